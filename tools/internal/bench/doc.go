// Package bench is scatterbench: it runs the adaptive scatter RFC's
// validation workloads against a data owner and reports, per workload and
// mode, what the "Measurement contract" of the architecture asks for, with
// the machine's ceilings measured in the same run and the goals
// computed from them. Main is the command; the package also serves tests
// that run the whole benchmark in-process on a small geometry.
//
// # Passes, owners and workloads
//
// A run is one pass per transport (tcp, shm). Each pass starts an owner
// (package owner, the code scatterd runs) with a generated table of
// -table-bytes (1 GiB by default; the pattern stream of -seed), a scratch
// region for WRITE workloads and the gather service; it finds the owner's
// address through a discovery directory (a memory directory in-process, a
// file directory of its own otherwise), connects with the destination
// region exposed, and runs its workloads. The owner runs in this process
// (-owner inproc), in a child process of this binary's owner mode
// (-owner process, the default: "scatterbench owner ..."), or in that child
// inside a network namespace reached over a veth pair (-owner netns; root;
// optionally shaped with tc tbf, -tbf).
//
// Workloads are rows of the Named table (workload.go), the RFC matrix
// (Matrix) or a custom geometry from flags. A workload of small fragments
// only lowers to a fixed-row plan; with large fragments to a ranges plan.
// Engram workloads (engram.go) bring their own snapshot and owners in this
// process; reshard workloads (reshard.go) bring both layouts' ranks in
// this process (reshard/mesh) and run one reshard per mode and repetition,
// planned anew each time, the destination ranks pulling. Their lines use
// the same fields: plan_ms is NewPlan plus the lowering inside
// reshard.Start, staging_peak_bytes sums the pairs' peaks of one
// repetition, staging_bound_bytes is the source ranks' staging pools
// together. Structured Object workloads (structobj.go) run an owner and
// two clients (pooled, and without a pool) in this process; their lines'
// modes are variants of one operation (multi, single, concat, buffers,
// fallback for PUT; whole, whole-buffer, selective and their fallbacks
// for GET) and chosen is the client's path (pool, inline, registered).
//
// # Repetitions
//
// Each repetition of a workload runs, in an order that rotates by one step
// per repetition, the direct control, one pack-only measurement, three
// control round trips and one operation per mode (per caller, all callers
// at once), so every mode and ceiling sees the same machine over the run.
// The first -warmup repetitions are not timed. The first and the last
// repetition are verified: before them every destination is filled with a
// poison pattern; after them every fragment must hold its source bytes
// (for READ the table's pattern, for WRITE the requester's source, read
// back from the owner's scratch region) and every byte between fragments
// the poison. A wrong byte is a *VerifyError and fails the workload (exit
// status 1). After every repetition the owner's staging must hold no lease.
//
// # Failures
//
// A workload that fails (its setup, an operation, its verification, a mode
// without a timed repetition, a run without a verified repetition) is
// never dropped: its WorkloadResult keeps a line per mode (empty where
// nothing was measured), Status "failed" and Err, a *WorkloadError with
// the cause; the table lists it under "FAILED workloads" with the reason,
// its goals are n/a with the reason, and the exit status is 1. The next
// workloads still run. What makes going on pointless stops more, and the
// workloads it leaves are recorded with Status "not run" and why: the
// pass's owner did not start or a lost connection to it (that owner's
// scatter workloads; the others bring their own owners and run), or an
// interrupt (everything left). The run's output ends with one line,
// "N goals ok, M missed, K not measured" (Summary).
//
// # Calibration fallbacks
//
// A packing calibration that cannot finish (costmodel.CalibrateOrFallback,
// a busy machine) runs the cost model on costmodel's conservative figures;
// the run goes on and says so (CalibrationFallback: who, why): the
// engines scatterbench makes (Engine.Calibration); the in-process gather
// services (reshard meshes, the structobj owner), which share one
// calibration per pack-worker count measured here; the owner process (its
// ready line's calibration_fallback) and the in-process owner (its Info),
// which say why; and an owner that says nothing (the Engram server), from
// its gather capability: the conservative figures, bit for bit as the wire
// carries them, say it fell back, though not why. The table prints a "CALIBRATION
// FALLBACK" block, every line behind one carries calibration_fallback, and
// the summary record lists them.
//
// # Figures
//
// Per workload and mode (Line, one JSON object per line with -json):
//
//	workload, transport, owner, seed, mode, direction   what ran
//	chosen              the mode the engine chose (for adaptive, its choice;
//	                    "gather+direct" when repetitions differed, most frequent first)
//	fragments, payload_bytes
//	reps                timed operations that succeeded (repetitions x callers)
//	p50_ms, p95_ms      of the full API time (verbs Trace.Total), nearest rank
//	goodput_gbps        payload_bytes x 8 / p50, in Gbit/s (1e9 bit/s)
//	window_gbps         payload_bytes x 8 / median bulk window (first bulk post to
//	                    last data completion: the owner's for gather, the
//	                    requester's for direct), Gbit/s
//	plan_ms, control_ms, decode_ms, pack_ms, complete_ms
//	                    median stage times (verbs Trace: requester planning, command
//	                    delivery and reply, owner decode, packing, completion publication)
//	staging_peak_bytes  most staging bytes one operation held (owner's, or the
//	                    requester's wave for WRITE gather)
//	staging_bound_bytes the largest P x C (slots x chunk) of those operations; the
//	                    goals count operations whose peak exceeded their own P x C
//	leaked_leases       most staging leases (owner and requester) outstanding
//	                    after a repetition completed
//	fallbacks, errors   operations that fell back to direct, and that failed
//	status              "ok", "failed" (the workload failed; its figures are no
//	                    goal's inputs) or "not run"
//	error               when not ok: the line's failed operations (count and first
//	                    error), else the workload's failure
//	calibration_fallback  when set: the calibrations behind the line that fell back,
//	                    "<who>: <reason>" joined by "; "
//
// Ceilings, one CeilingLine per workload and ceiling ("workload":
// "ceiling/<name>", "for": the workload), measured in the same repetitions:
//
//	ceiling/direct-control  goodput_gbps of 64 x 512 KiB random table ranges read
//	                        with forced direct on the same connection
//	ceiling/pack-only       goodput_gbps of the owner packing the workload's plan
//	                        into a 1 MiB staging lease with no transfer, measured inside
//	                        the owner process (owner.MethodPackOnly: the gather service's
//	                        loops and pack worker count)
//	ceiling/rtt             p50_ms of a control call to a no-op handler (owner.MethodPing)
//
// The last record is the run's SummaryLine ("workload": "summary"): seed,
// status ("ok" or "failed"), exit_status, goals_ok, goals_missed,
// goals_not_measured, failed_operations, failed_workloads ({transport,
// workload, status, error}), calibration_fallbacks ("<transport> <who>:
// <reason> [<workloads>]") and text (the summary line). Fields are only
// ever added; testdata/lines.golden pins them.
//
// # Goals
//
// Goals evaluates the goals as ratios of figures from the same run
// (adaptive chooses gather for many-small over tcp, and direct over shm;
// window and end-to-end ratios to the ceilings; few-large, mixed and
// single-read ratios; for reshard-kv and reshard-mixed, adaptive against
// the better of forced direct and gather, and the staging peak against the
// staging bound; for structobj-put the 64-buffer PUT against one buffer
// and the fast path against the fallback, for structobj-get the fast path
// against the fallback, whole and selective; p95/p50, plan/p50 and decode/p50 for every adaptive
// workload; staging within P x C; no leaked lease; no failed workload or
// operation). A goal whose inputs were not measured, or come from a
// workload that failed, is n/a with the reason, never ok. A missed goal is
// reported, never hidden, and does not change the exit status: the
// development machine is shared and noisy.
//
// # Pictures and the report
//
// Figures builds a figure model from the passes (one panel per workload,
// bars per mode in a colour of its own, the workload's ceilings and its
// ratio goals as lines in its own panel; latency-sized workloads on a time
// axis; stacked stage times; the matrix as small multiples, one panel per
// fragment size and direction, at most about 2,000 pixels wide), which
// WritePlots renders as PNG with gonum/plot (-plot DIR) and WriteReport
// embeds, with the tables and the goal verdicts of the text report, in a
// self-contained index.html (-report DIR). ReadPasses reads captured JSON
// lines back, so a run can be drawn again (scripts/bench-pictures.sh).
package bench

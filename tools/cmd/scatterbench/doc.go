// Command scatterbench runs the adaptive scatter RFC's validation workloads
// against a scatterkit data owner and prints, per workload and mode, the
// RFC's table (p50, p95, end-to-end and window goodput, stage times, the
// mode the engine chose, staging peak and bound, fallbacks, errors), the
// machine's ceilings measured in the same run (direct control, pack-only,
// control round trip) and the goals as ratios, each ok, MISSED or
// n/a (not measured, with why). Every workload's payload is verified byte
// for byte. A workload that fails (setup, an operation, wrong bytes) is
// listed with its reason, its goals are n/a, and the others still run. A
// packing calibration that cannot finish on a busy machine falls back to
// conservative figures, and the output says so (CALIBRATION FALLBACK). The
// output ends with one line:
//
//	20 goals ok, 3 missed, 4 not measured
//
// With no flags,
//
//	go run ./tools/cmd/scatterbench
//
// runs the default: over tcp, with the owner in a child process (this
// binary re-executed as "scatterbench owner"), the workloads many-small
// (98,304 random 264 B rows of a 1 GiB table), few-large (64 x 512 KiB),
// mixed (32,768 x 264 B + 64 x 512 KiB) and single-read (one 264 B row), in
// the modes direct, gather and adaptive, 20 timed repetitions after 3
// warmups; then the Engram lookups (engram-cpu, engram-remote-t1/t4/t16,
// owners in this process), the reshards (reshard-kv, reshard-mixed: every
// rank of both layouts in this process) and the Structured Object A/B
// workloads (structobj-put, structobj-get); then many-small again over
// shm. It takes about 40 s on the 2-core development machine.
//
// Goodput is in Gbit/s (1e9 bits per second): payload bytes x 8 over the
// p50 of the full API time; window goodput uses the median bulk window.
//
// Flags:
//
//	-transport tcp,shm     transports to run (default: tcp, then many-small over shm)
//	-owner inproc|process|netns
//	                       where the owner runs (default process); netns needs root and
//	                       the ip command: the owner runs in a namespace scatterbench-PID
//	                       reached over a veth pair in a private /30, all removed on
//	                       exit and on SIGINT/SIGTERM
//	-tbf RATE              with -owner netns: shape the veth with tc tbf (e.g. 1gbit)
//	-mode LIST             direct, gather, adaptive, hybrid, all (default all = the first three)
//	-workloads LIST        many-small, many-small-3owners, many-small-131k, few-large, mixed, single-read,
//	                       engram-cpu, engram-remote (-t1, -t4, -t16), engram-remote-sharded, reshard
//	                       (reshard-kv, reshard-mixed), structobj (structobj-put,
//	                       structobj-get),
//	                       all (every named workload), matrix (the RFC matrix: 192 entries within
//	                       32 MiB of payload each, READ and WRITE; about 30 s per
//	                       repetition over tcp here, so try -reps 3 -warmup 1), default
//	-frag-size N -frags N -large-size N -large-count N -src random|sequential
//	-dst contiguous|fragmented -dir read|write
//	                       a custom workload ("custom"); alone, it runs instead of the defaults
//	-dst gpu               (a build with -tags cuda: .gpu/scatterbench from scripts/gpu-build.sh)
//	                       the READ workloads (default many-small, few-large, mixed; or the
//	                       named or custom ones given) into device memory of GPU 0: each
//	                       operation an Engine.DoDevice through a pinned bounce region, the
//	                       device bytes read back and verified, with two more ceilings per
//	                       workload: h2d-copy (the payload copied host to device) and
//	                       host-dst (the same READ, adaptive, into host memory)
//	-staging-slots N       owner staging slots per gather command (default 8)
//	-staging-bytes N       owner staging pool (default 64MiB)
//	-callers N             concurrent callers, each with its own destination (default 1)
//	-reps N, -warmup N     timed and untimed repetitions (default 20 and 3)
//	-seed N                seed of the table and the plans (default: from the clock, printed)
//	-table-bytes N         owner table size (default 1GiB)
//	-lanes N               tcp lanes per connection (default verbs' 4)
//	-tcp-no-checksums      tcp frames without checksums on both sides (what the checksums cost)
//	-json PATH             JSON lines, one per workload and mode plus one per ceiling,
//	                       then a summary record ("-": stdout; the table then goes to stderr)
//	-plot DIR              PNG pictures, each at most 2,000 pixels wide: goodput-<transport>.png
//	                       (a panel per workload: a bar per mode, its ceilings and goal as
//	                       lines), latency-<transport>.png (latency-sized workloads: p50 and
//	                       p95 in ms, rtt and local-lookup ceilings), stages-<transport>.png
//	                       (stacked stage times per mode against the p50) and, with matrix
//	                       workloads, matrix-<transport>-<src>-<dst>.png (a panel per fragment
//	                       size, READ and WRITE side by side, a line per mode)
//	-report DIR            DIR/index.html: the tables, the goals with their verdicts and the
//	                       pictures in one page with no external assets
//	-quiet                 no table and no progress bar (the summary line goes to stderr)
//
// A progress bar is drawn on stderr when it is a terminal. The exit status
// is 0 when every workload ran, every operation succeeded, every payload
// verified and no staging lease leaked, 1 otherwise (a failed or unrun
// workload included), 2 for a usage error; missed goals and calibration
// fallbacks do not change it.
//
// "scatterbench owner [scatterd flags]" runs only the owner: the same daemon
// as scatterd (see its documentation), which the process and netns owners
// are.
//
// The JSON fields and the goals are documented in package
// tools/internal/bench.
package main

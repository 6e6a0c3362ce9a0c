// Package probe is scatterprof's kernel side and its loader: three BPF
// programs (begin, end, next), written with cilium/ebpf's asm package, on
// the probe points of the engine's stage markers (package
// github.com/scatterkit/scatterkit/verbs/stage, "Probe ABI"), and the
// [Profiler] that loads them, checks executables, attaches to processes
// by pid, calibrates itself and reads the per-CPU records into
// [report.Snapshot]s.
//
// It is the only package of the workspace that imports cilium/ebpf.
//
// # Maps
//
//	starts    array, 2048 sets x 2 ways x {id, stage | tgid<<32, start ns, spare}
//	stages    per-CPU array, 16 records of 264 words: 256 histogram buckets,
//	          count, sum ns, bytes (all weighted), bias ns, intervals ended
//	          by next, intervals probed, spare
//	counters  per-CPU array, 1 entry: unmatched ends, bad stages, replaced starts
//
// A begin stores its start in the way of its set that holds its key, else
// a free way, else replaces the first (a store error). An end takes the
// time first, finds its key in its set, frees the way, subtracts the
// stage's bias and records the interval; a key in neither way is
// unmatched. The histogram geometry is package report's.
//
// # Privileges and platform
//
// [New] needs root, or CAP_BPF with CAP_PERFMON (or CAP_SYS_ADMIN), Linux
// with BPF and perf-event uprobes (no tracefs, no BTF), and amd64. It
// returns [ErrNotRoot], [ErrNoBPF], [ErrNoUprobes] or [ErrNotSupported]
// otherwise. [Profiler.Attach] returns an [*ExecError] wrapping
// [ErrTargetExited], [ErrStripped], [ErrNoMarkers] or [ErrMarkerABI] for a
// process it cannot probe.
package probe

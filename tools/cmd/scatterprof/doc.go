// Command scatterprof is an eBPF stage profiler for the scatterkit transfer
// engine. It attaches entry uprobes to the engine's stage markers (package
// github.com/scatterkit/scatterkit/verbs/stage) in running processes and
// reports, per stage, how many intervals ran, their p50/p95/p99 and mean,
// the bytes they moved and their share of operation time, without any
// instrumentation in the hot path: unprobed, a marker is one call.
//
//	scatterprof [flags] -p PID[,PID...]      profile running processes
//	scatterprof [flags] -- COMMAND [ARG...]   start a command and profile it
//	scatterprof bench [flags]                 measure the profiler itself
//
// A started command is held at its first instruction (it is traced until
// the probes are attached, then released), so none of its operations is
// missed. With -children (the default) the targets' descendants are found
// by polling /proc and attached too: scatterbench's owner child, or the
// programs a shell script starts. Stripped executables (no .symtab: built
// with -ldflags="-s -w", or by go run / go test) are refused with the
// reason, as are executables without the markers and markers of another
// probe ABI.
//
// Output: a live table every -interval (redrawn in place on a terminal),
// (totals since attach, or with -delta only the last interval), then a
// final summary of the totals when the targets exit, -duration ends or
// SIGINT arrives; with -json one JSON line per refresh and one for the final
// summary; with -metrics host:port a Prometheus endpoint at /metrics. In
// command mode the profiler writes to stderr and the command keeps stdout;
// the exit status is the command's.
//
// At start the profiler calibrates its probes in its own process
// (-calibrate pairs of markers): the median interval of an empty
// begin/end pair is the bias the kernel subtracts from every interval, and
// the wall cost of a hit is reported with the share of the targets' time it
// cost them.
//
// Needs root (CAP_BPF and CAP_PERFMON), Linux with uprobes and BPF, amd64.
//
// "scatterprof bench" runs a scatterbench workload (many-small by default)
// over tcp against an owner in its own process, in alternating blocks with
// the profiler attached to itself and detached, and reports the goodput
// ratio, the detached markers' cost and the stage shares against the
// engine's own trace of the same operations, with the profiler issue's
// goals. See docs/scatterprof.md.
package main

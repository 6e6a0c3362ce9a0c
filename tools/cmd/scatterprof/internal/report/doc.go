// Package report turns readings of scatterprof's kernel maps into
// summaries, text tables, JSON lines and Prometheus metrics. It is pure Go:
// it never touches BPF, so everything here is tested without privileges.
//
// A [Snapshot] holds, per stage number (package
// github.com/scatterkit/scatterkit/verbs/stage: 1 op, 2 plan, 3 control,
// 4 decode, 5 pack, 6 post, 7 complete, 8 scatter), the count of matched
// begin/end intervals, their summed nanoseconds, the bytes their ends
// reported and a histogram, plus the probes' own event [Counters]. The
// intervals are already bias-corrected in the kernel. Stage 15
// ([CalibrationStage]) belongs to the profiler's calibration and is never
// reported.
//
// # Histogram geometry
//
// Every stage has [Buckets] (256) buckets: a log2 histogram with four linear
// sub-buckets per power of two. Durations below 4 ns get one bucket per
// nanosecond (0..3); a duration ns >= 4 with lg = floor(log2(ns)) lands in
// bucket 4*lg + ((ns >> (lg-2)) & 3). Buckets 4..7 stay empty. A sub-bucket
// is a quarter of its octave wide, so an interpolated [Quantile] is within
// 25% of the true value; every power of two 2^k ns is a bucket edge.
//
// # Summary
//
// [Summarize] reduces a snapshot and the profiler's [Meta] (targets,
// elapsed time, calibration) to one [Row] per stage with data: count,
// p50/p95/p99, mean, bytes, the share of the op stage's summed time and the
// byte rate over the stage's own time. Stages overlap (chunks pipeline, and
// requester and owner stages run in different processes), so shares need
// not add up to 100%.
//
// # JSON format
//
// [Summary.WriteJSON] writes one line holding one JSON object, read back
// by [DecodeJSON]:
//
//	{"time":"2025-01-02T03:04:05.123456789Z",  // RFC 3339, nanoseconds
//	 "elapsed_s":12.5,                          // Meta.Elapsed in seconds
//	 "targets":[{"pid":1234,"exe":"/usr/bin/scatterd"}],
//	 "stages":[{"stage":5,"name":"pack","count":1000,"probes":250,
//	            "p50_us":1.27,"p95_us":3.1,"p99_us":4.9,"mean_us":1.5,
//	            "bytes":1048576,"share":0.42,"rate_gbps":12.3}],
//	 "counters":{"unmatched":0,"nexts":0,"bad_stage":0,"store_errors":0},
//	 "bias_us":0.95,"hit_us":1.27,"unprobed_us":0.002,
//	 "probe_share":0.004}
//
// count is the number of intervals: for chunk stages, which the engine
// samples (at most 16 chunks of an operation carry markers, each weighted
// by the chunks it stands for), an estimate from the weights; probes is
// the number of intervals actually probed. Durations are float
// microseconds (suffix _us), rate_gbps is gigabits per
// second of the stage's own time, share and probe_share are fractions.
// Stages appear in numeric order; targets and stages are [] when empty.
// A decoder rejects malformed JSON, a bad time and stage numbers outside
// 0..15 with [ErrBadSummary].
//
// # Table format
//
// [Summary.WriteTable] writes header lines (targets with pid and
// executable base name, elapsed time, the probe calibration and its
// estimated share of the targets' time, and any nonzero error counters),
// then one fixed-width row per stage: count, p50, p95, p99, mean (ns, us,
// ms, s with three significant digits), bytes (B, KiB, MiB, GiB), rate
// (GB/s, "-" without bytes) and share of op time ("-" when no op was
// recorded), and a footnote on overlapping stages.
//
// # Prometheus format
//
// [WritePrometheus] writes text exposition format 0.0.4:
//
//	scatterprof_stage_duration_seconds        histogram {stage}
//	scatterprof_stage_bytes_total             counter   {stage}
//	scatterprof_probe_events_total            counter   {event}
//	scatterprof_probe_hit_seconds             gauge
//	scatterprof_probe_bias_seconds            gauge
//	scatterprof_targets                       gauge
//
// The histogram's buckets are the octave edges le = 2^k ns (k = 0..40, in
// seconds) and +Inf. Because the kernel's buckets end before their upper
// edge, the bucket le=2^k counts durations below 2^k ns, not at or below
// it; on nanosecond integers the difference is durations of exactly 2^k ns.
package report

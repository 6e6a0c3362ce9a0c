package report

import (
	"io"
	"math"
	"strconv"
	"strings"
)

// promOctaves is the number of finite histogram buckets WritePrometheus
// exposes: le = 2^k ns for k = 0..promOctaves-1.
const promOctaves = 41

// octaveCut[k] is the number of leading kernel buckets that end at or below
// 2^k ns, the ones the Prometheus bucket le=2^k ns sums; bucket octaveCut[k]
// starts exactly at 2^k (see TestOctaveEdges).
var octaveCut = func() (cut [promOctaves]int) {
	i := 0
	for k := range cut {
		for i < Buckets && Upper(i) <= 1<<k {
			i++
		}
		cut[k] = i
	}
	return cut
}()

// WritePrometheus writes a snapshot in the Prometheus text exposition
// format 0.0.4 (see the package doc for the metrics). Like an HTTP handler
// it has nowhere to report a failed write, so it reports none.
func WritePrometheus(w io.Writer, s *Snapshot, m Meta) {
	var b []byte
	family := func(name, typ, help string) {
		b = append(b, "# HELP "+name+" "+escapeHelp(help)+"\n# TYPE "+name+" "+typ+"\n"...)
	}
	key := func(name, labels string) {
		b = append(b, name...)
		if labels != "" {
			b = append(b, '{')
			b = append(b, labels...)
			b = append(b, '}')
		}
		b = append(b, ' ')
	}
	sample := func(name, labels string, v float64) {
		key(name, labels)
		b = appendValue(b, v)
		b = append(b, '\n')
	}
	count := func(name, labels string, n uint64) { // exact, where a float64 would round
		key(name, labels)
		b = strconv.AppendUint(b, n, 10)
		b = append(b, '\n')
	}
	reported := func(i int) bool { return i != CalibrationStage && s.Stages[i].Count > 0 }

	const dur = "scatterprof_stage_duration_seconds"
	family(dur, "histogram", "Time spent in each stage interval, bias-corrected; bucket le=2^k ns counts intervals below 2^k ns.")
	for i := range s.Stages {
		if !reported(i) {
			continue
		}
		st := &s.Stages[i]
		lbl := `stage="` + escapeLabel(StageName(i)) + `"`
		var cum uint64
		j := 0
		for k, cut := range octaveCut {
			for ; j < cut; j++ {
				cum += st.Hist[j]
			}
			// Per-CPU slots are read one after another, so a count can
			// trail its histogram; keep the buckets within _count.
			count(dur+"_bucket", lbl+`,le="`+formatFloat(math.Ldexp(1, k)/1e9)+`"`, min(cum, st.Count))
		}
		count(dur+"_bucket", lbl+`,le="+Inf"`, st.Count)
		sample(dur+"_sum", lbl, float64(st.SumNs)/1e9)
		count(dur+"_count", lbl, st.Count)
	}

	const byt = "scatterprof_stage_bytes_total"
	family(byt, "counter", "Bytes the ends of each stage's intervals reported.")
	for i := range s.Stages {
		if reported(i) {
			count(byt, `stage="`+escapeLabel(StageName(i))+`"`, s.Stages[i].Bytes)
		}
	}

	const ev = "scatterprof_probe_events_total"
	family(ev, "counter", "Probe events besides matched intervals: unmatched ends, intervals ended by next probes, bad stages, replaced starts.")
	c := s.Counters
	for _, e := range []struct {
		name string
		n    uint64
	}{
		{"unmatched", c.Unmatched},
		{"nexts", c.Nexts}, {"bad_stage", c.BadStage}, {"store_errors", c.StoreErrors},
	} {
		count(ev, `event="`+e.name+`"`, e.n)
	}

	family("scatterprof_probe_hit_seconds", "gauge", "Calibrated wall cost of one probe hit.")
	sample("scatterprof_probe_hit_seconds", "", m.Hit.Seconds())
	family("scatterprof_probe_bias_seconds", "gauge", "Calibrated bias subtracted from every interval in the kernel.")
	sample("scatterprof_probe_bias_seconds", "", m.Bias.Seconds())
	family("scatterprof_targets", "gauge", "Processes the profiler is attached to.")
	count("scatterprof_targets", "", uint64(len(m.Targets)))

	w.Write(b) //nolint:errcheck // see the doc comment
}

// appendValue appends a sample value as the format spells it.
func appendValue(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// escapeLabel escapes a label value: backslash, double quote and newline.
func escapeLabel(s string) string {
	return labelEscaper.Replace(s)
}

// escapeHelp escapes a HELP text: backslash and newline.
func escapeHelp(s string) string {
	return helpEscaper.Replace(s)
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

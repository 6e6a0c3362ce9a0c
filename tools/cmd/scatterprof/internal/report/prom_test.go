package report

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/stage"
)

// promSample is one sample line of the text format.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// promDoc is a parsed exposition: families by name with their type, and
// the samples in order, each with the family it belongs to.
type promDoc struct {
	types   map[string]string
	help    map[string]string
	samples []promSample
	family  []string // family of samples[i]
}

// parseProm parses text format 0.0.4 strictly enough to catch malformed
// output: HELP and TYPE once per family and before its samples, samples of
// a family together, label values properly quoted and escaped.
func parseProm(t *testing.T, text string) promDoc {
	t.Helper()
	d := promDoc{types: map[string]string{}, help: map[string]string{}}
	require.True(t, strings.HasSuffix(text, "\n"), "output ends with a newline")
	current, done := "", map[string]bool{}
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		n++
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, ok := strings.Cut(rest, " ")
			require.True(t, ok, "line %d: %q", n, line)
			require.NotContains(t, d.help, name, "line %d: second HELP", n)
			d.help[name] = help
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, ok := strings.Cut(rest, " ")
			require.True(t, ok, "line %d: %q", n, line)
			require.NotContains(t, d.types, name, "line %d: second TYPE", n)
			require.Contains(t, []string{"counter", "gauge", "histogram", "summary", "untyped"}, typ)
			if current != "" {
				done[current] = true
			}
			d.types[name], current = typ, name
			continue
		}
		require.False(t, strings.HasPrefix(line, "#"), "line %d: unknown comment %q", n, line)
		s := parseSample(t, n, line)
		fam := s.name
		if d.types[current] == "histogram" {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if f, ok := strings.CutSuffix(s.name, suf); ok && f == current {
					fam = f
				}
			}
		}
		require.Equal(t, current, fam, "line %d: sample %q outside its family's block", n, line)
		require.False(t, done[fam], "line %d: family %s split", n, fam)
		d.samples = append(d.samples, s)
		d.family = append(d.family, fam)
	}
	return d
}

func parseSample(t *testing.T, n int, line string) promSample {
	t.Helper()
	s := promSample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	require.Positive(t, i, "line %d: %q", n, line)
	s.name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for line[0] != '}' {
			eq := strings.IndexByte(line, '=')
			require.Positive(t, eq, "line %d: label in %q", n, line)
			key := line[:eq]
			require.Equal(t, byte('"'), line[eq+1], "line %d: quoted value", n)
			var val strings.Builder
			j := eq + 2
			for ; line[j] != '"'; j++ {
				c := line[j]
				require.NotEqual(t, byte('\n'), c)
				if c == '\\' {
					j++
					switch line[j] {
					case '\\':
						c = '\\'
					case '"':
						c = '"'
					case 'n':
						c = '\n'
					default:
						t.Fatalf("line %d: bad escape \\%c", n, line[j])
					}
				}
				val.WriteByte(c)
			}
			require.NotContains(t, s.labels, key, "line %d: label twice", n)
			s.labels[key] = val.String()
			line = line[j+1:]
			if line[0] == ',' {
				line = line[1:]
			}
		}
		line = line[1:]
	}
	v, ok := strings.CutPrefix(line, " ")
	require.True(t, ok, "line %d: space before the value", n)
	f, err := strconv.ParseFloat(v, 64)
	require.NoError(t, err, "line %d", n)
	s.value = f
	return s
}

// find returns the samples of a name whose labels include want.
func (d *promDoc) find(name string, want map[string]string) []promSample {
	var out []promSample
next:
	for _, s := range d.samples {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

func (d *promDoc) one(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	s := d.find(name, want)
	require.Len(t, s, 1, "%s%v", name, want)
	return s[0].value
}

func TestOctaveEdges(t *testing.T) {
	for k, cut := range octaveCut {
		edge := uint64(1) << k
		require.Equal(t, edge, Lower(cut), "octave %d: first bucket above starts at the edge", k)
		require.Equal(t, edge, Upper(cut-1), "octave %d: last bucket below ends at the edge", k)
		require.Equal(t, cut, BucketOf(edge), "octave %d", k)
		require.Less(t, BucketOf(edge-1), cut, "octave %d", k)
		for i := range cut {
			require.LessOrEqual(t, Upper(i), edge, "octave %d bucket %d", k, i)
		}
	}
}

func TestWritePrometheus(t *testing.T) {
	r := newRand(t)
	for round := range 10 {
		s, tr := randomSnapshot(t, r)
		m := randomMeta(r)
		var buf bytes.Buffer
		WritePrometheus(&buf, s, m)
		d := parseProm(t, buf.String())

		require.Equal(t, map[string]string{
			"scatterprof_stage_duration_seconds": "histogram",
			"scatterprof_stage_bytes_total":      "counter",
			"scatterprof_probe_events_total":     "counter",
			"scatterprof_probe_hit_seconds":      "gauge",
			"scatterprof_probe_bias_seconds":     "gauge",
			"scatterprof_targets":                "gauge",
		}, d.types)
		for name := range d.types {
			require.NotEmpty(t, d.help[name], "HELP for %s", name)
		}

		var stages []string
		for _, sm := range d.find("scatterprof_stage_duration_seconds_count", nil) {
			stages = append(stages, sm.labels["stage"])
		}
		var want []string
		for sg, ns := range tr {
			if len(ns) > 0 {
				want = append(want, StageName(sg))
			}
		}
		require.Equal(t, want, stages, "round %d: stages with data, calibration left out", round)

		for sg, ns := range tr {
			if len(ns) == 0 {
				continue
			}
			lbl := map[string]string{"stage": StageName(sg)}
			st := &s.Stages[sg]
			buckets := d.find("scatterprof_stage_duration_seconds_bucket", lbl)
			require.Len(t, buckets, promOctaves+1)
			prev := -1.0
			for k, b := range buckets {
				require.Len(t, b.labels, 2)
				if k < promOctaves {
					le, err := strconv.ParseFloat(b.labels["le"], 64)
					require.NoError(t, err)
					require.Equal(t, math.Ldexp(1, k)/1e9, le)
					below := 0
					for _, v := range ns {
						if v < 1<<k {
							below++
						}
					}
					require.Equal(t, float64(below), b.value, "stage %s le=2^%d ns", StageName(sg), k)
				} else {
					require.Equal(t, "+Inf", b.labels["le"])
				}
				require.GreaterOrEqual(t, b.value, prev, "cumulative")
				prev = b.value
			}
			count := d.one(t, "scatterprof_stage_duration_seconds_count", lbl)
			require.Equal(t, float64(len(ns)), count)
			require.Equal(t, count, buckets[promOctaves].value, "+Inf equals _count")
			require.InEpsilon(t, float64(st.SumNs)/1e9, d.one(t, "scatterprof_stage_duration_seconds_sum", lbl), 1e-12)
			require.Equal(t, float64(st.Bytes), d.one(t, "scatterprof_stage_bytes_total", lbl))
		}

		c := s.Counters
		for ev, n := range map[string]uint64{"unmatched": c.Unmatched,
			"nexts": c.Nexts, "bad_stage": c.BadStage, "store_errors": c.StoreErrors} {
			require.Equal(t, float64(n), d.one(t, "scatterprof_probe_events_total", map[string]string{"event": ev}), ev)
		}
		require.Len(t, d.find("scatterprof_probe_events_total", nil), 4)
		require.InDelta(t, m.Hit.Seconds(), d.one(t, "scatterprof_probe_hit_seconds", nil), 1e-18)
		require.InDelta(t, m.Bias.Seconds(), d.one(t, "scatterprof_probe_bias_seconds", nil), 1e-18)
		require.Equal(t, float64(len(m.Targets)), d.one(t, "scatterprof_targets", nil))
	}
}

func TestWritePrometheusEdges(t *testing.T) {
	r := newRand(t)
	torn := &Snapshot{}
	for range 50 {
		record(&torn.Stages[stage.Pack], randomDuration(r), 64)
	}
	torn.Stages[stage.Pack].Count -= 5 // a count read before its last histogram updates

	long := &Snapshot{}
	record(&long.Stages[stage.Op], 1<<41+r.Uint64N(1<<41), 0) // beyond the last finite edge

	for _, tc := range []struct {
		name  string
		snap  *Snapshot
		check func(t *testing.T, d promDoc)
	}{
		{"empty: families, no stage samples", &Snapshot{}, func(t *testing.T, d promDoc) {
			require.Empty(t, d.find("scatterprof_stage_duration_seconds_bucket", nil))
			require.Empty(t, d.find("scatterprof_stage_bytes_total", nil))
			require.Len(t, d.types, 6)
			require.Zero(t, d.one(t, "scatterprof_targets", nil))
		}},
		{"torn read: buckets stay within _count", torn, func(t *testing.T, d promDoc) {
			lbl := map[string]string{"stage": "pack"}
			count := d.one(t, "scatterprof_stage_duration_seconds_count", lbl)
			require.Equal(t, 45.0, count)
			prev := 0.0
			for _, b := range d.find("scatterprof_stage_duration_seconds_bucket", lbl) {
				require.LessOrEqual(t, b.value, count)
				require.GreaterOrEqual(t, b.value, prev)
				prev = b.value
			}
			require.Equal(t, count, prev)
		}},
		{"beyond 2^40 ns: only in +Inf", long, func(t *testing.T, d promDoc) {
			b := d.find("scatterprof_stage_duration_seconds_bucket", map[string]string{"stage": "op"})
			require.Zero(t, b[promOctaves-1].value)
			require.Equal(t, 1.0, b[promOctaves].value)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			WritePrometheus(&buf, tc.snap, Meta{Hit: time.Microsecond})
			tc.check(t, parseProm(t, buf.String()))
		})
	}
}

func TestEscape(t *testing.T) {
	for _, tc := range []struct {
		name, in, label, help string
	}{
		{"plain", "pack", "pack", "pack"},
		{"backslash", `a\b`, `a\\b`, `a\\b`},
		{"quote", `say "hi"`, `say \"hi\"`, `say "hi"`},
		{"newline", "two\nlines", `two\nlines`, `two\nlines`},
		{"all", "\\\"\n", `\\\"\n`, `\\"\n`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.label, escapeLabel(tc.in))
			require.Equal(t, tc.help, escapeHelp(tc.in))
			s := parseSample(t, 1, `m{l="`+escapeLabel(tc.in)+`",x="1"} 2`)
			require.Equal(t, map[string]string{"l": tc.in, "x": "1"}, s.labels)
		})
	}
}

package report

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/stage"
)

// newRand returns a generator from a fresh, logged seed.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 7))
}

// randomDuration is log-uniform between 1 ns and about 30 s.
func randomDuration(r *rand.Rand) uint64 {
	return 1 + uint64(math.Exp(r.Float64()*math.Log(3e10)))
}

// truth is what a random snapshot was built from: the durations of every
// stage, in nanoseconds.
type truth [MaxStages][]uint64

// record adds one interval to a stage the way the kernel does.
func record(st *Stage, ns, bytes uint64) {
	st.Count++
	st.Probes++
	st.SumNs += ns
	st.Bytes += bytes
	st.Hist[BucketOf(ns)]++
}

// randomSnapshot fills the op stage, a random subset of the other engine
// stages and the calibration stage with random intervals.
func randomSnapshot(t *testing.T, r *rand.Rand) (*Snapshot, truth) {
	t.Helper()
	s := &Snapshot{Time: time.Unix(1_700_000_000+r.Int64N(1e8), r.Int64N(1e9))}
	var tr truth
	for _, sg := range stage.All() {
		if sg != stage.Op && r.IntN(4) == 0 {
			continue // a stage that did not fire
		}
		moves := sg == stage.Pack || sg == stage.Post || sg == stage.Scatter
		for range 1 + r.IntN(2000) {
			ns := randomDuration(r)
			var b uint64
			if moves {
				b = 1 + r.Uint64N(1<<22)
			}
			record(&s.Stages[sg], ns, b)
			tr[sg] = append(tr[sg], ns)
		}
	}
	for range 100 {
		record(&s.Stages[CalibrationStage], 1+r.Uint64N(50), 0)
	}
	s.Counters = Counters{
		Unmatched: r.Uint64N(3), Nexts: r.Uint64N(3), BadStage: r.Uint64N(3), StoreErrors: r.Uint64N(3),
	}
	return s, tr
}

func randomMeta(r *rand.Rand) Meta {
	return Meta{
		Targets:  []Target{{PID: 1 + r.IntN(1<<22), Exe: "/usr/local/bin/scatterd"}, {PID: 1 + r.IntN(1<<22), Exe: "/opt/sk/scatterbench"}},
		Elapsed:  time.Duration(1 + r.Int64N(int64(time.Hour))),
		Bias:     time.Duration(r.Int64N(2000)),
		Hit:      time.Duration(r.Int64N(3000)),
		Unprobed: time.Duration(r.Int64N(10)),
	}
}

// trueQuantile is the sample the histogram quantile interpolates towards:
// the one of 0-based index ceil(q*n)-1 in sorted order.
func trueQuantile(sorted []uint64, q float64) uint64 {
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(k, 0)]
}

func TestSummarizeQuantiles(t *testing.T) {
	r := newRand(t)
	for round := range 20 {
		s, tr := randomSnapshot(t, r)
		sum := Summarize(s, randomMeta(r))
		for sg, ns := range tr {
			if len(ns) == 0 {
				continue
			}
			row, ok := sum.Row(sg)
			require.True(t, ok, "round %d stage %d", round, sg)
			sorted := slices.Clone(ns)
			slices.Sort(sorted)
			for _, q := range []struct {
				q   float64
				got time.Duration
			}{{0.50, row.P50}, {0.95, row.P95}, {0.99, row.P99}} {
				want := trueQuantile(sorted, q.q)
				i := BucketOf(want)
				width := Upper(i) - Lower(i)
				require.LessOrEqual(t, width, max(1, want/SubBuckets), "bucket %d is wider than a quarter octave", i)
				diff := math.Abs(float64(q.got) - float64(want))
				require.LessOrEqual(t, diff, float64(width)+0.5,
					"round %d stage %d q %.2f: got %v, true %dns, bucket %d [%d,%d)", round, sg, q.q, q.got, want, i, Lower(i), Upper(i))
			}
		}
	}
}

func TestSummarizeRows(t *testing.T) {
	r := newRand(t)
	s, tr := randomSnapshot(t, r)
	m := randomMeta(r)
	sum := Summarize(s, m)

	require.Equal(t, s.Time, sum.Time)
	require.Equal(t, m.Elapsed, sum.Elapsed)
	require.Equal(t, m.Targets, sum.Targets)
	require.Equal(t, s.Counters, sum.Counters)
	require.Equal(t, m.Bias, sum.Bias)
	require.Equal(t, m.Hit, sum.Hit)
	require.Equal(t, m.Unprobed, sum.Unprobed)
	wantShare := float64(s.Hits()) * float64(m.Hit) / float64(m.Elapsed)
	require.InDelta(t, wantShare, sum.ProbeShare, 1e-12*wantShare)

	var want []int
	for sg, ns := range tr {
		if len(ns) > 0 {
			want = append(want, sg)
		}
	}
	var got []int
	for _, row := range sum.Rows {
		got = append(got, row.Stage)
	}
	require.Equal(t, want, got, "rows in numeric order, calibration excluded")
	_, ok := sum.Row(CalibrationStage)
	require.False(t, ok)

	var opSum uint64
	for _, ns := range tr[stage.Op] {
		opSum += ns
	}
	for _, row := range sum.Rows {
		t.Run(row.Name, func(t *testing.T) {
			ns := tr[row.Stage]
			var total uint64
			for _, v := range ns {
				total += v
			}
			st := &s.Stages[row.Stage]
			require.Equal(t, StageName(row.Stage), row.Name)
			require.Equal(t, uint64(len(ns)), row.Count)
			require.Equal(t, st.Bytes, row.Bytes)
			require.Equal(t, time.Duration(total/uint64(len(ns))), row.Mean)
			require.InEpsilon(t, float64(total)/float64(opSum), row.Share, 1e-12)
			if row.Stage == int(stage.Op) {
				require.Equal(t, 1.0, row.Share)
			}
			if st.Bytes == 0 {
				require.Zero(t, row.Rate)
			} else {
				require.InEpsilon(t, float64(st.Bytes)*1e9/float64(total), row.Rate, 1e-12)
			}
			require.LessOrEqual(t, row.P50, row.P95)
			require.LessOrEqual(t, row.P95, row.P99)
		})
	}
}

func TestSummarizeEdges(t *testing.T) {
	r := newRand(t)
	s, _ := randomSnapshot(t, r)
	noOp := *s
	noOp.Stages[stage.Op] = Stage{}
	noOp.Stages[stage.Plan] = Stage{}
	record(&noOp.Stages[stage.Plan], 1+r.Uint64N(1e6), 0)

	for _, tc := range []struct {
		name  string
		snap  *Snapshot
		meta  Meta
		check func(t *testing.T, sum Summary)
	}{
		{"no op: shares are zero", &noOp, randomMeta(r), func(t *testing.T, sum Summary) {
			require.NotEmpty(t, sum.Rows)
			for _, row := range sum.Rows {
				require.NotEqual(t, int(stage.Op), row.Stage)
				require.Zero(t, row.Share, "stage %s", row.Name)
			}
		}},
		{"zero elapsed: no probe share", s, Meta{Hit: time.Microsecond}, func(t *testing.T, sum Summary) {
			require.Zero(t, sum.ProbeShare)
			require.Nil(t, sum.Targets)
		}},
		{"empty snapshot: no rows", &Snapshot{Time: s.Time}, randomMeta(r), func(t *testing.T, sum Summary) {
			require.Empty(t, sum.Rows)
			_, ok := sum.Row(int(stage.Op))
			require.False(t, ok)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, Summarize(tc.snap, tc.meta))
		})
	}

	t.Run("targets are copied", func(t *testing.T) {
		m := randomMeta(r)
		sum := Summarize(s, m)
		m.Targets[0].PID = -1
		require.NotEqual(t, -1, sum.Targets[0].PID)
	})
}

func TestJSONRoundTrip(t *testing.T) {
	r := newRand(t)
	for round := range 10 {
		s, _ := randomSnapshot(t, r)
		m := randomMeta(r)
		if round == 0 {
			m.Targets = nil
		}
		want := Summarize(s, m)
		var buf bytes.Buffer
		require.NoError(t, want.WriteJSON(&buf))
		line := buf.Bytes()
		require.Equal(t, 1, bytes.Count(line, []byte("\n")), "one line")
		require.Equal(t, byte('\n'), line[len(line)-1])

		got, err := DecodeJSON(line)
		require.NoError(t, err)
		require.True(t, want.Time.Equal(got.Time), "time %v != %v", want.Time, got.Time)
		near := func(a, b time.Duration, what string) {
			t.Helper()
			require.InDelta(t, float64(a), float64(b), 1, "round %d %s", round, what)
		}
		near(want.Elapsed, got.Elapsed, "elapsed")
		near(want.Bias, got.Bias, "bias")
		near(want.Hit, got.Hit, "hit")
		near(want.Unprobed, got.Unprobed, "unprobed")
		require.Equal(t, want.Targets, got.Targets)
		require.Equal(t, want.Counters, got.Counters)
		require.Equal(t, want.ProbeShare, got.ProbeShare)
		require.Len(t, got.Rows, len(want.Rows))
		for i, w := range want.Rows {
			g := got.Rows[i]
			require.Equal(t, w.Stage, g.Stage)
			require.Equal(t, w.Name, g.Name)
			require.Equal(t, w.Count, g.Count)
			require.Equal(t, w.Bytes, g.Bytes)
			require.Equal(t, w.Share, g.Share)
			near(w.P50, g.P50, w.Name+" p50")
			near(w.P95, g.P95, w.Name+" p95")
			near(w.P99, g.P99, w.Name+" p99")
			near(w.Mean, g.Mean, w.Name+" mean")
			if w.Rate == 0 {
				require.Zero(t, g.Rate)
			} else {
				require.InEpsilon(t, w.Rate, g.Rate, 1e-12)
			}
		}
	}
}

func TestJSONFields(t *testing.T) {
	r := newRand(t)
	s, _ := randomSnapshot(t, r)
	sum := Summarize(s, randomMeta(r))
	var buf bytes.Buffer
	require.NoError(t, sum.WriteJSON(&buf))

	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(buf.Bytes(), &top))
	require.ElementsMatch(t, []string{"time", "elapsed_s", "targets", "stages", "counters",
		"bias_us", "hit_us", "unprobed_us", "probe_share"}, keys(top))

	var tm string
	require.NoError(t, json.Unmarshal(top["time"], &tm))
	pt, err := time.Parse(time.RFC3339Nano, tm)
	require.NoError(t, err)
	require.True(t, pt.Equal(sum.Time))

	var es float64
	require.NoError(t, json.Unmarshal(top["elapsed_s"], &es))
	require.InDelta(t, sum.Elapsed.Seconds(), es, 1e-9)
	var hit float64
	require.NoError(t, json.Unmarshal(top["hit_us"], &hit))
	require.InDelta(t, float64(sum.Hit)/1e3, hit, 1e-9)

	var counters map[string]uint64
	require.NoError(t, json.Unmarshal(top["counters"], &counters))
	require.Equal(t, map[string]uint64{"unmatched": s.Counters.Unmatched, "nexts": s.Counters.Nexts,
		"bad_stage": s.Counters.BadStage, "store_errors": s.Counters.StoreErrors}, counters)

	var targets []map[string]any
	require.NoError(t, json.Unmarshal(top["targets"], &targets))
	require.Len(t, targets, len(sum.Targets))
	require.Equal(t, sum.Targets[0].Exe, targets[0]["exe"])
	require.EqualValues(t, sum.Targets[0].PID, targets[0]["pid"])

	var stages []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(top["stages"], &stages))
	require.Len(t, stages, len(sum.Rows))
	for i, st := range stages {
		require.ElementsMatch(t, []string{"stage", "name", "count", "probes", "p50_us", "p95_us", "p99_us",
			"mean_us", "bytes", "share", "rate_gbps"}, keys(st))
		var gbps, p99 float64
		require.NoError(t, json.Unmarshal(st["rate_gbps"], &gbps))
		require.NoError(t, json.Unmarshal(st["p99_us"], &p99))
		require.InDelta(t, sum.Rows[i].Rate*8/1e9, gbps, 1e-12)
		require.InDelta(t, float64(sum.Rows[i].P99)/1e3, p99, 1e-9)
	}

	t.Run("empty lists are arrays", func(t *testing.T) {
		var buf bytes.Buffer
		empty := Summarize(&Snapshot{Time: sum.Time}, Meta{})
		require.NoError(t, empty.WriteJSON(&buf))
		require.Contains(t, buf.String(), `"targets":[]`)
		require.Contains(t, buf.String(), `"stages":[]`)
	})
}

func keys[V any](m map[string]V) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}

func TestDecodeJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
	}{
		{"not json", `{"time":`},
		{"trailing data", `{"time":"2025-01-02T03:04:05Z"} {}`},
		{"no time", `{"elapsed_s":1}`},
		{"bad time", `{"time":"yesterday"}`},
		{"wrong type", `{"time":"2025-01-02T03:04:05Z","stages":{}}`},
		{"stage too large", `{"time":"2025-01-02T03:04:05Z","stages":[{"stage":16,"name":"x"}]}`},
		{"negative stage", `{"time":"2025-01-02T03:04:05Z","stages":[{"stage":-1,"name":"x"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeJSON([]byte(tc.in))
			require.ErrorIs(t, err, ErrBadSummary)
		})
	}
	t.Run("minimal", func(t *testing.T) {
		s, err := DecodeJSON([]byte(`{"time":"2025-01-02T03:04:05Z","stages":[{"stage":5,"name":"pack","count":3,"p50_us":1.5}]}`))
		require.NoError(t, err)
		row, ok := s.Row(int(stage.Pack))
		require.True(t, ok)
		require.Equal(t, 1500*time.Nanosecond, row.P50)
		require.Equal(t, uint64(3), row.Count)
	})
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

func TestWriteJSONError(t *testing.T) {
	sum := Summarize(&Snapshot{}, Meta{})
	require.ErrorIs(t, sum.WriteJSON(failWriter{}), os.ErrClosed)
}

// ExampleSummary_WriteTable shows a summary of a small profile as a table.
func ExampleSummary_WriteTable() {
	var s Snapshot
	s.Time = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range uint64(100) {
		record(&s.Stages[stage.Op], 40_000+400*i, 0)
		record(&s.Stages[stage.Plan], 2_000+20*i, 0)
		for range 4 {
			record(&s.Stages[stage.Pack], 6_000+30*i, 1<<20)
		}
	}
	s.Counters = Counters{Unmatched: 2}
	sum := Summarize(&s, Meta{
		Targets: []Target{{PID: 4242, Exe: "/usr/local/bin/scatterd"}},
		Elapsed: 2 * time.Second, Bias: 950, Hit: 1270, Unprobed: 2,
	})
	sum.WriteTable(os.Stdout)
	// Output:
	// targets: 4242 scatterd
	// elapsed: 2.00s
	// probe: hit 1.27us, bias 950ns subtracted, ~0.1% of target time
	// marker without probe: 2ns per call
	// unmatched ends: 2 (attached mid-stage or evicted)
	// stage  count     p50     p95     p99    mean   bytes     rate   share
	// op       100  59.8us  79.6us  81.5us  59.8us      0B        -  100.0%
	// plan     100  2.99us  3.97us  4.07us  2.99us      0B        -    5.0%
	// pack     400  7.49us  9.85us  10.2us  7.49us  400MiB  140GB/s   50.1%
	// shares are of summed op time; stages overlap, so they need not add to 100%
}

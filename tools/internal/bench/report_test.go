package bench

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/stretchr/testify/require"
)

func fptr(v float64) *float64 { return &v }

func result(name string, lines []Line, dc, po, rtt float64) WorkloadResult {
	w, _ := Lookup(name)
	wr := WorkloadResult{Workload: w, Lines: lines, OverBound: make([]int, len(lines))}
	for i := range wr.Lines {
		wr.Lines[i].Workload = name
		if wr.Lines[i].Reps == 0 {
			wr.Lines[i].Reps = 20
		}
	}
	wr.Ceilings = []CeilingLine{
		{Workload: "ceiling/" + CeilingDirect, For: name, GoodputGbps: fptr(dc)},
		{Workload: "ceiling/" + CeilingPack, For: name, GoodputGbps: fptr(po)},
		{Workload: "ceiling/" + CeilingRTT, For: name, P50Ms: fptr(rtt)},
	}
	return wr
}

func TestGoals(t *testing.T) {
	tcp := PassResult{Transport: "tcp", Workloads: []WorkloadResult{
		result("many-small", []Line{
			{Mode: "direct", Chosen: "direct", GoodputGbps: 5, P50Ms: 40, P95Ms: 44},
			{Mode: "adaptive", Chosen: "gather", GoodputGbps: 16, WindowGbps: 19, P50Ms: 13, P95Ms: 15, PlanMs: 0.3, DecodeMs: 0.4},
		}, 20, 30, 0.1),
		result("few-large", []Line{
			{Mode: "direct", GoodputGbps: 20, P50Ms: 13, P95Ms: 14},
			{Mode: "adaptive", Chosen: "direct", GoodputGbps: 19, P50Ms: 14, P95Ms: 20},
		}, 20, 100, 0.1),
		result("single-read", []Line{{Mode: "adaptive", Chosen: "direct", P50Ms: 0.12, P95Ms: 0.13, PlanMs: 0.001}}, 20, 1, 0.1),
	}}
	tcp.Workloads[1].OverBound[0] = 2
	shmPass := PassResult{Transport: "shm", Leaked: 1, Workloads: []WorkloadResult{
		result("many-small", []Line{{Mode: "adaptive", Chosen: "direct", GoodputGbps: 28, P50Ms: 10, P95Ms: 11, Errors: 1}}, 80, 30, 0.02),
	}}
	got := map[string]Goal{}
	for _, g := range Goals([]PassResult{tcp, shmPass}) {
		got[g.Transport+" "+g.Text] = g
	}
	for _, tc := range []struct {
		key, verdict string
		value        float64
	}{
		{"tcp many-small: adaptive chooses", "ok", math.NaN()},
		{"tcp many-small: adaptive window / direct control", "ok", 0.95},
		{"tcp many-small: adaptive goodput / min(direct control, pack-only)", "ok", 0.8},
		{"tcp few-large: adaptive / forced direct", "MISSED", 0.95},
		{"tcp single-read: adaptive p50 / rtt p50", "ok", 1.2},
		{"tcp few-large: adaptive p95 / p50", "MISSED", 20.0 / 14},
		{"tcp many-small: adaptive plan / p50", "ok", 0.3 / 13},
		{"tcp operations whose staging peak exceeded their P x C", "MISSED", math.NaN()},
		{"tcp leaked leases (after each repetition and at shutdown)", "ok", math.NaN()},
		{"shm many-small: adaptive chooses", "ok", math.NaN()},
		{"shm many-small: adaptive goodput / pack-only", "ok", 28.0 / 30},
		{"shm leaked leases (after each repetition and at shutdown)", "MISSED", math.NaN()},
		{"shm failed workloads and operations", "MISSED", math.NaN()},
		{"tcp failed workloads and operations", "ok", math.NaN()},
	} {
		t.Run(tc.key, func(t *testing.T) {
			g, ok := got[tc.key]
			require.True(t, ok, "goal evaluated")
			require.Equal(t, tc.verdict, g.Verdict)
			if !math.IsNaN(tc.value) {
				require.InDelta(t, tc.value, g.Value, 1e-9)
			}
		})
	}
	_, ok := got["tcp mixed: adaptive / better of forced direct and gather"]
	require.False(t, ok, "no goal for a workload that did not run")

	// A goal whose inputs were not measured is n/a, not ok.
	na := Goals([]PassResult{{Transport: "tcp", Workloads: []WorkloadResult{
		result("few-large", []Line{{Mode: "adaptive", Chosen: "direct", GoodputGbps: 19, P50Ms: 14, P95Ms: 15}}, 20, 100, 0.1)}}})
	require.Equal(t, "n/a", na[0].Verdict, na[0].Text)

	var out bytes.Buffer
	PrintGoals(&out, Goals([]PassResult{tcp}))
	require.Contains(t, out.String(), "MISSED")
	require.Contains(t, out.String(), ">= 0.97")
}

func TestSeriesLine(t *testing.T) {
	w, _ := Lookup("many-small")
	s := newSeries(Modes[2])
	for i, d := range []int{30, 10, 20, 40, 50} {
		res := engine.Result{Chosen: engine.ModeGather, Trace: engine.Trace{Total: msDur(d), Window: msDur(d / 2), Plan: msDur(1),
			Slots: 2, ChunkBytes: 1 << 20, StagingPeak: 2 << 20}}
		if i == 4 {
			res.Chosen, res.Fallback = engine.ModeDirect, engine.FallbackExhausted
		}
		s.add(res, nil, true)
	}
	s.add(engine.Result{}, errTest, true)
	s.add(engine.Result{Chosen: engine.ModeDirect, Trace: engine.Trace{Total: msDur(1), StagingPeak: 1}}, nil, false)
	l := s.line(&w, "tcp", "inproc", 5)
	require.Equal(t, 5, l.Reps, "unmeasured and failed operations are not timed")
	require.Equal(t, 30.0, l.P50Ms)
	require.Equal(t, 50.0, l.P95Ms)
	require.InDelta(t, float64(w.Payload())*8/0.030/1e9, l.GoodputGbps, 1e-9)
	require.InDelta(t, float64(w.Payload())*8/0.015/1e9, l.WindowGbps, 1e-9)
	require.Equal(t, "gather+direct", l.Chosen)
	require.Equal(t, 1, l.Fallbacks)
	require.Equal(t, 1, l.Errors)
	require.Equal(t, int64(2<<20), l.StagingPeakBytes)
	require.Equal(t, int64(2<<20), l.StagingBoundBytes)
	require.Equal(t, 1, s.overBound, "the unmeasured operation held staging without a P x C")
	require.Equal(t, "adaptive", l.Mode)
	require.Equal(t, "read", l.Direction)
}

var errTest = errorString("injected")

type errorString string

func (e errorString) Error() string { return string(e) }

func msDur(n int) time.Duration { return time.Duration(n) * time.Millisecond }

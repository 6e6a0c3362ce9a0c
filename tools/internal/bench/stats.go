package bench

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"
)

// Line is the JSON line of one workload in one mode (see the package
// documentation for each field's meaning). Field names are part of the
// command's interface: testdata/line.golden pins them.
type Line struct {
	Workload          string  `json:"workload"`
	Transport         string  `json:"transport"`
	Owner             string  `json:"owner"`
	Seed              uint64  `json:"seed"`
	Mode              string  `json:"mode"`
	Chosen            string  `json:"chosen"`
	Direction         string  `json:"direction"`
	Fragments         uint64  `json:"fragments"`
	PayloadBytes      uint64  `json:"payload_bytes"`
	Reps              int     `json:"reps"`
	P50Ms             float64 `json:"p50_ms"`
	P95Ms             float64 `json:"p95_ms"`
	GoodputGbps       float64 `json:"goodput_gbps"`
	WindowGbps        float64 `json:"window_gbps"`
	PlanMs            float64 `json:"plan_ms"`
	ControlMs         float64 `json:"control_ms"`
	DecodeMs          float64 `json:"decode_ms"`
	PackMs            float64 `json:"pack_ms"`
	CompleteMs        float64 `json:"complete_ms"`
	StagingPeakBytes  int64   `json:"staging_peak_bytes"`
	StagingBoundBytes int64   `json:"staging_bound_bytes"`
	LeakedLeases      int     `json:"leaked_leases"`
	Fallbacks         int     `json:"fallbacks"`
	Errors            int     `json:"errors"`
	// Status is StatusOK, StatusFailed (the workload failed: Error says
	// why, and its figures are not goals' inputs) or StatusNotRun.
	Status string `json:"status"`
	// Error is why the line's workload failed or did not run: its own
	// failed operations (the count and the first error), else the
	// workload's failure.
	Error string `json:"error,omitempty"`
	// CalibrationFallback lists the packing calibrations behind this
	// line that could not finish and used costmodel's conservative
	// figures ("<who>: <reason>", joined by "; ").
	CalibrationFallback string `json:"calibration_fallback,omitempty"`

	// opErr is the first failed operation's error (not in the JSON:
	// Error carries it).
	opErr error
}

// Line statuses.
const (
	StatusOK     = "ok"
	StatusFailed = "failed"
	StatusNotRun = "not run"
)

// Ceiling names.
const (
	CeilingDirect = "direct-control"
	CeilingPack   = "pack-only"
	CeilingRTT    = "rtt"
)

// CeilingLine is the JSON line of a ceiling measured for one workload in
// the same run: Workload is "ceiling/<name>", For the workload it bounds.
// direct-control and pack-only carry GoodputGbps, rtt carries P50Ms.
type CeilingLine struct {
	Workload    string   `json:"workload"`
	For         string   `json:"for"`
	Transport   string   `json:"transport"`
	Owner       string   `json:"owner"`
	Seed        uint64   `json:"seed"`
	Reps        int      `json:"reps"`
	GoodputGbps *float64 `json:"goodput_gbps,omitempty"`
	P50Ms       *float64 `json:"p50_ms,omitempty"`
}

// Name returns the ceiling's name without the "ceiling/" prefix.
func (c *CeilingLine) Name() string { return strings.TrimPrefix(c.Workload, "ceiling/") }

// Value returns the ceiling's figure: Gbit/s, or ms for rtt.
func (c *CeilingLine) Value() float64 {
	switch {
	case c.GoodputGbps != nil:
		return *c.GoodputGbps
	case c.P50Ms != nil:
		return *c.P50Ms
	}
	return math.NaN()
}

// quantile returns the q-quantile (nearest rank) of ds, which it sorts.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// gbps is payload bytes over d in Gbit/s (1e9 bits per second).
func gbps(payload uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(payload) * 8 / d.Seconds() / 1e9
}

// series collects the repetitions of one workload in one mode.
type series struct {
	mode      Mode
	traces    []engine.Trace
	chosen    map[engine.Mode]int
	fallbacks int
	errors    int
	firstErr  error
	peak      int64
	bound     int64
	// overBound counts operations whose staging peak exceeded their own
	// P*C; leaked is the most leases outstanding after a repetition.
	overBound int
	leaked    int
	verified  int
	// last is the last measured operation's result (-explain).
	last engine.Result
}

func newSeries(m Mode) *series { return &series{mode: m, chosen: map[engine.Mode]int{}} }

// add records one operation's outcome (measured or not: errors, staging
// and fallbacks count always; times only when measured).
func (s *series) add(res engine.Result, err error, measured bool) {
	if err != nil {
		s.errors++
		if s.firstErr == nil {
			s.firstErr = err
		}
		return
	}
	if res.Fallback != engine.FallbackNone {
		s.fallbacks++
	}
	t := res.Trace
	bound := int64(t.Slots) * t.ChunkBytes
	s.peak, s.bound = max(s.peak, t.StagingPeak), max(s.bound, bound)
	if t.StagingPeak > bound {
		s.overBound++
	}
	if measured {
		s.traces = append(s.traces, t)
		s.chosen[res.Chosen]++
		s.last = res
	}
}

// chosenName names the mode the engine chose: one name when every
// measured repetition agreed, else the names joined by "+", most frequent
// first.
func (s *series) chosenName() string {
	type kv struct {
		m engine.Mode
		n int
	}
	var ks []kv
	for m, n := range s.chosen {
		ks = append(ks, kv{m, n})
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].n > ks[j].n || ks[i].n == ks[j].n && ks[i].m < ks[j].m })
	var names []string
	for _, k := range ks {
		names = append(names, k.m.String())
	}
	return strings.Join(names, "+")
}

// line summarizes the series.
func (s *series) line(w *Workload, transport, ownerKind string, seed uint64) Line {
	l := Line{Workload: w.Name, Transport: transport, Owner: ownerKind, Seed: seed, Mode: s.mode.Name,
		Chosen: s.chosenName(), Direction: strings.ToLower(w.Dir.String()),
		Fragments: uint64(w.Fragments()), PayloadBytes: w.Payload(), Reps: len(s.traces),
		StagingPeakBytes: s.peak, StagingBoundBytes: s.bound, LeakedLeases: s.leaked,
		Fallbacks: s.fallbacks, Errors: s.errors, opErr: s.firstErr}
	if len(s.traces) == 0 {
		return l
	}
	pick := func(f func(*engine.Trace) time.Duration) []time.Duration {
		out := make([]time.Duration, len(s.traces))
		for i := range s.traces {
			out[i] = f(&s.traces[i])
		}
		return out
	}
	total := pick(func(t *engine.Trace) time.Duration { return t.Total })
	p50 := quantile(total, 0.5)
	l.P50Ms, l.P95Ms = ms(p50), ms(quantile(total, 0.95))
	l.GoodputGbps = gbps(w.Payload(), p50)
	l.WindowGbps = gbps(w.Payload(), quantile(pick(func(t *engine.Trace) time.Duration { return t.Window }), 0.5))
	l.PlanMs = ms(quantile(pick(func(t *engine.Trace) time.Duration { return t.Plan }), 0.5))
	l.ControlMs = ms(quantile(pick(func(t *engine.Trace) time.Duration { return t.Control }), 0.5))
	l.DecodeMs = ms(quantile(pick(func(t *engine.Trace) time.Duration { return t.Decode }), 0.5))
	l.PackMs = ms(quantile(pick(func(t *engine.Trace) time.Duration { return t.Pack }), 0.5))
	l.CompleteMs = ms(quantile(pick(func(t *engine.Trace) time.Duration { return t.Complete }), 0.5))
	return l
}

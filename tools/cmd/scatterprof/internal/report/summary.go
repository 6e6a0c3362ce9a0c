package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/scatterkit/scatterkit/verbs/stage"
)

var (
	// ErrBadSummary reports JSON that [DecodeJSON] cannot read as a summary.
	ErrBadSummary = errors.New("report: malformed summary")
)

// Meta is what the profiler knows besides the maps.
type Meta struct {
	Targets  []Target      // attached processes
	Elapsed  time.Duration // since the profile began
	Bias     time.Duration // calibrated, subtracted per interval in the kernel
	Hit      time.Duration // calibrated wall cost of one probe hit
	Unprobed time.Duration // one marker call without a probe
}

// Target is one attached process.
type Target struct {
	PID int    `json:"pid"`
	Exe string `json:"exe"`
}

// Row is one stage's figures.
type Row struct {
	Stage               int
	Name                string
	Count               uint64 // intervals (sampled chunk stages: estimated from their weights)
	Probes              uint64 // intervals probed
	P50, P95, P99, Mean time.Duration
	Bytes               uint64
	Share               float64 // this stage's summed time / the op stage's summed time (0 when no op recorded)
	Rate                float64 // bytes per second of this stage's own time (Bytes / SumNs), 0 when none
}

// Summary is a snapshot reduced to what a person or a dashboard reads.
type Summary struct {
	Time     time.Time
	Elapsed  time.Duration
	Targets  []Target
	Rows     []Row // stages with Count > 0, numeric order, calibration stage excluded
	Counters Counters

	Bias, Hit, Unprobed time.Duration
	// ProbeShare estimates the probes' cost as a share of the targets'
	// elapsed time: Snapshot.Hits() * Hit / Elapsed (0 when Elapsed is 0).
	ProbeShare float64
}

// Summarize reduces a snapshot and the profiler's meta data to a summary.
func Summarize(s *Snapshot, m Meta) Summary {
	sum := Summary{
		Time:     s.Time,
		Elapsed:  m.Elapsed,
		Targets:  slices.Clone(m.Targets),
		Counters: s.Counters,
		Bias:     m.Bias,
		Hit:      m.Hit,
		Unprobed: m.Unprobed,
	}
	if len(sum.Targets) == 0 {
		sum.Targets = nil
	}
	if m.Elapsed > 0 {
		sum.ProbeShare = float64(s.Hits()) * float64(m.Hit) / float64(m.Elapsed)
	}
	op := &s.Stages[stage.Op]
	for i := range s.Stages {
		st := &s.Stages[i]
		if i == CalibrationStage || st.Count == 0 {
			continue
		}
		r := Row{
			Stage:  i,
			Name:   StageName(i),
			Count:  st.Count,
			Probes: st.Probes,
			P50:    quantileDuration(&st.Hist, 0.50),
			P95:    quantileDuration(&st.Hist, 0.95),
			P99:    quantileDuration(&st.Hist, 0.99),
			Mean:   time.Duration(st.SumNs / st.Count),
			Bytes:  st.Bytes,
		}
		if op.Count > 0 && op.SumNs > 0 {
			r.Share = float64(st.SumNs) / float64(op.SumNs)
		}
		if st.Bytes > 0 && st.SumNs > 0 {
			r.Rate = float64(st.Bytes) / (float64(st.SumNs) / 1e9)
		}
		sum.Rows = append(sum.Rows, r)
	}
	return sum
}

// quantileDuration is Quantile rounded to a whole nanosecond.
func quantileDuration(h *[Buckets]uint64, q float64) time.Duration {
	v := math.Round(Quantile(h, q))
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(v)
}

// Row returns the row of a stage number, false when the stage has no data.
func (s *Summary) Row(stage int) (Row, bool) {
	for _, r := range s.Rows {
		if r.Stage == stage {
			return r, true
		}
	}
	return Row{}, false
}

// summaryJSON is the wire form of a Summary (see the package doc).
type summaryJSON struct {
	Time       string    `json:"time"`
	ElapsedS   float64   `json:"elapsed_s"`
	Targets    []Target  `json:"targets"`
	Stages     []rowJSON `json:"stages"`
	Counters   Counters  `json:"counters"`
	BiasUs     float64   `json:"bias_us"`
	HitUs      float64   `json:"hit_us"`
	UnprobedUs float64   `json:"unprobed_us"`
	ProbeShare float64   `json:"probe_share"`
}

type rowJSON struct {
	Stage    int     `json:"stage"`
	Name     string  `json:"name"`
	Count    uint64  `json:"count"`
	Probes   uint64  `json:"probes"`
	P50Us    float64 `json:"p50_us"`
	P95Us    float64 `json:"p95_us"`
	P99Us    float64 `json:"p99_us"`
	MeanUs   float64 `json:"mean_us"`
	Bytes    uint64  `json:"bytes"`
	Share    float64 `json:"share"`
	RateGbps float64 `json:"rate_gbps"`
}

func micros(d time.Duration) float64 { return float64(d) / 1e3 }

func fromMicros(us float64) time.Duration { return time.Duration(math.Round(us * 1e3)) }

// WriteJSON writes the summary as one line holding one JSON object.
func (s *Summary) WriteJSON(w io.Writer) error {
	out := summaryJSON{
		Time:       s.Time.Format(time.RFC3339Nano),
		ElapsedS:   s.Elapsed.Seconds(),
		Targets:    s.Targets,
		Stages:     make([]rowJSON, 0, len(s.Rows)),
		Counters:   s.Counters,
		BiasUs:     micros(s.Bias),
		HitUs:      micros(s.Hit),
		UnprobedUs: micros(s.Unprobed),
		ProbeShare: s.ProbeShare,
	}
	if out.Targets == nil {
		out.Targets = []Target{}
	}
	for _, r := range s.Rows {
		out.Stages = append(out.Stages, rowJSON{
			Stage: r.Stage, Name: r.Name, Count: r.Count, Probes: r.Probes,
			P50Us: micros(r.P50), P95Us: micros(r.P95), P99Us: micros(r.P99), MeanUs: micros(r.Mean),
			Bytes: r.Bytes, Share: r.Share, RateGbps: r.Rate * 8 / 1e9,
		})
	}
	enc := json.NewEncoder(w) // Encode ends the object with a newline
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&out); err != nil {
		return fmt.Errorf("report: write json: %w", err)
	}
	return nil
}

// DecodeJSON reads back one summary written by [Summary.WriteJSON].
// Durations come back rounded to the nanosecond.
func DecodeJSON(b []byte) (Summary, error) {
	var in summaryJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return Summary{}, fmt.Errorf("%w: %w", ErrBadSummary, err)
	}
	t, err := time.Parse(time.RFC3339Nano, in.Time)
	if err != nil {
		return Summary{}, fmt.Errorf("%w: time: %w", ErrBadSummary, err)
	}
	s := Summary{
		Time:       t,
		Elapsed:    time.Duration(math.Round(in.ElapsedS * 1e9)),
		Counters:   in.Counters,
		Bias:       fromMicros(in.BiasUs),
		Hit:        fromMicros(in.HitUs),
		Unprobed:   fromMicros(in.UnprobedUs),
		ProbeShare: in.ProbeShare,
	}
	if len(in.Targets) > 0 {
		s.Targets = in.Targets
	}
	for i, r := range in.Stages {
		if r.Stage < 0 || r.Stage >= MaxStages {
			return Summary{}, fmt.Errorf("%w: stages[%d]: stage number %d out of range", ErrBadSummary, i, r.Stage)
		}
		s.Rows = append(s.Rows, Row{
			Stage: r.Stage, Name: r.Name, Count: r.Count, Probes: r.Probes,
			P50: fromMicros(r.P50Us), P95: fromMicros(r.P95Us), P99: fromMicros(r.P99Us), Mean: fromMicros(r.MeanUs),
			Bytes: r.Bytes, Share: r.Share, Rate: r.RateGbps * 1e9 / 8,
		})
	}
	return s, nil
}

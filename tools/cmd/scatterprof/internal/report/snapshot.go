package report

import (
	"time"

	"github.com/scatterkit/scatterkit/verbs/stage"
)

// Stage is what the kernel recorded for one stage number, summed over
// CPUs: matched begin/end intervals (after the calibrated bias was
// subtracted), their histogram and the bytes their ends reported.
type Stage struct {
	Count uint64          `json:"count"`
	SumNs uint64          `json:"sum_ns"`
	Bytes uint64          `json:"bytes"`
	Hist  [Buckets]uint64 `json:"-"`
}

// Counters are the probes' own event counts.
type Counters struct {
	Begins      uint64 `json:"begins"`       // begin probes that stored a start
	Ends        uint64 `json:"ends"`         // end probes matched to a begin
	Unmatched   uint64 `json:"unmatched"`    // ends with no begin (attached mid-stage, or evicted)
	Nexts       uint64 `json:"nexts"`        // next probes: one hit that ended a stage and began another
	BadStage    uint64 `json:"bad_stage"`    // probes with a stage number >= MaxStages
	StoreErrors uint64 `json:"store_errors"` // begins whose start could not be stored
}

// Hits is the number of probe hits the counters account for (a next
// probe counts an end and a begin, in one hit).
func (c Counters) Hits() uint64 {
	events := c.Begins + c.Ends + c.Unmatched + c.BadStage + c.StoreErrors
	if events < c.Nexts { // counters read while probes fire
		return 0
	}
	return events - c.Nexts
}

// Snapshot is a reading of the profiler's maps.
type Snapshot struct {
	Time     time.Time
	Stages   [MaxStages]Stage // by stage number
	Counters Counters
}

// Sub returns s minus an earlier snapshot of the same maps: what happened
// between the two.
func (s *Snapshot) Sub(prev *Snapshot) Snapshot {
	d := Snapshot{Time: s.Time}
	for i := range s.Stages {
		a, b := &s.Stages[i], &prev.Stages[i]
		o := &d.Stages[i]
		o.Count, o.SumNs, o.Bytes = a.Count-b.Count, a.SumNs-b.SumNs, a.Bytes-b.Bytes
		for j := range a.Hist {
			o.Hist[j] = a.Hist[j] - b.Hist[j]
		}
	}
	c, p := s.Counters, prev.Counters
	d.Counters = Counters{Begins: c.Begins - p.Begins, Ends: c.Ends - p.Ends, Unmatched: c.Unmatched - p.Unmatched,
		Nexts: c.Nexts - p.Nexts, BadStage: c.BadStage - p.BadStage, StoreErrors: c.StoreErrors - p.StoreErrors}
	return d
}

// StageName names a stage number: the engine's name, "calibration" for
// the profiler's own, "stage<n>" for numbers the engine does not define.
func StageName(n int) string {
	if n == CalibrationStage {
		return "calibration"
	}
	if s := stage.Stage(n).String(); s != "stage?" {
		return s
	}
	return "stage" + itoa(n)
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

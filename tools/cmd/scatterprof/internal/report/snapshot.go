package report

import (
	"time"

	"github.com/scatterkit/scatterkit/verbs/stage"
)

// Stage is what the kernel recorded for one stage number, summed over
// CPUs: matched begin/end intervals (after the calibrated bias was
// subtracted), their histogram and the bytes their ends reported.
//
// A sampled interval (the engine marks at most stage.MaxMarkedChunks chunks
// of an operation) stands for several: Count, SumNs, Bytes and Hist hold
// the weighted figures, estimates of all intervals; Probes counts the
// intervals actually probed.
type Stage struct {
	Count  uint64          `json:"count"`
	SumNs  uint64          `json:"sum_ns"`
	Bytes  uint64          `json:"bytes"`
	Probes uint64          `json:"probes"`
	Hist   [Buckets]uint64 `json:"-"`
}

// Counters are the probes' own event counts. Matched intervals are the
// stages' counts; these are the rest.
type Counters struct {
	Unmatched   uint64 `json:"unmatched"`    // ends with no begin (attached mid-stage, or its start replaced)
	Nexts       uint64 `json:"nexts"`        // intervals ended by a next probe (one hit that also began another)
	BadStage    uint64 `json:"bad_stage"`    // probes with a stage number >= MaxStages
	StoreErrors uint64 `json:"store_errors"` // begins that found no free way and replaced an open stage's start
}

// Snapshot is a reading of the profiler's maps.
type Snapshot struct {
	Time     time.Time
	Stages   [MaxStages]Stage // by stage number
	Counters Counters
}

// Intervals is the number of matched intervals probed, of every stage but
// the calibration stage.
func (s *Snapshot) Intervals() uint64 {
	var n uint64
	for i := range s.Stages {
		if i != CalibrationStage {
			n += s.Stages[i].Probes
		}
	}
	return n
}

// Hits is the number of probe hits the snapshot accounts for: each probed
// interval took a begin and an end hit, less one hit per next probe (which
// ended one interval and began another), plus the hits that matched
// nothing. Begins still open when the maps were read are not counted.
func (s *Snapshot) Hits() uint64 {
	c := s.Counters
	n := 2*s.Intervals() + c.Unmatched + c.BadStage + c.StoreErrors
	if n < c.Nexts { // counters read while probes fire
		return 0
	}
	return n - c.Nexts
}

// Sub returns s minus an earlier snapshot of the same maps: what happened
// between the two.
func (s *Snapshot) Sub(prev *Snapshot) Snapshot {
	d := Snapshot{Time: s.Time}
	for i := range s.Stages {
		a, b := &s.Stages[i], &prev.Stages[i]
		o := &d.Stages[i]
		o.Count, o.SumNs, o.Bytes, o.Probes = a.Count-b.Count, a.SumNs-b.SumNs, a.Bytes-b.Bytes, a.Probes-b.Probes
		for j := range a.Hist {
			o.Hist[j] = a.Hist[j] - b.Hist[j]
		}
	}
	c, p := s.Counters, prev.Counters
	d.Counters = Counters{Unmatched: c.Unmatched - p.Unmatched, Nexts: c.Nexts - p.Nexts,
		BadStage: c.BadStage - p.BadStage, StoreErrors: c.StoreErrors - p.StoreErrors}
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

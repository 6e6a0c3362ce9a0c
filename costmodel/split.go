package costmodel

import (
	"math"
	"math/bits"
	"strconv"
	"time"
)

// Run is one compatible run of a mixed operation: spans that can travel
// together, with their geometry. Gatherable says whether the run may join
// the gather pipeline at all (its destination order permits packing);
// runs that are not gatherable always go direct.
type Run struct {
	Geometry
	Gatherable bool
}

// SplitDecision is the outcome of Split.
type SplitDecision struct {
	// Mode is ModeDirect (nothing gathered), ModeGather (every run
	// gathered) or ModeHybrid.
	Mode Mode
	// Threshold is the largest mean fragment size, in bytes, of a run
	// that was gathered: a gatherable run goes to the gather pipeline
	// exactly when S/N <= Threshold. Zero when nothing is gathered.
	Threshold int64
	// Predicted is the predicted time of the chosen split.
	Predicted time.Duration
	// AllDirect is T_direct of the whole operation.
	AllDirect time.Duration
	// AllGather is the time with every gatherable run gathered (the
	// others direct), Forever when nothing can be gathered.
	AllGather time.Duration
	// Direct and Gather are the geometries of the two parts of the chosen
	// split.
	Direct, Gather Geometry
	// Pipeline is the gather pipeline's candidate (C, P, K and its own
	// T_gather); zero when Mode is ModeDirect.
	Pipeline Candidate
	// Splits counts the thresholds evaluated.
	Splits int
	// Err is set when the input was invalid; Mode is then ModeDirect and
	// modes was not written.
	Err error
}

// sizeClasses is the number of histogram buckets: a run's class is
// bits.Len64 of its mean fragment size, so class b holds means in
// [2^(b-1), 2^b).
const sizeClasses = 64

// Split partitions a mixed operation between direct posting and one
// shared gather pipeline, and writes each run's mode into modes (which
// must be at least as long as runs).
//
// Runs are classed by mean fragment size (S/N) into power-of-two
// classes, in one pass and without sorting; a split is a threshold class
// at or below which gatherable runs are gathered, so small fragments share
// the pipeline while large ranges stay direct. Every threshold with runs
// in its class is evaluated, each with the same bounded (C, P) search as
// Decide scored by THybrid: O(runs + classes * candidates). The best
// split is taken only when it beats all-direct by the margin
// (T*(1+Margin) < T_direct); otherwise everything is direct.
//
// Split does not allocate. On invalid input it returns a direct decision
// with Err set and leaves modes untouched.
func Split(p Params, runs []Run, modes []Mode) SplitDecision {
	out := SplitDecision{Mode: ModeDirect, AllDirect: Forever, AllGather: Forever, Predicted: Forever}
	if err := p.Validate(); err != nil {
		out.Err = err
		return out
	}
	if len(modes) < len(runs) {
		out.Err = &FieldError{
			Field:  "modes",
			Value:  "len " + strconv.Itoa(len(modes)),
			Reason: "shorter than runs (len " + strconv.Itoa(len(runs)) + ")",
			Err:    ErrShortBuffer,
		}
		return out
	}
	var (
		total Geometry
		hist  [sizeClasses]Geometry
		ok    bool
	)
	for i := range runs {
		r := &runs[i].Geometry
		if r.Validate() != nil {
			out.Err = r.validate("runs[" + strconv.Itoa(i) + "]")
			return out
		}
		if total, ok = total.add(*r); !ok {
			out.Err = geomErr("runs["+strconv.Itoa(i)+"]", "S", r.S, "totals overflow int64")
			return out
		}
		if runs[i].Gatherable && r.N > 0 {
			b := sizeClass(*r)
			hist[b], _ = hist[b].add(*r) // bounded by total
		}
	}

	whole := newModel(&p, total)
	out.AllDirect = duration(whole.direct(total.S, total.N))
	out.Direct, out.Predicted = total, out.AllDirect

	best := struct {
		t     time.Duration
		class int
		g     Geometry
		cand  Candidate
	}{t: Forever, class: -1}
	var gathered Geometry
	for b := range hist {
		if hist[b].N == 0 {
			continue
		}
		gathered, _ = gathered.add(hist[b])
		t, cand := bestSplit(&p, total.sub(gathered), gathered)
		out.Splits++
		out.AllGather = t
		if t < best.t {
			best.t, best.class, best.g, best.cand = t, b, gathered, cand
		}
	}
	if best.class < 0 || !gatherWins(best.t, out.AllDirect, p.Margin) {
		for i := range runs {
			modes[i] = ModeDirect
		}
		return out
	}

	out.Predicted = best.t
	out.Threshold = math.MaxInt64
	if best.class < 63 {
		out.Threshold = int64(1)<<best.class - 1
	}
	out.Gather = best.g
	out.Direct = total.sub(best.g)
	out.Pipeline = best.cand
	out.Mode = ModeHybrid
	if out.Direct.N == 0 {
		out.Mode = ModeGather
	}
	for i := range runs {
		modes[i] = ModeDirect
		if r := runs[i]; r.Gatherable && r.N > 0 && sizeClass(r.Geometry) <= best.class {
			modes[i] = ModeGather
		}
	}
	return out
}

// bestSplit is the fastest hybrid time for sending d direct and gathering
// g, over the gather candidates of g.
func bestSplit(p *Params, d, g Geometry) (time.Duration, Candidate) {
	m := newModel(p, g)
	var best choice
	search(&m, func(c, k int64, w int, total float64) {
		if d.N > 0 {
			total = m.hybrid(d, k, total)
		}
		best.offer(c, k, w, total)
	})
	if best.c == 0 {
		return Forever, Candidate{}
	}
	t := m.gather(best.c, best.k, best.w)
	return duration(best.objective), t.candidate(bytesUp(cMin(p)))
}

// sizeClass is bits.Len64 of the mean fragment size; g.N >= 1.
func sizeClass(g Geometry) int {
	return min(bits.Len64(uint64(g.S/g.N)), sizeClasses-1)
}

// String summarizes the split on one line.
func (s SplitDecision) String() string {
	b := make([]byte, 0, 160)
	b = append(b, s.Mode.String()...)
	if s.Err != nil {
		b = append(b, " (fallback: "...)
		b = append(b, s.Err.Error()...)
		return string(append(b, ')'))
	}
	b = append(b, ": predicted "...)
	b = appendDuration(b, s.Predicted)
	b = append(b, ", all-direct "...)
	b = appendDuration(b, s.AllDirect)
	b = append(b, ", all-gather "...)
	b = appendDuration(b, s.AllGather)
	if s.Mode != ModeDirect {
		b = append(b, "; gather runs with S/N <= "...)
		b = appendBytes(b, s.Threshold)
		b = append(b, " ("...)
		b = appendBytes(b, s.Gather.S)
		b = append(b, " in "...)
		b = strconv.AppendInt(b, s.Gather.N, 10)
		b = append(b, " fragments, P="...)
		b = strconv.AppendInt(b, int64(s.Pipeline.P), 10)
		b = append(b, " C="...)
		b = appendBytes(b, s.Pipeline.C)
		b = append(b, "); direct "...)
		b = appendBytes(b, s.Direct.S)
		b = append(b, " in "...)
		b = strconv.AppendInt(b, s.Direct.N, 10)
		b = append(b, " fragments"...)
	}
	return string(b)
}

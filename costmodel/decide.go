package costmodel

import (
	"math/bits"
	"time"
)

// Mode is how an operation (or part of one) moves its bytes. The transfer
// engine uses this type for its operations' modes too (verbs/engine.Mode),
// so there is one numbering: the zero value is ModeAuto, "not decided".
type Mode uint8

const (
	// ModeAuto leaves the choice to the cost model (an engine decides
	// direct, gather or hybrid). A Decision never reports it.
	ModeAuto Mode = iota
	// ModeDirect posts one request per span: the correctness fallback.
	ModeDirect
	// ModeGather has the owner pack the spans into staging and send a few
	// bulk transfers (READ), or stages the fragments on the requester for
	// the owner to read and scatter (WRITE).
	ModeGather
	// ModeHybrid sends some runs direct and gathers the others (Split),
	// both at once, under one completion.
	ModeHybrid
)

func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeDirect:
		return "direct"
	case ModeGather:
		return "gather"
	case ModeHybrid:
		return "hybrid"
	}
	return "mode(" + itoa(int64(m)) + ")"
}

// Candidate is one evaluated configuration.
type Candidate struct {
	Mode Mode
	// C is the chunk size in bytes; zero for direct.
	C int64
	// P is the pipeline width (pack workers, chunks in flight); zero for
	// direct.
	P int
	// K is the number of requests posted: chunks for gather, fragments
	// for direct.
	K int64
	// Clamped is set when C_min exceeded C_max and C was clamped down to
	// C_max: the staging bound wins over amortization.
	Clamped bool
	// Pack and Bulk are T_pack and T_bulk of a gather candidate.
	Pack, Bulk time.Duration
	// Total is the predicted time: T_direct or T_gather.
	Total time.Duration
}

// Decision is the outcome of Decide. It is a plain value: Decide fills it
// without allocating, and the evaluated candidates are recomputed on
// request (Candidates, AppendExplain, String), since the search is
// deterministic.
type Decision struct {
	// Mode is ModeDirect or ModeGather.
	Mode Mode
	// Chosen is the candidate to run; Chosen.Total is the prediction.
	Chosen Candidate
	// Direct is the direct candidate, always evaluated.
	Direct Candidate
	// Gather is the best gather candidate, chosen or not. With no gather
	// candidate (empty operation, no staging budget) its C is zero and its
	// Total is Forever.
	Gather Candidate
	// CMin is C_min in bytes.
	CMin int64
	// Evaluated counts the candidates compared, direct included.
	Evaluated int
	// Err is set when the Params or Geometry were invalid; the decision
	// is then direct, the path that needs no model.
	Err error

	params   Params
	geom     Geometry
	staged   Staged // DecideStaged's requester side
	isStaged bool
}

// Predicted is the predicted time of the chosen mode.
func (d Decision) Predicted() time.Duration { return d.Chosen.Total }

// model rebuilds the decision's model (Decide's or DecideStaged's).
func (d *Decision) model() model {
	if d.isStaged {
		return newStagedModel(&d.params, d.geom, d.staged)
	}
	return newModel(&d.params, d.geom)
}

// Staged reports the requester side a DecideStaged decision was made
// with, and whether it was one.
func (d Decision) Staged() (Staged, bool) { return d.staged, d.isStaged }

// Params returns the parameters the decision was made with.
func (d Decision) Params() Params { return d.params }

// Geometry returns the geometry the decision was made for.
func (d Decision) Geometry() Geometry { return d.geom }

// Decide picks direct or gather for one operation. It evaluates T_direct
// and a bounded set of gather candidates: P in 1, 2, 4, ... up to MaxP, and
// for each P at most Params.ChunkSteps chunk sizes from C_min to C_max(P)
// (C_min times powers of two, evenly spaced in octaves, then C_max). It
// picks the fastest gather candidate only when T_gather*(1+Margin) <
// T_direct. It does not allocate; on invalid input it returns a direct
// decision with Err set.
func Decide(p Params, g Geometry) Decision {
	d := Decision{params: p, geom: g}
	if err := p.Validate(); err != nil {
		return d.fallback(err)
	}
	if err := g.Validate(); err != nil {
		return d.fallback(err)
	}
	m := newModel(&p, g)
	return d.settle(&m, bytesUp(cMin(&p)))
}

// settle fills d from m (its geometry, and Decide's or DecideStaged's
// pricing): the direct candidate, the best gather candidate of the search
// from cmin, and the choice by the margin rule.
func (d Decision) settle(m *model, cmin int64) Decision {
	g, p := m.g, m.p
	d.Direct = Candidate{Mode: ModeDirect, K: g.N, Total: duration(m.direct(g.S, g.N))}
	d.Gather = Candidate{Mode: ModeGather, Total: Forever}
	d.CMin = cmin
	d.Evaluated = 1
	var best choice
	search(m, func(c, k int64, w int, total float64) {
		d.Evaluated++
		best.offer(c, k, w, total)
	})
	if best.c != 0 {
		t := m.gather(best.c, best.k, best.w)
		d.Gather = t.candidate(d.CMin)
	}
	d.Mode, d.Chosen = ModeDirect, d.Direct
	if gatherWins(d.Gather.Total, d.Direct.Total, p.Margin) {
		d.Mode, d.Chosen = ModeGather, d.Gather
	}
	return d
}

func (d Decision) fallback(err error) Decision {
	d.Err = err
	d.Mode = ModeDirect
	d.Direct = Candidate{Mode: ModeDirect, K: d.geom.N, Total: Forever}
	d.Gather = Candidate{Mode: ModeGather, Total: Forever}
	d.Chosen = d.Direct
	return d
}

// gatherWins is the safety-margin rule, applied to the reported durations
// so that anyone can check a decision from its fields.
func gatherWins(gather, direct time.Duration, margin float64) bool {
	return gather != Forever && float64(gather)*(1+margin) < float64(direct)
}

// choice keeps the best candidate offered: smallest objective first,
// then least staging (P*C), then fewest workers.
type choice struct {
	c, k      int64
	w         int
	objective float64
}

func (b *choice) offer(c, k int64, w int, objective float64) {
	if b.c != 0 {
		if objective > b.objective {
			return
		}
		if objective == b.objective {
			s, bs := int64(w)*c, int64(b.w)*b.c
			if s > bs || (s == bs && w >= b.w) {
				return
			}
		}
	}
	*b = choice{c: c, k: k, w: w, objective: objective}
}

// nextWidth steps the pipeline width through 1, 2, 4, ... and ends at
// maxP; it returns 0 after maxP.
func nextWidth(w, maxP int) int {
	if w >= maxP {
		return 0
	}
	return min(w*2, maxP)
}

// chunkRange is the interval of chunk sizes tried at width w: [lo, hi]
// with lo = max(C_min, 1) and hi = C_max(w). When lo > hi the staging
// bound wins and the only size is hi (a clamped candidate). hi < 1 means
// no candidate.
func chunkRange(p *Params, g Geometry, w int, cmin int64) (lo, hi int64) {
	hi = CMax(*p, g, w)
	return min(max(cmin, 1), hi), hi
}

// search calls fn with the chunk size, chunk count, width and T_gather of
// every gather candidate of m's geometry, in a fixed order: widths
// ascending, chunk sizes ascending. A width is skipped for a
// chunk size that leaves fewer chunks than workers (a worker packs one
// chunk at a time, so the extra workers would idle). m.p must be valid.
func search(m *model, fn func(c, k int64, w int, total float64)) {
	p, g := m.p, m.g
	if g.S < 1 {
		return
	}
	steps := p.ChunkSteps
	if steps == 0 {
		steps = DefaultChunkSteps
	}
	cmin := bytesUp(cMin(p))
	if m.staged {
		cmin = m.stagedLow()
	}
	widest := p.MaxP
	if m.staged {
		widest = m.maxCalls
	}
	for w := 1; w != 0; w = nextWidth(w, widest) {
		lo, hi := chunkRange(p, g, w, cmin)
		if hi < 1 {
			continue
		}
		// Chunk sizes lo*2^(j*step) below hi, then hi: at most steps
		// sizes, spaced evenly in octaves, found with shifts alone.
		step := 1
		if steps > 1 {
			span := bits.Len64(uint64(hi / lo)) // >= log2(hi/lo)
			step = max((span+steps-2)/(steps-1), 1)
		}
		for c := lo; ; {
			k := Chunks(g.S, c)
			if int64(w) <= k {
				fn(c, k, w, m.gather(c, k, w).total)
			}
			if c >= hi || steps == 1 {
				break
			}
			if c > hi>>step {
				c = hi
			} else {
				c = min(c<<step, hi)
			}
		}
	}
}

package costmodel

import (
	"cmp"
	"math"
	"strconv"
	"time"
)

// Staged is the requester's side of a staged READ gather: the gather is
// sent as a command per chunk with up to P calls in flight, the owner packs
// each chunk and WRITEs it whole into a lease of the requester's staging,
// and the requester scatters the landed chunk into the destination's runs
// on the call's own goroutine. A staged READ is what a destination as
// fragmented as its source takes: the owner would otherwise post one WRITE
// per fragment.
type Staged struct {
	// BMem and RCopy are one requester goroutine's copy rates (its
	// Calibration): the scatter out of staging.
	BMem, RCopy float64
	// Runs is the number of destination runs the payload scatters into
	// (at least one for a payload).
	Runs int64
	// MaxCalls is the most calls the search puts in flight (0:
	// Params.MaxP). A call waits on the link's round trip as well as on
	// the owner's packing, so more calls than the owner's workers can
	// hide that wait; the owner's packing is still priced at MaxP
	// workers at most, whatever the calls.
	MaxCalls int
	// Workers is how many of the requester's goroutines run scatters at
	// once (its cores; 0: one per call in flight).
	Workers int
}

// Validate reports the first field that makes s unusable, as a
// *FieldError wrapping ErrInvalidParams.
func (s Staged) Validate() error {
	switch {
	case !positiveFinite(s.BMem):
		return stagedErr("BMem", fmtFloat(s.BMem), "must be a positive, finite bandwidth in bytes/s")
	case !positiveFinite(s.RCopy):
		return stagedErr("RCopy", fmtFloat(s.RCopy), "must be a positive, finite rate in runs/s")
	case s.Runs < 0:
		return stagedErr("Runs", strconv.FormatInt(s.Runs, 10), "must not be negative")
	case s.MaxCalls < 0 || s.MaxCalls > MaxPipelineWidth:
		return stagedErr("MaxCalls", strconv.Itoa(s.MaxCalls), "must be in [0, "+strconv.Itoa(MaxPipelineWidth)+"]")
	case s.Workers < 0:
		return stagedErr("Workers", strconv.Itoa(s.Workers), "must not be negative")
	}
	return nil
}

func stagedErr(field, value, reason string) error {
	return &FieldError{Field: "Staged." + field, Value: value, Reason: reason, Err: ErrInvalidParams}
}

// DecideStaged picks direct or a staged READ gather (see Staged) for one
// operation, and for the gather its chunk size C and its calls in flight
// P. Unlike Decide's one-command pipeline, each call carries its chunk
// through the owner's packing, the link and the requester's scatter one
// after the other, so the chunks in flight, not a pack pipeline, hide the
// stages of one another:
//
//	n      = min(P, K)                      calls in flight at once
//	pack1  = C/B_mem + m_C/R_copy           one chunk, one owner worker
//	post1  = C/B_mem' + r_C/R_copy'         its scatter, one requester goroutine
//	W      = min(MaxP, n*w_C)               owner workers busy (w_C: a chunk's
//	                                        split, one below ParallelMin)
//	V      = min(n, Workers)                requester goroutines scattering
//	T_call = L + T_chunk_fixed + pack1/w_C + C/B_net + post1
//	T_stag = front + max(n*pack1/W + max(T_pack, T_bulk, T_post) + C/B_net + post1,
//	                     ceil(K/n)*T_call)
//
// with T_pack = (S/B_mem + M/R_copy)/W, T_post = (S/B_mem' + R/R_copy')/V,
// m_C and r_C the spans and runs of one chunk (M and R in proportion), and
// the primed rates the requester's (Staged). The first term is the
// pipeline: the first n chunks packed at once (the fill), the slowest of
// the owner's packing, the link and the requester's scatter, and the last
// chunk's transfer and scatter (the drain); the second is one call slot
// running its chunks back to back. The search runs P over 1, 2, 4, ... up
// to MaxCalls (Staged; MaxP by default) and C from the bandwidth-delay
// product shared by MaxCalls calls, B_net*L/MaxCalls, to C_max(P); C_min
// does not bound it, since a call's fixed cost is in T_call. It does not
// allocate; on invalid input it returns a direct decision with Err set.
func DecideStaged(p Params, g Geometry, s Staged) Decision {
	d := Decision{params: p, geom: g, staged: s, isStaged: true}
	if err := p.Validate(); err != nil {
		return d.fallback(err)
	}
	if err := g.Validate(); err != nil {
		return d.fallback(err)
	}
	if err := s.Validate(); err != nil {
		return d.fallback(err)
	}
	m := newStagedModel(&p, g, s)
	return d.settle(&m, m.stagedLow())
}

// TStaged is T_stag (see DecideStaged) for c-byte chunks with workers
// calls in flight. It is Forever when c < 1, workers < 1 or s is invalid.
func TStaged(p Params, g Geometry, s Staged, c int64, workers int) time.Duration {
	if c < 1 || workers < 1 || s.Validate() != nil {
		return Forever
	}
	m := newStagedModel(&p, g, s)
	return duration(m.gather(c, Chunks(g.S, c), workers).total)
}

func newStagedModel(p *Params, g Geometry, s Staged) model {
	m := newModel(p, g)
	m.staged = true
	m.postMem, m.postCopy = 1/s.BMem, float64(s.Runs)/s.RCopy
	m.maxCalls, m.postWorkers = cmp.Or(s.MaxCalls, p.MaxP), s.Workers
	return m
}

// stagedLow is the smallest chunk a staged search tries: the
// bandwidth-delay product shared by MaxCalls calls in flight, at least
// one byte.
func (m *model) stagedLow() int64 {
	return max(bytesUp(m.p.BNet*m.l/float64(max(m.maxCalls, 1))), 1)
}

// stagedTerms evaluates T_stag for c-byte chunks, k of them, with w calls
// in flight; c >= 1, w >= 1, S >= 1.
func (m *model) stagedTerms(c, k int64, w int) terms {
	cf, s := float64(c), float64(m.g.S)
	frac := min(cf/s, 1)
	n := min(int64(w), k)
	split := m.packWidth(c, m.p.MaxP)
	workers := float64(min(int64(m.p.MaxP), n*int64(split)))
	pack1 := cf*m.invMem + frac*m.mCopy
	post1 := cf*m.postMem + frac*m.postCopy
	pack := (m.sMem + m.mCopy) / workers
	scatter := n
	if m.postWorkers > 0 {
		scatter = min(n, int64(m.postWorkers))
	}
	post := (s*m.postMem + m.postCopy) / float64(scatter)
	bulk := m.bulk(k)
	pipeline := float64(n)*pack1/workers + max(pack, bulk, post) + cf*m.invNet + post1
	call := m.l + m.p.TChunkFixed.Seconds() + pack1/float64(split) + cf*m.invNet + post1
	slot := float64(ceilDiv(k, n)) * call
	if math.IsNaN(slot) {
		slot = math.Inf(1)
	}
	return terms{c: c, k: k, w: w, pack: pack, bulk: bulk, total: m.front + max(pipeline, slot)}
}

package costmodel

import (
	"math"
	"time"
)

// Forever is the prediction for a time too long for a time.Duration
// (about 292 years), or for one that cannot be computed (a parameter of
// zero where a rate is needed). Predictions saturate at Forever instead of
// overflowing.
const Forever time.Duration = math.MaxInt64

// The formulas below are the RFC's ("Adaptive direct, gather, and hybrid
// modes"), written once in float64 seconds (the lower-case functions) and
// exposed as time.Duration for tools and tests. They do not validate their
// Params: with Params that fail Validate the results are meaningless but
// never panic (a division by zero saturates to Forever).

// TDirect is the time to post every fragment as its own request:
//
//	T_direct = N*T_direct_req + L + max(S/B_net + N/R_post, ceil(N/Q)*L)
//
// or, with Params.RequestsOverlap, N*T_direct_req plus the RFC's L +
// max(S/B_net, N/R_post, ceil(N/Q)*L): a NIC that processes requests
// while the bytes of earlier ones stream. On the transports measured here (tcp, shm, and the
// engine's own request handling) the per-request work and the bytes share
// the same cores, and the times add (docs/perf-notes.md, 2026-12-02:
// mixed's direct took 9.5 ms where the RFC's form predicted 6.6); the
// engine measures R_post to match (requests per second of the window
// beyond S/B_net, or of the whole window when they overlap).
// T_direct_req is Params.TDirectPerRequest, the requester's own work per
// request outside the window (planning, posting, completing).
func TDirect(p Params, g Geometry) time.Duration {
	m := newModel(&p, Geometry{})
	return duration(m.direct(g.S, g.N))
}

// Chunks is the number of chunks of size c that hold s bytes,
// K = ceil(S/C). It is zero when c < 1 or s < 1.
func Chunks(s, c int64) int64 {
	if c < 1 || s < 1 {
		return 0
	}
	return ceilDiv(s, c)
}

// TPack is the time for workers pack workers to copy the payload into
// staging:
//
//	T_pack = S/(P*B_mem) + M/(P*R_copy)
func TPack(p Params, g Geometry, workers int) time.Duration {
	m := newModel(&p, g)
	return duration(m.pack(workers))
}

// TBulk is the time to transfer s bytes as k bulk requests:
//
//	T_bulk = L + max(S/B_net, K/R_post, ceil(K/Q)*L)
func TBulk(p Params, s, k int64) time.Duration {
	m := newModel(&p, Geometry{S: s})
	return duration(m.bulk(k))
}

// TFront is the fixed front of the gather path, the first three terms of
// T_gather: T_plan + T_control + T_decode, where T_plan = TPlan +
// M*TPlanPerSpan and T_decode = TDecode + M*TDecodePerSpan.
func TFront(p Params, g Geometry) time.Duration {
	m := newModel(&p, g)
	return duration(m.front)
}

// TGather is the time of the gather path with chunk size c and pipeline
// width workers:
//
//	T_gather = T_plan + T_control + T_decode + C/B_mem
//	           + max(T_pack, T_bulk) + C/B_net
//
// C/B_mem is the pipeline fill (the first chunk packed before the link is
// busy) and C/B_net the drain (the last chunk sent after packing ends).
// T_pack takes one worker when min(c, S) is below Params.ParallelMin. It
// is Forever when c < 1 or workers < 1.
func TGather(p Params, g Geometry, c int64, workers int) time.Duration {
	if c < 1 || workers < 1 {
		return Forever
	}
	m := newModel(&p, g)
	return duration(m.gather(c, Chunks(g.S, c), workers).total)
}

// CMin is the smallest profitable chunk in bytes, rounded up:
//
//	C_min = max(B_net*L, B_net*T_chunk_fixed/epsilon)
//
// The first term keeps a chunk at least one bandwidth-delay product, the
// second keeps the fixed per-chunk cost at most epsilon of its transfer
// time. It saturates at math.MaxInt64.
func CMin(p Params) int64 {
	return bytesUp(cMin(&p))
}

// CMax is the largest chunk the staging budget allows with workers chunks
// in flight:
//
//	C_max = min(staging_budget/P, S)
//
// further capped by Params.MaxChunk when that is set. It is zero when
// workers < 1.
func CMax(p Params, g Geometry, workers int) int64 {
	if workers < 1 {
		return 0
	}
	c := min(p.StagingBudget/int64(workers), g.S)
	if p.MaxChunk > 0 {
		c = min(c, p.MaxChunk)
	}
	return max(c, 0)
}

// THybrid is the time of a hybrid plan: the direct part posted one request
// per fragment while the gather part runs its pipeline with chunk size c
// and workers pack workers, both on the same link and queue. The RFC gives
// no formula for it; this package takes the largest of three bounds, each
// made of the model's own terms:
//
//	T_hybrid = max(T_direct(D), T_gather(G),
//	               L + max((S_D+S_G)/B_net + N_D/R_post,
//	                       ceil((N_D+K_G)/Q)*L))
//
// (the K_G bulk requests are the owner's to post: they share the queue,
// not the requester's per-request work).
//
// Each part takes at least as long as it would alone, and the shared link
// and queue carry both parts' bytes and requests. With an empty part it is
// the other part's time.
func THybrid(p Params, direct, gather Geometry, c int64, workers int) time.Duration {
	m := newModel(&p, gather)
	if gather.N == 0 {
		return duration(m.direct(direct.S, direct.N))
	}
	if c < 1 || workers < 1 {
		return Forever
	}
	k := Chunks(gather.S, c)
	tg := m.gather(c, k, workers).total
	if direct.N == 0 {
		return duration(tg)
	}
	return duration(m.hybrid(direct, k, tg))
}

// model holds one geometry's per-operation terms, computed once, so that a
// candidate costs a few floating-point operations and two integer
// divisions. Every exported formula goes through it, so a candidate's
// figures and the exported functions agree to the nanosecond.
type model struct {
	p       *Params
	g       Geometry
	l       float64 // L, seconds
	q       int64   // Q, at least 1
	invNet  float64 // 1/B_net
	invMem  float64 // 1/B_mem
	invPost float64 // 1/R_post
	sNet    float64 // S/B_net
	sMem    float64 // S/B_mem
	mCopy   float64 // M/R_copy
	front   float64 // T_plan + T_control + T_decode
	perReq  float64 // T_direct_req: a direct request's requester-side cost

	// A staged READ gather (DecideStaged): the requester's scatter, per
	// byte (1/B_mem') and for all of R runs (R/R_copy').
	staged            bool
	postMem, postCopy float64
	maxCalls          int // widths searched (Staged.MaxCalls, or MaxP)
	postWorkers       int // requester goroutines scattering (0: one per call)
}

func newModel(p *Params, g Geometry) model {
	spans := float64(g.M)
	m := model{
		p:       p,
		g:       g,
		l:       p.L.Seconds(),
		q:       int64(max(p.Q, 1)),
		invNet:  1 / p.BNet,
		invMem:  1 / p.BMem,
		invPost: 1 / p.RPost,
		perReq:  p.TDirectPerRequest.Seconds(),
		mCopy:   spans / p.RCopy,
		front: p.TPlan.Seconds() + spans*p.TPlanPerSpan.Seconds() +
			p.TControl.Seconds() +
			p.TDecode.Seconds() + spans*p.TDecodePerSpan.Seconds(),
	}
	m.sNet = float64(g.S) * m.invNet
	m.sMem = float64(g.S) * m.invMem
	return m
}

// direct is n*T_direct_req + L + max(s/B_net + n/R_post, ceil(n/Q)*L),
// or with RequestsOverlap n*T_direct_req + L + max(s/B_net, n/R_post,
// ceil(n/Q)*L): T_direct for n requests carrying s bytes.
func (m *model) direct(s, n int64) float64 {
	bytes, reqs := float64(s)*m.invNet, float64(n)*m.invPost
	front := float64(n) * m.perReq
	if m.p.RequestsOverlap {
		return front + m.l + max(bytes, reqs, float64(m.rounds(n))*m.l)
	}
	return front + m.l + max(bytes+reqs, float64(m.rounds(n))*m.l)
}

// rounds is ceil(n/Q), the round trips n requests need; most gathers post
// fewer chunks than the queue holds, and skip the division.
func (m *model) rounds(n int64) int64 {
	if n <= m.q {
		return min(n, 1)
	}
	return ceilDiv(n, m.q)
}

// pack is T_pack = S/(P*B_mem) + M/(P*R_copy).
func (m *model) pack(workers int) float64 {
	return (m.sMem + m.mCopy) / float64(workers)
}

// terms are one gather candidate's figures, in seconds.
type terms struct {
	c, k       int64
	w          int
	pack, bulk float64
	total      float64 // T_gather
}

// packWidth is how many of a candidate's workers pack its c-byte chunks:
// all of them, or one when a chunk (at most the whole payload) is below
// Params.ParallelMin.
func (m *model) packWidth(c int64, workers int) int {
	if min(c, m.g.S) < m.p.ParallelMin {
		return 1
	}
	return workers
}

// gather evaluates T_gather for c-byte chunks, k of them, with workers
// pack workers (one when a chunk is below Params.ParallelMin); c >= 1,
// workers >= 1.
func (m *model) gather(c, k int64, workers int) terms {
	if m.staged {
		return m.stagedTerms(c, k, workers)
	}
	pack := m.pack(m.packWidth(c, workers))
	bulk := m.bulk(k)
	return terms{c: c, k: k, w: workers, pack: pack, bulk: bulk, total: m.total(c, pack, bulk)}
}

// bulk is T_bulk = L + max(S/B_net, K/R_post, ceil(K/Q)*L).
func (m *model) bulk(k int64) float64 {
	return m.l + max(m.sNet, float64(k)*m.invPost, float64(m.rounds(k))*m.l)
}

// total is T_gather = front + C/B_mem + max(T_pack, T_bulk) + C/B_net.
func (m *model) total(c int64, pack, bulk float64) float64 {
	cf := float64(c)
	return m.front + cf*m.invMem + max(pack, bulk) + cf*m.invNet
}

// hybrid combines a direct part d with this model's geometry gathered in k
// chunks, whose own T_gather is tg. The shared bound carries both parts'
// bytes and the direct part's requests; the k bulk requests are the
// owner's to post, and count only against the queue's round trips.
func (m *model) hybrid(d Geometry, k int64, tg float64) float64 {
	bytes, reqs := float64(d.S+m.g.S)*m.invNet, float64(d.N)*m.invPost
	shared := bytes + reqs
	if m.p.RequestsOverlap {
		shared = max(bytes, reqs)
	}
	link := m.l + max(shared, float64(m.rounds(d.N+k))*m.l)
	return max(m.direct(d.S, d.N), tg, link)
}

// candidate reports t; cmin is C_min, below which a chunk was clamped.
func (t *terms) candidate(cmin int64) Candidate {
	return Candidate{
		Mode:    ModeGather,
		C:       t.c,
		P:       t.w,
		K:       t.k,
		Clamped: t.c < max(cmin, 1),
		Pack:    duration(t.pack),
		Bulk:    duration(t.bulk),
		Total:   duration(t.total),
	}
}

func cMin(p *Params) float64 {
	return max(p.BNet*p.L.Seconds(), p.BNet*p.TChunkFixed.Seconds()/p.Epsilon)
}

// ceilDiv is ceil(a/b) for a >= 0, b >= 1, without overflow, with one
// division.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if q*b != a {
		q++
	}
	return q
}

// maxNanos is 2^63 as a float64: the first value past time.Duration.
const maxNanos = float64(1 << 63)

// duration converts seconds to a time.Duration, rounding to the
// nanosecond; NaN and anything too long become Forever.
func duration(sec float64) time.Duration {
	ns := sec * 1e9
	switch {
	case !(ns < maxNanos): // also NaN
		return Forever
	case ns <= 0:
		return 0
	}
	return time.Duration(math.Round(ns))
}

// bytesUp rounds a byte count up to an int64, saturating; NaN and
// negatives become zero. A value within a billionth of a whole number is
// that number, so that float noise in a product (1e9 * 2e-6 is not exactly
// 2000) does not add a byte.
func bytesUp(x float64) int64 {
	switch {
	case !(x > 0):
		return 0
	case !(x < maxNanos): // 2^63 bytes: the same bound
		return math.MaxInt64
	}
	if r := math.Round(x); math.Abs(x-r) <= 1e-9*x {
		return int64(r)
	}
	return int64(math.Ceil(x))
}

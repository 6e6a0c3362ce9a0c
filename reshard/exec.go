package reshard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

// Dir is who runs the pairs of a reshard, and so the direction of their
// one-sided transfers.
type Dir uint8

const (
	// Pull: each destination rank READs what it receives from the source
	// ranks' exported regions (verbs.OpRead, run by the pair's Dst).
	Pull Dir = 1
	// Push: each source rank WRITEs what it sends into the destination
	// ranks' exported regions (verbs.OpWrite, run by the pair's Src).
	Push Dir = 2
)

// String returns "pull" or "push".
func (d Dir) String() string {
	switch d {
	case Pull:
		return "pull"
	case Push:
		return "push"
	}
	return fmt.Sprintf("Dir(%d)", uint8(d))
}

// runner is the rank that runs pr in direction d (-1 for an unknown d).
func (d Dir) runner(pr *Pair) int {
	switch d {
	case Pull:
		return pr.Dst
	case Push:
		return pr.Src
	}
	return -1
}

// Link is how the rank that runs a pair reaches the pair's other rank, its
// peer: the peer is the owner of a verbs segment, the running rank the
// requester.
type Link struct {
	// Conn is the running rank's connection to the peer's segment. The
	// Engine given to Start owns its completion queue while the run is in
	// flight.
	Conn verbs.Conn
	// Remote is the peer's region as listed by Conn.Remote(); RemoteBase
	// is where the peer's layout offsets start inside it (its layout
	// offset 0 is byte RemoteBase of Remote).
	Remote     verbs.RegionInfo
	RemoteBase uint64
	// Local is the running rank's own region, registered with Conn's
	// transport with AccessLocal; LocalBase is where the running rank's
	// layout offsets start inside it. For a Pull to be gathered, Local
	// must also be exposed on Conn with AccessRemoteWrite (see
	// verbs.ScatterOp); otherwise its pairs run direct.
	Local     *verbs.Region
	LocalBase uint64
}

// LinkFunc returns the Link over which rank self runs its pair with rank
// peer. For Pull, self is a rank of the plan's destination layout and
// peer one of its source layout; for Push the other way round. Start calls
// it once per pair it runs, before submitting anything.
type LinkFunc func(self, peer int) (Link, error)

// Options tune Start. The zero value is usable.
type Options struct {
	// Mode is passed to every pair's scatter operation. ModeAuto (the
	// zero value) lets the engine's cost model decide per pair, on that
	// pair's link: a pair of a few large contiguous fragments runs
	// direct, one of many small fragments may be gathered, and one that
	// has both may be split (hybrid: large spans direct, small ones
	// gathered), so a reshard is hybrid by construction. The other modes
	// force one mode on every pair.
	Mode verbs.Mode
	// MaxFragments bounds the fragments of one pair, the ranges of its
	// lowered plan (default DefaultMaxFragments); a pair with more fails
	// Start with a *LimitError.
	MaxFragments int64
}

// Phase is the step at which a pair failed.
type Phase uint8

const (
	// PhaseCheck: the pair's regions are malformed, write a destination
	// byte twice or exceed Options.MaxFragments, or its byte windows do
	// not fit the regions of its Link. Nothing was submitted.
	PhaseCheck Phase = iota + 1
	// PhaseLink: the LinkFunc failed, or returned a Link that cannot carry
	// the pair (a missing field, a region without the access the
	// direction needs). Nothing was submitted.
	PhaseLink
	// PhaseSubmit: the engine rejected the pair's operation. The pairs
	// submitted before it were cancelled and waited for.
	PhaseSubmit
	// PhaseTransfer: the pair's operation failed (a *verbs.OpError).
	PhaseTransfer
)

var phaseNames = [...]string{PhaseCheck: "check", PhaseLink: "link", PhaseSubmit: "submit", PhaseTransfer: "transfer"}

// String returns the phase's name ("link").
func (p Phase) String() string {
	if int(p) < len(phaseNames) && phaseNames[p] != "" {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", uint8(p))
}

// PairError is the failure of one pair of a reshard. Err is the cause: a
// *LayoutError or *LimitError (PhaseCheck), the LinkFunc's error or a
// *verbs.InvalidOpError (PhaseLink), the engine's error (PhaseSubmit,
// PhaseTransfer), so errors.Is sees both this package's and verbs'
// sentinels through it.
type PairError struct {
	Src, Dst int
	Dir      Dir
	Phase    Phase
	Err      error
}

func (e *PairError) Error() string {
	return fmt.Sprintf("reshard: %v pair %d->%d: %v: %v", e.Dir, e.Src, e.Dst, e.Phase, e.Err)
}

// Unwrap returns Err.
func (e *PairError) Unwrap() error { return e.Err }

// PairResult is the outcome of one pair's scatter operation.
type PairResult struct {
	Src, Dst int
	Result   verbs.Result
}

// Result is the outcome of a Run.
type Result struct {
	// Pairs holds one entry per pair the run submitted, in plan order.
	// Pairs that carry no bytes are not submitted and not listed.
	Pairs []PairResult
	// Bytes is the payload of the submitted pairs.
	Bytes int64
	// Lower is the time Start spent checking and lowering pairs into
	// scatter plans (the planning overhead, LinkFunc calls excluded);
	// Submit the time spent in Engine.Submit. On a mapped Conn (shm) a
	// direct operation copies inside Submit, so Submit then includes
	// transfer time.
	Lower, Submit time.Duration
	// Elapsed is the time from Start being called to the last pair's
	// last data completion (for a pair that moved no data, the moment
	// Wait saw it complete).
	Elapsed time.Duration
	// StagingPeak is the largest staging peak of any pair: the most
	// staging bytes a gathering owner held at once for one operation (for
	// a gathered Push, the running rank's wave lease). Zero when nothing
	// was staged (direct, or a small Pull answered inline).
	StagingPeak uint64
}

// Run is a reshard in flight: the scatter operations of the pairs that
// one Start submitted. Wait must be called: it waits for the operations
// and releases the run's context. Calling it again (from any goroutine)
// returns the same result.
type Run struct {
	dir    Dir
	t0     time.Time
	cancel context.CancelFunc
	pairs  []execPair
	plans  []planfmt.Plan  // the lowered plans: read by the engine until completion
	ranges []planfmt.Range // backing store of the plans' ranges
	spans  []uint64        // Result.SpanBytes storage, one per pair
	bytes  int64

	lower, submit time.Duration

	once sync.Once
	res  *Result
	err  error
}

// execPair is one pair of a run: where it is in the plan, its byte
// windows in each rank's layout offsets, its link and its operation.
type execPair struct {
	index    int
	src, dst int
	frags    int64 // fragments (Inner > 0), before coalescing
	bytes    int64
	srcLo    int64 // the windows [lo, hi) the fragments span
	srcHi    int64
	dstLo    int64
	dstHi    int64
	link     Link
	op       verbs.ScatterOp
	oper     *verbs.Operation
}

// submitOp is Engine.Submit; tests replace it to fail a submission.
var submitOp = (*verbs.Engine).Submit

// Running returns the indices (into p.Pairs) of the pairs that rank runs
// in direction dir: those whose Dst is rank for Pull, whose Src is rank
// for Push. It returns nil for an unknown dir.
func (p *Plan) Running(rank int, dir Dir) []int {
	var out []int
	if dir != Pull && dir != Push {
		return nil
	}
	for i := range p.Pairs {
		if dir.runner(&p.Pairs[i]) == rank {
			out = append(out, i)
		}
	}
	return out
}

// Start runs every pair of p that a rank in local runs (Dst for Pull, Src
// for Push) and returns the Run; Wait for its result.
//
// Each pair becomes one verbs scatter operation under one completion: its
// fragments are lowered into a planfmt FormRanges plan whose source and
// destination extents are the byte windows [lo, hi) the fragments span on
// each side, with range offsets relative to the windows, in ascending
// destination order, fragments adjacent on both sides coalesced. The
// order is settled per region (its loops reordered, the regions visited
// by destination), so fragments are radix-sorted only when regions
// interleave. Destination order gives the engine long destination runs,
// which gather needs, and spares it the sort its overlap check would
// otherwise make. Runs of many fragments are lowered by several
// goroutines, a pair each. A pair that carries no bytes is not submitted.
//
// For Pull the operation READs (verbs.OpRead) from the source rank's
// region (the Link's Remote at RemoteBase + source lo) into the
// destination rank's (Local at LocalBase + destination lo); for Push it
// WRITEs (verbs.OpWrite) from Local at LocalBase + source lo into Remote
// at RemoteBase + destination lo. All pairs are submitted to e, which
// decides each one's mode (Options.Mode).
//
// Everything is checked before anything is submitted; a failure returns a
// typed error and submits nothing: an unknown local rank (a *LayoutError),
// malformed regions, overlapping destination fragments or too many
// fragments (a *PairError at PhaseCheck wrapping a *LayoutError or
// *LimitError), a LinkFunc error or unusable Link (PhaseLink), a window
// outside its Link's Local or Remote region (PhaseCheck, ErrLayout), more
// than 2^40 fragments in all (a *LimitError), a context that has already
// ended. Duplicate ranks in local count once.
//
// ctx bounds every operation: when it ends, the operations stop and fail,
// and Wait returns their errors. If the engine rejects one operation, the
// ones submitted before it are cancelled and waited for, and Start
// returns the rejection (PhaseSubmit) with no Run. The lowered plans live
// in the Run until Wait has seen every operation complete.
func Start(ctx context.Context, e *verbs.Engine, p *Plan, dir Dir, local []int, links LinkFunc, opt Options) (*Run, error) {
	t0 := time.Now()
	if err := checkStart(e, p, dir, links, opt); err != nil {
		return nil, err
	}
	maxFrags := opt.MaxFragments
	if maxFrags <= 0 {
		maxFrags = DefaultMaxFragments
	}
	self, peer := p.Dst, p.Src
	if dir == Push {
		self, peer = p.Src, p.Dst
	}
	runs := make([]bool, len(self.Ranks))
	for _, r := range local {
		if r < 0 || r >= len(runs) {
			return nil, &LayoutError{Kind: ErrLayout, Rank: r, Piece: -1,
				Reason: fmt.Sprintf("local rank %d of a %v is not a rank of the plan's %s layout (%d ranks)",
					r, dir, sideName(dir, true), len(runs))}
		}
		runs[r] = true
	}

	// Measure the pairs this run owns: windows, fragments, bytes.
	var pairs []execPair
	var total int64
	for i := range p.Pairs {
		pr := &p.Pairs[i]
		r := dir.runner(pr)
		if r < 0 || r >= len(runs) || !runs[r] {
			continue
		}
		x := execPair{index: i, src: pr.Src, dst: pr.Dst}
		fail := func(err error) error {
			return &PairError{Src: pr.Src, Dst: pr.Dst, Dir: dir, Phase: PhaseCheck, Err: err}
		}
		if o := peerOf(pr, dir); o < 0 || o >= len(peer.Ranks) {
			return nil, fail(&LayoutError{Kind: ErrLayout, Rank: o, Piece: -1,
				Reason: fmt.Sprintf("not a rank of the plan's %s layout (%d ranks)", sideName(dir, false), len(peer.Ranks))})
		}
		if err := measurePair(pr, &x, maxFrags); err != nil {
			return nil, fail(err)
		}
		if x.frags == 0 {
			continue // nothing to move
		}
		if total += x.frags; total > maxRunFragments || total < 0 {
			return nil, &LimitError{Limit: "fragments of the run", Value: total, Max: maxRunFragments}
		}
		pairs = append(pairs, x)
	}

	// Links, and the windows against their regions.
	var linkTime time.Duration
	for k := range pairs {
		x := &pairs[k]
		selfRank, peerRank := x.dst, x.src
		if dir == Push {
			selfRank, peerRank = x.src, x.dst
		}
		lt := time.Now()
		l, err := links(selfRank, peerRank)
		linkTime += time.Since(lt)
		if err == nil {
			err = checkLink(&l, dir)
		}
		if err != nil {
			return nil, &PairError{Src: x.src, Dst: x.dst, Dir: dir, Phase: PhaseLink, Err: err}
		}
		x.link = l
		if err := x.setOffsets(dir); err != nil {
			return nil, &PairError{Src: x.src, Dst: x.dst, Dir: dir, Phase: PhaseCheck, Err: err}
		}
	}

	// Lower every pair before submitting any, so a bad pair (overlapping
	// destinations) submits nothing.
	r := &Run{dir: dir, t0: t0, pairs: pairs,
		plans:  make([]planfmt.Plan, len(pairs)),
		ranges: make([]planfmt.Range, total),
		spans:  make([]uint64, len(pairs)),
	}
	if err := r.lowerAll(p, total); err != nil {
		return nil, err
	}
	for k := range pairs {
		x := &pairs[k]
		x.op.Plan = &r.plans[k]
		x.op.Mode = opt.Mode
		x.op.SpanBytes = r.spans[k : k : k+1]
		r.bytes += x.bytes
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reshard: start: %w", err)
	}
	st := time.Now()
	r.lower = st.Sub(t0) - linkTime

	runCtx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	for k := range pairs {
		x := &pairs[k]
		oper, err := submitOp(e, runCtx, &x.op)
		if err != nil {
			cancel()
			for j := range k {
				// Cancelled: the submit error is the one to report.
				_, _ = pairs[j].oper.Wait(context.Background())
				pairs[j].oper = nil
			}
			return nil, &PairError{Src: x.src, Dst: x.dst, Dir: dir, Phase: PhaseSubmit, Err: err}
		}
		x.oper = oper
	}
	r.submit = time.Since(st)
	return r, nil
}

// maxRunFragments bounds the fragments of all pairs of one Start, whose
// lowered ranges are held at once (24 bytes each), far beyond memory.
const maxRunFragments = 1 << 40

// parallelLowerMin is the fewest fragments, all pairs together, that are
// lowered by several goroutines (one pair at a time each).
const parallelLowerMin = 1 << 16

// lowerAll lowers every pair of r into its plan, with its ranges in
// r.ranges (total fragments before coalescing). Large runs are lowered by
// up to GOMAXPROCS goroutines, a pair each; the error reported is the
// first in pair order.
func (r *Run) lowerAll(p *Plan, total int64) error {
	offs := make([]int64, len(r.pairs)+1)
	for k := range r.pairs {
		offs[k+1] = offs[k] + r.pairs[k].frags
	}
	lower := func(k int, sc *lowerScratch) error {
		x := &r.pairs[k]
		rs, err := lowerPair(&p.Pairs[x.index], x, r.ranges[offs[k]:offs[k]:offs[k+1]], sc)
		if err != nil {
			return &PairError{Src: x.src, Dst: x.dst, Dir: r.dir, Phase: PhaseCheck, Err: err}
		}
		r.plans[k] = planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: uint64(x.srcHi - x.srcLo),
			DstExtent: uint64(x.dstHi - x.dstLo), Ranges: rs}
		return nil
	}
	workers := min(runtime.GOMAXPROCS(0), len(r.pairs))
	if total < parallelLowerMin || workers < 2 {
		var sc lowerScratch
		for k := range r.pairs {
			if err := lower(k, &sc); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(r.pairs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var sc lowerScratch
			for k := int(next.Add(1) - 1); k < len(r.pairs); k = int(next.Add(1) - 1) {
				errs[k] = lower(k, &sc)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkStart checks Start's arguments other than the ranks and pairs.
func checkStart(e *verbs.Engine, p *Plan, dir Dir, links LinkFunc, opt Options) error {
	bad := func(field, reason string) error {
		return fmt.Errorf("reshard: start: %w", &verbs.InvalidOpError{Field: field, Reason: reason})
	}
	switch {
	case e == nil:
		return bad("Engine", "nil")
	case dir != Pull && dir != Push:
		return bad("dir", fmt.Sprintf("%v is neither Pull nor Push", dir))
	case links == nil:
		return bad("links", "nil")
	case opt.Mode > verbs.ModeHybrid:
		return bad("Options.Mode", opt.Mode.String())
	case p == nil:
		return &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: "nil plan"}
	case p.Src == nil || p.Dst == nil:
		return &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: "plan without its source or destination layout"}
	}
	return nil
}

// sideName names the layout of the running ranks (self) or of their peers.
func sideName(dir Dir, self bool) string {
	if (dir == Pull) == self {
		return "destination"
	}
	return "source"
}

// peerOf is the rank at the other end of pr from its runner.
func peerOf(pr *Pair, dir Dir) int {
	if dir == Push {
		return pr.Dst
	}
	return pr.Src
}

// execArith is int64 arithmetic that records overflow instead of
// wrapping; once bad, results are meaningless and the caller fails.
type execArith struct{ bad bool }

func (o *execArith) add(a, b int64) int64 {
	c := a + b
	if (c > a) != (b > 0) {
		o.bad = true
	}
	return c
}

func (o *execArith) mul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		o.bad = true
	}
	return c
}

// measurePair checks the shape of pr's regions and computes, without
// visiting fragments, the windows they span on both sides, their
// fragments and their bytes into x.
func measurePair(pr *Pair, x *execPair, maxFrags int64) error {
	var o execArith
	x.srcLo, x.dstLo = math.MaxInt64, math.MaxInt64
	x.srcHi, x.dstHi = math.MinInt64, math.MinInt64
	bad := func(i int, reason string) error {
		return &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: fmt.Sprintf("region %d: %s", i, reason)}
	}
	for i := range pr.Regions {
		reg := &pr.Regions[i]
		n := len(reg.Counts)
		switch {
		case len(reg.SrcStrides) != n || len(reg.DstStrides) != n:
			return bad(i, fmt.Sprintf("%d counts, %d source and %d destination strides", n, len(reg.SrcStrides), len(reg.DstStrides)))
		case reg.Inner < 0:
			return bad(i, fmt.Sprintf("negative inner size %d", reg.Inner))
		}
		frags := int64(1)
		slo, shi, dlo, dhi := reg.SrcOff, reg.SrcOff, reg.DstOff, reg.DstOff
		for l, c := range reg.Counts {
			if c < 0 {
				return bad(i, fmt.Sprintf("negative count %d", c))
			}
			frags = o.mul(frags, c)
			if c == 0 {
				continue
			}
			if s := o.mul(c-1, reg.SrcStrides[l]); s < 0 {
				slo = o.add(slo, s)
			} else {
				shi = o.add(shi, s)
			}
			if d := o.mul(c-1, reg.DstStrides[l]); d < 0 {
				dlo = o.add(dlo, d)
			} else {
				dhi = o.add(dhi, d)
			}
		}
		shi, dhi = o.add(shi, reg.Inner), o.add(dhi, reg.Inner)
		bytes := o.mul(frags, reg.Inner)
		if o.bad {
			return bad(i, "byte offsets overflow int64")
		}
		if frags == 0 || reg.Inner == 0 {
			continue
		}
		if slo < 0 || dlo < 0 {
			return bad(i, fmt.Sprintf("fragments start at negative offsets (source %d, destination %d)", slo, dlo))
		}
		x.frags = o.add(x.frags, frags)
		x.bytes = o.add(x.bytes, bytes)
		if o.bad {
			return bad(i, "pair bytes overflow int64")
		}
		if x.frags > maxFrags {
			return &LimitError{Limit: fmt.Sprintf("fragments of pair %d->%d", pr.Src, pr.Dst), Value: x.frags, Max: maxFrags}
		}
		x.srcLo, x.srcHi = min(x.srcLo, slo), max(x.srcHi, shi)
		x.dstLo, x.dstHi = min(x.dstLo, dlo), max(x.dstHi, dhi)
	}
	return nil
}

// checkLink checks what Submit would reject about a Link, so that no
// pair is submitted when another's link is unusable.
func checkLink(l *Link, dir Dir) error {
	bad := func(field, reason string) error { return &verbs.InvalidOpError{Field: "Link." + field, Reason: reason} }
	need := verbs.AccessRemoteRead
	if dir == Push {
		need = verbs.AccessRemoteWrite
	}
	switch {
	case l.Conn == nil:
		return bad("Conn", "nil")
	case l.Local == nil:
		return bad("Local", "nil")
	case !l.Local.Access().Has(verbs.AccessLocal):
		return bad("Local", "region lacks AccessLocal")
	case l.Remote.Key == 0:
		return bad("Remote.Key", "zero")
	case !l.Remote.Access.Has(need):
		return bad("Remote.Access", fmt.Sprintf("%v lacks %v", l.Remote.Access, need))
	}
	return nil
}

// setOffsets places x's windows in its link's regions (the operation's
// RemoteOff and LocalOff), checking that both fit.
func (x *execPair) setOffsets(dir Dir) error {
	l := &x.link
	op := &x.op
	op.Conn, op.Remote, op.Local = l.Conn, l.Remote, l.Local
	rLo, rHi, rRank, rSide := x.srcLo, x.srcHi, x.src, "source"
	lLo, lHi, lRank, lSide := x.dstLo, x.dstHi, x.dst, "destination"
	op.Dir = verbs.OpRead
	if dir == Push {
		rLo, rHi, rRank, rSide, lLo, lHi, lRank, lSide = lLo, lHi, lRank, lSide, rLo, rHi, rRank, rSide
		op.Dir = verbs.OpWrite
	}
	var ok bool
	if op.RemoteOff, ok = placeWindow(l.RemoteBase, rLo, rHi, l.Remote.Len); !ok {
		return windowError(rSide, rRank, rLo, rHi, l.RemoteBase, "remote", l.Remote.Len)
	}
	if op.LocalOff, ok = placeWindow(l.LocalBase, lLo, lHi, uint64(l.Local.Len())); !ok {
		return windowError(lSide, lRank, lLo, lHi, l.LocalBase, "local", uint64(l.Local.Len()))
	}
	return nil
}

// placeWindow returns base+lo, and whether [base+lo, base+hi) lies inside
// a region of size bytes (0 <= lo < hi).
func placeWindow(base uint64, lo, hi int64, size uint64) (uint64, bool) {
	off := base + uint64(lo)
	if off < base || off > size || uint64(hi-lo) > size-off {
		return 0, false
	}
	return off, true
}

func windowError(side string, rank int, lo, hi int64, base uint64, which string, size uint64) error {
	return &LayoutError{Kind: ErrLayout, Rank: rank, Piece: -1,
		Reason: fmt.Sprintf("%s bytes [%d, %d) at base %d pass the end of the %s region (%d bytes)", side, lo, hi, base, which, size)}
}

// lowerScratch is the reusable storage of lowering the pairs of one
// Start.
type lowerScratch struct {
	regs  []lowerRegion
	loops []int64         // the loops of the canonical region copies
	tmp   []planfmt.Range // the radix sort's second buffer
}

// lowerRegion is a non-empty region in canonical form and the
// destination bytes [dlo, dhi) it spans.
type lowerRegion struct {
	reg      Region
	dlo, dhi int64
}

// lowerPair expands the fragments of pr into rs (whose capacity holds
// x.frags ranges), relative to x's windows, in destination order, with
// fragments that continue the previous one on both sides coalesced.
//
// Order is settled per region where it can be: each region is put in
// canonical form (loops with a negative destination stride walked from
// their other end, loops sorted by destination stride, largest first);
// when every canonical region is a nest (each stride at least the extent
// of the loops inside it), its fragments ascend in the destination, and
// when the regions' destination spans are disjoint, visiting them by
// span start yields every fragment in destination order, at no cost per
// fragment. Otherwise (regions that interleave, such as two cyclic
// shares of one block) the ranges are radix-sorted by destination and
// coalesced again. Either way each fragment is checked against the
// previous one, so an order that is not ascending is always sorted.
// Overlapping destinations fail with an ErrOverlap *LayoutError.
func lowerPair(pr *Pair, x *execPair, rs []planfmt.Range, sc *lowerScratch) ([]planfmt.Range, error) {
	sc.regs, sc.loops = sc.regs[:0], sc.loops[:0]
	nested := true
	for i := range pr.Regions {
		reg := &pr.Regions[i]
		if reg.Inner == 0 || reg.Fragments() == 0 {
			continue
		}
		lr, ok := sc.canonical(reg)
		nested = nested && ok
		sc.regs = append(sc.regs, lr)
	}
	if nested {
		slices.SortStableFunc(sc.regs, func(a, b lowerRegion) int { return cmp.Compare(a.dlo, b.dlo) })
	}

	sorted := true
	srcLo, dstLo := x.srcLo, x.dstLo
	for i := range sc.regs {
		reg := &sc.regs[i].reg
		n := uint64(reg.Inner)
		reg.Each(func(s, d int64) bool {
			src, dst := uint64(s-srcLo), uint64(d-dstLo)
			if k := len(rs); k > 0 {
				last := &rs[k-1]
				end := last.Dst + last.Len
				if dst == end && src == last.Src+last.Len {
					last.Len += n
					return true
				}
				if dst < end {
					sorted = false
				}
			}
			rs = append(rs, planfmt.Range{Src: src, Dst: dst, Len: n})
			return true
		})
	}
	if sorted {
		return rs, nil
	}
	if cap(sc.tmp) < len(rs) {
		sc.tmp = make([]planfmt.Range, len(rs))
	}
	sortByDst(rs, sc.tmp[:len(rs)])
	w := 0
	for _, r := range rs {
		if w > 0 {
			last := &rs[w-1]
			end := last.Dst + last.Len
			if r.Dst < end {
				return nil, &LayoutError{Kind: ErrOverlap, Rank: x.dst, Piece: -1,
					Reason: fmt.Sprintf("pair %d->%d writes destination bytes [%d, %d) and [%d, %d)",
						x.src, x.dst, int64(last.Dst)+dstLo, int64(end)+dstLo, int64(r.Dst)+dstLo, int64(r.Dst+r.Len)+dstLo)}
			}
			if r.Dst == end && r.Src == last.Src+last.Len {
				last.Len += r.Len
				continue
			}
		}
		rs[w] = r
		w++
	}
	return rs[:w], nil
}

// canonical returns a copy of reg (non-empty, measured by measurePair, so
// no offset below overflows) whose loops walk the destination upwards,
// largest destination stride first, with its destination span, and
// whether it is a nest: then its fragments ascend in the destination,
// disjoint. The copy's loops live in sc.loops.
func (sc *lowerScratch) canonical(reg *Region) (lowerRegion, bool) {
	n := len(reg.Counts)
	at := len(sc.loops)
	sc.loops = append(sc.loops, reg.Counts...)
	sc.loops = append(sc.loops, reg.SrcStrides...)
	sc.loops = append(sc.loops, reg.DstStrides...)
	buf := sc.loops[at:]
	c := Region{SrcOff: reg.SrcOff, DstOff: reg.DstOff, Inner: reg.Inner,
		Counts: buf[0:n:n], SrcStrides: buf[n : 2*n : 2*n], DstStrides: buf[2*n : 3*n : 3*n]}
	for l := range n {
		if c.DstStrides[l] < 0 {
			k := c.Counts[l] - 1
			c.SrcOff += k * c.SrcStrides[l]
			c.DstOff += k * c.DstStrides[l]
			c.SrcStrides[l], c.DstStrides[l] = -c.SrcStrides[l], -c.DstStrides[l]
		}
	}
	for i := 1; i < n; i++ {
		for j := i; j > 0 && c.DstStrides[j-1] < c.DstStrides[j]; j-- {
			c.Counts[j-1], c.Counts[j] = c.Counts[j], c.Counts[j-1]
			c.SrcStrides[j-1], c.SrcStrides[j] = c.SrcStrides[j], c.SrcStrides[j-1]
			c.DstStrides[j-1], c.DstStrides[j] = c.DstStrides[j], c.DstStrides[j-1]
		}
	}
	ext, nest := c.Inner, true
	for l := n - 1; l >= 0; l-- {
		if k := c.Counts[l] - 1; k > 0 {
			nest = nest && c.DstStrides[l] >= ext
			ext += k * c.DstStrides[l]
		}
	}
	return lowerRegion{reg: c, dlo: c.DstOff, dhi: c.DstOff + ext}, nest
}

// sortByDst sorts a by destination with a stable least-significant-digit
// radix sort over bytes, using tmp (same length) as the second buffer:
// O(len(a)) per byte position in which the destinations differ (3 passes
// for windows below 16 MiB), so lowering stays linear in the fragments.
func sortByDst(a, tmp []planfmt.Range) {
	if len(a) < 2 {
		return
	}
	or, and := uint64(0), ^uint64(0)
	for _, r := range a {
		or, and = or|r.Dst, and&r.Dst
	}
	diff := or ^ and
	src, dst := a, tmp
	var count [256]int
	for shift := 0; shift < 64; shift += 8 {
		if (diff>>shift)&0xff == 0 {
			continue
		}
		clear(count[:])
		for _, r := range src {
			count[byte(r.Dst>>shift)]++
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, r := range src {
			d := byte(r.Dst >> shift)
			dst[count[d]] = r
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &a[0] {
		copy(a, src)
	}
}

// Wait waits for every operation of the run and returns the result. If
// any pair failed, the result (every pair's verbs.Result, which for a
// failed pair describes what was planned) comes with an error: the
// pair's *PairError at PhaseTransfer wrapping the verbs error, or, when
// several pairs failed, their errors joined. The destination bytes of a
// failed pair are undefined.
func (r *Run) Wait() (*Result, error) {
	r.once.Do(r.wait)
	return r.res, r.err
}

func (r *Run) wait() {
	res := &Result{Pairs: make([]PairResult, len(r.pairs)), Bytes: r.bytes, Lower: r.lower, Submit: r.submit}
	var errs []error
	end := r.t0
	for k := range r.pairs {
		x := &r.pairs[k]
		// The operation is bounded by the run's context; waiting without
		// a deadline lets it finish before its plan is released.
		vr, err := x.oper.Wait(context.Background())
		x.oper = nil
		res.Pairs[k] = PairResult{Src: x.src, Dst: x.dst, Result: vr}
		if err != nil {
			errs = append(errs, &PairError{Src: x.src, Dst: x.dst, Dir: r.dir, Phase: PhaseTransfer, Err: err})
		}
		if sp := vr.Trace.StagingPeak; sp > 0 && uint64(sp) > res.StagingPeak {
			res.StagingPeak = uint64(sp)
		}
		// Total runs to Wait returning; Complete is the part after the
		// last data completion.
		if done := vr.Trace.Start.Add(vr.Trace.Total - vr.Trace.Complete); done.After(end) {
			end = done
		}
	}
	if r.cancel != nil {
		r.cancel()
	}
	res.Elapsed = end.Sub(r.t0)
	// Drop what pins the caller's memory and connections.
	r.plans, r.ranges = nil, nil
	for k := range r.pairs {
		r.pairs[k].link, r.pairs[k].op = Link{}, verbs.ScatterOp{}
	}
	r.res = res
	switch len(errs) {
	case 0:
	case 1:
		r.err = errs[0]
	default:
		r.err = errors.Join(errs...)
	}
}

package reshard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"

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
	// engine.ScatterOp); otherwise its pairs run direct.
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
	Mode engine.Mode
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
	// PhaseTransfer: the pair's operation failed (a *engine.OpError).
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
// *engine.InvalidOpError (PhaseLink), the engine's error (PhaseSubmit,
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
	Result   engine.Result
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
// and releases the run's context and its lowered plans (whose storage
// later runs reuse). Calling it again (from any goroutine) returns the
// same result.
type Run struct {
	dir    Dir
	t0     time.Time
	cancel context.CancelFunc
	pairs  []execPair
	plans  []planfmt.Plan     // the lowered plans: read by the engine until completion
	ranges []*[]planfmt.Range // backing store of each plan's ranges, from rangesPool
	spans  []uint64           // Result.SpanBytes storage, one per pair
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
	op       engine.ScatterOp
	oper     *engine.Operation
}

// submitOp is Engine.Submit; tests replace it to fail a submission.
var submitOp = (*engine.Engine).Submit

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
// otherwise make. The regions that NewPlan makes are read in place, and
// inside a region the order is checked once per run of its innermost
// loop, not per fragment. Runs of many fragments (32768 or more, as the
// plan counts them) are measured and lowered by up to GOMAXPROCS
// goroutines, a pair at a time each. A pair that carries no bytes is not
// submitted.
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
// in the Run until Wait has seen every operation complete; their storage
// then goes back to a pool that later Starts lower into.
func Start(ctx context.Context, e *engine.Engine, p *Plan, dir Dir, local []int, links LinkFunc, opt Options) (*Run, error) {
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

	// Measure and lower the pairs this run owns (on several goroutines
	// when they hold many fragments). Failures are reported in the order
	// of the steps: the first pair in order that fails its checks or
	// takes the run past maxRunFragments, then links, then lowering.
	var own []int
	var work int64
	for i := range p.Pairs {
		pr := &p.Pairs[i]
		if r := dir.runner(pr); r >= 0 && r < len(runs) && runs[r] {
			own = append(own, i)
			work += max(pr.Fragments, int64(len(pr.Regions))) // only to decide on goroutines
		}
	}
	r := &Run{dir: dir, t0: t0}
	lowerErrs, err := r.keep(r.prepare(p, own, len(peer.Ranks), maxFrags, work))
	if err != nil {
		r.release()
		return nil, err
	}
	pairs := r.pairs

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
			r.release()
			return nil, &PairError{Src: x.src, Dst: x.dst, Dir: dir, Phase: PhaseLink, Err: err}
		}
		x.link = l
		if err := x.setOffsets(dir); err != nil {
			r.release()
			return nil, &PairError{Src: x.src, Dst: x.dst, Dir: dir, Phase: PhaseCheck, Err: err}
		}
	}
	// Every pair is lowered before any is submitted, so a bad pair
	// (overlapping destinations) submits nothing.
	for k, err := range lowerErrs {
		if err != nil {
			x := &pairs[k]
			r.release()
			return nil, &PairError{Src: x.src, Dst: x.dst, Dir: dir, Phase: PhaseCheck, Err: err}
		}
	}
	r.spans = make([]uint64, len(pairs))
	for k := range pairs {
		x := &pairs[k]
		x.op.Plan = &r.plans[k]
		x.op.Mode = opt.Mode
		x.op.SpanBytes = r.spans[k : k : k+1]
		r.bytes += x.bytes
	}
	if err := ctx.Err(); err != nil {
		r.release()
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
			r.release()
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

// parallelLowerMin is the least work (fragments, all pairs together,
// as the plan counts them) that Start measures and lowers on several
// goroutines, a pair at a time each: on a 2-core virtual machine, where
// a helper goroutine starts 0.1 to 0.3 ms late, a KV cache reshard
// breaks even at about 32768 fragments (0.22 ms sequentially) and takes
// 0.6 to 0.7 times as long at 131072.
const parallelLowerMin = 1 << 15

// runParallel calls f(k) for every k in [0, n), in order, until f
// returns false, on up to workers goroutines, each taking the next k.
// The calling goroutine is one of them and starts at once, so that a
// helper that starts late (an idle processor takes a while to wake)
// finds less left to do, never more time to wait. Once f has returned
// false, the k not yet taken are skipped: every k below the first that
// failed is done.
func runParallel(n, workers int, f func(k int) bool) {
	var next atomic.Int64
	var failed atomic.Bool
	work := func() {
		for k := int(next.Add(1) - 1); k < n && !failed.Load(); k = int(next.Add(1) - 1) {
			if !f(k) {
				failed.Store(true)
			}
		}
	}
	var wg sync.WaitGroup
	for range min(workers, n) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// rangesPool holds the range storage of pairs whose operations have all
// completed (*[]planfmt.Range), for later runs: lowering then writes into
// memory that is already there instead of a fresh, zeroed allocation.
var rangesPool sync.Pool

// getRanges returns storage for n ranges, from rangesPool when it holds
// enough.
func getRanges(n int64) *[]planfmt.Range {
	if b, ok := rangesPool.Get().(*[]planfmt.Range); ok && int64(cap(*b)) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]planfmt.Range, n)
	return &b
}

// release hands the run's range storage back to rangesPool; no operation
// of the run may be in flight, and its plans are dropped.
func (r *Run) release() {
	for _, b := range r.ranges {
		if b != nil {
			rangesPool.Put(b)
		}
	}
	r.plans, r.ranges = nil, nil
}

// keep reports, in pair order, the first pair that failed its checks (a
// *PairError at PhaseCheck) or took the run past maxRunFragments (a
// *LimitError), of what prepare returned; otherwise it keeps the pairs
// that carry fragments, and returns their lowering errors.
func (r *Run) keep(checkErrs, lowerErrs []error) ([]error, error) {
	var total int64
	kept := 0
	for k := range r.pairs {
		x := &r.pairs[k]
		if err := checkErrs[k]; err != nil {
			return nil, &PairError{Src: x.src, Dst: x.dst, Dir: r.dir, Phase: PhaseCheck, Err: err}
		}
		if x.frags == 0 {
			continue // nothing to move
		}
		if total += x.frags; total > maxRunFragments || total < 0 {
			return nil, &LimitError{Limit: "fragments of the run", Value: total, Max: maxRunFragments}
		}
		if k > kept {
			r.pairs[kept], r.plans[kept], r.ranges[kept], lowerErrs[kept] = r.pairs[k], r.plans[k], r.ranges[k], lowerErrs[k]
			r.ranges[k] = nil // held once, so that release returns it once
		}
		kept++
	}
	r.pairs, r.plans, r.ranges = r.pairs[:kept], r.plans[:kept], r.ranges[:kept]
	return lowerErrs[:kept], nil
}

// prepare measures and lowers pairs own of p (indices into p.Pairs) into
// r.pairs, r.plans and r.ranges, in the same order, for a run whose
// peers' layout has peers ranks: checkErrs[k] is pair k's failure to
// check (a peer that is no rank, measurePair's error), lowerErrs[k] its
// lowering's. With work of parallelLowerMin or more, up to GOMAXPROCS
// goroutines take a pair at a time each, which they measure and lower
// while its regions are in cache. Once a pair fails its checks or the
// pairs measured take more than maxRunFragments, the pairs not yet taken
// are skipped (left zero, unchecked); every pair before the first such
// failure is done, so reading the results in order finds the failure
// that checking pair after pair would. Pairs without fragments, and pairs
// that would take the run past maxRunFragments, are not lowered.
func (r *Run) prepare(p *Plan, own []int, peers int, maxFrags, work int64) (checkErrs, lowerErrs []error) {
	r.pairs = make([]execPair, len(own))
	r.plans = make([]planfmt.Plan, len(own))
	r.ranges = make([]*[]planfmt.Range, len(own))
	checkErrs, lowerErrs = make([]error, len(own)), make([]error, len(own))
	workers := 1
	if work >= parallelLowerMin {
		workers = runtime.GOMAXPROCS(0)
	}
	var claimed atomic.Int64
	runParallel(len(own), workers, func(k int) bool {
		pr := &p.Pairs[own[k]]
		x := &r.pairs[k]
		*x = execPair{index: own[k], src: pr.Src, dst: pr.Dst}
		if o := peerOf(pr, r.dir); o < 0 || o >= peers {
			checkErrs[k] = &LayoutError{Kind: ErrLayout, Rank: o, Piece: -1,
				Reason: fmt.Sprintf("not a rank of the plan's %s layout (%d ranks)", sideName(r.dir, false), peers)}
			return false
		}
		if checkErrs[k] = measurePair(pr, x, maxFrags); checkErrs[k] != nil {
			return false
		}
		if x.frags == 0 {
			return true
		}
		if c := claimed.Add(x.frags); c > maxRunFragments || c < 0 {
			return false // the pairs in order pass maxRunFragments
		}
		b := getRanges(x.frags)
		r.ranges[k] = b
		sc := lowerScratchPool.Get().(*lowerScratch)
		rs, err := lowerPair(pr, x, (*b)[:0], sc)
		lowerScratchPool.Put(sc)
		if err != nil {
			lowerErrs[k] = err
			return true // a pair after it may fail its checks, which comes first
		}
		r.plans[k] = planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: uint64(x.srcHi - x.srcLo),
			DstExtent: uint64(x.dstHi - x.dstLo), Ranges: rs}
		return true
	})
	return checkErrs, lowerErrs
}

// checkStart checks Start's arguments other than the ranks and pairs.
func checkStart(e *engine.Engine, p *Plan, dir Dir, links LinkFunc, opt Options) error {
	bad := func(field, reason string) error {
		return fmt.Errorf("reshard: start: %w", &engine.InvalidOpError{Field: field, Reason: reason})
	}
	switch {
	case e == nil:
		return bad("Engine", "nil")
	case dir != Pull && dir != Push:
		return bad("dir", fmt.Sprintf("%v is neither Pull nor Push", dir))
	case links == nil:
		return bad("links", "nil")
	case opt.Mode > engine.ModeHybrid:
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

// measurePair checks the shape of pr's regions and computes, without
// visiting fragments, the windows they span on both sides, their
// fragments and their bytes into x.
func measurePair(pr *Pair, x *execPair, maxFrags int64) error {
	var o planArith
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
	bad := func(field, reason string) error {
		return &engine.InvalidOpError{Field: "Link." + field, Reason: reason}
	}
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

// lowerScratch is the reusable storage of lowering pairs: pointer-free,
// so that growing and sorting it costs no write barriers. Lowering
// borrows one from lowerScratchPool per goroutine.
type lowerScratch struct {
	keys, keys2 []lowerKey      // the pair's non-empty regions, and the radix sort's second buffer
	canon       []lowerCanon    // canonical copies of regions not in canonical form already
	loops       []int64         // their loops
	idx         []int64         // the odometer of a region's outer loops
	tmp         []planfmt.Range // the radix sort's second buffer of ranges
}

var lowerScratchPool = sync.Pool{New: func() any { return new(lowerScratch) }}

// lowerKey is a non-empty region of a pair, in canonical form, and its
// lowest destination byte dlo (never negative: measurePair rejects
// regions that start below 0): pr.Regions[i] for i >= 0 (which is in
// canonical form as it is, as the planner's regions are), the copy
// sc.canon[^i] otherwise.
type lowerKey struct {
	dlo uint64
	i   int
}

// lowerCanon is a canonical copy of a region whose loops (counts, source
// strides, destination strides) are lowerScratch.loops[at:][:3*n].
type lowerCanon struct {
	srcOff, dstOff, inner int64
	at, n                 int
}

// lowerView is a region in canonical form as lowering reads it.
type lowerView struct {
	srcOff, dstOff, inner int64
	counts, ss, ds        []int64
}

// view is the canonical form of the region that k stands for.
func (sc *lowerScratch) view(pr *Pair, k lowerKey) lowerView {
	if k.i >= 0 {
		r := &pr.Regions[k.i]
		return lowerView{r.SrcOff, r.DstOff, r.Inner, r.Counts, r.SrcStrides, r.DstStrides}
	}
	c := &sc.canon[^k.i]
	buf := sc.loops[c.at:][:3*c.n]
	return lowerView{c.srcOff, c.dstOff, c.inner, buf[:c.n], buf[c.n : 2*c.n], buf[2*c.n:]}
}

// lowerPair expands the fragments of pr into rs (whose capacity holds
// x.frags ranges), relative to x's windows, in destination order, with
// fragments that continue the previous one on both sides coalesced.
//
// Order is settled per region where it can be: each region is put in
// canonical form (loops with a negative destination stride walked from
// their other end, loops sorted by destination stride, largest first:
// the planner's regions are in that form already and are read as they
// are, others are copied); when every canonical region is a nest (each
// stride at least the extent of the loops inside it), its fragments
// ascend in the destination, and when the regions' destination spans are
// disjoint, visiting them by span start (a radix sort of the regions,
// none when they come in that order) yields every fragment in destination
// order. Inside a nest, the fragments of the innermost loop follow each
// other without a test: only the first fragment of each run of the
// innermost loop is compared with the previous range, to coalesce with
// it or to find that the regions interleave. Otherwise (a region that is
// not a nest, or regions that interleave, such as two cyclic shares of
// one block) every fragment is compared with the previous range and,
// when some fragment does not continue upwards, the ranges are
// radix-sorted by destination and coalesced again. Overlapping
// destinations fail with an ErrOverlap *LayoutError. The ranges are
// those of expanding every region fragment by fragment, whichever way
// they are found.
func lowerPair(pr *Pair, x *execPair, rs []planfmt.Range, sc *lowerScratch) ([]planfmt.Range, error) {
	keys := sc.keys[:0]
	sc.canon, sc.loops = sc.canon[:0], sc.loops[:0]
	nested, inOrder := true, true
	for i := range pr.Regions {
		reg := &pr.Regions[i]
		if reg.Inner == 0 || reg.Fragments() == 0 {
			continue
		}
		k, nest := sc.key(reg, i)
		nested = nested && nest
		inOrder = inOrder && (len(keys) == 0 || keys[len(keys)-1].dlo <= k.dlo)
		keys = append(keys, k)
	}
	sc.keys = keys
	if nested && !inOrder {
		sc.keys2 = grown(sc.keys2, len(keys))
		radixSortInPlace(keys, sc.keys2, lowerKeyDlo)
	}

	sorted := true
	srcLo, dstLo := x.srcLo, x.dstLo
	for _, k := range keys {
		v := sc.view(pr, k)
		rs = sc.emit(rs, &v, uint64(v.srcOff-srcLo), uint64(v.dstOff-dstLo), nested, &sorted)
	}
	if sorted {
		return rs, nil
	}
	if cap(sc.tmp) < len(rs) {
		sc.tmp = make([]planfmt.Range, len(rs))
	}
	radixSortInPlace(rs, sc.tmp, rangeDst)
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

// key returns the key of region i, reg (non-empty, measured by
// measurePair, so no offset below overflows), and whether its canonical
// form is a nest: then its fragments ascend in the destination,
// disjoint. A region whose destination strides are non-negative and
// descending is in canonical form already; any other is copied into sc
// and put in that form.
func (sc *lowerScratch) key(reg *Region, i int) (lowerKey, bool) {
	v := lowerView{reg.SrcOff, reg.DstOff, reg.Inner, reg.Counts, reg.SrcStrides, reg.DstStrides}
	k := lowerKey{i: i}
	for l, d := range v.ds {
		if d < 0 || l > 0 && v.ds[l-1] < d {
			k.i = ^len(sc.canon)
			v = sc.canonical(reg)
			break
		}
	}
	ext, nest := v.inner, true
	for l := len(v.counts) - 1; l >= 0; l-- {
		if c := v.counts[l] - 1; c > 0 {
			nest = nest && v.ds[l] >= ext
			ext += c * v.ds[l]
		}
	}
	k.dlo = uint64(v.dstOff)
	return k, nest
}

// canonical copies reg into sc.canon and sc.loops in canonical form: its
// loops walk the destination upwards, largest destination stride first
// (an insertion sort: stable, few loops).
func (sc *lowerScratch) canonical(reg *Region) lowerView {
	n := len(reg.Counts)
	at := len(sc.loops)
	sc.loops = append(sc.loops, reg.Counts...)
	sc.loops = append(sc.loops, reg.SrcStrides...)
	sc.loops = append(sc.loops, reg.DstStrides...)
	buf := sc.loops[at:]
	c := lowerView{reg.SrcOff, reg.DstOff, reg.Inner, buf[0:n:n], buf[n : 2*n : 2*n], buf[2*n : 3*n : 3*n]}
	for l := range n {
		if c.ds[l] < 0 {
			k := c.counts[l] - 1
			c.srcOff += k * c.ss[l]
			c.dstOff += k * c.ds[l]
			c.ss[l], c.ds[l] = -c.ss[l], -c.ds[l]
		}
	}
	for i := 1; i < n; i++ {
		for j := i; j > 0 && c.ds[j-1] < c.ds[j]; j-- {
			c.counts[j-1], c.counts[j] = c.counts[j], c.counts[j-1]
			c.ss[j-1], c.ss[j] = c.ss[j], c.ss[j-1]
			c.ds[j-1], c.ds[j] = c.ds[j], c.ds[j-1]
		}
	}
	sc.canon = append(sc.canon, lowerCanon{srcOff: c.srcOff, dstOff: c.dstOff, inner: c.inner, at: at, n: n})
	return c
}

// emit appends the fragments of v (non-empty, canonical) to rs, the
// first at src and dst relative to the windows, in loop order, each
// coalesced with the previous range when it continues it on both sides;
// it clears *sorted when a fragment starts below the previous range's
// end. For a nest (nest set), only the first fragment of each run of the
// innermost loop can do either (a nest's fragments ascend, each past the
// previous one's end), so the others are appended without a test; and a
// run that is contiguous on both sides is one fragment.
func (sc *lowerScratch) emit(rs []planfmt.Range, v *lowerView, src, dst uint64, nest bool, sorted *bool) []planfmt.Range {
	n := len(v.counts)
	inner := uint64(v.inner)
	if n == 0 {
		return lowerAdd(rs, src, dst, inner, sorted)
	}
	// The innermost loop, and the outer ones driven by an odometer;
	// offsets wrap as uint64, which walks negative source strides.
	c, ss, ds := v.counts[n-1], uint64(v.ss[n-1]), uint64(v.ds[n-1])
	outer := n - 1
	idx := grown(sc.idx, outer)
	sc.idx = idx
	clear(idx)
	for {
		switch {
		case !nest:
			s, d := src, dst
			for range c {
				rs = lowerAdd(rs, s, d, inner, sorted)
				s += ss
				d += ds
			}
		case ss == inner && ds == inner:
			rs = lowerAdd(rs, src, dst, uint64(c)*inner, sorted)
		default:
			rs = lowerAdd(rs, src, dst, inner, sorted)
			s, d := src, dst
			for range c - 1 {
				s += ss
				d += ds
				rs = append(rs, planfmt.Range{Src: s, Dst: d, Len: inner})
			}
		}
		l := outer - 1
		for ; l >= 0; l-- {
			src += uint64(v.ss[l])
			dst += uint64(v.ds[l])
			if idx[l]++; idx[l] < v.counts[l] {
				break
			}
			idx[l] = 0
			src -= uint64(v.counts[l]) * uint64(v.ss[l])
			dst -= uint64(v.counts[l]) * uint64(v.ds[l])
		}
		if l < 0 {
			return rs
		}
	}
}

// lowerAdd appends the fragment of n bytes at src and dst to rs, or
// extends the last range when the fragment continues it on both sides;
// it clears *sorted when the fragment starts below the last range's end.
func lowerAdd(rs []planfmt.Range, src, dst, n uint64, sorted *bool) []planfmt.Range {
	if k := len(rs); k > 0 {
		last := &rs[k-1]
		end := last.Dst + last.Len
		if dst == end && src == last.Src+last.Len {
			last.Len += n
			return rs
		}
		if dst < end {
			*sorted = false
		}
	}
	return append(rs, planfmt.Range{Src: src, Dst: dst, Len: n})
}

// radixSortInPlace sorts a stably with planfmt.RadixSort by key, tmp
// (room for len(a)) as the second buffer, leaving the result in a:
// O(len(a)) per byte position in which the keys differ (3 passes for
// windows below 16 MiB), so lowering stays linear in the fragments.
func radixSortInPlace[E any](a, tmp []E, key func(*E) *uint64) {
	if s := planfmt.RadixSort(a, tmp, key); len(s) > 0 && &s[0] != &a[0] {
		copy(a, s)
	}
}

// The sort keys of lowering: a region's lowest destination byte, a
// range's destination.
func lowerKeyDlo(k *lowerKey) *uint64   { return &k.dlo }
func rangeDst(r *planfmt.Range) *uint64 { return &r.Dst }

// Wait waits for every operation of the run and returns the result. If
// any pair failed, the result (every pair's engine.Result, which for a
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
	// Every operation has completed: the ranges go back for later runs.
	// Drop what pins the caller's memory and connections.
	r.release()
	for k := range r.pairs {
		r.pairs[k].link, r.pairs[k].op = Link{}, engine.ScatterOp{}
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

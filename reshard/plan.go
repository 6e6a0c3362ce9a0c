package reshard

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// NewPlan plans the reshard of src's tensor into dst.
//
// It validates both layouts against lim (returning Validate's error as
// is), then requires that they hold the same tensor (same shape and
// element size; otherwise a *LayoutError of kind ErrMismatch).
//
// Every destination piece of every rank receives its whole box,
// destination replicas included: each replica gets its own copy. The
// part of a destination piece that one source box holds becomes one
// Region. Source replicas (identical boxes on different ranks) are one
// logical source: each such part is read from one replica, chosen to
// spread the load: the replica whose rank has been assigned the fewest
// bytes so far in this plan, the lowest rank on ties. Destination ranks
// are visited in order, their pieces in order, and the parts of one
// destination piece in order of their first destination byte, so the
// choice is deterministic and, for parts of equal size, the replicas of a
// box take turns.
//
// A Region is compacted: its loops run in order of destination stride,
// largest first (destination bytes ascending), adjacent loops that form
// one progression on both sides are fused, and innermost loops that are
// contiguous on both sides are folded into Inner. A region with no loops
// left is one fragment.
//
// Pairs are sorted by (Src, Dst); a pair's regions keep the order in
// which they were produced. Plan.Bytes totals the destination pieces.
//
// NewPlan fails with a *LimitError when the plan needs more than
// lim.MaxRegions regions ("regions") or a pair more than lim.MaxFragments
// fragments ("fragments of pair s->d"); it stops at the first region
// that exceeds a limit, so the error's Value is a lower bound. Sums that
// would overflow int64 fail with a *LayoutError of kind ErrLayout.
//
// Cost: with D destination pieces, A axes and n distinct source boxes,
// beyond validating both layouts (see Validate), whose sorting and
// grouping of the source boxes the planner reuses: picking the index
// axis takes O(A*(n + D + e)), where e is the extent of an axis at most
// 4n long (counted densely), O(A*(n + D)*log n) along longer axes, and
// only O(A*D) without source replicas (validation counted the boxes
// already); indexing along it takes O(n) when it is the sweep axis
// (the boxes are in order already), a sort of the n spans otherwise. Each
// destination piece then costs O(log n + c*A), where c is the number of
// source boxes whose span along the index axis overlaps the piece's (the
// candidates tested), O((1+c)*log n + c*A) when some source span along
// that axis lies inside another; each region costs O(A). The index axis
// is the one with the fewest candidates over all destination pieces,
// counted exactly: the token axis of a paged KV cache, the head axis of a
// tensor-parallel weight. When the pieces of either layout tile the index
// axis in blocks, the candidates are the boxes a piece meets along that
// axis, so the work follows the regions and pieces, not the elements;
// only when the boxes overlap along every axis (cyclic placements on all
// axes) can it approach all pairs of boxes and pieces. NewPlan allocates
// little beyond the plan: its Regions, one array per destination rank,
// and their loops, in blocks of 4096 int64s; its scratch is reused
// across calls.
//
// NewPlan runs on several goroutines (up to GOMAXPROCS) where that cannot
// change the plan. It validates the destination alongside the source
// when both have a few hundred pieces. Without source replicas, whose
// choice depends on every part planned before, and with a few thousand
// candidates or more (about half a millisecond of planning), runs of
// destination pieces are planned concurrently and joined in piece order:
// the plan, and any error, is the one that planning piece after piece
// gives.
func NewPlan(src, dst *Layout, lim Limits) (*Plan, error) {
	if src == nil || dst == nil {
		return nil, &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: "nil layout"}
	}
	lim = lim.withDefaults()
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	// Validating the destination does not depend on the source: with
	// enough pieces on both sides, it runs alongside. Either way the
	// source's error comes first.
	dsc := scratchPool.Get().(*scratch)
	var dstErr error
	var wg sync.WaitGroup
	concurrent := runtime.GOMAXPROCS(0) > 1 &&
		min(layoutPieces(src), layoutPieces(dst)) >= validateParallelMin
	if concurrent {
		wg.Go(func() { _, dstErr = dst.validate(lim, dsc) })
	}
	boxes, err := src.validate(lim, sc)
	if concurrent {
		wg.Wait()
	} else if err == nil {
		_, dstErr = dst.validate(lim, dsc)
	}
	scratchPool.Put(dsc)
	if err != nil {
		return nil, err
	}
	if dstErr != nil {
		return nil, dstErr
	}
	if !slices.Equal(src.Tensor.Shape, dst.Tensor.Shape) || src.Tensor.ElemSize != dst.Tensor.ElemSize {
		return nil, &LayoutError{
			Kind: ErrMismatch, Rank: -1, Piece: -1,
			Reason: fmt.Sprintf("source holds %v x %d bytes, destination %v x %d bytes",
				src.Tensor.Shape, src.Tensor.ElemSize, dst.Tensor.Shape, dst.Tensor.ElemSize),
		}
	}
	return planLayouts(src, dst, boxes, lim)
}

// validateParallelMin is the fewest pieces that both layouts must have
// for NewPlan to validate them at the same time.
const validateParallelMin = 256

// layoutPieces is the number of pieces of l, all ranks together.
func layoutPieces(l *Layout) int {
	n := 0
	for r := range l.Ranks {
		n += len(l.Ranks[r].Pieces)
	}
	return n
}

// Each calls f with the source and destination byte offsets of every
// fragment of the region (Inner bytes each), in loop order: the
// outermost loop's index changes slowest. It stops when f returns false.
// Each allocates nothing.
func (r *Region) Each(f func(src, dst int64) bool) {
	if len(r.Counts) == 0 {
		f(r.SrcOff, r.DstOff)
		return
	}
	r.each(0, r.SrcOff, r.DstOff, f)
}

func (r *Region) each(l int, src, dst int64, f func(src, dst int64) bool) bool {
	n, ss, ds := r.Counts[l], r.SrcStrides[l], r.DstStrides[l]
	if l == len(r.Counts)-1 {
		for range n {
			if !f(src, dst) {
				return false
			}
			src += ss
			dst += ds
		}
		return true
	}
	for range n {
		if !r.each(l+1, src, dst, f) {
			return false
		}
		src += ss
		dst += ds
	}
	return true
}

// planner holds what the destination ranks of one NewPlan call share,
// read-only once the index is built.
type planner struct {
	src, dst *Layout
	boxes    *layoutBoxes // the source's, as validating it found them
	lim      Limits
	axes     int
	elem     int64
	index    planAxisIndex
	// work estimates the planning's cost: the candidate source boxes of
	// all destination pieces, as buildIndex counted them (the
	// destination pieces when it did not count).
	work int64
}

// planWorker plans runs of destination pieces, one after the other: the
// whole plan, a rank at a time, or in parallel planning the runs one
// goroutine takes.
type planWorker struct {
	*planner

	load   []int64 // bytes assigned to each source rank
	pairOf []int32 // pair (in the current run) of each source rank, -1 if none
	nregs  int     // regions of all runs so far
	total  int64   // bytes of the destination pieces so far

	// The pairs and regions of all runs so far; the current run's are
	// pairs[base:] and regs[rbase:].
	pairs       []Pair
	regs        []planRegion
	base, rbase int
	// The loops of all regions: blocks of full length that the plan's
	// Regions share, the last one filled to used.
	chunks [][]int64
	used   int

	// join's scratch: the rank's pair of each source rank (-1 if none),
	// the number of regions of each of the rank's pairs (then their next
	// slots), and the rank's pair of each pair of a run.
	joinOf []int32
	joinN  []int
	segOf  []int32

	loops []planLoop
	cands []planCand
	found []int32
	ivs   []Interval
}

// planSeg is what a worker produced for a run of one destination rank's
// pieces: its pairs, in order of their first region (Regions unset), its
// regions in the order produced, each naming its pair in pairs, and the
// worker's blocks of loops when the run ended. The slices are the
// worker's, cut to the run: the worker only appends past them, so
// another goroutine may read them once the run is done.
type planSeg struct {
	pairs  []Pair
	regs   []planRegion
	chunks [][]int64
}

// planCand is the intersection of the current destination piece with a
// distinct source box: its intervals are planWorker.ivs[iv:][:axes].
type planCand struct {
	box      int32
	iv       int32
	dstStart int64
}

// planLoop is one loop of a region being built.
type planLoop struct {
	n, ss, ds int64
}

// planRegion is a Region while the plan is built: its loops (counts,
// source strides, destination strides) are chunks[chunk][off:][:3*n],
// and it belongs to its run's pairs[pair]. Holding no pointers, it is
// cheap to grow.
type planRegion struct {
	srcOff, dstOff, inner int64
	chunk, off            int32
	n, pair               int32
}

// planLoopChunk is the size of the blocks of loops (int64s) that the
// plan's Regions slice, each with its capacity cut to its own loops: the
// loops are written once and never copied.
const planLoopChunk = 1 << 12

// Parallel planning: planParallelMin is the least work (planner.work:
// candidate source boxes over all destination pieces) planned on several
// goroutines. On a 2-core virtual machine a helper goroutine starts 0.1
// to 0.3 ms late (an idle processor wakes slowly); planning a KV cache
// reshard breaks even at 2048 to 4096 candidates (0.2 to 0.45 ms
// sequentially) and takes 0.7 times as long at 16384 (2 ms). The
// destination pieces are cut into runs of at least planRunMin pieces,
// about planRunsPerWorker runs per goroutine, so that goroutines that
// start late or run slow share the work. Variables, so that tests can
// force either way.
var (
	planParallelMin   int64 = 1 << 12
	planRunMin              = 16
	planRunsPerWorker       = 4
)

// planLayouts plans src into dst; the layouts are validated and hold the
// same tensor, and boxes is what validating src returned. Validate
// rejects negative strides; the planner handles them anyway (it walks
// such a loop from its last index, so that the destination still
// ascends), so relaxing Validate needs no change here.
//
// When the source has no replicas, the destination pieces are
// independent (with replicas, the replica a part is read from depends on
// the load of every piece planned before), and with enough work
// (planParallelMin) up to GOMAXPROCS goroutines plan runs of pieces of
// the destination ranks, joined rank by rank in piece order: the plan is
// the same as sequential planning's, value for value. Should a goroutine
// fail or the runs together exceed a limit, the plan is made again
// sequentially, which reports the error sequential planning does.
func planLayouts(src, dst *Layout, boxes *layoutBoxes, lim Limits) (*Plan, error) {
	p := newPlanner(src, dst, boxes, lim)
	var pairs []Pair
	var total int64
	ok := false
	if workers := runtime.GOMAXPROCS(0); workers > 1 && !p.replicas() && p.work >= planParallelMin {
		pairs, total, ok = p.planParallel(workers)
	}
	if !ok {
		var err error
		if pairs, total, err = p.planSequential(); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(pairs, func(a, b Pair) int {
		return cmp.Or(cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst))
	})
	return &Plan{Tensor: src.Tensor, Src: src, Dst: dst, Pairs: pairs, Bytes: total}, nil
}

// newPlanner readies the planning of src into dst (see planLayouts):
// it picks the index axis and indexes the source boxes along it.
func newPlanner(src, dst *Layout, boxes *layoutBoxes, lim Limits) *planner {
	p := &planner{
		src:   src,
		dst:   dst,
		boxes: boxes,
		lim:   lim,
		axes:  len(src.Tensor.Shape),
		elem:  src.Tensor.ElemSize,
	}
	p.buildIndex()
	return p
}

// replicas reports whether two source pieces hold the same box.
func (p *planner) replicas() bool {
	return len(p.boxes.distinct)-1 < len(p.boxes.refs)
}

// planSequential plans the destination ranks in order, a rank at a time,
// on one worker: the pairs in the order they were produced (rank by
// rank) and the bytes of the destination pieces.
func (p *planner) planSequential() ([]Pair, int64, error) {
	w := p.newWorker(planWorkerPool.Get().(*planWorker))
	defer w.release()
	var pairs []Pair
	for d := range p.dst.Ranks {
		seg, err := w.planRun(d, 0, len(p.dst.Ranks[d].Pieces))
		if err != nil {
			return nil, 0, err
		}
		// One run per rank: join checks nothing that planRun has not.
		pairs, _ = w.join([]planSeg{seg}, pairs)
		w.pairs, w.regs = w.pairs[:0], w.regs[:0]
	}
	return pairs, w.total, nil
}

// planWorkerPool holds the scratch of planning workers.
var planWorkerPool = sync.Pool{New: func() any { return new(planWorker) }}

// newWorker returns a worker with the scratch of w.
func (p *planner) newWorker(w *planWorker) *planWorker {
	*w = planWorker{
		planner: p,
		load:    grown(w.load, len(p.src.Ranks)),
		pairOf:  grown(w.pairOf, len(p.src.Ranks)),
		joinOf:  grown(w.joinOf, len(p.src.Ranks)),
		pairs:   w.pairs[:0],
		regs:    w.regs[:0],
		joinN:   w.joinN[:0],
		segOf:   w.segOf[:0],
		loops:   slices.Grow(w.loops[:0], p.axes),
		cands:   w.cands[:0],
		found:   w.found[:0],
		ivs:     w.ivs[:0],
	}
	clear(w.load)
	for i := range w.pairOf {
		w.pairOf[i], w.joinOf[i] = -1, -1
	}
	return w
}

// release drops what the worker holds of the plan and of the layouts
// and returns its scratch to planWorkerPool.
func (w *planWorker) release() {
	w.planner, w.chunks = nil, nil // the runs' pairs hold no Regions
	planWorkerPool.Put(w)
}

// planParallel plans on up to workers goroutines, each taking the next
// run of pieces (runs in rank and piece order) until none is left; the
// goroutine that finishes the last run of a rank joins the rank's runs.
// It returns the ranks' pairs in rank order, as sequential planning
// produces them. It reports false when a goroutine failed or the runs
// together exceed a limit or overflow: sequential planning finds the
// error to report. The source must have no replicas.
func (p *planner) planParallel(workers int) ([]Pair, int64, bool) {
	type run struct{ d, lo, hi int }
	ranks := p.dst.Ranks
	size := int64(planRunMin)
	if n, m := int64(layoutPieces(p.dst)), int64(planRunsPerWorker*workers); n > size*m {
		size = (n + m - 1) / m
	}
	// first[d] is rank d's first run; every rank has one, maybe empty,
	// so that every rank is joined.
	var runs []run
	first := make([]int, len(ranks)+1)
	for d := range ranks {
		first[d] = len(runs)
		n := len(ranks[d].Pieces)
		k := max(1, int((int64(n)+size-1)/size))
		for i := range k {
			runs = append(runs, run{d: d, lo: i * n / k, hi: (i + 1) * n / k})
		}
	}
	first[len(ranks)] = len(runs)
	segs := make([]planSeg, len(runs))
	left := make([]atomic.Int32, len(ranks))
	for d := range ranks {
		left[d].Store(int32(first[d+1] - first[d]))
	}
	joined := make([][]Pair, len(ranks))

	ws := make([]*planWorker, min(workers, len(runs)))
	for i := range ws {
		ws[i] = p.newWorker(planWorkerPool.Get().(*planWorker))
	}
	defer func() {
		for _, w := range ws {
			w.release()
		}
	}()
	var next atomic.Int64
	var failed atomic.Bool
	runParallel(len(ws), len(ws), func(k int) bool {
		w := ws[k]
		for i := int(next.Add(1) - 1); i < len(runs) && !failed.Load(); i = int(next.Add(1) - 1) {
			r := runs[i]
			seg, err := w.planRun(r.d, r.lo, r.hi)
			if err != nil {
				failed.Store(true)
				return false
			}
			segs[i] = seg
			if left[r.d].Add(-1) == 0 {
				pairs, ok := w.join(segs[first[r.d]:first[r.d+1]], nil)
				if !ok {
					failed.Store(true)
					return false
				}
				joined[r.d] = pairs
			}
		}
		return true
	})
	if failed.Load() {
		return nil, 0, false
	}
	var o planArith
	var total int64
	n, regions := 0, 0
	for _, w := range ws {
		total = o.add(total, w.total)
		regions += w.nregs
	}
	for _, pairs := range joined {
		n += len(pairs)
	}
	if o.bad || regions > p.lim.MaxRegions {
		return nil, 0, false
	}
	pairs := make([]Pair, 0, n)
	for _, rp := range joined {
		pairs = append(pairs, rp...)
	}
	return pairs, total, true
}

// planRun produces the regions of pieces [lo, hi) of destination rank d:
// the run's pairs and regions, which follow the worker's earlier runs'.
func (w *planWorker) planRun(d, lo, hi int) (planSeg, error) {
	w.base, w.rbase = len(w.pairs), len(w.regs)
	var o planArith
	for pi := lo; pi < hi; pi++ {
		dp := &w.dst.Ranks[d].Pieces[pi]
		if err := w.checkPiece(dp, d, pi); err != nil {
			return planSeg{}, err
		}
		n := planBoxLen(dp.Box, &o)
		if n == 0 {
			continue
		}
		w.total = o.add(w.total, o.mul(n, w.elem))
		if o.bad {
			return planSeg{}, &LayoutError{Kind: ErrLayout, Rank: d, Piece: pi, Reason: "destination bytes overflow int64"}
		}
		if err := w.planPiece(d, pi, dp); err != nil {
			return planSeg{}, err
		}
	}
	seg := planSeg{pairs: w.pairs[w.base:len(w.pairs):len(w.pairs)], regs: w.regs[w.rbase:len(w.regs):len(w.regs)],
		chunks: w.chunks[:len(w.chunks):len(w.chunks)]}
	for i := range seg.pairs {
		w.pairOf[seg.pairs[i].Src] = -1
	}
	return seg, nil
}

// join appends to out the pairs of one destination rank whose pieces
// segs produced, in piece order: a pair per source rank in order of its
// first region, its regions in the order they were produced, all of the
// rank's in one array of Regions. It reports false when a pair exceeds
// lim.MaxFragments or its sums overflow (which planRun finds itself
// when a run is the whole rank).
func (w *planWorker) join(segs []planSeg, out []Pair) ([]Pair, bool) {
	base := len(out)
	var o planArith
	nregs := 0
	for _, sg := range segs {
		for i := range sg.pairs {
			pr := &sg.pairs[i]
			k := w.joinOf[pr.Src]
			if k < 0 {
				k = int32(len(out) - base)
				w.joinOf[pr.Src] = k
				out = append(out, Pair{Src: pr.Src, Dst: pr.Dst})
				w.joinN = append(w.joinN, 0)
			}
			q := &out[base+int(k)]
			q.Bytes = o.add(q.Bytes, pr.Bytes)
			q.Fragments = o.add(q.Fragments, pr.Fragments)
			if q.Fragments > w.lim.MaxFragments {
				o.bad = true
			}
		}
		for _, r := range sg.regs {
			w.joinN[w.joinOf[sg.pairs[r.pair].Src]]++
		}
		nregs += len(sg.regs)
	}
	ok := !o.bad
	if ok && nregs > 0 {
		all := make([]Region, nregs)
		// joinN becomes the next free slot of each pair in all.
		at := 0
		for i, n := range w.joinN {
			w.joinN[i] = at
			at += n
		}
		for _, sg := range segs {
			segOf := w.segOf[:0]
			for i := range sg.pairs {
				segOf = append(segOf, w.joinOf[sg.pairs[i].Src])
			}
			w.segOf = segOf
			for _, r := range sg.regs {
				next := &w.joinN[segOf[r.pair]]
				reg := &all[*next]
				*next++
				// Field by field: the slices of a fresh Region are nil already.
				reg.SrcOff, reg.DstOff, reg.Inner = r.srcOff, r.dstOff, r.inner
				if n := int(r.n); n > 0 {
					buf := sg.chunks[r.chunk][r.off:][: 3*n : 3*n]
					reg.Counts = buf[0:n:n]
					reg.SrcStrides = buf[n : 2*n : 2*n]
					reg.DstStrides = buf[2*n : 3*n : 3*n]
				}
			}
		}
		at = 0
		for i := range out[base:] {
			end := w.joinN[i]
			out[base+i].Regions = all[at:end:end]
			at = end
		}
	}
	for i := range out[base:] {
		w.joinOf[out[base+i].Src] = -1
	}
	w.joinN = w.joinN[:0]
	return out, ok
}

// checkPiece guards the indexing below against a piece whose box or
// strides do not have one entry per axis (Validate rejects such pieces).
func (p *planner) checkPiece(pc *Piece, rank, piece int) error {
	if len(pc.Box) != p.axes || len(pc.Strides) != p.axes {
		return &LayoutError{Kind: ErrLayout, Rank: rank, Piece: piece,
			Reason: fmt.Sprintf("piece has %d intervals and %d strides for %d axes", len(pc.Box), len(pc.Strides), p.axes)}
	}
	return nil
}

// planBoxLen is the number of elements of a box.
func planBoxLen(box []Interval, o *planArith) int64 {
	n := int64(1)
	for _, iv := range box {
		n = o.mul(n, length(iv))
	}
	return n
}

// planSpan is the envelope [Lo, Last+1) of an interval (empty: [Lo, Lo)).
func planSpan(iv Interval) (lo, hi int64) {
	c := canonical(iv)
	return c.Lo, c.Hi
}

// buildIndex picks the index axis and indexes the distinct source boxes
// along it. The index axis is the one with the fewest pairs of (source
// box, destination piece) whose spans along it overlap: the candidates
// that planPiece will test, whose number (at least the destination
// pieces) becomes p.work.
func (p *planner) buildIndex() {
	b := p.boxes
	n := len(b.distinct) - 1
	best := 0
	p.work = 0
	for d := range p.dst.Ranks {
		p.work += int64(len(p.dst.Ranks[d].Pieces))
	}
	if p.axes > 1 && n > 1 {
		bestCount := int64(math.MaxInt64)
		for a := range p.axes {
			if count, ok := p.overlaps(a); ok && count < bestCount {
				best, bestCount = a, count
			}
		}
		if bestCount < math.MaxInt64 {
			p.work = max(p.work, bestCount)
		}
	}
	lo, hi := grown(b.sc.lo, n), grown(b.sc.hi, n)
	b.sc.lo, b.sc.hi = lo, hi
	for i, at := range b.distinct[:n] {
		lo[i], hi[i] = b.span(&b.refs[at], best)
	}
	p.index.build(best, lo, hi, p.src.Tensor.Shape[best])
}

// overlaps counts the pairs of (distinct source box, non-empty
// destination piece) whose spans along axis a overlap: a source span
// overlaps [lo, hi) unless it ends at or before lo or starts at or after
// hi, never both. It returns false, counting nothing, when all source
// boxes have one interval along a, which makes the axis useless as an
// index. Without replicas, the counts validation made along a, of all
// source boxes, are those of the distinct boxes; otherwise it counts
// these again in their buffers.
func (p *planner) overlaps(a int) (int64, bool) {
	b := p.boxes
	if b.same[a] {
		return 0, false
	}
	n := len(b.distinct) - 1
	ec := &b.counts.ec[a]
	if n < len(b.refs) {
		ec.reset(n, p.src.Tensor.Shape[a])
		for _, at := range b.distinct[:n] {
			ec.add(b.span(&b.refs[at], a))
		}
		ec.done()
	}
	var count int64
	for d := range p.dst.Ranks {
		for i := range p.dst.Ranks[d].Pieces {
			box := p.dst.Ranks[d].Pieces[i].Box
			if len(box) != p.axes || slices.ContainsFunc(box, func(iv Interval) bool { return length(iv) == 0 }) {
				continue
			}
			dlo, dhi := planSpan(box[a])
			count += ec.startsBelow(dhi) - ec.endsBy(dlo)
		}
	}
	return count, true
}

// planIntersect is x.Intersect(y), without arithmetic for steps of 1.
func planIntersect(x, y Interval) Interval {
	if x.Step == 1 && y.Step == 1 {
		return Interval{Lo: max(x.Lo, y.Lo), Hi: min(x.Hi, y.Hi), Step: 1}
	}
	return x.Intersect(y)
}

// planPiece produces the regions of destination piece pi of rank d.
func (p *planWorker) planPiece(d, pi int, dp *Piece) error {
	ilo, ihi := planSpan(dp.Box[p.index.axis])
	p.found = p.index.query(ilo, ihi, p.found[:0])
	cands, ivs := p.cands[:0], p.ivs[:0]
	b := p.boxes
	// The piece's spans along the axes whose spans the refs carry: most
	// candidates that miss the piece miss it there, without a look at
	// their boxes.
	lo, hi := planSpan(dp.Box[b.ax])
	lo2, hi2 := int32(0), int32(1)
	if b.ax2 >= 0 {
		l, h := planSpan(dp.Box[b.ax2])
		lo2, hi2 = int32(l), int32(h)
	}
	sorted := true
	for _, id := range p.found {
		r := &b.refs[b.distinct[id]]
		if r.hi <= lo || hi <= r.lo || r.hi2 <= lo2 || hi2 <= r.lo2 {
			continue
		}
		sb := b.box(*r)
		at := len(ivs)
		start := dp.Offset // the lowest destination byte of the intersection
		for a, x := range dp.Box {
			iv := planIntersect(x, sb[a])
			if iv.Hi <= iv.Lo { // empty
				ivs = ivs[:at]
				break
			}
			ivs = append(ivs, iv)
			start += planOffset(x, iv, dp.Strides[a])
		}
		if len(ivs) == at {
			continue
		}
		sorted = sorted && (len(cands) == 0 || cands[len(cands)-1].dstStart <= start)
		cands = append(cands, planCand{box: id, iv: int32(at), dstStart: start})
	}
	if !sorted {
		slices.SortStableFunc(cands, func(a, b planCand) int { return cmp.Compare(a.dstStart, b.dstStart) })
	}
	p.cands, p.ivs = cands, ivs

	var o planArith
	for _, c := range cands {
		ivs := ivs[c.iv:][:p.axes]
		replicas := b.refs[b.distinct[c.box]:b.distinct[c.box+1]] // in rank order
		m := replicas[0]
		for _, r := range replicas[1:] {
			if p.load[r.rank] < p.load[m.rank] {
				m = r
			}
		}
		s := int(m.rank)
		if len(p.regs) == cap(p.regs) { // doubling: append grows large slices by a quarter
			p.regs = slices.Grow(p.regs, max(len(p.regs), 64))
		}
		reg := &p.regs[:len(p.regs)+1][len(p.regs)]
		frags := p.region(reg, &p.src.Ranks[s].Pieces[m.piece], dp, ivs, c.dstStart)
		bytes := frags * reg.inner // at most the piece's bytes
		p.load[s] = o.add(p.load[s], bytes)
		if o.bad {
			return &LayoutError{Kind: ErrLayout, Rank: d, Piece: pi, Reason: "source rank bytes overflow int64"}
		}

		if p.nregs >= p.lim.MaxRegions {
			return &LimitError{Limit: "regions", Value: int64(p.nregs) + 1, Max: int64(p.lim.MaxRegions)}
		}
		k := p.pairOf[s] // in the run
		if k < 0 {
			k = int32(len(p.pairs) - p.base)
			p.pairOf[s] = k
			p.pairs = append(p.pairs, Pair{Src: s, Dst: d})
		}
		reg.pair = k
		p.regs = p.regs[:len(p.regs)+1]
		p.nregs++
		pr := &p.pairs[p.base+int(k)]
		pr.Bytes = o.add(pr.Bytes, bytes)
		pr.Fragments = o.add(pr.Fragments, frags)
		if o.bad {
			return &LayoutError{Kind: ErrLayout, Rank: d, Piece: pi, Reason: "pair bytes overflow int64"}
		}
		if pr.Fragments > p.lim.MaxFragments {
			return &LimitError{Limit: fmt.Sprintf("fragments of pair %d->%d", s, d), Value: pr.Fragments, Max: p.lim.MaxFragments}
		}
	}
	return nil
}

// planOffset is the offset, from the piece's first element, of the
// lowest byte of the indices sub selects of interval iv of a piece whose
// stride along it is stride. Like region, it computes offsets of elements
// of a validated piece, which lie within its rank's region: nothing
// overflows.
func planOffset(iv, sub Interval, stride int64) int64 {
	off := planIndex(iv, sub.Lo) * stride
	if stride < 0 {
		if n := length(sub); n > 1 {
			off += (n - 1) * (sub.Step / iv.Step) * stride
		}
	}
	return off
}

// region maps the intersection ivs from source piece sp to destination
// piece dp, where its lowest byte is dstOff, and compacts it into reg
// (but its pair), writing its loops to the last chunk. It returns the
// region's number of fragments. The pieces are validated: every offset computed is
// that of an element of a piece, within its rank's region, every stride
// at most a piece's extent, every count at most its elements, so nothing
// overflows but the test whether two loops fuse, which is checked.
func (p *planWorker) region(reg *planRegion, sp, dp *Piece, ivs []Interval, dstOff int64) int64 {
	srcOff := sp.Offset
	loops := p.loops[:0]
	for a, iv := range ivs {
		sa, da := sp.Box[a], dp.Box[a]
		ss, ds := sp.Strides[a], dp.Strides[a]
		srcOff += planIndex(sa, iv.Lo) * ss
		n := length(iv)
		if n == 1 {
			continue
		}
		if iv.Step != 1 { // (with step 1, both boxes hold consecutive indices: step 1)
			ss *= iv.Step / sa.Step
			ds *= iv.Step / da.Step
		}
		if ds < 0 {
			// Walk the loop from its last index, so that the
			// destination ascends (dstOff is that of the last index
			// already).
			srcOff += (n - 1) * ss
			ss, ds = -ss, -ds
		}
		loops = append(loops, planLoop{n: n, ss: ss, ds: ds})
	}
	// Destination stride descending (insertion sort: few loops, stable).
	for i := 1; i < len(loops); i++ {
		for j := i; j > 0 && loops[j-1].ds < loops[j].ds; j-- {
			loops[j-1], loops[j] = loops[j], loops[j-1]
		}
	}
	// Fuse adjacent loops that form one progression on both sides.
	// Fusing never creates a new opportunity with the loop further out:
	// the fused loop spans what the outer one of the two did.
	k := 0
	for _, l := range loops {
		if k > 0 {
			t := &loops[k-1]
			if planMulIs(l.ss, l.n, t.ss) && planMulIs(l.ds, l.n, t.ds) {
				*t = planLoop{n: t.n * l.n, ss: l.ss, ds: l.ds}
				continue
			}
		}
		loops[k] = l
		k++
	}
	loops = loops[:k]
	// Fold innermost loops that are contiguous on both sides.
	inner := p.elem
	for len(loops) > 0 {
		l := loops[len(loops)-1]
		if l.ss != inner || l.ds != inner {
			break
		}
		inner *= l.n
		loops = loops[:len(loops)-1]
	}
	// (loops has the capacity of every axis: its array is p.loops'.)
	n := len(loops)
	if c := len(p.chunks) - 1; c < 0 || len(p.chunks[c])-p.used < 3*n {
		p.chunks = append(p.chunks, make([]int64, max(planLoopChunk, 3*n)))
		p.used = 0
	}
	c := len(p.chunks) - 1
	*reg = planRegion{srcOff: srcOff, dstOff: dstOff, inner: inner, chunk: int32(c), off: int32(p.used), n: int32(n)}
	buf := p.chunks[c][p.used:][:3*n]
	frags := int64(1)
	for i, l := range loops {
		buf[i], buf[n+i], buf[2*n+i] = l.n, l.ss, l.ds
		frags *= l.n
	}
	p.used += 3 * n
	return frags
}

// planAxisIndex indexes the distinct source boxes by their span along
// one axis, sorted by start. When no span ends before one that starts
// earlier (blocks, pages, cyclic parts of equal length), the ends ascend
// too, and the spans that overlap [lo, hi) are the run that two binary
// searches find: O(log n + k) for k of them. Otherwise a segment tree of
// the largest end over ranges of that order finds them, visiting
// O((1+k)*log n) nodes.
type planAxisIndex struct {
	axis   int
	ids    []int32 // the boxes, by span start; nil when that is their order
	lo, hi []int64 // their spans, in that order
	nested bool    // some span ends before an earlier one: queries use the tree
	max    []int64 // max[size+i] is hi[i]; max[j] = max(max[2j], max[2j+1])
	size   int     // leaves, a power of two
}

// build indexes the spans [lo[i], hi[i]) of boxes i along axis, whose
// extent bounds them, and keeps lo and hi. Spans already in order of
// start (the source's sweep axis) need no sorting; otherwise it sorts by
// counting where the extent is at most 4 times the number of boxes.
func (x *planAxisIndex) build(axis int, lo, hi []int64, extent int64) {
	n := len(lo)
	*x = planAxisIndex{axis: axis, lo: lo, hi: hi}
	if !slices.IsSorted(lo) {
		x.ids = make([]int32, n)
		if extent <= 4*int64(n) {
			// A stable counting sort by start.
			next := make([]int32, extent+1)
			for _, v := range lo {
				next[v+1]++
			}
			for i := 1; i < len(next); i++ {
				next[i] += next[i-1]
			}
			for i, v := range lo {
				x.ids[next[v]] = int32(i)
				next[v]++
			}
		} else {
			for i := range x.ids {
				x.ids[i] = int32(i)
			}
			slices.SortFunc(x.ids, func(a, b int32) int { return cmp.Or(cmp.Compare(lo[a], lo[b]), cmp.Compare(a, b)) })
		}
		x.lo, x.hi = make([]int64, n), make([]int64, n)
		for i, id := range x.ids {
			x.lo[i], x.hi[i] = lo[id], hi[id]
		}
	}
	for i := 1; i < n && !x.nested; i++ {
		x.nested = x.hi[i] < x.hi[i-1]
	}
	if !x.nested {
		return
	}
	x.size = 1
	for x.size < n {
		x.size *= 2
	}
	x.max = make([]int64, 2*x.size)
	for i := range x.max[x.size:] {
		x.max[x.size+i] = math.MinInt64
	}
	copy(x.max[x.size:], x.hi)
	for j := x.size - 1; j >= 1; j-- {
		x.max[j] = max(x.max[2*j], x.max[2*j+1])
	}
}

// id is the box at position i of the order.
func (x *planAxisIndex) id(i int) int32 {
	if x.ids == nil {
		return int32(i)
	}
	return x.ids[i]
}

// query appends to out the boxes whose span overlaps [lo, hi), in order
// of span start.
func (x *planAxisIndex) query(lo, hi int64, out []int32) []int32 {
	end, _ := slices.BinarySearch(x.lo, hi) // positions [0, end) start before hi
	if !x.nested {
		start, _ := slices.BinarySearch(x.hi[:end], lo+1) // the first end after lo
		for i := start; i < end; i++ {
			out = append(out, x.id(i))
		}
		return out
	}
	if end == 0 {
		return out
	}
	return x.collect(1, 0, x.size, end, lo, out)
}

func (x *planAxisIndex) collect(node, nlo, nhi, end int, lo int64, out []int32) []int32 {
	if nlo >= end || x.max[node] <= lo {
		return out
	}
	if node >= x.size {
		return append(out, x.id(nlo))
	}
	mid := (nlo + nhi) / 2
	out = x.collect(2*node, nlo, mid, end, lo, out)
	return x.collect(2*node+1, mid, nhi, end, lo, out)
}

// planIndex is iv.Index(x), without a division for a step of 1.
func planIndex(iv Interval, x int64) int64 {
	if iv.Step == 1 {
		return x - iv.Lo
	}
	return iv.Index(x)
}

// planArith is int64 arithmetic that records overflow instead of
// wrapping; once bad, results are meaningless and the caller fails.
type planArith struct{ bad bool }

func (o *planArith) add(a, b int64) int64 {
	c := a + b
	if (c > a) != (b > 0) {
		o.bad = true
	}
	return c
}

func (o *planArith) mul(a, b int64) int64 {
	if uint64(a)+1<<31 < 1<<32 && uint64(b)+1<<31 < 1<<32 {
		return a * b // both in [-2^31, 2^31): no overflow
	}
	if a == 0 || b == 0 {
		return 0
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		o.bad = true
	}
	return c
}

// planMulIs reports whether x*n == want, without overflow.
func planMulIs(x, n, want int64) bool {
	var o planArith
	return o.mul(x, n) == want && !o.bad
}

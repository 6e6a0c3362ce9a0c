package reshard

import (
	"cmp"
	"fmt"
	"math"
	"slices"
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
func NewPlan(src, dst *Layout, lim Limits) (*Plan, error) {
	if src == nil || dst == nil {
		return nil, &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: "nil layout"}
	}
	lim = lim.withDefaults()
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	boxes, err := src.validate(lim, sc)
	if err != nil {
		return nil, err
	}
	dsc := scratchPool.Get().(*scratch)
	_, err = dst.validate(lim, dsc)
	scratchPool.Put(dsc)
	if err != nil {
		return nil, err
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

// planner holds the state of one NewPlan call.
type planner struct {
	src, dst *Layout
	boxes    *layoutBoxes // the source's, as validating it found them
	lim      Limits
	axes     int
	elem     int64
	index    planAxisIndex

	load   []int64 // bytes assigned to each source rank
	pairs  []Pair
	base   int     // pairs[base:] are the current destination rank's
	pairOf []int32 // pair of each source rank for the current destination rank, -1 if none
	nregs  int     // regions of all ranks so far

	// The current destination rank's regions and the number of regions
	// of each of its pairs.
	regs  []planRegion
	pairN []int
	// The loops of all regions, in blocks that the plan's Regions share.
	chunks [][]int64

	loops []planLoop
	cands []planCand
	found []int32
	ivs   []Interval
}

// planCand is the intersection of the current destination piece with a
// distinct source box: its intervals are planner.ivs[iv:][:axes].
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
// and it belongs to pairs[pair]. Holding no pointers, it is cheap to
// grow.
type planRegion struct {
	srcOff, dstOff, inner int64
	chunk, off            int32
	n, pair               int32
}

// planLoopChunk is the size of the blocks of loops (int64s) that the
// plan's Regions slice, each with its capacity cut to its own loops: the
// loops are written once and never copied.
const planLoopChunk = 1 << 12

// planLayouts plans src into dst; the layouts are validated and hold the
// same tensor, and boxes is what validating src returned, whose scratch
// it uses too. Validate rejects negative strides; the planner handles
// them anyway (it walks such a loop from its last index, so that the
// destination still ascends), so relaxing Validate needs no change here.
func planLayouts(src, dst *Layout, boxes *layoutBoxes, lim Limits) (*Plan, error) {
	p := &planner{
		src:    src,
		dst:    dst,
		boxes:  boxes,
		lim:    lim,
		axes:   len(src.Tensor.Shape),
		elem:   src.Tensor.ElemSize,
		load:   make([]int64, len(src.Ranks)),
		pairOf: make([]int32, len(src.Ranks)),
		loops:  make([]planLoop, 0, len(src.Tensor.Shape)),
		regs:   boxes.sc.regs[:0],
	}
	defer func() { boxes.sc.regs = p.regs[:0] }()
	for i := range p.pairOf {
		p.pairOf[i] = -1
	}
	p.buildIndex()

	var total int64
	var o planArith
	for d := range dst.Ranks {
		for pi := range dst.Ranks[d].Pieces {
			dp := &dst.Ranks[d].Pieces[pi]
			if err := p.checkPiece(dp, d, pi); err != nil {
				return nil, err
			}
			n := planBoxLen(dp.Box, &o)
			if n == 0 {
				continue
			}
			total = o.add(total, o.mul(n, p.elem))
			if o.bad {
				return nil, &LayoutError{Kind: ErrLayout, Rank: d, Piece: pi, Reason: "destination bytes overflow int64"}
			}
			if err := p.planPiece(d, pi, dp); err != nil {
				return nil, err
			}
		}
		p.flush()
	}
	slices.SortFunc(p.pairs, func(a, b Pair) int {
		return cmp.Or(cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst))
	})
	return &Plan{Tensor: src.Tensor, Src: src, Dst: dst, Pairs: p.pairs, Bytes: total}, nil
}

// flush hands the current destination rank's regions to its pairs,
// pairs[base:], in one array of Regions, and readies the planner for the
// next rank.
func (p *planner) flush() {
	pairs := p.pairs[p.base:]
	if len(p.regs) > 0 {
		all := make([]Region, len(p.regs))
		// pairN becomes the next free slot of each pair in all.
		at := 0
		for i, n := range p.pairN {
			p.pairN[i] = at
			at += n
		}
		for _, r := range p.regs {
			next := &p.pairN[int(r.pair)-p.base]
			reg := &all[*next]
			*next++
			// Field by field: the slices of a fresh Region are nil already.
			reg.SrcOff, reg.DstOff, reg.Inner = r.srcOff, r.dstOff, r.inner
			if n := int(r.n); n > 0 {
				buf := p.chunks[r.chunk][r.off:][: 3*n : 3*n]
				reg.Counts = buf[0:n:n]
				reg.SrcStrides = buf[n : 2*n : 2*n]
				reg.DstStrides = buf[2*n : 3*n : 3*n]
			}
		}
		at = 0
		for i := range pairs {
			end := p.pairN[i]
			pairs[i].Regions = all[at:end:end]
			at = end
		}
	}
	for i := range pairs {
		p.pairOf[pairs[i].Src] = -1
	}
	p.base = len(p.pairs)
	p.regs, p.pairN = p.regs[:0], p.pairN[:0]
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
// that planPiece will test.
func (p *planner) buildIndex() {
	b := p.boxes
	n := len(b.distinct) - 1
	best := 0
	if p.axes > 1 && n > 1 {
		bestCount := int64(math.MaxInt64)
		for a := range p.axes {
			if count, ok := p.overlaps(a); ok && count < bestCount {
				best, bestCount = a, count
			}
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
func (p *planner) planPiece(d, pi int, dp *Piece) error {
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
		k := p.pairOf[s]
		if k < 0 {
			k = int32(len(p.pairs))
			p.pairOf[s] = k
			p.pairs = append(p.pairs, Pair{Src: s, Dst: d})
			p.pairN = append(p.pairN, 0)
		}
		reg.pair = k
		p.regs = p.regs[:len(p.regs)+1]
		p.nregs++
		p.pairN[int(k)-p.base]++
		pr := &p.pairs[k]
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
func (p *planner) region(reg *planRegion, sp, dp *Piece, ivs []Interval, dstOff int64) int64 {
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
	p.loops = loops

	n := len(loops)
	if c := len(p.chunks) - 1; c < 0 || cap(p.chunks[c])-len(p.chunks[c]) < 3*n {
		p.chunks = append(p.chunks, make([]int64, 0, max(planLoopChunk, 3*n)))
	}
	c := len(p.chunks) - 1
	*reg = planRegion{srcOff: srcOff, dstOff: dstOff, inner: inner, chunk: int32(c), off: int32(len(p.chunks[c])), n: int32(n)}
	buf := p.chunks[c][len(p.chunks[c]):][:3*n]
	frags := int64(1)
	for i, l := range loops {
		buf[i], buf[n+i], buf[2*n+i] = l.n, l.ss, l.ds
		frags *= l.n
	}
	p.chunks[c] = p.chunks[c][:len(p.chunks[c])+3*n]
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

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
// Cost: with P source pieces, D destination pieces and A axes, grouping
// the source replicas takes O(P*A) (hashing). Picking the index axis
// and building the index take O(A*(P + n*log n + D*log n)), where n is
// the number of distinct spans of the source boxes along an axis (2048
// token ranges for the 16384 pages of a KV cache paged by 16 tokens in 8
// head groups). Each destination piece then costs O((1+k)*log n + c*A),
// where k is the number of distinct source spans that overlap the
// piece's along the index axis and c the number of source boxes on them
// (the candidates tested), and each region O(A). The index axis is the
// one with the fewest candidates over all destination pieces, counted
// exactly: the token axis of a paged KV cache, the head axis of a
// tensor-parallel weight. When the pieces of either layout tile the index
// axis in blocks, the candidates are the boxes a piece meets along that
// axis, so the work follows the regions and pieces, not the elements;
// only when the boxes overlap along every axis (cyclic placements on all
// axes) can it approach all pairs of boxes and pieces.
func NewPlan(src, dst *Layout, lim Limits) (*Plan, error) {
	if src == nil || dst == nil {
		return nil, &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: "nil layout"}
	}
	lim = lim.withDefaults()
	if err := src.Validate(lim); err != nil {
		return nil, err
	}
	if err := dst.Validate(lim); err != nil {
		return nil, err
	}
	if !slices.Equal(src.Tensor.Shape, dst.Tensor.Shape) || src.Tensor.ElemSize != dst.Tensor.ElemSize {
		return nil, &LayoutError{
			Kind: ErrMismatch, Rank: -1, Piece: -1,
			Reason: fmt.Sprintf("source holds %v x %d bytes, destination %v x %d bytes",
				src.Tensor.Shape, src.Tensor.ElemSize, dst.Tensor.Shape, dst.Tensor.ElemSize),
		}
	}
	return planLayouts(src, dst, lim)
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

// planRegionChunk is the number of regions per block of planner.regs.
const planRegionChunk = 1 << 12

// planner holds the state of one NewPlan call.
type planner struct {
	src, dst *Layout
	lim      Limits
	axes     int
	elem     int64

	boxes   []planSrcBox
	members []planMember // replicas of boxes[i]: members[boxes[i].first:][:boxes[i].n]
	spans   planSpanSet
	index   planAxisIndex

	load    []int64 // bytes assigned to each source rank
	pairs   []Pair
	pairN   []int          // regions of each pair
	pairOf  []int32        // pair of each source rank for the current destination rank, -1 if none
	touched []int          // source ranks whose pairOf is set
	regs    [][]planRegion // in chunks of planRegionChunk, so that growing copies nothing
	nregs   int
	slab    []int64 // the loops of regs
	loops   []planLoop
	cands   []planCand
	found   []int32
	ivs     []Interval
}

// planSrcBox is one distinct box of the source layout and the range of
// its replicas in planner.members.
type planSrcBox struct {
	box      []Interval
	first, n int32
}

// planMember is one replica of a source box.
type planMember struct {
	rank, piece int32
}

// planCand is the intersection of the current destination piece with a
// source box: its intervals are planner.ivs[iv:][:axes].
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
// source strides, destination strides) are slab[loop:][:3*n], and it
// belongs to pairs[pair]. Holding no pointers, it is cheap to grow.
type planRegion struct {
	srcOff, dstOff, inner int64
	loop                  int
	n, pair               int32
}

// planLayouts plans src into dst; the layouts are validated and hold the
// same tensor. Validate rejects negative strides; the planner handles
// them anyway (it walks such a loop from its last index, so that the
// destination still ascends), so relaxing Validate needs no change here.
func planLayouts(src, dst *Layout, lim Limits) (*Plan, error) {
	p := &planner{
		src:    src,
		dst:    dst,
		lim:    lim,
		axes:   len(src.Tensor.Shape),
		elem:   src.Tensor.ElemSize,
		load:   make([]int64, len(src.Ranks)),
		pairOf: make([]int32, len(src.Ranks)),
	}
	for i := range p.pairOf {
		p.pairOf[i] = -1
	}
	p.loops = make([]planLoop, 0, p.axes)
	if err := p.groupSources(); err != nil {
		return nil, err
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
		for _, s := range p.touched {
			p.pairOf[s] = -1
		}
		p.touched = p.touched[:0]
	}
	p.finish()
	return &Plan{Tensor: src.Tensor, Src: src, Dst: dst, Pairs: p.pairs, Bytes: total}, nil
}

// finish turns the regions built into the pairs' Regions (one backing
// array for all) and sorts the pairs.
func (p *planner) finish() {
	all := make([]Region, p.nregs)
	next := make([]int, len(p.pairs)) // next free slot of each pair in all
	at := 0
	for k := range p.pairs {
		next[k] = at
		at += p.pairN[k]
	}
	for _, chunk := range p.regs {
		for _, r := range chunk {
			reg := &all[next[r.pair]]
			next[r.pair]++
			*reg = Region{SrcOff: r.srcOff, DstOff: r.dstOff, Inner: r.inner}
			if n := int(r.n); n > 0 {
				buf := p.slab[r.loop : r.loop+3*n : r.loop+3*n]
				reg.Counts = buf[0:n:n]
				reg.SrcStrides = buf[n : 2*n : 2*n]
				reg.DstStrides = buf[2*n : 3*n : 3*n]
			}
		}
	}
	at = 0
	for k := range p.pairs {
		n := p.pairN[k]
		p.pairs[k].Regions = all[at : at+n : at+n]
		at += n
	}
	slices.SortFunc(p.pairs, func(a, b Pair) int {
		return cmp.Or(cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst))
	})
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
		n = o.mul(n, iv.Len())
	}
	return n
}

// planTableSize is the size of an open-addressing table for n keys: a
// power of two, at least 2n.
func planTableSize(n int) int {
	size := 1
	for size < 2*n {
		size *= 2
	}
	return size
}

// groupSources collects the distinct non-empty source boxes and their
// replicas, in rank order. Boxes are identified by the indices they
// select (Lo, Len and, for more than one index, Step), through an
// open-addressing hash table.
func (p *planner) groupSources() error {
	npieces := 0
	for s := range p.src.Ranks {
		npieces += len(p.src.Ranks[s].Pieces)
	}
	size := planTableSize(npieces)
	table := make([]int32, size) // box id + 1, 0 when empty
	p.boxes = make([]planSrcBox, 0, npieces)
	hashes := make([]uint64, 0, npieces) // hash of each box
	counts := make([]int32, 0, npieces)  // replicas of each box
	gid := make([]int32, 0, npieces)     // box of each piece, -1 if empty
	for s := range p.src.Ranks {
		for pi := range p.src.Ranks[s].Pieces {
			sp := &p.src.Ranks[s].Pieces[pi]
			if err := p.checkPiece(sp, s, pi); err != nil {
				return err
			}
			h, ok := planHashBox(sp.Box)
			if !ok {
				gid = append(gid, -1) // empty
				continue
			}
			i := int(h & uint64(size-1))
			for table[i] != 0 {
				id := table[i] - 1
				if hashes[id] == h && planSameBox(p.boxes[id].box, sp.Box) {
					break
				}
				i = (i + 1) & (size - 1)
			}
			if table[i] == 0 {
				table[i] = int32(len(p.boxes)) + 1
				p.boxes = append(p.boxes, planSrcBox{box: sp.Box})
				hashes = append(hashes, h)
				counts = append(counts, 0)
			}
			id := table[i] - 1
			counts[id]++
			gid = append(gid, id)
		}
	}
	var first int32
	for i := range p.boxes {
		p.boxes[i].first = first
		first += counts[i]
	}
	p.members = make([]planMember, first)
	k := 0
	for s := range p.src.Ranks {
		for pi := range p.src.Ranks[s].Pieces {
			id := gid[k]
			k++
			if id < 0 {
				continue
			}
			b := &p.boxes[id]
			p.members[b.first+b.n] = planMember{rank: int32(s), piece: int32(pi)}
			b.n++
		}
	}
	return nil
}

// planMix folds v into the hash h.
func planMix(h uint64, v int64) uint64 {
	h ^= uint64(v)
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>31
}

// planHashBox hashes the indices a box selects; ok is false for an
// empty box.
func planHashBox(box []Interval) (h uint64, ok bool) {
	h = 0x9e3779b97f4a7c15
	for _, iv := range box {
		n := iv.Len()
		if n == 0 {
			return 0, false
		}
		h = planMix(planMix(h, iv.Lo), n)
		if n > 1 {
			h = planMix(h, iv.Step)
		}
	}
	return h, true
}

// planSameBox reports whether two boxes select the same indices.
func planSameBox(a, b []Interval) bool {
	for i := range a {
		x, y := a[i], b[i]
		n := x.Len()
		if x.Lo != y.Lo || n != y.Len() || n > 1 && x.Step != y.Step {
			return false
		}
	}
	return true
}

// planSpan is the envelope [Lo, Last+1) of a non-empty interval.
func planSpan(iv Interval) (lo, hi int64) { return iv.Lo, iv.Last() + 1 }

// planSpanSet is the distinct spans of the source boxes along one axis
// (many boxes share one: the pages of all head groups of one token
// range), with the boxes of each.
type planSpanSet struct {
	lo, hi []int64 // distinct spans, in order of first appearance
	n      []int32 // boxes per span
	of     []int32 // span of each box
	table  []int32 // scratch hash table: span + 1, 0 when empty
}

// collect fills the set for the given axis.
func (ss *planSpanSet) collect(boxes []planSrcBox, axis int) {
	size := planTableSize(len(boxes))
	if len(ss.table) != size {
		ss.table = make([]int32, size)
	} else {
		clear(ss.table)
	}
	ss.lo, ss.hi, ss.n, ss.of = ss.lo[:0], ss.hi[:0], ss.n[:0], ss.of[:0]
	for _, b := range boxes {
		lo, hi := planSpan(b.box[axis])
		i := int(planMix(planMix(0, lo), hi) & uint64(size-1))
		for ss.table[i] != 0 {
			id := ss.table[i] - 1
			if ss.lo[id] == lo && ss.hi[id] == hi {
				break
			}
			i = (i + 1) & (size - 1)
		}
		if ss.table[i] == 0 {
			ss.table[i] = int32(len(ss.lo)) + 1
			ss.lo = append(ss.lo, lo)
			ss.hi = append(ss.hi, hi)
			ss.n = append(ss.n, 0)
		}
		id := ss.table[i] - 1
		ss.n[id]++
		ss.of = append(ss.of, id)
	}
}

// planCounted is a sorted list of span ends with the number of boxes at
// or before each: below(x) counts the boxes whose end is < x.
type planCounted struct {
	v   []int64 // ascending, distinct
	cum []int64 // cum[i]: boxes with an end < v[i]; one more entry for all
}

func (c *planCounted) fill(vals []int64, n []int32) {
	type vn struct {
		v int64
		n int32
	}
	s := make([]vn, len(vals))
	for i := range vals {
		s[i] = vn{vals[i], n[i]}
	}
	slices.SortFunc(s, func(a, b vn) int { return cmp.Compare(a.v, b.v) })
	c.v, c.cum = c.v[:0], append(c.cum[:0], 0)
	for _, e := range s {
		if k := len(c.v); k > 0 && c.v[k-1] == e.v {
			c.cum[k] += int64(e.n)
			continue
		}
		c.v = append(c.v, e.v)
		c.cum = append(c.cum, c.cum[len(c.cum)-1]+int64(e.n))
	}
}

func (c *planCounted) below(x int64) int64 {
	i, _ := slices.BinarySearch(c.v, x)
	return c.cum[i]
}

// buildIndex picks the index axis and indexes the source boxes along it.
// The index axis is the one with the fewest pairs of (source box,
// destination piece) whose spans along it overlap: the candidates that
// planPiece will test. Counting them takes a sort of the distinct spans
// and two binary searches per destination piece: a source span overlaps
// [lo, hi) unless it ends at or before lo or starts at or after hi, never
// both.
func (p *planner) buildIndex() {
	best := 0
	if p.axes > 1 && len(p.boxes) > 1 {
		var dsts []*Piece // non-empty destination pieces
		for d := range p.dst.Ranks {
			for i := range p.dst.Ranks[d].Pieces {
				dp := &p.dst.Ranks[d].Pieces[i]
				if !slices.ContainsFunc(dp.Box, func(iv Interval) bool { return iv.Len() == 0 }) {
					dsts = append(dsts, dp)
				}
			}
		}
		bestCount := int64(math.MaxInt64)
		for a := range p.axes {
			if count, ok := p.overlaps(a, dsts); ok && count < bestCount {
				best, bestCount = a, count
			}
		}
	}
	p.spans.collect(p.boxes, best)
	p.index.build(&p.spans, best)
}

// overlaps counts the pairs of (source box, destination piece among
// dsts) whose spans along axis a overlap. It returns false, counting
// nothing, when all source boxes span the same range along a, which
// makes the axis useless as an index.
func (p *planner) overlaps(a int, dsts []*Piece) (int64, bool) {
	p.spans.collect(p.boxes, a)
	if len(p.spans.lo) == 1 {
		return 0, false
	}
	var starts, ends planCounted
	starts.fill(p.spans.lo, p.spans.n)
	ends.fill(p.spans.hi, p.spans.n)
	var count int64
	for _, dp := range dsts {
		lo, hi := planSpan(dp.Box[a])
		count += starts.below(hi) - ends.below(lo+1)
	}
	return count, true
}

// planPiece produces the regions of destination piece pi of rank d.
func (p *planner) planPiece(d, pi int, dp *Piece) error {
	lo, hi := planSpan(dp.Box[p.index.axis])
	p.found = p.index.query(lo, hi, p.found[:0])
	p.cands = p.cands[:0]
	p.ivs = p.ivs[:0]
	var o planArith
	for _, b := range p.found {
		sb := p.boxes[b].box
		iv := len(p.ivs)
		empty := false
		for a := range p.axes {
			x := dp.Box[a].Intersect(sb[a])
			if x.Len() == 0 {
				empty = true
				break
			}
			p.ivs = append(p.ivs, x)
		}
		if empty {
			p.ivs = p.ivs[:iv]
			continue
		}
		start := planStart(dp, p.ivs[iv:], &o)
		if o.bad {
			return &LayoutError{Kind: ErrLayout, Rank: d, Piece: pi, Reason: "byte offsets overflow int64"}
		}
		p.cands = append(p.cands, planCand{box: b, iv: int32(iv), dstStart: start})
	}
	slices.SortStableFunc(p.cands, func(a, b planCand) int { return cmp.Compare(a.dstStart, b.dstStart) })

	for _, c := range p.cands {
		ivs := p.ivs[c.iv:][:p.axes]
		box := &p.boxes[c.box]
		m := p.members[box.first]
		for _, r := range p.members[box.first+1:][:box.n-1] {
			if p.load[r.rank] < p.load[m.rank] {
				m = r
			}
		}
		s := int(m.rank)
		sp := &p.src.Ranks[s].Pieces[m.piece]
		reg, frags := p.region(sp, dp, ivs, &o)
		bytes := o.mul(frags, reg.inner)
		p.load[s] = o.add(p.load[s], bytes)
		if o.bad {
			return &LayoutError{Kind: ErrLayout, Rank: d, Piece: pi, Reason: "byte offsets overflow int64"}
		}

		if p.nregs >= p.lim.MaxRegions {
			return &LimitError{Limit: "regions", Value: int64(p.nregs) + 1, Max: int64(p.lim.MaxRegions)}
		}
		k := p.pairOf[s]
		if k < 0 {
			k = int32(len(p.pairs))
			p.pairOf[s] = k
			p.touched = append(p.touched, s)
			p.pairs = append(p.pairs, Pair{Src: s, Dst: d})
			p.pairN = append(p.pairN, 0)
		}
		reg.pair = k
		if last := len(p.regs) - 1; last < 0 || len(p.regs[last]) == cap(p.regs[last]) {
			p.regs = append(p.regs, make([]planRegion, 0, planRegionChunk))
		}
		last := &p.regs[len(p.regs)-1]
		*last = append(*last, reg)
		p.nregs++
		p.pairN[k]++
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

// planStart is the lowest destination byte offset of the intersection
// ivs within destination piece dp: the region's DstOff.
func planStart(dp *Piece, ivs []Interval, o *planArith) int64 {
	off := dp.Offset
	for a, iv := range ivs {
		db := dp.Box[a]
		off = o.add(off, o.mul(planIndex(db, iv.Lo), dp.Strides[a]))
		if n := iv.Len(); n > 1 && dp.Strides[a] < 0 {
			off = o.add(off, o.mul(n-1, o.mul(iv.Step/db.Step, dp.Strides[a])))
		}
	}
	return off
}

// region maps the intersection ivs from source piece sp to destination
// piece dp and compacts it, appending its loops to the slab. It returns
// the region and its number of fragments.
func (p *planner) region(sp, dp *Piece, ivs []Interval, o *planArith) (planRegion, int64) {
	srcOff, dstOff := sp.Offset, dp.Offset
	loops := p.loops[:0]
	for a, iv := range ivs {
		sb, db := sp.Box[a], dp.Box[a]
		srcOff = o.add(srcOff, o.mul(planIndex(sb, iv.Lo), sp.Strides[a]))
		dstOff = o.add(dstOff, o.mul(planIndex(db, iv.Lo), dp.Strides[a]))
		n := iv.Len()
		if n == 1 {
			continue
		}
		ss := o.mul(planIndex(Interval{Step: sb.Step}, iv.Step), sp.Strides[a])
		ds := o.mul(planIndex(Interval{Step: db.Step}, iv.Step), dp.Strides[a])
		if ds < 0 {
			// Walk the loop from its last index, so that the
			// destination ascends.
			srcOff = o.add(srcOff, o.mul(n-1, ss))
			dstOff = o.add(dstOff, o.mul(n-1, ds))
			ss, ds = o.neg(ss), o.neg(ds)
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
				*t = planLoop{n: o.mul(t.n, l.n), ss: l.ss, ds: l.ds}
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
		inner = o.mul(inner, l.n)
		loops = loops[:len(loops)-1]
	}
	p.loops = loops

	reg := planRegion{srcOff: srcOff, dstOff: dstOff, inner: inner, loop: len(p.slab), n: int32(len(loops))}
	frags := int64(1)
	for _, l := range loops {
		p.slab = append(p.slab, l.n)
		frags = o.mul(frags, l.n)
	}
	for _, l := range loops {
		p.slab = append(p.slab, l.ss)
	}
	for _, l := range loops {
		p.slab = append(p.slab, l.ds)
	}
	return reg, frags
}

// planAxisIndex indexes the source boxes by their span along one axis:
// the distinct spans sorted by start, with a segment tree of the largest
// end over ranges of that order, and the boxes of each span. A query for
// the boxes whose span overlaps [lo, hi) visits O((1+k)*log n) nodes for
// n distinct spans, k of which overlap, and then lists their boxes.
type planAxisIndex struct {
	axis  int
	lo    []int64 // span starts, ascending
	max   []int64 // max[size+i] is the end of span i; max[j] = max(max[2j], max[2j+1])
	size  int     // leaves, a power of two
	first []int32 // boxes of span i: boxes[first[i]:first[i+1]]
	boxes []int32
}

func (x *planAxisIndex) build(ss *planSpanSet, axis int) {
	n := len(ss.lo)
	type entry struct {
		lo, hi int64
		id     int32
	}
	order := make([]entry, n)
	for i := range order {
		order[i] = entry{lo: ss.lo[i], hi: ss.hi[i], id: int32(i)}
	}
	slices.SortFunc(order, func(a, b entry) int { return cmp.Compare(a.lo, b.lo) })
	pos := make([]int32, n) // position of each span in order
	for i, e := range order {
		pos[e.id] = int32(i)
	}
	x.axis = axis
	x.size = 1
	for x.size < n {
		x.size *= 2
	}
	x.lo = make([]int64, n)
	x.max = make([]int64, 2*x.size)
	for i := range x.max {
		x.max[i] = math.MinInt64
	}
	x.first = make([]int32, n+1)
	for i, e := range order {
		x.lo[i], x.max[x.size+i] = e.lo, e.hi
		x.first[i+1] = x.first[i] + ss.n[e.id]
	}
	for j := x.size - 1; j >= 1; j-- {
		x.max[j] = max(x.max[2*j], x.max[2*j+1])
	}
	x.boxes = make([]int32, len(ss.of))
	next := slices.Clone(x.first[:n])
	for b, s := range ss.of {
		i := pos[s]
		x.boxes[next[i]] = int32(b)
		next[i]++
	}
}

// query appends to out the boxes whose span overlaps [lo, hi), in order
// of span start.
func (x *planAxisIndex) query(lo, hi int64, out []int32) []int32 {
	end, _ := slices.BinarySearch(x.lo, hi) // positions [0, end) start before hi
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
		return append(out, x.boxes[x.first[nlo]:x.first[nlo+1]]...)
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

func (o *planArith) neg(a int64) int64 {
	if a == math.MinInt64 {
		o.bad = true
	}
	return -a
}

// planMulIs reports whether x*n == want, without overflow.
func planMulIs(x, n, want int64) bool {
	var o planArith
	return o.mul(x, n) == want && !o.bad
}

package reshard

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
)

// Validate checks that l is a well-formed layout of l.Tensor within lim
// (a zero field of lim takes its default). It returns nil, a
// *LayoutError wrapping ErrLayout, ErrOverlap or ErrCoverage with the rank
// and piece at fault, or a *LimitError wrapping ErrLimit. It changes
// nothing.
//
// The rules, checked in this order (the first failure is reported):
//
//   - The tensor has 1 to lim.MaxAxes axes (more is a *LimitError
//     "axes"), every extent and ElemSize are at least 1, and its size in
//     bytes fits in an int64. There is at least one rank, and the pieces
//     of all ranks number at most lim.MaxPieces and at most 2^31-1
//     (*LimitError "pieces").
//   - No rank's RegionBytes is negative. Every piece has one Interval and one stride per axis; every
//     interval is non-empty, has Step >= 1 and lies inside the shape
//     (0 <= Lo < Hi <= Shape[a]); strides are >= 0, and 0 only on an axis
//     whose interval selects a single index; Offset >= 0; and the byte
//     after the piece's last element, Offset + sum (Len-1)*Strides +
//     ElemSize, lies within RegionBytes. Violations are ErrLayout.
//   - No two elements of a piece overlap in memory. Validate sorts the
//     axes that select more than one index by stride and requires each
//     stride to be at least the byte extent of the axes inside it
//     (ElemSize for the innermost), so that the piece is a nest of blocks,
//     each within one stride of the next. This accepts every nested
//     arrangement: row-major, column-major, padded rows or planes,
//     permuted axes, a page of a page pool. It refuses exotic
//     interleavings whose elements happen not to collide (an axis whose
//     stride falls inside the extent of a smaller one), which common
//     layouts do not use. ErrOverlap.
//   - Pieces of one rank occupy separate byte ranges: the spans
//     [Offset, last byte) of two pieces of a rank must not intersect, even
//     where their elements would interleave without colliding (describe
//     such an arrangement as one piece with a stepped interval where it
//     is one).
//     ErrOverlap.
//   - Two pieces that select a common element must be replicas: have
//     identical boxes (select the same indices) and lie on different
//     ranks. Anything else, including two pieces of one rank in the same
//     place of the tensor, is ErrOverlap, reported at the later of the two
//     pieces with the other and a common element named in the reason.
//   - The distinct boxes (replicas counted once) cover the tensor: being
//     pairwise disjoint, their element counts must add up to the tensor's.
//     Otherwise ErrCoverage, with the number of elements no rank holds.
//
// Validate never works per element. With n pieces of A axes it reads
// each piece twice: once to check it and to count its intervals along
// every axis, once to sort it. It checks the byte spans of each rank's
// pieces by bucketing their offsets: O(n) where the offsets lie within
// 4n times the shortest span of each other, as a page pool's do, O(n log
// n) by sorting otherwise. It then sweeps the boxes along one axis: the
// axis along which the fewest pairs of boxes meet, counted exactly, in
// O(n + e) for an axis of extent e <= 4n, O(n log n) for a longer one. It
// sorts the boxes along that axis by counting (in at most 4n buckets,
// then sorting each bucket that is not in order), sets replicas aside,
// and tests each pair of distinct boxes whose intervals along the sweep
// axis meet: by their envelopes along a second, filter axis (the axis
// with the next fewest meeting pairs, whose intervals the sort records
// too) and then, if those meet, axis by axis. That is O(n*A + e) plus
// the pairs, e the total extent of the axes counted densely, plus
// O(n log n) per longer axis. For blocked, cyclic and paged layouts
// (paged along any axis) the pairs of a box are its few neighbours,
// which the filter axis mostly tells apart (BenchmarkValidatePaged
// measures 8 ranks of 4096 pages each, paged along an inner axis).
// Validate reuses its buffers across calls: it allocates little.
func (l *Layout) Validate(lim Limits) error {
	sc := scratchPool.Get().(*scratch)
	_, err := l.validate(lim, sc)
	scratchPool.Put(sc)
	return err
}

// scratch holds the large buffers of validating a layout and of planning
// from it. Reused through scratchPool, they spare each call allocating,
// and the collector reclaiming, what it throws away: a plan allocates
// little beyond its own Regions and loops.
type scratch struct {
	refs     []boxRef
	distinct []int32
	ec       []edgeCounts // per axis
	spans    []span
	slots    []int32
	next     []int32
	regs     []planRegion
	lo, hi   []int64
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// grown is s with length n, reusing its array when it is large enough;
// the contents are left as they were.
func grown[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// layoutBoxes is what validating a layout learns about its boxes, which
// planning reads: the pieces sorted along the sweep axis and which of
// them hold the same box. Reading a piece's box in that order costs a
// cache miss or two on a large layout, so the refs carry the spans that
// decide most comparisons.
type layoutBoxes struct {
	l  *Layout
	sc *scratch // holds refs, distinct and counts; the planner's buffers too
	// ax is the sweep axis and ax2 the filter axis (-1 if none); same[a]
	// is set when every box has the same interval along axis a.
	ax, ax2 int
	same    []bool
	// counts are the per-axis counts of all boxes that picked the axes
	// (finished along the axes where boxes differ); the planner reads
	// them, or counts the distinct boxes again in their buffers.
	counts *axisCounts
	// refs are the pieces sorted along the sweep axis, replicas of one
	// box next to each other in rank order; distinct[i] is where the
	// replicas of distinct box i start in refs (one more entry ends the
	// last).
	refs     []boxRef
	distinct []int32
}

// boxRef is a piece of a layout, with the canonical envelopes [lo, hi)
// of its box along the sweep axis and [lo2, hi2) along the filter axis
// ([0, 1) for every box when there is none).
type boxRef struct {
	lo, hi      int64
	lo2, hi2    int32 // the filter axis is at most 2^31-1 long
	rank, piece int32
}

// box is the box of a ref's piece, as the layout spells it.
func (lb *layoutBoxes) box(r boxRef) []Interval {
	return lb.l.Ranks[r.rank].Pieces[r.piece].Box
}

// span is the canonical envelope of a ref's box along axis a.
func (lb *layoutBoxes) span(r *boxRef, a int) (lo, hi int64) {
	switch a {
	case lb.ax:
		return r.lo, r.hi
	case lb.ax2:
		return int64(r.lo2), int64(r.hi2)
	}
	c := canonical(lb.box(*r)[a])
	return c.Lo, c.Hi
}

// validate is Validate; on success it also returns the layout's boxes,
// which live in sc (nil: fresh buffers) until sc is reused.
func (l *Layout) validate(lim Limits, sc *scratch) (*layoutBoxes, error) {
	if sc == nil {
		sc = new(scratch)
	}
	lim = lim.withDefaults()
	if l == nil {
		return nil, &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: "nil layout"}
	}
	t := &l.Tensor
	elems, _, err := checkTensor(t, lim.MaxAxes)
	if err != nil {
		return nil, err
	}
	if len(l.Ranks) == 0 {
		return nil, &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: "no ranks"}
	}
	if len(l.Ranks) > math.MaxInt32 {
		return nil, &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1,
			Reason: fmt.Sprintf("%d ranks exceed %d", len(l.Ranks), math.MaxInt32)}
	}
	n, most := 0, 0
	for r := range l.Ranks {
		n += len(l.Ranks[r].Pieces)
		most = max(most, len(l.Ranks[r].Pieces))
	}
	if maxPieces := min(lim.MaxPieces, math.MaxInt32); n > maxPieces {
		return nil, &LimitError{Limit: "pieces", Value: int64(n), Max: int64(maxPieces)}
	}

	// One pass over the pieces: their shape (ErrLayout, returned at once)
	// and memory (ErrOverlap: elements of a piece, then pieces of a rank;
	// the first failure is kept until every piece's shape has passed),
	// the counts that pick the sweep axis, and the elements of all boxes
	// (wrapping: replicas may hold more than 2^63 together; the distinct
	// boxes, all of them less their replicas, do not).
	var memErr error
	spans := spanCheck{spans: slices.Grow(sc.spans[:0], most), slots: sc.slots}
	var all uint64
	var nest nestCheck
	nest.init(len(t.Shape), t.ElemSize)
	counts := newAxisCounts(t.Shape, n, sc)
	for r := range l.Ranks {
		rk := &l.Ranks[r]
		if rk.RegionBytes < 0 {
			return nil, &LayoutError{Kind: ErrLayout, Rank: r, Piece: -1,
				Reason: fmt.Sprintf("negative region size %d", rk.RegionBytes)}
		}
		spans.spans = spans.spans[:0]
		for i := range rk.Pieces {
			p := &rk.Pieces[i]
			end, count, reason := checkPiece(t, p, rk.RegionBytes)
			if reason != "" {
				return nil, &LayoutError{Kind: ErrLayout, Rank: r, Piece: i, Reason: reason}
			}
			counts.add(p.Box)
			all += uint64(count)
			if memErr != nil {
				continue
			}
			if reason := nest.check(p); reason != "" {
				memErr = &LayoutError{Kind: ErrOverlap, Rank: r, Piece: i, Reason: reason}
				continue
			}
			spans.spans = append(spans.spans, span{lo: p.Offset, hi: end, piece: i})
		}
		if memErr == nil {
			memErr = spans.check(r)
		}
	}
	sc.spans, sc.slots = spans.spans, spans.slots
	if memErr != nil {
		return nil, memErr
	}

	// The tensor: distinct boxes pairwise disjoint, then coverage.
	lb := &layoutBoxes{l: l, sc: sc}
	if err := lb.group(n, counts); err != nil {
		return nil, err
	}
	for i := range len(lb.distinct) - 1 {
		for _, r := range lb.refs[lb.distinct[i]+1 : lb.distinct[i+1]] { // replicas
			c := uint64(1)
			for _, iv := range lb.box(r) {
				c *= uint64(length(iv))
			}
			all -= c
		}
	}
	// Disjoint boxes inside the tensor hold at most its elements.
	if held := int64(all); held != elems {
		return nil, &LayoutError{Kind: ErrCoverage, Rank: -1, Piece: -1,
			Reason: fmt.Sprintf("%d of the tensor's %d elements are held by no rank", elems-held, elems)}
	}
	return lb, nil
}

// group sorts the n pieces of lb.l along the sweep axis, keeps the first
// of each set of identical boxes as the distinct box (two of a set on one
// rank are an overlap), and sweeps: distinct boxes must be pairwise
// disjoint. The boxes must have passed checkPiece, and counts counted
// them all.
func (lb *layoutBoxes) group(n int, counts *axisCounts) error {
	l := lb.l
	lb.ax, lb.ax2 = counts.pick(n, l.Tensor.Shape)
	lb.same, lb.counts = counts.same, counts
	lb.refs = sortRefs(l, n, lb.ax, lb.ax2, &counts.ec[lb.ax], lb.sc)
	refs := lb.refs
	lb.distinct = slices.Grow(lb.sc.distinct[:0], n+1)
	defer func() { lb.sc.distinct = lb.distinct }()
	for j := range refs {
		if j > 0 && sameSpans(&refs[j-1], &refs[j]) && compareBoxes(lb.box(refs[j-1]), lb.box(refs[j])) == 0 {
			if x, y := refs[j-1], refs[j]; x.rank == y.rank {
				return &LayoutError{Kind: ErrOverlap, Rank: int(y.rank), Piece: int(y.piece),
					Reason: fmt.Sprintf("selects the same elements %s as piece %d of the same rank",
						boxString(lb.box(y)), x.piece)}
			}
			continue
		}
		lb.distinct = append(lb.distinct, int32(j))
	}
	// Sweep along ax, with the distinct boxes (their positions in refs)
	// whose interval along ax has not ended yet.
	var active []int32
	at := make([]int64, len(l.Tensor.Shape))
	for _, j := range lb.distinct {
		d := &refs[j]
		keep := active[:0]
		for _, i := range active {
			a := &refs[i]
			if a.hi <= d.lo {
				continue // ends before this box starts along ax
			}
			keep = append(keep, i)
			if a.hi2 > d.lo2 && d.hi2 > a.lo2 && boxesMeet(lb.box(*a), lb.box(*d), at) {
				return overlapError(l, *a, *d, at)
			}
		}
		active = append(keep, j)
	}
	lb.distinct = append(lb.distinct, int32(n))
	return nil
}

// span is the bytes [lo, hi) a piece occupies in its rank's region.
type span struct {
	lo, hi int64
	piece  int
}

// spanCheck checks that the byte spans of one rank's pieces are
// disjoint; slots is scratch for bucketing.
type spanCheck struct {
	spans []span
	slots []int32
}

// check returns the ErrOverlap of rank r's first pair of intersecting
// spans in order of (offset, piece), or nil. When the n offsets lie
// within about 4n times the shortest span of each other, it proves the
// spans disjoint by bucketing in O(n); otherwise, or when two spans may
// intersect, it sorts them.
func (c *spanCheck) check(r int) error {
	if c.bucketed() {
		return nil
	}
	return c.sorted(r)
}

// sorted is check by sorting the spans.
func (c *spanCheck) sorted(r int) error {
	s := c.spans
	slices.SortFunc(s, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.lo, b.lo), cmp.Compare(a.piece, b.piece))
	})
	for j := 1; j < len(s); j++ {
		if a, b := s[j-1], s[j]; b.lo < a.hi {
			first, second := a, b
			if first.piece > second.piece {
				first, second = second, first
			}
			return &LayoutError{Kind: ErrOverlap, Rank: r, Piece: second.piece,
				Reason: fmt.Sprintf("bytes [%d, %d) overlap bytes [%d, %d) of piece %d of the same rank",
					second.lo, second.hi, first.lo, first.hi, first.piece)}
		}
	}
	return nil
}

// bucketed reports whether it proved the spans disjoint by bucketing
// their offsets: with buckets of 2^s <= the shortest span's length, two
// disjoint spans never start in one bucket, so walking the buckets visits
// the spans in order of offset. It gives up (false) when that takes more
// than 4 buckets per span or finds two spans that intersect.
func (c *spanCheck) bucketed() bool {
	s := c.spans
	if len(s) < 2 {
		return true
	}
	lo, last, shortest := s[0].lo, s[0].lo, s[0].hi-s[0].lo
	for _, x := range s[1:] {
		lo, last, shortest = min(lo, x.lo), max(last, x.lo), min(shortest, x.hi-x.lo)
	}
	shift := bits.Len64(uint64(shortest)) - 1 // spans hold at least one byte
	nb := uint64(last-lo)>>shift + 1
	if nb > 4*uint64(len(s)) {
		return false
	}
	if uint64(cap(c.slots)) < nb {
		c.slots = make([]int32, nb)
	}
	slots := c.slots[:nb]
	clear(slots)
	for i, x := range s {
		b := &slots[uint64(x.lo-lo)>>shift]
		if *b != 0 {
			return false // both start within the shorter's length: they intersect
		}
		*b = int32(i) + 1
	}
	end := int64(math.MinInt64)
	for _, i := range slots {
		if i == 0 {
			continue
		}
		x := s[i-1]
		if x.lo < end {
			return false
		}
		end = x.hi
	}
	return true
}

// checkTensor checks the shape and element size of t and returns its
// element count and size in bytes.
func checkTensor(t *Tensor, maxAxes int) (elems, size int64, err error) {
	axes := len(t.Shape)
	if axes == 0 {
		return 0, 0, &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: "tensor has no axes"}
	}
	if axes > maxAxes {
		return 0, 0, &LimitError{Limit: "axes", Value: int64(axes), Max: int64(maxAxes)}
	}
	if t.ElemSize < 1 {
		return 0, 0, &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1,
			Reason: fmt.Sprintf("element size %d", t.ElemSize)}
	}
	elems = 1
	for a, s := range t.Shape {
		if s < 1 {
			return 0, 0, &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1,
				Reason: fmt.Sprintf("axis %d has extent %d", a, s)}
		}
		var ok bool
		if elems, ok = mulFits(elems, s); !ok {
			return 0, 0, &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1,
				Reason: fmt.Sprintf("shape %v has more than %d elements", t.Shape, int64(math.MaxInt64))}
		}
	}
	size, ok := mulFits(elems, t.ElemSize)
	if !ok {
		return 0, 0, &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1,
			Reason: fmt.Sprintf("%d elements of %d bytes exceed %d bytes", elems, t.ElemSize, int64(math.MaxInt64))}
	}
	return elems, size, nil
}

// checkPiece checks the box, strides and bounds of p against t and a
// region of region bytes. It returns the byte after the piece's last
// element and the number of its elements, or why the piece is malformed.
func checkPiece(t *Tensor, p *Piece, region int64) (end, elems int64, reason string) {
	axes := len(t.Shape)
	if len(p.Box) != axes {
		return 0, 0, fmt.Sprintf("box has %d intervals for %d axes", len(p.Box), axes)
	}
	if len(p.Strides) != axes {
		return 0, 0, fmt.Sprintf("%d strides for %d axes", len(p.Strides), axes)
	}
	if p.Offset < 0 {
		return 0, 0, fmt.Sprintf("negative offset %d", p.Offset)
	}
	end, elems = p.Offset, 1
	for a, iv := range p.Box {
		switch {
		case iv.Step < 1:
			return 0, 0, fmt.Sprintf("axis %d interval %s has step < 1", a, ivString(iv))
		case iv.Lo < 0 || iv.Hi > t.Shape[a]:
			return 0, 0, fmt.Sprintf("axis %d interval %s is outside [0, %d)", a, ivString(iv), t.Shape[a])
		case iv.Hi <= iv.Lo:
			return 0, 0, fmt.Sprintf("axis %d interval %s is empty", a, ivString(iv))
		}
		n, s := length(iv), p.Strides[a]
		switch {
		case s < 0:
			return 0, 0, fmt.Sprintf("axis %d has negative stride %d", a, s)
		case s == 0 && n > 1:
			return 0, 0, fmt.Sprintf("axis %d has stride 0 but selects %d indices", a, n)
		}
		elems *= n // at most the tensor's elements: the box lies inside it
		ext, ok := mulFits(n-1, s)
		if ok {
			end, ok = addFits(end, ext)
		}
		if !ok {
			return 0, 0, "byte offsets overflow int64"
		}
	}
	end, ok := addFits(end, t.ElemSize)
	if !ok {
		return 0, 0, "byte offsets overflow int64"
	}
	if end > region {
		return 0, 0, fmt.Sprintf("bytes [%d, %d) exceed the region of %d bytes", p.Offset, end, region)
	}
	return end, elems, ""
}

// nestCheck is checkNest for the pieces of a layout, in order: a piece
// with the strides and lengths of the last one that passed (the pages of
// a pool) passes too.
type nestCheck struct {
	elemSize      int64
	strides, lens []int64 // of the last piece that passed; lens[0] < 0 when none
	scratch       []int
}

func (c *nestCheck) init(axes int, elemSize int64) {
	c.elemSize = elemSize
	c.strides, c.lens, c.scratch = make([]int64, axes), make([]int64, axes), make([]int, axes)
	c.lens[0] = -1
}

// check is checkNest(p); p has passed checkPiece.
func (c *nestCheck) check(p *Piece) string {
	same := true
	for a, iv := range p.Box {
		same = same && length(iv) == c.lens[a] && p.Strides[a] == c.strides[a]
	}
	if same {
		return ""
	}
	if reason := checkNest(p, c.elemSize, c.scratch); reason != "" {
		return reason
	}
	for a, iv := range p.Box {
		c.lens[a], c.strides[a] = length(iv), p.Strides[a]
	}
	return ""
}

// checkNest reports why two elements of p may overlap in memory, or "".
// The axes selecting more than one index, sorted by stride, must nest:
// each stride at least the extent of the axes inside it. scratch has one
// entry per axis. p has passed checkPiece, so no extent overflows.
func checkNest(p *Piece, elemSize int64, scratch []int) string {
	// Row-major and the like pass from the innermost axis out, each
	// stride at least the extent inside it (and so above the strides
	// inside it: the order by stride).
	extent := elemSize
	a := len(p.Box) - 1
	for ; a >= 0; a-- {
		if n := length(p.Box[a]); n > 1 {
			if p.Strides[a] < extent {
				break
			}
			extent += (n - 1) * p.Strides[a]
		}
	}
	if a < 0 {
		return ""
	}
	// Otherwise the axes by stride, ascending, ties in axis order
	// (insertion sort: few axes, no allocation).
	order := scratch[:0]
	for a, iv := range p.Box {
		if length(iv) > 1 {
			order = append(order, a)
		}
	}
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && p.Strides[order[j]] < p.Strides[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	extent = elemSize
	inner := -1
	for _, a := range order {
		if s := p.Strides[a]; s < extent {
			if inner < 0 {
				return fmt.Sprintf("axis %d stride %d is less than the element size %d", a, s, elemSize)
			}
			return fmt.Sprintf("axis %d stride %d is inside the %d-byte extent of the axes within it (axis %d stride %d)",
				a, s, extent, inner, p.Strides[inner])
		}
		extent += (length(p.Box[a]) - 1) * p.Strides[a]
		inner = a
	}
	return ""
}

// length is iv.Len(), without a division for a step of 1.
func length(iv Interval) int64 {
	if iv.Step == 1 {
		return max(iv.Hi-iv.Lo, 0)
	}
	return iv.Len()
}

// canonical is iv with Hi one past its last index, and Step 1 when it
// selects a single index; two non-empty intervals select the same indices
// exactly when their canonical forms are equal.
func canonical(iv Interval) Interval {
	if iv.Step == 1 {
		iv.Hi = max(iv.Hi, iv.Lo)
		return iv
	}
	n := iv.Len()
	if n <= 1 {
		return Interval{Lo: iv.Lo, Hi: iv.Lo + n, Step: 1}
	}
	return Interval{Lo: iv.Lo, Hi: iv.Lo + (n-1)*iv.Step + 1, Step: iv.Step}
}

// compareBoxes orders boxes by the indices they select: by the
// canonical forms of their intervals, axis by axis.
func compareBoxes(x, y []Interval) int {
	for a := range x {
		cx, cy := canonical(x[a]), canonical(y[a])
		if c := cmp.Or(cmp.Compare(cx.Lo, cy.Lo), cmp.Compare(cx.Hi, cy.Hi), cmp.Compare(cx.Step, cy.Step)); c != 0 {
			return c
		}
	}
	return 0
}

// edgeCounts counts the starts and ends of a set of intervals [lo, hi)
// along an axis of extent indices (0 <= lo < hi <= extent): a count per
// index when the extent is at most 4 times the number of intervals
// (O(n + extent), each query O(1)), the sorted starts and ends otherwise
// (O(n log n), each query O(log n)). Use: reset, add each interval, done.
type edgeCounts struct {
	dense bool
	// dense: below[x] intervals start before x, by[x] end at or before x,
	// for 0 <= x <= extent.
	below, by []int32
	// sparse: the starts and the ends, sorted.
	starts, ends []int64
}

func (c *edgeCounts) reset(n int, extent int64) {
	c.dense = extent <= 4*int64(n)
	if !c.dense {
		c.starts, c.ends = c.starts[:0], c.ends[:0]
		return
	}
	size := int(extent) + 1
	if cap(c.below) < size {
		c.below, c.by = make([]int32, size), make([]int32, size)
	}
	c.below, c.by = c.below[:size], c.by[:size]
	clear(c.below)
	clear(c.by)
}

func (c *edgeCounts) add(lo, hi int64) {
	if c.dense {
		c.below[lo+1]++
		c.by[hi]++
		return
	}
	c.starts = append(c.starts, lo)
	c.ends = append(c.ends, hi)
}

func (c *edgeCounts) done() {
	if !c.dense {
		slices.Sort(c.starts)
		slices.Sort(c.ends)
		return
	}
	for x := 1; x < len(c.below); x++ {
		c.below[x] += c.below[x-1]
		c.by[x] += c.by[x-1]
	}
}

// startsBelow is the number of intervals that start before x.
func (c *edgeCounts) startsBelow(x int64) int64 {
	if c.dense {
		return int64(c.below[min(max(x, 0), int64(len(c.below)-1))])
	}
	i, _ := slices.BinarySearch(c.starts, x)
	return int64(i)
}

// endsBy is the number of intervals that end at or before x.
func (c *edgeCounts) endsBy(x int64) int64 {
	if c.dense {
		if x < 0 {
			return 0
		}
		return int64(c.by[min(x, int64(len(c.by)-1))])
	}
	i, _ := slices.BinarySearch(c.ends, x+1)
	return int64(i)
}

// apart is the number of ordered pairs of intervals of which the first
// ends at or before the second starts: the pairs that do not meet.
func (c *edgeCounts) apart() int64 {
	var n int64
	if c.dense {
		for x := 0; x+1 < len(c.below); x++ {
			n += int64(c.below[x+1]-c.below[x]) * int64(c.by[x]) // starting at x, after those ended by x
		}
		return n
	}
	e := 0
	for _, lo := range c.starts {
		for e < len(c.ends) && c.ends[e] <= lo {
			e++
		}
		n += int64(e)
	}
	return n
}

// axisCounts counts, along every axis, the canonical [Lo, Hi) ranges
// of a layout's boxes, to pick the sweep axis: reading the pieces is
// what costs, so one pass counts all axes.
type axisCounts struct {
	ec    []edgeCounts
	first []Interval // the first box's canonical intervals
	same  []bool     // every box counted has first's interval along the axis
	n     int
}

// newAxisCounts readies counts of n boxes of the given shape, in sc's
// buffers (sc may be nil).
func newAxisCounts(shape []int64, n int, sc *scratch) *axisCounts {
	if sc == nil {
		sc = new(scratch)
	}
	if len(sc.ec) < len(shape) {
		sc.ec = append(sc.ec, make([]edgeCounts, len(shape)-len(sc.ec))...)
	}
	c := &axisCounts{ec: sc.ec[:len(shape)], first: make([]Interval, len(shape)), same: make([]bool, len(shape))}
	for a := range shape {
		c.ec[a].reset(n, shape[a])
	}
	return c
}

// add counts a box that has passed checkPiece.
func (c *axisCounts) add(box []Interval) {
	if c.n == 0 {
		for a, iv := range box {
			c.first[a], c.same[a] = canonical(iv), true
		}
	}
	c.n++
	for a, iv := range box {
		iv = canonical(iv)
		if c.same[a] && iv != c.first[a] {
			c.same[a] = false
		}
		c.ec[a].add(iv.Lo, iv.Hi)
	}
}

// pick returns, among the axes along which the n boxes counted do not all
// have one interval, the sweep axis, along which the fewest pairs of
// boxes have meeting ranges (the candidates a sweep along it tests), and
// among the others at most 2^31-1 long the filter axis, with the fewest
// (-1 if none). It finishes the counts of those axes. Counting costs
// O(n + Shape[a]) per axis whose extent is at most 4n, O(n log n) for
// longer ones.
func (c *axisCounts) pick(n int, shape []int64) (ax, ax2 int) {
	pairs := make([]int64, len(shape))
	ax, ax2 = -1, -1
	for a := range shape {
		if c.same[a] {
			continue // every pair meets along a
		}
		c.ec[a].done()
		pairs[a] = int64(n)*int64(n-1)/2 - c.ec[a].apart()
		if ax < 0 || pairs[a] < pairs[ax] {
			ax = a
		}
	}
	if ax < 0 { // all boxes alike
		c.ec[0].done()
		return 0, -1
	}
	for a := range shape {
		if !c.same[a] && a != ax && shape[a] <= math.MaxInt32 && (ax2 < 0 || pairs[a] < pairs[ax2]) {
			ax2 = a
		}
	}
	return ax, ax2
}

// sortRefs returns l's n pieces as refs sorted by (lo, lo2, hi2, box,
// rank, piece) along the sweep axis ax and the filter axis ax2 (-1 if
// none), so that identical boxes are next to each other, in (rank, piece)
// order. It sorts by counting lo>>s, in buckets of 2^s indices, s the
// least that makes at most 4n buckets, then sorts each run of one bucket
// that is not in order already: O(n) plus those runs. Where the extent is
// at most 4n (s = 0), ec's finished counts of the boxes along ax are the
// counting (and are as they were when it returns). The refs live in sc.
func sortRefs(l *Layout, n int, ax, ax2 int, ec *edgeCounts, sc *scratch) []boxRef {
	refs := grown(sc.refs, n)
	sc.refs = refs
	// ref is the ref of piece i of rank r.
	ref := func(r, i int) boxRef {
		box := l.Ranks[r].Pieces[i].Box
		iv := canonical(box[ax])
		x := boxRef{lo: iv.Lo, hi: iv.Hi, lo2: 0, hi2: 1, rank: int32(r), piece: int32(i)}
		if ax2 >= 0 {
			iv := canonical(box[ax2])
			x.lo2, x.hi2 = int32(iv.Lo), int32(iv.Hi)
		}
		return x
	}
	order := func(x, y *boxRef) int {
		if c := cmp.Or(cmp.Compare(x.lo, y.lo), cmp.Compare(x.lo2, y.lo2), cmp.Compare(x.hi2, y.hi2)); c != 0 {
			return c
		}
		return cmp.Or(compareBoxes(l.Ranks[x.rank].Pieces[x.piece].Box, l.Ranks[y.rank].Pieces[y.piece].Box),
			cmp.Compare(x.rank, y.rank), cmp.Compare(x.piece, y.piece))
	}
	if n == 0 {
		return refs
	}
	// next[b] is the next free position for bucket b: the number of
	// boxes in the buckets before it, to begin with.
	var next []int32
	shift := uint(0)
	if ec.dense {
		next = ec.below // below[x]: the boxes that start before x
	} else {
		extent := l.Tensor.Shape[ax]
		for extent>>shift > 4*int64(n) {
			shift++
		}
		next = grown(sc.next, int(extent>>shift)+2)
		sc.next = next
		clear(next)
		for r := range l.Ranks {
			for i := range l.Ranks[r].Pieces {
				next[l.Ranks[r].Pieces[i].Box[ax].Lo>>shift+1]++
			}
		}
		for b := 1; b < len(next); b++ {
			next[b] += next[b-1]
		}
	}
	for r := range l.Ranks {
		for i := range l.Ranks[r].Pieces {
			x := ref(r, i)
			b := &next[x.lo>>shift]
			refs[*b] = x
			*b++
		}
	}
	if ec.dense {
		// Each next[x] now counts the boxes that start at or before x:
		// ec.below one position on.
		copy(next[1:], next[:len(next)-1])
		next[0] = 0
	}
	for g := 0; g < n; {
		e, sorted := g+1, true
		for ; e < n && refs[e].lo>>shift == refs[g].lo>>shift; e++ {
			sorted = sorted && order(&refs[e-1], &refs[e]) < 0
		}
		if !sorted {
			slices.SortFunc(refs[g:e], func(x, y boxRef) int { return order(&x, &y) })
		}
		g = e
	}
	return refs
}

// sameSpans reports whether two refs have the same spans, as identical
// boxes do.
func sameSpans(x, y *boxRef) bool {
	return x.lo == y.lo && x.hi == y.hi && x.lo2 == y.lo2 && x.hi2 == y.hi2
}

// boxesMeet reports whether two boxes share an element, and stores the
// first common index per axis in at when they do. It compares the
// boxes' envelopes first, which decides for intervals of step 1.
func boxesMeet(x, y []Interval, at []int64) bool {
	for a := range x {
		cx, cy := canonical(x[a]), canonical(y[a])
		if cx.Hi <= cy.Lo || cy.Hi <= cx.Lo {
			return false
		}
	}
	for a := range x {
		if x[a].Step == 1 && y[a].Step == 1 {
			at[a] = max(x[a].Lo, y[a].Lo)
			continue
		}
		i, ok := firstCommon(canonical(x[a]), canonical(y[a]))
		if !ok {
			return false
		}
		at[a] = i
	}
	return true
}

// overlapError reports the distinct boxes of two pieces of l sharing
// element at, at the later of the two pieces in (rank, piece) order.
func overlapError(l *Layout, x, y boxRef, at []int64) error {
	if cmp.Or(cmp.Compare(x.rank, y.rank), cmp.Compare(x.piece, y.piece)) > 0 {
		x, y = y, x
	}
	xb := l.Ranks[x.rank].Pieces[x.piece].Box
	yb := l.Ranks[y.rank].Pieces[y.piece].Box
	where := fmt.Sprintf("rank %d piece %d %s", x.rank, x.piece, boxString(xb))
	if x.rank == y.rank {
		where = fmt.Sprintf("piece %d %s of the same rank", x.piece, boxString(xb))
	}
	return &LayoutError{Kind: ErrOverlap, Rank: int(y.rank), Piece: int(y.piece),
		Reason: fmt.Sprintf("box %s shares element %v with %s without being its replica",
			boxString(yb), at, where)}
}

func ivString(iv Interval) string {
	if iv.Step == 1 {
		return fmt.Sprintf("[%d, %d)", iv.Lo, iv.Hi)
	}
	return fmt.Sprintf("[%d, %d) step %d", iv.Lo, iv.Hi, iv.Step)
}

func boxString(b []Interval) string {
	s := ""
	for a, iv := range b {
		if a > 0 {
			s += "×"
		}
		s += ivString(iv)
	}
	return s
}

// mulFits is a*b for non-negative a and b, and whether it fits an int64.
func mulFits(a, b int64) (int64, bool) {
	h, l := bits.Mul64(uint64(a), uint64(b))
	return int64(l), h == 0 && l <= math.MaxInt64
}

// addFits is a+b for non-negative a and b, and whether it fits an int64.
func addFits(a, b int64) (int64, bool) {
	s := a + b
	return s, s >= a
}

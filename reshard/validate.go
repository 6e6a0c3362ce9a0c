package reshard

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
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
//     of all ranks number at most lim.MaxPieces (*LimitError "pieces").
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
// Validate never works per element. With n pieces it costs O(n log n)
// plus the pairs of pieces whose intervals meet along one sweep axis: it
// picks the axis along which the fewest pairs meet (counted exactly, by
// counting sort where the axis is at most 4n long), sorts the pieces by
// their interval along it, sets replicas aside, and sweeps with an active
// set, testing each candidate pair axis by axis. For blocked, cyclic and
// paged layouts (paged along any axis) the candidates of a piece are its
// few neighbours (BenchmarkValidatePaged measures 8 ranks of 4096 pages
// each, paged along an inner axis).
func (l *Layout) Validate(lim Limits) error {
	lim = lim.withDefaults()
	if l == nil {
		return &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: "nil layout"}
	}
	t := &l.Tensor
	elems, _, err := checkTensor(t, lim.MaxAxes)
	if err != nil {
		return err
	}
	if len(l.Ranks) == 0 {
		return &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: "no ranks"}
	}
	n := 0
	for r := range l.Ranks {
		n += len(l.Ranks[r].Pieces)
	}
	if n > lim.MaxPieces {
		return &LimitError{Limit: "pieces", Value: int64(n), Max: int64(lim.MaxPieces)}
	}

	// Pass 1: the shape of every piece (ErrLayout).
	axes := len(t.Shape)
	ends := make([]int64, n) // per piece, the byte after its last element
	k := 0
	for r := range l.Ranks {
		rk := &l.Ranks[r]
		if rk.RegionBytes < 0 {
			return &LayoutError{Kind: ErrLayout, Rank: r, Piece: -1,
				Reason: fmt.Sprintf("negative region size %d", rk.RegionBytes)}
		}
		for i := range rk.Pieces {
			end, reason := checkPiece(t, &rk.Pieces[i], rk.RegionBytes)
			if reason != "" {
				return &LayoutError{Kind: ErrLayout, Rank: r, Piece: i, Reason: reason}
			}
			ends[k] = end
			k++
		}
	}

	// Pass 2: memory. Elements of a piece, then pieces of a rank.
	scratch := make([]int, axes)
	var spans []span
	k = 0
	for r := range l.Ranks {
		rk := &l.Ranks[r]
		spans = spans[:0]
		for i := range rk.Pieces {
			if reason := checkNest(&rk.Pieces[i], t.ElemSize, scratch); reason != "" {
				return &LayoutError{Kind: ErrOverlap, Rank: r, Piece: i, Reason: reason}
			}
			spans = append(spans, span{lo: rk.Pieces[i].Offset, hi: ends[k], piece: i})
			k++
		}
		slices.SortFunc(spans, func(a, b span) int {
			if a.lo != b.lo {
				return cmp.Compare(a.lo, b.lo)
			}
			return cmp.Compare(a.piece, b.piece)
		})
		for j := 1; j < len(spans); j++ {
			if a, b := spans[j-1], spans[j]; b.lo < a.hi {
				first, second := a, b
				if first.piece > second.piece {
					first, second = second, first
				}
				return &LayoutError{Kind: ErrOverlap, Rank: r, Piece: second.piece,
					Reason: fmt.Sprintf("bytes [%d, %d) overlap bytes [%d, %d) of piece %d of the same rank",
						second.lo, second.hi, first.lo, first.hi, first.piece)}
			}
		}
	}

	// Pass 3: the tensor. Canonical boxes (a single index has Step 1, Hi
	// is the last index + 1) so that boxes selecting the same indices
	// compare equal; piece k (in rank, piece order) has box k.
	boxes := make([]Interval, n*axes)
	locs := make([]pieceLoc, 0, n)
	for r := range l.Ranks {
		for i := range l.Ranks[r].Pieces {
			b := boxes[len(locs)*axes:]
			for a, iv := range l.Ranks[r].Pieces[i].Box {
				b[a] = canonical(iv)
			}
			locs = append(locs, pieceLoc{rank: r, piece: i})
		}
	}
	box := func(k int) []Interval { return boxes[k*axes : (k+1)*axes] }
	ax := sweepAxis(boxes, t.Shape, n)
	refs := sortRefs(boxes, t.Shape, ax)
	// Keep the first of each set of identical boxes as the distinct box;
	// two of a set on one rank are an overlap. A run of equal (lo, hash)
	// is ordered by box first, in case of a hash collision.
	distinct := refs[:0]
	for g := 0; g < len(refs); {
		e := g + 1
		for e < len(refs) && refs[e].lo == refs[g].lo && refs[e].hash == refs[g].hash {
			e++
		}
		run := refs[g:e]
		if len(run) > 1 {
			slices.SortFunc(run, func(x, y boxRef) int {
				return cmp.Or(compareBoxes(box(x.k), box(y.k)), cmp.Compare(x.k, y.k))
			})
		}
		for j := range run {
			if j > 0 && compareBoxes(box(run[j-1].k), box(run[j].k)) == 0 {
				if x, y := locs[run[j-1].k], locs[run[j].k]; x.rank == y.rank {
					return &LayoutError{Kind: ErrOverlap, Rank: y.rank, Piece: y.piece,
						Reason: fmt.Sprintf("selects the same elements %s as piece %d of the same rank",
							boxString(l.Ranks[y.rank].Pieces[y.piece].Box), x.piece)}
				}
				continue
			}
			distinct = append(distinct, run[j])
		}
		g = e
	}
	// Sweep along ax: distinct boxes must be pairwise disjoint.
	var active []int
	at := make([]int64, axes)
	for j, d := range distinct {
		keep := active[:0]
		for _, i := range active {
			if distinct[i].hi <= d.lo {
				continue // ends before this box starts along ax
			}
			keep = append(keep, i)
			if boxesMeet(box(distinct[i].k), box(d.k), at) {
				return overlapError(l, locs[distinct[i].k], locs[d.k], at)
			}
		}
		active = append(keep, j)
	}

	// Pass 4: coverage.
	var held int64
	for _, d := range distinct {
		c := int64(1)
		for _, iv := range box(d.k) {
			c *= iv.Len() // at most the tensor's elements: the box lies inside it
		}
		held += c // disjoint boxes inside the tensor: at most its elements
	}
	if held != elems {
		return &LayoutError{Kind: ErrCoverage, Rank: -1, Piece: -1,
			Reason: fmt.Sprintf("%d of the tensor's %d elements are held by no rank", elems-held, elems)}
	}
	return nil
}

// span is the bytes [lo, hi) a piece occupies in its rank's region.
type span struct {
	lo, hi int64
	piece  int
}

// pieceLoc is where a piece is in a layout.
type pieceLoc struct{ rank, piece int }

// boxRef is piece k of a layout, in (rank, piece) order, with its
// canonical interval [lo, hi) along the sweep axis.
type boxRef struct {
	lo, hi int64
	hash   uint64
	k      int
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
// element, or why the piece is malformed.
func checkPiece(t *Tensor, p *Piece, region int64) (end int64, reason string) {
	axes := len(t.Shape)
	if len(p.Box) != axes {
		return 0, fmt.Sprintf("box has %d intervals for %d axes", len(p.Box), axes)
	}
	if len(p.Strides) != axes {
		return 0, fmt.Sprintf("%d strides for %d axes", len(p.Strides), axes)
	}
	if p.Offset < 0 {
		return 0, fmt.Sprintf("negative offset %d", p.Offset)
	}
	end = p.Offset
	for a, iv := range p.Box {
		switch {
		case iv.Step < 1:
			return 0, fmt.Sprintf("axis %d interval %s has step < 1", a, ivString(iv))
		case iv.Lo < 0 || iv.Hi > t.Shape[a]:
			return 0, fmt.Sprintf("axis %d interval %s is outside [0, %d)", a, ivString(iv), t.Shape[a])
		case iv.Hi <= iv.Lo:
			return 0, fmt.Sprintf("axis %d interval %s is empty", a, ivString(iv))
		}
		n, s := iv.Len(), p.Strides[a]
		switch {
		case s < 0:
			return 0, fmt.Sprintf("axis %d has negative stride %d", a, s)
		case s == 0 && n > 1:
			return 0, fmt.Sprintf("axis %d has stride 0 but selects %d indices", a, n)
		}
		ext, ok := mulFits(n-1, s)
		if ok {
			end, ok = addFits(end, ext)
		}
		if !ok {
			return 0, "byte offsets overflow int64"
		}
	}
	end, ok := addFits(end, t.ElemSize)
	if !ok {
		return 0, "byte offsets overflow int64"
	}
	if end > region {
		return 0, fmt.Sprintf("bytes [%d, %d) exceed the region of %d bytes", p.Offset, end, region)
	}
	return end, ""
}

// checkNest reports why two elements of p may overlap in memory, or "".
// The axes selecting more than one index, sorted by stride, must nest:
// each stride at least the extent of the axes inside it. scratch has one
// entry per axis. p has passed checkPiece, so no extent overflows.
func checkNest(p *Piece, elemSize int64, scratch []int) string {
	order := scratch[:0]
	for a, iv := range p.Box {
		if iv.Len() > 1 {
			order = append(order, a)
		}
	}
	// Insertion sort by stride: few axes, no allocation.
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && p.Strides[order[j]] < p.Strides[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	extent := elemSize
	inner := -1
	for _, a := range order {
		if s := p.Strides[a]; s < extent {
			if inner < 0 {
				return fmt.Sprintf("axis %d stride %d is less than the element size %d", a, s, elemSize)
			}
			return fmt.Sprintf("axis %d stride %d is inside the %d-byte extent of the axes within it (axis %d stride %d)",
				a, s, extent, inner, p.Strides[inner])
		}
		extent += (p.Box[a].Len() - 1) * p.Strides[a]
		inner = a
	}
	return ""
}

// canonical is iv with Hi one past its last index, and Step 1 when it
// selects a single index; two non-empty intervals select the same indices
// exactly when their canonical forms are equal.
func canonical(iv Interval) Interval {
	n := iv.Len()
	if n <= 1 {
		return Interval{Lo: iv.Lo, Hi: iv.Lo + n, Step: 1}
	}
	return Interval{Lo: iv.Lo, Hi: iv.Lo + (n-1)*iv.Step + 1, Step: iv.Step}
}

func compareBoxes(x, y []Interval) int {
	for a := range x {
		if c := cmp.Or(cmp.Compare(x[a].Lo, y[a].Lo), cmp.Compare(x[a].Hi, y[a].Hi),
			cmp.Compare(x[a].Step, y[a].Step)); c != 0 {
			return c
		}
	}
	return 0
}

// sweepAxis is the axis along which the fewest pairs of the n canonical
// boxes (axes intervals each, in a row) have meeting [Lo, Hi) ranges: the
// candidates a sweep along it tests. It costs O(n + Shape[a]) per axis
// whose extent is at most 4n (counting), O(n log n) for longer ones.
func sweepAxis(boxes []Interval, shape []int64, n int) int {
	axes := len(shape)
	if axes == 1 || n < 2 {
		return 0
	}
	var los, his []int64
	best, bestPairs := 0, int64(math.MaxInt64)
	for a := range axes {
		first := boxes[a]
		same := true
		for i := a; i < len(boxes); i += axes {
			same = same && boxes[i] == first
		}
		if same {
			continue // every pair meets along a
		}
		// Pairs that do not meet: for each box, those ending at or before
		// its start.
		var apart int64
		if extent := shape[a]; extent <= 4*int64(n) {
			// ends[x]: boxes with Hi == x; starts[x]: boxes with Lo == x.
			if int64(cap(los)) < extent+1 {
				los, his = make([]int64, extent+1), make([]int64, extent+1)
			}
			starts, ends := los[:extent+1], his[:extent+1]
			clear(starts)
			clear(ends)
			for i := a; i < len(boxes); i += axes {
				starts[boxes[i].Lo]++
				ends[boxes[i].Hi]++
			}
			var ended int64
			for x := range starts {
				ended += ends[x]
				apart += starts[x] * ended
			}
		} else {
			if len(los) < n {
				los, his = make([]int64, n), make([]int64, n)
			}
			los, his := los[:n], his[:n]
			for k := range n {
				los[k], his[k] = boxes[k*axes+a].Lo, boxes[k*axes+a].Hi
			}
			slices.Sort(los)
			slices.Sort(his)
			e := 0
			for _, lo := range los {
				for e < n && his[e] <= lo {
					e++
				}
				apart += int64(e)
			}
		}
		if pairs := int64(n)*int64(n-1)/2 - apart; pairs < bestPairs {
			best, bestPairs = a, pairs
			if pairs == 0 {
				break
			}
		}
	}
	return best
}

// sortRefs returns the n canonical boxes as refs sorted by (lo, hash, k)
// along axis ax, so that identical boxes fall in one run of equal (lo,
// hash), in (rank, piece) order. Along an extent of at most 4n it sorts by
// counting, then each run of equal lo by (hash, k).
func sortRefs(boxes []Interval, shape []int64, ax int) []boxRef {
	axes := len(shape)
	n := len(boxes) / axes
	refs := make([]boxRef, n)
	for k := range refs {
		iv := boxes[k*axes+ax]
		refs[k] = boxRef{lo: iv.Lo, hi: iv.Hi, hash: boxHash(boxes[k*axes : (k+1)*axes]), k: k}
	}
	byHash := func(x, y boxRef) int {
		if x.hash != y.hash {
			return cmp.Compare(x.hash, y.hash)
		}
		return cmp.Compare(x.k, y.k)
	}
	extent := shape[ax]
	if extent > 4*int64(n) {
		slices.SortFunc(refs, func(x, y boxRef) int {
			if x.lo != y.lo {
				return cmp.Compare(x.lo, y.lo)
			}
			return byHash(x, y)
		})
		return refs
	}
	// A stable counting sort by lo keeps k order within each lo.
	next := make([]int, extent+1)
	for _, r := range refs {
		next[r.lo+1]++
	}
	for x := 1; x <= int(extent); x++ {
		next[x] += next[x-1]
	}
	sorted := make([]boxRef, n)
	for _, r := range refs {
		sorted[next[r.lo]] = r
		next[r.lo]++
	}
	for g := 0; g < n; {
		e := g + 1
		for e < n && sorted[e].lo == sorted[g].lo {
			e++
		}
		if e-g > 1 {
			slices.SortFunc(sorted[g:e], byHash)
		}
		g = e
	}
	return sorted
}

// boxHash mixes the intervals of a canonical box into 64 bits.
func boxHash(box []Interval) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, iv := range box {
		for _, v := range [3]int64{iv.Lo, iv.Hi, iv.Step} {
			h = (h ^ uint64(v)) * 0xff51afd7ed558ccd
			h ^= h >> 32
		}
	}
	return h
}

// boxesMeet reports whether two canonical boxes share an element, and
// stores the first common index per axis in at when they do.
func boxesMeet(x, y []Interval, at []int64) bool {
	for a := range x {
		i, ok := firstCommon(x[a], y[a])
		if !ok {
			return false
		}
		at[a] = i
	}
	return true
}

// overlapError reports two distinct boxes of l sharing element at, at
// the later of the two pieces in (rank, piece) order.
func overlapError(l *Layout, x, y pieceLoc, at []int64) error {
	if cmp.Or(cmp.Compare(x.rank, y.rank), cmp.Compare(x.piece, y.piece)) > 0 {
		x, y = y, x
	}
	xb := l.Ranks[x.rank].Pieces[x.piece].Box
	yb := l.Ranks[y.rank].Pieces[y.piece].Box
	where := fmt.Sprintf("rank %d piece %d %s", x.rank, x.piece, boxString(xb))
	if x.rank == y.rank {
		where = fmt.Sprintf("piece %d %s of the same rank", x.piece, boxString(xb))
	}
	return &LayoutError{Kind: ErrOverlap, Rank: y.rank, Piece: y.piece,
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

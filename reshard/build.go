package reshard

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
)

// ShardSpec describes a regular sharding of a tensor over ranks, for
// Sharded.
type ShardSpec struct {
	// Parts is the number of parts along each axis (one entry per axis,
	// each 1..Shape[a]). The shards are the product of the parts.
	Parts []int64
	// Cyclic, when Cyclic[a] is set, deals the indices of axis a round
	// robin: part p holds p, p+Parts[a], p+2*Parts[a], ... (an Interval
	// with Step Parts[a]). Otherwise part p holds the block
	// [p*n/Parts[a], (p+1)*n/Parts[a]) of the n indices, so an uneven
	// split gives blocks differing by at most one index. Nil means no
	// axis is cyclic.
	Cyclic []bool
	// Replicas is the number of copies of every shard (data parallelism);
	// 0 means 1.
	Replicas int
	// Order is the memory order of each rank's piece, outermost axis
	// first: a permutation of 0..axes-1. Nil means the logical order
	// (row-major).
	Order []int
	// Base is the byte offset of the piece in every rank's region.
	Base int64
}

// Sharded returns the layout in which every rank holds one shard of t,
// stored densely at byte s.Base of its region with its axes in memory
// order s.Order; each region is s.Base plus the shard's bytes.
//
// Ranks are numbered replica*shards + shard, where shard is the
// mixed-radix index of the shard's parts with axis 0 most significant:
// with Parts {P0, P1, P2}, the part (p0, p1, p2) is shard
// (p0*P1 + p1)*P2 + p2.
//
// For example, the weights [layers 32, experts 8, heads 64, headDim 128]
// of a model trained with 4 pipeline stages (PP, along layers), 2 expert
// groups (EP, along experts), 8-way tensor parallelism (TP, along heads)
// and 2 data-parallel replicas (DP) are
//
//	Sharded(t, ShardSpec{Parts: []int64{4, 2, 8, 1}, Replicas: 2})
//
// 128 ranks, rank 64*dp + 16*pp + 8*ep + tp holding layers
// [8*pp, 8*pp+8), experts [4*ep, 4*ep+4) and heads [8*tp, 8*tp+8).
// Setting Cyclic[2] instead gives rank tp the heads tp, tp+8, tp+16, ...;
// Order {2, 0, 1, 3} stores each rank's heads outermost.
//
// Sharded refuses a malformed tensor or spec with a *LayoutError wrapping
// ErrLayout (Rank and Piece -1), and more than DefaultMaxPieces ranks
// with a *LimitError ("pieces").
func Sharded(t Tensor, s ShardSpec) (*Layout, error) {
	if _, _, err := checkTensor(&t, DefaultMaxAxes); err != nil {
		return nil, err
	}
	axes := len(t.Shape)
	bad := func(format string, args ...any) error {
		return &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: "shard spec: " + fmt.Sprintf(format, args...)}
	}
	if len(s.Parts) != axes {
		return nil, bad("%d parts for %d axes", len(s.Parts), axes)
	}
	if s.Cyclic != nil && len(s.Cyclic) != axes {
		return nil, bad("%d cyclic flags for %d axes", len(s.Cyclic), axes)
	}
	if s.Replicas < 0 {
		return nil, bad("%d replicas", s.Replicas)
	}
	if s.Base < 0 {
		return nil, bad("negative base %d", s.Base)
	}
	order := s.Order
	if order == nil {
		order = make([]int, axes)
		for a := range order {
			order[a] = a
		}
	} else if reason := checkOrder(order, axes); reason != "" {
		return nil, bad("%s", reason)
	}
	replicas := int64(max(s.Replicas, 1))
	shards := int64(1)
	for a, p := range s.Parts {
		if p < 1 || p > t.Shape[a] {
			return nil, bad("%d parts along axis %d of extent %d", p, a, t.Shape[a])
		}
		shards *= p // at most the tensor's elements
	}
	ranks, ok := mulFits(shards, replicas)
	if !ok || ranks > DefaultMaxPieces {
		if !ok {
			ranks = -1
		}
		return nil, &LimitError{Limit: "pieces", Value: ranks, Max: DefaultMaxPieces}
	}

	l := &Layout{Tensor: cloneTensor(t), Ranks: make([]Rank, ranks)}
	boxes := make([]Interval, int(ranks)*axes)
	strides := make([]int64, int(ranks)*axes)
	for r := range l.Ranks {
		box := boxes[r*axes : (r+1)*axes : (r+1)*axes]
		st := strides[r*axes : (r+1)*axes : (r+1)*axes]
		if int64(r) >= shards { // a replica: copy the shard's box
			copy(box, boxes[(int64(r)%shards)*int64(axes):])
		} else {
			rest := int64(r)
			for a := axes - 1; a >= 0; a-- {
				p, n, parts := rest%s.Parts[a], t.Shape[a], s.Parts[a]
				rest /= parts
				if s.Cyclic != nil && s.Cyclic[a] {
					box[a] = Interval{Lo: p, Hi: n, Step: parts}
				} else {
					box[a] = Interval{Lo: blockStart(p, n, parts), Hi: blockStart(p+1, n, parts), Step: 1}
				}
			}
		}
		bytes := denseStrides(st, box, order, -1, 0, t.ElemSize)
		region, ok := addFits(s.Base, bytes)
		if !ok {
			return nil, bad("base %d plus %d bytes overflows int64", s.Base, bytes)
		}
		l.Ranks[r] = Rank{Pieces: []Piece{{Box: box, Offset: s.Base, Strides: st}}, RegionBytes: region}
	}
	return l, nil
}

// Paginate returns l with every rank's piece cut into pages along axis,
// as in a paged cache: page j of rank r holds the piece's indices
// [Lo + j*pageLen, Lo + (j+1)*pageLen) along axis (the last page may hold
// fewer) and lives in slot tables[r][j] of the rank's page pool, at byte
// slot*pageBytes, where pageBytes is pageLen times the piece's other
// axes' lengths times ElemSize. The rank's region is (largest slot + 1) *
// pageBytes bytes; slots no page uses are left unused.
//
// Inside a page the elements are dense in the piece's own memory order
// (its axes sorted by stride, largest first; ties in logical order), with
// the paged axis pageLen indices long, so that every page of a rank has
// the same strides and a short last page leaves its tail unused. Where
// the piece lies in l's regions does not matter: the pools replace them.
//
// l must pass Validate with default limits and hold exactly one piece per
// rank, whose interval along axis is contiguous (Step 1, or a single
// index). tables holds one page table per rank, at least as long as the
// rank's pages (entries past them are ignored), with no negative or
// repeated slot among those used. Refusals are *LayoutError wrapping
// ErrLayout naming the rank and, as Piece, the page of a bad slot (0, l's
// piece, for a non-contiguous interval; -1 otherwise), or l's own
// validation error wrapped. l and tables are not changed.
func Paginate(l *Layout, axis int, pageLen int64, tables [][]int64) (*Layout, error) {
	if err := l.Validate(Limits{}); err != nil {
		return nil, fmt.Errorf("paginate: %w", err)
	}
	axes := len(l.Tensor.Shape)
	bad := func(r, page int, format string, args ...any) error {
		return &LayoutError{Kind: ErrLayout, Rank: r, Piece: page, Reason: "paginate: " + fmt.Sprintf(format, args...)}
	}
	if axis < 0 || axis >= axes {
		return nil, bad(-1, -1, "axis %d of a %d-axis tensor", axis, axes)
	}
	if pageLen < 1 {
		return nil, bad(-1, -1, "page length %d", pageLen)
	}
	if len(tables) != len(l.Ranks) {
		return nil, bad(-1, -1, "%d page tables for %d ranks", len(tables), len(l.Ranks))
	}
	out := &Layout{Tensor: cloneTensor(l.Tensor), Ranks: make([]Rank, len(l.Ranks))}
	order := make([]int, axes)
	var sorted []int64
	for r := range l.Ranks {
		rk := &l.Ranks[r]
		if len(rk.Pieces) != 1 {
			return nil, bad(r, -1, "rank holds %d pieces, not 1", len(rk.Pieces))
		}
		src := &rk.Pieces[0]
		iv := src.Box[axis]
		n := iv.Len()
		if iv.Step != 1 && n > 1 {
			return nil, bad(r, 0, "interval %s along axis %d is not contiguous", ivString(iv), axis)
		}
		pages := (n-1)/pageLen + 1
		table := tables[r]
		if int64(len(table)) < pages {
			return nil, bad(r, -1, "page table has %d slots for %d pages", len(table), pages)
		}
		table = table[:pages]
		sorted = append(sorted[:0], table...)
		slices.Sort(sorted)
		for j, slot := range sorted {
			if slot < 0 {
				return nil, bad(r, slices.Index(table, slot), "negative slot %d", slot)
			}
			if j > 0 && slot == sorted[j-1] {
				first := slices.Index(table, slot)
				return nil, bad(r, first+1+slices.Index(table[first+1:], slot),
					"slot %d already holds page %d", slot, first)
			}
		}

		// The piece's memory order, outermost first.
		for a := range order {
			order[a] = a
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(src.Strides[b], src.Strides[a]) })
		st := make([]int64, axes)
		pageBytes := denseStrides(st, src.Box, order, axis, pageLen, l.Tensor.ElemSize)
		if pageBytes < 0 {
			return nil, bad(r, -1, "pages of %d indices overflow int64 bytes", pageLen)
		}
		region, ok := mulFits(sorted[len(sorted)-1], pageBytes)
		if ok {
			region, ok = addFits(region, pageBytes)
		}
		if !ok {
			return nil, bad(r, -1, "slot %d of %d-byte pages overflows int64", sorted[len(sorted)-1], pageBytes)
		}

		boxes := make([]Interval, int(pages)*axes)
		strides := make([]int64, int(pages)*axes)
		pieces := make([]Piece, pages)
		for j := range pieces {
			box := boxes[j*axes : (j+1)*axes : (j+1)*axes]
			copy(box, src.Box)
			lo := iv.Lo + int64(j)*pageLen
			box[axis] = Interval{Lo: lo, Hi: lo + min(pageLen, n-int64(j)*pageLen), Step: 1}
			pst := strides[j*axes : (j+1)*axes : (j+1)*axes]
			copy(pst, st)
			pieces[j] = Piece{Box: box, Offset: table[j] * pageBytes, Strides: pst}
		}
		out.Ranks[r] = Rank{Pieces: pieces, RegionBytes: region}
	}
	return out, nil
}

// Clone returns a deep copy of l: the copy shares no slice with l.
func (l *Layout) Clone() *Layout {
	if l == nil {
		return nil
	}
	c := &Layout{Tensor: cloneTensor(l.Tensor), Ranks: make([]Rank, len(l.Ranks))}
	for r, rk := range l.Ranks {
		c.Ranks[r] = Rank{Pieces: make([]Piece, len(rk.Pieces)), RegionBytes: rk.RegionBytes}
		for i, p := range rk.Pieces {
			c.Ranks[r].Pieces[i] = Piece{Box: slices.Clone(p.Box), Offset: p.Offset, Strides: slices.Clone(p.Strides)}
		}
	}
	return c
}

func cloneTensor(t Tensor) Tensor {
	return Tensor{Shape: slices.Clone(t.Shape), ElemSize: t.ElemSize}
}

// checkOrder reports why order is not a permutation of 0..axes-1, or "".
func checkOrder(order []int, axes int) string {
	if len(order) != axes {
		return fmt.Sprintf("order %v has %d entries for %d axes", order, len(order), axes)
	}
	seen := make([]bool, axes)
	for _, a := range order {
		if a < 0 || a >= axes || seen[a] {
			return fmt.Sprintf("order %v is not a permutation of the %d axes", order, axes)
		}
		seen[a] = true
	}
	return ""
}

// blockStart is p*n/parts, the first index of block p of n indices split
// into parts blocks, without overflow (0 <= p <= parts <= n).
func blockStart(p, n, parts int64) int64 {
	h, l := bits.Mul64(uint64(p), uint64(n))
	q, _ := bits.Div64(h, l, uint64(parts)) // h < parts: p*n <= parts*n
	return int64(q)
}

// denseStrides fills st with the strides of box stored densely in memory
// order (outermost axis first), the interval along axis paged taken as
// pageLen indices long (paged -1: none), and returns the bytes of the
// whole, or -1 when they overflow int64.
func denseStrides(st []int64, box []Interval, order []int, paged int, pageLen, elemSize int64) int64 {
	size := elemSize
	for k := len(order) - 1; k >= 0; k-- {
		a := order[k]
		st[a] = size
		n := box[a].Len()
		if a == paged {
			n = pageLen
		}
		var ok bool
		if size, ok = mulFits(size, n); !ok {
			return -1
		}
	}
	return size
}

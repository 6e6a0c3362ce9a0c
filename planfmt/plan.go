package planfmt

import (
	"math"
	"math/bits"
	"strconv"
	"unsafe"
)

// Form says which lowering a Plan holds.
type Form uint8

const (
	// FormRanges is the general lowering: a list of Range.
	FormRanges Form = 1
	// FormRows is the fixed-row lowering: row ids into a table of equal-size
	// rows, landing in a contiguous or strided destination layout.
	FormRows Form = 2
)

func (f Form) String() string {
	switch f {
	case FormRanges:
		return "ranges"
	case FormRows:
		return "rows"
	}
	return "Form(" + strconv.Itoa(int(f)) + ")"
}

// Range is one fragment of the general lowering: Len bytes from offset Src of
// the source extent to offset Dst of the destination extent. A zero-length
// range is allowed and carries nothing.
type Range struct {
	Src, Dst, Len uint64
}

// LayoutKind selects how the fixed-row form places rows in the destination.
type LayoutKind uint8

const (
	// LayoutContiguous places row i at DstBase + i*RowSize.
	LayoutContiguous LayoutKind = 0
	// LayoutStrided reads the ids as a row-major [T, Cols] array and places
	// row (t, k) at DstBase + t*RowStride + k*ColStride.
	LayoutStrided LayoutKind = 1
)

// Layout is the destination layout of the fixed-row form. The zero value is
// the contiguous layout; a contiguous layout must leave the other fields zero.
//
// A strided layout covers token-major outputs ([T,K,R]: RowStride = K*R,
// ColStride = R), head-major outputs ([K,T,R]: RowStride = R, ColStride =
// T*R), padded variants of both and any other strides under which no two rows
// overlap. Overlap is decided exactly in O(log(stride)) time from the strides
// alone (see Normalize), never per row.
type Layout struct {
	Kind      LayoutKind
	Cols      uint64 // K: ids per token row; len(ids) must be a multiple of it
	RowStride uint64 // destination bytes from token t to token t+1
	ColStride uint64 // destination bytes from column k to column k+1
}

// Rows is the fixed-row lowering: the rows of a table of TableRows rows of
// RowSize bytes starting at source offset SrcBase, selected by ids.
//
// The ids are held, never copied: set exactly one of IDs32 and IDs64 (an empty
// plan may set neither). Id -1 skips a row: its destination bytes are left
// untouched and it carries no bytes. Any other id must lie in
// [0, TableRows).
//
// Plans filled by DecodePlan and DecodeCommand hold their ids in storage owned
// by the Plan: IDs32 when TableRows <= math.MaxInt32 (4 bytes per id is the
// cheapest stream for the owner's gather loop), IDs64 otherwise.
type Rows struct {
	RowSize   uint64 // R, bytes per row, at least 1
	SrcBase   uint64 // source offset of row 0
	TableRows uint64 // rows in the table, at most math.MaxInt64
	IDs32     []int32
	IDs64     []int64
	DstBase   uint64 // destination offset of row 0 (or of (0,0) when strided)
	Layout    Layout
}

// Len returns the number of ids (fragments), skipped ones included.
func (r *Rows) Len() int {
	if len(r.IDs32) != 0 {
		return len(r.IDs32)
	}
	return len(r.IDs64)
}

// ID returns id i (as int64) whichever slice holds it. It is meant for
// inspection and tests; hot loops should range over IDs32 or IDs64 directly.
func (r *Rows) ID(i int) int64 {
	if len(r.IDs32) != 0 {
		return int64(r.IDs32[i])
	}
	return r.IDs64[i]
}

// Plan is a scatter plan: one lowering (Form selects Ranges or Rows) within a
// source extent and a destination extent, plus optional completion spans.
//
// Offsets are relative to the extents: in a Command the extents are the
// source and destination windows, and SrcExtent/DstExtent must equal their
// lengths.
//
// CompletionEnds groups fragments (in plan order) into completion spans: span
// j holds fragments [CompletionEnds[j-1], CompletionEnds[j]). The ends must be
// strictly increasing and the last must equal the fragment count. Empty means
// one span for the whole plan.
//
// A Plan may be reused: DecodePlan and DecodeCommand keep their id, range and
// completion storage inside it and grow it only when a message needs more.
type Plan struct {
	Form           Form
	SrcExtent      uint64
	DstExtent      uint64
	Ranges         []Range // FormRanges only
	Rows           Rows    // FormRows only
	CompletionEnds []uint32

	ownRanges []Range
	ownIDs32  []int32
	ownIDs64  []int64
	ownEnds   []uint32
}

// Footprint returns the bytes of decode storage the plan keeps for reuse
// (its own ranges, ids and completion ends, at their capacity); a plan
// whose slices are the caller's keeps none.
func (p *Plan) Footprint() int64 {
	return int64(cap(p.ownRanges))*int64(unsafe.Sizeof(Range{})) + int64(cap(p.ownIDs32))*4 +
		int64(cap(p.ownIDs64))*8 + int64(cap(p.ownEnds))*4
}

// Fragments returns the number of fragments of the plan's form, skipped ones
// included.
func (p *Plan) Fragments() int {
	if p.Form == FormRows {
		return p.Rows.Len()
	}
	return len(p.Ranges)
}

// rowShape is the fixed-row form reduced to a canonical lattice: fragment
// i = t*k + c lands at dstBase + t*a + c*b. Contiguous layouts and one-column
// strided layouts become a single lattice row (t == 1) so loops run long.
type rowShape struct {
	n       int
	t, k    uint64
	a, b    uint64
	width   int // encoded id width in bytes
	rowSize uint64
}

// maxFragments is the most fragments a plan can hold: counts are 32-bit on the
// wire.
const maxFragments = math.MaxUint32

// checkRows validates everything about the fixed-row form that does not need
// a pass over the ids: parameters, table and layout bounds, and layout
// overlap. Ids themselves are checked by the callers' loops.
func (p *Plan) checkRows() (rowShape, error) {
	r := &p.Rows
	if len(r.IDs32) != 0 && len(r.IDs64) != 0 {
		return rowShape{}, invalid("Rows.IDs32", "both IDs32 and IDs64 are set")
	}
	return checkRowsShape(r, r.Len(), p.SrcExtent, p.DstExtent)
}

// checkRowsShape is checkRows for a descriptor whose n ids are not (yet) in
// r; the decoder calls it before it touches any id.
func checkRowsShape(r *Rows, n int, srcExtent, dstExtent uint64) (rowShape, error) {
	var s rowShape
	if r.RowSize == 0 {
		return s, invalid("Rows.RowSize", "must be at least 1")
	}
	if r.TableRows > math.MaxInt64 {
		return s, invalid("Rows.TableRows", "exceeds math.MaxInt64")
	}
	if uint64(n) > maxFragments {
		return s, invalid("Rows", "more than 2^32-1 ids")
	}
	s.n = n
	s.rowSize = r.RowSize
	s.width = idWidth(r.TableRows)

	// The whole table must fit in the source extent.
	tbl, ok := mulAdd(r.TableRows, r.RowSize, r.SrcBase)
	if !ok || tbl > srcExtent {
		return s, &BoundsError{Index: -1, Field: "src", Off: r.SrcBase, Len: satMul(r.TableRows, r.RowSize), Limit: srcExtent}
	}

	l := r.Layout
	switch l.Kind {
	case LayoutContiguous:
		if l.Cols != 0 || l.RowStride != 0 || l.ColStride != 0 {
			return s, invalid("Rows.Layout", "contiguous layout with nonzero Cols or strides")
		}
		s.t, s.k, s.a, s.b = 1, uint64(n), 0, r.RowSize
	case LayoutStrided:
		if l.Cols == 0 {
			return s, invalid("Rows.Layout.Cols", "must be at least 1")
		}
		if uint64(n)%l.Cols != 0 {
			return s, invalid("Rows.Layout.Cols", "id count is not a multiple of Cols")
		}
		s.t, s.k, s.a, s.b = uint64(n)/l.Cols, l.Cols, l.RowStride, l.ColStride
		if s.k == 1 {
			s.t, s.k, s.a, s.b = 1, s.t, 0, s.a
		}
		if hi, lo := bits.Mul64(s.k, s.b); hi == 0 && lo == s.a && s.t > 1 {
			// Token rows packed back to back: one long lattice row.
			s.t, s.k, s.a = 1, s.t*s.k, 0
		}
	default:
		return s, invalid("Rows.Layout.Kind", "unknown layout kind "+strconv.Itoa(int(l.Kind)))
	}
	if n == 0 {
		s.t, s.k = 0, 0
		return s, nil
	}

	// The last lattice point plus one row must fit in the destination extent;
	// after this every t*a and c*b below fits in 64 bits.
	ta, ok1 := mulAdd(s.t-1, s.a, 0)
	kb, ok2 := mulAdd(s.k-1, s.b, 0)
	end, ok3 := add3(ta, kb, r.RowSize)
	end, ok4 := add3(end, r.DstBase, 0)
	if !ok1 || !ok2 || !ok3 || !ok4 || end > dstExtent {
		return s, &BoundsError{Index: -1, Field: "dst", Off: r.DstBase, Len: satAdd(satAdd(ta, kb), r.RowSize), Limit: dstExtent}
	}
	if x, y, found := latticeOverlap(s.t, s.k, s.a, s.b, r.RowSize); found {
		i, j := int(x*s.k), int(y)
		di, dj := r.DstBase+x*s.a, r.DstBase+y*s.b
		if dj < di || (dj == di && j < i) {
			i, j, di, dj = j, i, dj, di
		}
		return s, &OverlapError{First: i, Second: j, FirstDst: di, FirstLen: r.RowSize, SecondDst: dj, SecondLen: r.RowSize}
	}
	return s, nil
}

// checkEnds validates completion ends against n fragments.
func checkEnds(ends []uint32, n int) error {
	if len(ends) == 0 {
		return nil
	}
	var prev uint32
	for j, e := range ends {
		if e == 0 || (j > 0 && e <= prev) {
			return invalid("CompletionEnds", "ends must be strictly increasing and positive")
		}
		prev = e
	}
	if uint64(prev) != uint64(n) {
		return invalid("CompletionEnds", "last end must equal the fragment count")
	}
	return nil
}

// idWidth returns the fewest bytes w such that every id in [0, tableRows)
// fits in w bytes and the all-ones w-byte value stays free for -1.
func idWidth(tableRows uint64) int {
	// Ids reach tableRows-1 and the reserved value is 2^(8w)-1, so we need
	// tableRows-1 < 2^(8w)-1, that is tableRows < 2^(8w): tableRows itself
	// fits in 8w bits.
	return max(1, (bits.Len64(tableRows)+7)/8)
}

// mulAdd returns a*b + c and whether it did not overflow.
func mulAdd(a, b, c uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	sum, carry := bits.Add64(lo, c, 0)
	return sum, hi == 0 && carry == 0
}

// add3 returns a+b+c and whether it did not overflow.
func add3(a, b, c uint64) (uint64, bool) {
	s, c1 := bits.Add64(a, b, 0)
	s, c2 := bits.Add64(s, c, 0)
	return s, c1 == 0 && c2 == 0
}

func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

func satAdd(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return math.MaxUint64
	}
	return s
}

package lookup

import (
	"math"
	"math/bits"
	"unsafe"
)

// Column is the source of one id column: a table's rows and the offset
// subtracted from the column's ids.
type Column struct {
	// Rows holds the table: row r is Rows[r*RowBytes : (r+1)*RowBytes].
	// It must hold at least NumRows*RowBytes bytes; bytes past that are
	// not rows.
	Rows []byte
	// NumRows is how many rows the table has.
	NumRows int64
	// RowBytes is the size R of a row, at least 1. Every column of one
	// lookup has the same R, the size of an output row.
	RowBytes int
	// Offset is subtracted from every id of the column but -1: id names
	// row id-Offset, so global ids address a table holding rows Offset,
	// Offset+1, ...
	Offset int64
	// Name is the table's name, when the lookup named it ([Request.Check]
	// sets it): errors report it, and a remote lookup finds the owner's
	// table by it.
	Name string
}

// Output describes a [T,K] array of R-byte output rows in Buf: row (t, k)
// is Buf[Off+t*TStride+k*KStride:][:R]. Offsets and strides are not
// negative, every row lies in Buf, no two rows overlap (the exact rule, see
// [Check]), and the rows do not overlap a table.
type Output struct {
	Buf []byte
	// Off is the byte offset of row (0, 0) in Buf.
	Off int
	// TStride and KStride are the distances in bytes from row (t, k) to
	// rows (t+1, k) and (t, k+1). A stride of a dimension of size 1 is not
	// used.
	TStride, KStride int
	// DeviceLen, when positive, makes the output device memory of that
	// many bytes (Buf nil): its rows are checked against the length, and
	// only a remote lookup, which stages them, takes one.
	DeviceLen int
}

// Len is the output's length in bytes: Buf's, or a device output's.
func (o Output) Len() int {
	if o.DeviceLen > 0 {
		return o.DeviceLen
	}
	return len(o.Buf)
}

// TokenMajor returns the dense [T,K,R] output over buf: all columns of
// token 0, then of token 1, and so on.
func TokenMajor(buf []byte, t, k, rowBytes int) Output {
	return Output{Buf: buf, TStride: mulOrNeg(k, rowBytes), KStride: rowBytes}
}

// HeadMajor returns the dense [K,T,R] output over buf: all tokens of column
// 0, then of column 1, and so on.
func HeadMajor(buf []byte, t, k, rowBytes int) Output {
	return Output{Buf: buf, TStride: rowBytes, KStride: mulOrNeg(t, rowBytes)}
}

// mulOrNeg returns a*b for non-negative a and b, or -1 when either is
// negative or the product overflows int, which the output check rejects.
func mulOrNeg(a, b int) int {
	if a < 0 || b < 0 {
		return -1
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt {
		return -1
	}
	return int(lo)
}

// addOK returns a+b for non-negative a and b; ok is false on overflow.
func addOK(a, b int) (int, bool) {
	if a > math.MaxInt-b {
		return 0, false
	}
	return a + b, true
}

// checkShape validates the [T,K] shape against the ids and columns.
func checkShape(cols, ids, t, k int) error {
	if t < 0 || k < 0 || k > math.MaxInt32 || cols != k {
		return &ShapeError{T: t, K: k, IDs: ids, Columns: cols}
	}
	if n := mulOrNeg(t, k); n < 0 || n != ids {
		return &ShapeError{T: t, K: k, IDs: ids, Columns: cols}
	}
	return nil
}

// checkColumns validates every column and returns their common row size
// (0 when there are no columns). Remote columns have no Rows to check, and
// no negative offset.
func checkColumns(cols []Column, remote bool) (int, error) {
	if len(cols) == 0 {
		return 0, nil
	}
	want := cols[0].RowBytes
	for k := range cols {
		c := &cols[k]
		bad := func(err error) error {
			return &ColumnError{Column: k, Table: c.Name, RowBytes: c.RowBytes, NumRows: c.NumRows, Len: len(c.Rows),
				Want: want, Offset: c.Offset, Err: err}
		}
		if remote && c.Offset < 0 {
			return 0, bad(ErrShape)
		}
		if k > 0 && sameColumn(c, &cols[k-1]) {
			continue // checked as column k-1
		}
		if c.RowBytes < 1 || c.NumRows < 0 {
			return 0, bad(ErrTable)
		}
		if c.RowBytes != want {
			return 0, bad(ErrRowBytes)
		}
		hi, lo := bits.Mul64(uint64(c.NumRows), uint64(c.RowBytes))
		if hi != 0 || lo > math.MaxInt64 || (!remote && lo > uint64(len(c.Rows))) {
			return 0, bad(ErrTable)
		}
	}
	return want, nil
}

// sameColumn reports whether two columns are the same table: same rows,
// row count and row size (the offsets may differ).
func sameColumn(a, b *Column) bool {
	return unsafe.SliceData(a.Rows) == unsafe.SliceData(b.Rows) && len(a.Rows) == len(b.Rows) &&
		a.NumRows == b.NumRows && a.RowBytes == b.RowBytes
}

// checkOutput validates the output of t*k rows of rowBytes bytes and, when
// the tables are local, that it does not overlap them; t and k are at
// least 1.
func checkOutput(out Output, t, k, rowBytes int, cols []Column, local bool) error {
	bad := func(reason string) error {
		return &OutputError{T: t, K: k, RowBytes: rowBytes, Off: out.Off, TStride: out.TStride,
			KStride: out.KStride, Len: out.Len(), Reason: reason}
	}
	// A stride of a dimension of size 1 is never used: treat it as 0 so
	// that it cannot overflow or overlap.
	ts, ks := out.TStride, out.KStride
	if t == 1 {
		ts = 0
	}
	if k == 1 {
		ks = 0
	}
	if out.Off < 0 || ts < 0 || ks < 0 {
		return bad("negative offset or stride")
	}
	end := -1
	if a := mulOrNeg(t-1, ts); a >= 0 {
		if b := mulOrNeg(k-1, ks); b >= 0 {
			if s, ok := addOK(a, b); ok {
				if s, ok = addOK(s, out.Off); ok {
					if s, ok = addOK(s, rowBytes); ok {
						end = s
					}
				}
			}
		}
	}
	if end < 0 {
		return bad("extent overflows int")
	}
	if end > out.Len() {
		return bad("rows do not fit in the buffer")
	}
	if reason := overlapReason(t, ts, k, ks, rowBytes); reason != "" {
		return bad(reason)
	}
	if !local || out.DeviceLen > 0 {
		return nil // a device output cannot overlap host tables
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(out.Buf))) + uintptr(out.Off)
	hi := lo + uintptr(end-out.Off)
	for j := range cols {
		c := &cols[j]
		if c.NumRows == 0 || (j > 0 && sameColumn(c, &cols[j-1])) {
			continue
		}
		tlo := uintptr(unsafe.Pointer(unsafe.SliceData(c.Rows)))
		thi := tlo + uintptr(c.NumRows)*uintptr(c.RowBytes)
		if lo < thi && tlo < hi {
			return bad("output overlaps the table of a column")
		}
	}
	return nil
}

// checkArena validates that a remote lookup's output lies inside the
// arena, the registered memory the owner may write.
func checkArena(out, arena []byte) error {
	if len(out) == 0 {
		return &BufferError{Len: 0, Reason: "empty output"}
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(arena)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(out)))
	if p < base || p-base >= uintptr(len(arena)) || uintptr(len(out)) > uintptr(len(arena))-(p-base) {
		return &BufferError{Len: len(out), Reason: "not inside the registered output memory (take it from NewBuffer)"}
	}
	return nil
}

// overlapReason returns why rows of size r at i*a + j*b, i < n, j < m,
// overlap, or "" when they do not. The rule is exact: rows (i1, j1) and
// (i2, j2) overlap when |dx*a + dy*b| < r with dx = i1-i2, dy = j1-j2.
// Taking dy >= 0, a pair with dx >= 0 is at least dy*b apart, so beyond the
// stride of each dimension (at least r when the dimension has two or more
// rows) only the pairs dx = -x < 0, dy > 0 matter, and for each dy the
// closest is x = floor(dy*b/a) or the one above, within [1, n-1]. That is
// min(n, m) steps, and a fast path accepts the tiled layouts (token-major,
// head-major, padded) without any. The caller has checked that
// (n-1)*a + (m-1)*b + r fits in an int.
func overlapReason(n, a, m, b, r int) string {
	if n > 1 && a < r {
		return "rows along T overlap (TStride below the row size)"
	}
	if m > 1 && b < r {
		return "rows along K overlap (KStride below the row size)"
	}
	if n <= 1 || m <= 1 {
		return ""
	}
	// Tiled: all rows along the smaller stride fit below the larger one.
	if (a <= b && (n-1)*a+r <= b) || (b < a && (m-1)*b+r <= a) {
		return ""
	}
	// Walk the shorter dimension as dy.
	if m > n {
		n, a, m, b = m, b, n, a
	}
	for dy := 1; dy < m; dy++ {
		d := dy * b
		x := min(d/a, n-1)
		if x >= 1 && d-x*a < r {
			return "TStride and KStride interleave overlapping rows"
		}
		if x+1 <= n-1 && (x+1)*a-d < r {
			return "TStride and KStride interleave overlapping rows"
		}
	}
	return ""
}

// bound is the range of ids a column accepts besides -1: [lo, lo+n), with
// n cut so that lo+n-1 does not overflow int64. An id is in it exactly when
// uint64(id-lo) < n, wrapping arithmetic included.
type bound struct {
	lo int64
	n  uint64
}

func columnBound(c *Column) bound {
	n := uint64(c.NumRows)
	if c.Offset > 0 {
		if room := uint64(math.MaxInt64-c.Offset) + 1; n > room {
			n = room
		}
	}
	return bound{lo: c.Offset, n: n}
}

func (b bound) has(id int64) bool { return uint64(id-b.lo) < b.n }

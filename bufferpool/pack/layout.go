package pack

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"
)

// ID is the set of id types: int32, int64 and types defined on them.
type ID interface{ ~int32 | ~int64 }

// Layout describes a 1-D request: which packed rows Rows ids map to. The
// zero value of Stride and IDStride selects the dense layout.
type Layout struct {
	// Rows is how many rows the request moves.
	Rows int
	// RowBytes is the size R of a row, in bytes, in the table and in the
	// packed buffer. It must be at least 1.
	RowBytes int
	// Off is the byte offset of packed row 0 in the packed buffer.
	Off int
	// Stride is the distance in bytes from one packed row to the next:
	// 0 means RowBytes (rows back to back); any other value must be at
	// least RowBytes.
	Stride int
	// IDStride is the distance in elements from one id to the next: id i is
	// ids[i*IDStride]. 0 means 1.
	IDStride int
	// Bias is subtracted from every id but -1 to give its table row, so that
	// global ids address a table holding rows Bias, Bias+1, ...
	Bias int64
}

// resolve returns l with the zero strides replaced, or an error wrapping
// ErrLayout.
func (l Layout) resolve() (Layout, error) {
	switch {
	case l.RowBytes < 1:
		return l, fmt.Errorf("row size %d below 1: %w", l.RowBytes, ErrLayout)
	case l.Rows < 0:
		return l, fmt.Errorf("negative row count %d: %w", l.Rows, ErrLayout)
	case l.Off < 0:
		return l, fmt.Errorf("negative offset %d: %w", l.Off, ErrLayout)
	case l.IDStride < 0:
		return l, fmt.Errorf("negative id stride %d: %w", l.IDStride, ErrLayout)
	case l.Stride != 0 && l.Stride < l.RowBytes:
		return l, fmt.Errorf("stride %d below row size %d, packed rows would overlap: %w", l.Stride, l.RowBytes, ErrLayout)
	}
	return l.dense(), nil
}

// dense replaces the zero strides of l without checking anything.
func (l Layout) dense() Layout {
	if l.Stride == 0 {
		l.Stride = l.RowBytes
	}
	if l.IDStride == 0 {
		l.IDStride = 1
	}
	return l
}

// Grid describes a whole [T,K] id array gathered into a [T,K]-shaped output
// of R-byte rows. Zero strides select the dense token-major layout: ids
// [T,K] row-major and output [T,K,R]; [HeadMajor] builds the [K,T,R] one.
type Grid struct {
	// T and K are the id array's dimensions (tokens, and ids per token).
	T, K int
	// RowBytes is the size R of a row, at least 1.
	RowBytes int
	// Off is the byte offset of output row (0, 0) in the output.
	Off int
	// TStride and KStride are the distances in bytes between output rows
	// (t, k) and (t+1, k), and (t, k) and (t, k+1). Zero KStride means
	// RowBytes; zero TStride means K*KStride. The rows must not overlap: the
	// check accepts layouts where all rows along the dimension of smaller
	// stride fit between two neighbours along the other (tiled layouts, with
	// or without padding).
	TStride, KStride int
	// IDTStride and IDKStride are the distances in elements between ids
	// (t, k) and (t+1, k), and (t, k) and (t, k+1). Zero IDKStride means 1;
	// zero IDTStride means K*IDKStride.
	IDTStride, IDKStride int
	// Bias is subtracted from every id but -1 to give its table row.
	Bias int64
}

// TokenMajor returns the grid of a dense [T,K] id array gathered into a dense
// [T,K,R] output.
func TokenMajor(t, k, rowBytes int) Grid { return Grid{T: t, K: k, RowBytes: rowBytes} }

// HeadMajor returns the grid of a dense [T,K] id array gathered into a dense
// [K,T,R] output: all rows of column 0, then all rows of column 1, ...
func HeadMajor(t, k, rowBytes int) Grid {
	return Grid{T: t, K: k, RowBytes: rowBytes, TStride: rowBytes, KStride: t * rowBytes}
}

// resolve returns g with the zero strides replaced, or an error wrapping
// ErrLayout.
func (g Grid) resolve() (Grid, error) {
	switch {
	case g.RowBytes < 1:
		return g, fmt.Errorf("row size %d below 1: %w", g.RowBytes, ErrLayout)
	case g.T < 0 || g.K < 0:
		return g, fmt.Errorf("negative grid [%d,%d]: %w", g.T, g.K, ErrLayout)
	case g.Off < 0:
		return g, fmt.Errorf("negative offset %d: %w", g.Off, ErrLayout)
	case g.TStride < 0 || g.KStride < 0 || g.IDTStride < 0 || g.IDKStride < 0:
		return g, fmt.Errorf("negative stride (%d, %d, ids %d, %d): %w", g.TStride, g.KStride, g.IDTStride, g.IDKStride, ErrLayout)
	}
	g = g.dense()
	if g.TStride < 0 || g.IDTStride < 0 {
		return g, fmt.Errorf("default strides of a [%d,%d] grid overflow: %w", g.T, g.K, ErrLayout)
	}
	if err := disjoint(g.TStride, g.T, g.KStride, g.K, g.RowBytes); err != nil {
		return g, err
	}
	return g, nil
}

// dense replaces the zero strides of g without checking anything. An
// overflowing product comes out negative.
func (g Grid) dense() Grid {
	if g.KStride == 0 {
		g.KStride = g.RowBytes
	}
	if g.TStride == 0 {
		g.TStride = mulOrNeg(g.K, g.KStride)
	}
	if g.IDKStride == 0 {
		g.IDKStride = 1
	}
	if g.IDTStride == 0 {
		g.IDTStride = mulOrNeg(g.K, g.IDKStride)
	}
	return g
}

// disjoint checks that rows of size bytes at a*i + b*j, i < na, j < nb, do
// not overlap, by the tiling rule of [Grid].
func disjoint(a, na, b, nb, size int) error {
	if na <= 1 && nb <= 1 {
		return nil
	}
	if na <= 1 || (nb > 1 && b < a) {
		a, na, b, nb = b, nb, a, na
	}
	if a < size {
		return fmt.Errorf("stride %d below row size %d, output rows would overlap: %w", a, size, ErrLayout)
	}
	if nb <= 1 {
		return nil
	}
	if span, ok := end(0, na, a, size); !ok || span > b {
		return fmt.Errorf("strides %d and %d interleave %d-byte rows: %w", a, b, size, ErrLayout)
	}
	return nil
}

// end returns off + (n-1)*stride + size, where n items of size bytes placed
// stride apart from off end; ok is false when that overflows int. All
// arguments are non-negative and n is at least 1.
func end(off, n, stride, size int) (int, bool) {
	hi, lo := bits.Mul64(uint64(n-1), uint64(stride))
	if hi != 0 || lo > math.MaxInt {
		return 0, false
	}
	e := int(lo)
	if e > math.MaxInt-off {
		return 0, false
	}
	e += off
	if e > math.MaxInt-size {
		return 0, false
	}
	return e + size, true
}

func mulOrNeg(a, b int) int {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt {
		return -1
	}
	return int(lo)
}

// overlap reports whether the byte ranges a and b share memory.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// tableRows returns how many whole rows table holds.
func tableRows(table []byte, rowBytes int) int { return len(table) / rowBytes }

// checkID returns the table row of id, or an error for an id outside a
// table of rows rows. It is only called for ids other than -1.
func checkID(id, bias int64, rows int, index int) (int64, error) {
	row := id - bias
	if (bias > 0 && row > id) || (bias < 0 && row < id) || row < 0 || row >= int64(rows) {
		return 0, &IDError{Index: index, ID: id, Err: ErrBounds}
	}
	return row, nil
}

// checkLinear validates a 1-D request; packed is the buffer holding the
// packed rows (the destination of a gather, the source of a scatter). For a
// scatter it also rejects two ids naming one table row.
func checkLinear[I ID](packed, table []byte, ids []I, l Layout, scatter bool) (Layout, error) {
	l, err := l.resolve()
	if err != nil || l.Rows == 0 {
		return l, err
	}
	if need, ok := end(0, l.Rows, l.IDStride, 1); !ok || need > len(ids) {
		return l, fmt.Errorf("%d ids %d apart do not fit in %d ids: %w", l.Rows, l.IDStride, len(ids), ErrBounds)
	}
	pend, ok := end(l.Off, l.Rows, l.Stride, l.RowBytes)
	if !ok || pend > len(packed) {
		return l, fmt.Errorf("%d packed rows from offset %d, stride %d, do not fit in %d bytes: %w",
			l.Rows, l.Off, l.Stride, len(packed), ErrBounds)
	}
	rows := tableRows(table, l.RowBytes)
	if overlap(packed[l.Off:pend], table[:rows*l.RowBytes]) {
		return l, fmt.Errorf("packed rows overlap the table: %w", ErrLayout)
	}
	var set *rowSet
	if scatter && l.Rows > 1 {
		set = rowSets.Get().(*rowSet)
		defer set.release()
		set.reset(l.Rows)
	}
	for i, j := 0, 0; i < l.Rows; i, j = i+1, j+l.IDStride {
		id := int64(ids[j])
		if id == -1 {
			continue
		}
		row, err := checkID(id, l.Bias, rows, j)
		if err != nil {
			return l, err
		}
		if set != nil && !set.insert(row) {
			return l, &IDError{Index: j, ID: id, Err: ErrLayout}
		}
	}
	return l, nil
}

// checkGrid validates a grid gather.
func checkGrid[I ID](dst, table []byte, ids []I, g Grid) (Grid, error) {
	g, err := g.resolve()
	if err != nil || g.T == 0 || g.K == 0 {
		return g, err
	}
	need, ok := end(0, g.T, g.IDTStride, 0)
	if ok {
		need, ok = end(need, g.K, g.IDKStride, 1)
	}
	if !ok || need > len(ids) {
		return g, fmt.Errorf("ids of a [%d,%d] grid with strides %d, %d do not fit in %d ids: %w",
			g.T, g.K, g.IDTStride, g.IDKStride, len(ids), ErrBounds)
	}
	dend, ok := end(g.Off, g.T, g.TStride, 0)
	if ok {
		dend, ok = end(dend, g.K, g.KStride, g.RowBytes)
	}
	if !ok || dend > len(dst) {
		return g, fmt.Errorf("output of a [%d,%d] grid from offset %d with strides %d, %d does not fit in %d bytes: %w",
			g.T, g.K, g.Off, g.TStride, g.KStride, len(dst), ErrBounds)
	}
	rows := tableRows(table, g.RowBytes)
	if overlap(dst[g.Off:dend], table[:rows*g.RowBytes]) {
		return g, fmt.Errorf("output overlaps the table: %w", ErrLayout)
	}
	for t := range g.T {
		j := t * g.IDTStride
		for range g.K {
			if id := int64(ids[j]); id != -1 {
				if _, err := checkID(id, g.Bias, rows, j); err != nil {
					return g, err
				}
			}
			j += g.IDKStride
		}
	}
	return g, nil
}

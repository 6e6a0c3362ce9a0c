package engram

import (
	"fmt"
	"math"
)

// TableSpec is the shape of one table: NumRows immutable rows of RowBytes
// bytes each.
type TableSpec struct {
	NumRows  int64
	RowBytes int
}

// Size returns NumRows x RowBytes, or -1 when it overflows int64.
func (s TableSpec) Size() int64 {
	if s.NumRows <= 0 || s.RowBytes <= 0 || s.NumRows > math.MaxInt64/int64(s.RowBytes) {
		return -1
	}
	return s.NumRows * int64(s.RowBytes)
}

func (s TableSpec) check(name string) error {
	if s.NumRows < 1 || s.RowBytes < 1 || s.Size() < 0 {
		return fmt.Errorf("%w: table %q: %d rows of %d bytes", ErrConfig, name, s.NumRows, s.RowBytes)
	}
	return nil
}

func (s TableSpec) String() string {
	return fmt.Sprintf("%d rows x %d B", s.NumRows, s.RowBytes)
}

// IDs is a [T,K] array of row ids, row-major (id (t, k) at t*K + k): set
// exactly one of I32 and I64. Id -1 leaves its output row untouched.
type IDs struct {
	I32  []int32
	I64  []int64
	T, K int
}

// IDs32 wraps int32 ids of shape [t,k]; the slice is used, never copied.
func IDs32(ids []int32, t, k int) IDs { return IDs{I32: ids, T: t, K: k} }

// IDs64 wraps int64 ids of shape [t,k]; the slice is used, never copied.
func IDs64(ids []int64, t, k int) IDs { return IDs{I64: ids, T: t, K: k} }

// Output is a uint8 [T,K,R] destination given by byte strides: row (t, k)
// starts at Buf[Off + t*TStride + k*KStride]. Any strides under which no
// two rows overlap are accepted; TokenMajor and HeadMajor build the two
// dense layouts.
type Output struct {
	Buf              []byte
	Off              int
	TStride, KStride int
}

// TokenMajor is the dense [T,K,R] layout over buf.
func TokenMajor(buf []byte, t, k, rowBytes int) Output {
	return Output{Buf: buf, TStride: k * rowBytes, KStride: rowBytes}
}

// HeadMajor is the dense [K,T,R] layout over buf: all tokens of column 0,
// then of column 1, and so on.
func HeadMajor(buf []byte, t, k, rowBytes int) Output {
	return Output{Buf: buf, TStride: rowBytes, KStride: t * rowBytes}
}

// LookupOptions are a lookup's optional arguments.
type LookupOptions struct {
	// Offsets, when set, holds one offset per column: id - Offsets[k] is
	// the row of column k's table, so global ids address a table holding
	// rows Offsets[k], Offsets[k]+1, ...; -1 still skips.
	Offsets []int64
}

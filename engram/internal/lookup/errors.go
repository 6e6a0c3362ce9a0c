package lookup

import (
	"errors"
	"fmt"
)

// Errors of a lookup. Every validation failure is one of the typed errors
// below, which wraps one of these; test for them with [errors.Is]. The
// prefix is the user-facing package's: the root package engram returns
// these errors as they are or wrapped, so every message, the typed
// errors' included, starts "engram:".
var (
	// ErrShape reports ids, columns and a [T,K] shape that disagree:
	// negative T or K, len(ids) != T*K or len(cols) != K, or more than
	// MaxInt32 columns.
	ErrShape = errors.New("engram: lookup shape mismatch")
	// ErrRowBytes reports columns whose tables have different row sizes:
	// all columns of one lookup fill rows of one size R.
	ErrRowBytes = errors.New("engram: row sizes differ")
	// ErrTable reports a column whose table is malformed: a row size below
	// 1, a negative row count, or fewer bytes than NumRows*RowBytes.
	ErrTable = errors.New("engram: bad table")
	// ErrOutput reports an output that does not fit its buffer, has a
	// negative offset or stride, has two rows that overlap, or overlaps a
	// table.
	ErrOutput = errors.New("engram: bad output layout")
	// ErrID reports an id that is neither -1 nor a row of its column's
	// table once the column's offset is subtracted.
	ErrID = errors.New("engram: id out of range")
	// ErrClosed reports a lookup on a closed [Engine].
	ErrClosed = errors.New("engram: lookup engine closed")
)

// ShapeError details an [ErrShape].
type ShapeError struct {
	// T and K are the shape the call gave.
	T, K int
	// IDs and Columns are len(ids) and len(cols).
	IDs, Columns int
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("%v: [T=%d, K=%d] with %d ids and %d columns", ErrShape, e.T, e.K, e.IDs, e.Columns)
}

// Unwrap returns [ErrShape].
func (e *ShapeError) Unwrap() error { return ErrShape }

// ColumnError details an [ErrTable] or an [ErrRowBytes] about one column.
type ColumnError struct {
	// Column is the index k of the column.
	Column int
	// RowBytes, NumRows and Len are the column's row size, row count and
	// len(Rows).
	RowBytes int
	NumRows  int64
	Len      int
	// Want is the row size of column 0, which every column must share
	// (set for ErrRowBytes).
	Want int
	// Err is ErrTable or ErrRowBytes.
	Err error
}

func (e *ColumnError) Error() string {
	var what string
	switch {
	case errors.Is(e.Err, ErrRowBytes):
		what = fmt.Sprintf("row size %d, column 0 has %d", e.RowBytes, e.Want)
	case e.RowBytes < 1:
		what = fmt.Sprintf("row size %d below 1", e.RowBytes)
	case e.NumRows < 0:
		what = fmt.Sprintf("negative row count %d", e.NumRows)
	default:
		what = fmt.Sprintf("%d rows of %d bytes do not fit in %d bytes", e.NumRows, e.RowBytes, e.Len)
	}
	return fmt.Sprintf("%v: column %d: %s", e.Err, e.Column, what)
}

// Unwrap returns e.Err.
func (e *ColumnError) Unwrap() error { return e.Err }

// OutputError details an [ErrOutput].
type OutputError struct {
	// T, K and RowBytes are the shape of the rows the output must hold.
	T, K, RowBytes int
	// Off, TStride and KStride are the output's; Len is len(Buf).
	Off, TStride, KStride, Len int
	// Reason says what is wrong.
	Reason string
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("%v: output [T=%d, K=%d] of %d-byte rows at offset %d, strides (%d, %d), in %d bytes: %s",
		ErrOutput, e.T, e.K, e.RowBytes, e.Off, e.TStride, e.KStride, e.Len, e.Reason)
}

// Unwrap returns [ErrOutput].
func (e *OutputError) Unwrap() error { return ErrOutput }

// IDError details an [ErrID]: the first bad id in token-major order
// (t, then k).
type IDError struct {
	// T and K are the id's position in the [T,K] id array.
	T, K int
	// ID is the id as given.
	ID int64
	// Rows and Offset are the row count and offset of column K: the
	// column accepts -1 and ids in [Offset, Offset+Rows).
	Rows, Offset int64
}

func (e *IDError) Error() string {
	return fmt.Sprintf("%v: id %d at (t=%d, k=%d): not -1 and not in [%d, %d+%d)",
		ErrID, e.ID, e.T, e.K, e.Offset, e.Offset, e.Rows)
}

// Unwrap returns [ErrID].
func (e *IDError) Unwrap() error { return ErrID }

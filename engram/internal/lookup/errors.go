package lookup

import (
	"errors"
	"fmt"
)

// Errors of a lookup, local or remote. Every check failure is one of the
// typed errors below, which wraps one of these; test for them with
// [errors.Is]. These are the Engram store's error vocabulary: the root
// package engram and the remote path return them as they are (engram
// exports them under the same names), so every message starts with the
// user-facing package's prefix, "engram:".
var (
	// ErrShape reports ids, table names, offsets and a [T,K] shape that
	// disagree: negative T or K, len(ids) != T*K, K names, offsets or
	// columns that are not K, more than MaxInt32 columns, both int32 and
	// int64 ids, or a negative offset in a remote lookup.
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
	// ErrUnregisteredOutput reports a remote lookup whose output does not
	// lie in the registered memory the owner may write (a buffer from
	// engram's Store.NewBuffer, remote's Client.NewOutput).
	ErrUnregisteredOutput = errors.New("engram: output not in a registered buffer")
	// ErrID reports an id that is neither -1 nor a row of its column's
	// table once the column's offset is subtracted.
	ErrID = errors.New("engram: id out of range")
	// ErrUnknownTable reports a name that is not one of the tables a
	// lookup may read.
	ErrUnknownTable = errors.New("engram: unknown table")
	// ErrClosed reports a lookup on a closed [Engine].
	ErrClosed = errors.New("engram: lookup engine closed")
)

// ShapeError details an [ErrShape] about the whole request.
type ShapeError struct {
	// T and K are the shape the call gave.
	T, K int
	// IDs and Columns are the number of ids and of columns (or table
	// names).
	IDs, Columns int
	// Reason, when set, says what disagrees beyond those counts (the
	// offsets, the id types).
	Reason string
}

func (e *ShapeError) Error() string {
	s := fmt.Sprintf("%v: [T=%d, K=%d] with %d ids and %d columns", ErrShape, e.T, e.K, e.IDs, e.Columns)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns [ErrShape].
func (e *ShapeError) Unwrap() error { return ErrShape }

// ColumnError details an [ErrTable] or an [ErrRowBytes] about one column,
// or the [ErrShape] of a remote lookup's negative offset.
type ColumnError struct {
	// Column is the index k of the column; Table its table's name, when
	// the request named it.
	Column int
	Table  string
	// RowBytes, NumRows and Len are the column's row size, row count and
	// len(Rows).
	RowBytes int
	NumRows  int64
	Len      int
	// Want is the row size of column 0, which every column must share
	// (set for ErrRowBytes).
	Want int
	// Offset is the column's offset (set for ErrShape).
	Offset int64
	// Err is ErrTable, ErrRowBytes or ErrShape.
	Err error
}

func (e *ColumnError) Error() string {
	var what string
	switch {
	case errors.Is(e.Err, ErrShape):
		what = fmt.Sprintf("offset %d: a remote lookup takes no negative offset", e.Offset)
	case errors.Is(e.Err, ErrRowBytes):
		what = fmt.Sprintf("row size %d, column 0 has %d", e.RowBytes, e.Want)
	case e.RowBytes < 1:
		what = fmt.Sprintf("row size %d below 1", e.RowBytes)
	case e.NumRows < 0:
		what = fmt.Sprintf("negative row count %d", e.NumRows)
	default:
		what = fmt.Sprintf("%d rows of %d bytes do not fit in %d bytes", e.NumRows, e.RowBytes, e.Len)
	}
	return fmt.Sprintf("%v: column %d%s: %s", e.Err, e.Column, tableOf(e.Table), what)
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

// BufferError details an [ErrUnregisteredOutput].
type BufferError struct {
	// Len is the output buffer's length.
	Len int
	// Reason says what is wrong.
	Reason string
}

func (e *BufferError) Error() string {
	return fmt.Sprintf("%v: output of %d bytes: %s", ErrUnregisteredOutput, e.Len, e.Reason)
}

// Unwrap returns [ErrUnregisteredOutput].
func (e *BufferError) Unwrap() error { return ErrUnregisteredOutput }

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
	// Table is column K's table, when the request named it.
	Table string
}

func (e *IDError) Error() string {
	return fmt.Sprintf("%v: id %d at (t=%d, k=%d)%s: not -1 and not in [%d, %d+%d)",
		ErrID, e.ID, e.T, e.K, tableOf(e.Table), e.Offset, e.Offset, e.Rows)
}

// Unwrap returns [ErrID].
func (e *IDError) Unwrap() error { return ErrID }

// TableError is an error about one named table: a lookup's (Op
// "lookup") or, in package engram, a store operation's.
type TableError struct {
	Table string
	Op    string // "lookup"; engram adds "populate", "open", "remove", ...
	Err   error
}

func (e *TableError) Error() string {
	return fmt.Sprintf("engram: %s table %q: %v", e.Op, e.Table, e.Err)
}

// Unwrap returns e.Err.
func (e *TableError) Unwrap() error { return e.Err }

// tableOf is " of table %q" for a named table, else "".
func tableOf(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(" of table %q", name)
}

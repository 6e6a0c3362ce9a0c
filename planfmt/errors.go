package planfmt

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them, so callers can branch with errors.Is; the typed errors below carry the
// detail.
var (
	// ErrInvalid reports a malformed plan or command parameter: an unknown
	// form, direction or layout kind, a zero row size, both id slices set,
	// completion ends that are not strictly increasing, and the like.
	ErrInvalid = errors.New("planfmt: invalid plan")
	// ErrBounds reports a fragment, row id or layout that reaches outside its
	// extent or table.
	ErrBounds = errors.New("planfmt: fragment out of bounds")
	// ErrOverlap reports two fragments whose destination bytes overlap.
	ErrOverlap = errors.New("planfmt: overlapping destinations")
	// ErrCorrupt reports an encoded message whose fields are inconsistent:
	// bad magic, reserved bits set, counts that disagree with the length,
	// non-canonical widths, trailing bytes.
	ErrCorrupt = errors.New("planfmt: corrupt message")
	// ErrTruncated reports an encoded message shorter than its header says.
	ErrTruncated = errors.New("planfmt: truncated message")
	// ErrVersion reports an encoded message of a version this package does
	// not speak.
	ErrVersion = errors.New("planfmt: unsupported version")
	// ErrChecksum reports an encoded message whose CRC32C does not match.
	ErrChecksum = errors.New("planfmt: checksum mismatch")
	// ErrTooLarge reports an encoded message or a count beyond the decoder's
	// Limits.
	ErrTooLarge = errors.New("planfmt: message exceeds limits")
)

// InvalidError details an ErrInvalid: which parameter is wrong and why.
type InvalidError struct {
	Field  string // the parameter, e.g. "Rows.RowSize", "CompletionEnds"
	Reason string // what is wrong with it
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("planfmt: invalid %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

func invalid(field, reason string) error {
	return &InvalidError{Field: field, Reason: reason}
}

// BoundsError details an ErrBounds.
type BoundsError struct {
	// Index is the fragment (range or row id index) at fault, or -1 when the
	// plan as a whole is out of bounds (a table or layout larger than its
	// extent).
	Index int
	// Field is "src", "dst" or "id".
	Field string
	// Off is the offending offset; for Field "id" it is the id, as int64 bits.
	Off uint64
	// Len is the length of the fragment or area starting at Off (zero for ids).
	Len uint64
	// Limit is the extent (for "src" and "dst") or the table row count (for
	// "id") that Off+Len must not exceed.
	Limit uint64
}

func (e *BoundsError) Error() string {
	where := "plan"
	if e.Index >= 0 {
		where = fmt.Sprintf("fragment %d", e.Index)
	}
	if e.Field == "id" {
		return fmt.Sprintf("planfmt: %s: row id %d outside table of %d rows", where, int64(e.Off), e.Limit)
	}
	return fmt.Sprintf("planfmt: %s: %s [%d, +%d) outside extent %d", where, e.Field, e.Off, e.Len, e.Limit)
}

// Unwrap returns ErrBounds.
func (e *BoundsError) Unwrap() error { return ErrBounds }

// OverlapError details an ErrOverlap: two fragments whose destination byte
// ranges intersect. First is the one with the lower destination offset.
type OverlapError struct {
	First, Second        int // fragment indices in plan order
	FirstDst, FirstLen   uint64
	SecondDst, SecondLen uint64
}

func (e *OverlapError) Error() string {
	return fmt.Sprintf("planfmt: fragment %d dst [%d, +%d) overlaps fragment %d dst [%d, +%d)",
		e.First, e.FirstDst, e.FirstLen, e.Second, e.SecondDst, e.SecondLen)
}

// Unwrap returns ErrOverlap.
func (e *OverlapError) Unwrap() error { return ErrOverlap }

// DecodeError details why a message was rejected: the byte offset and the
// field where decoding stopped, and the cause, which is a sentinel of this
// package or one of its typed errors (*BoundsError, *InvalidError).
type DecodeError struct {
	Offset int
	Field  string
	Err    error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("planfmt: decode %s at offset %d: %v", e.Field, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }

func decodeErr(off int, field string, err error) error {
	return &DecodeError{Offset: off, Field: field, Err: err}
}

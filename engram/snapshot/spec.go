package snapshot

import (
	"fmt"
	"math"
)

const (
	// MaxNameLen is the longest table or namespace name, in bytes.
	MaxNameLen = 200
	// Ext is the file name extension of a published table.
	Ext = ".engram"
	// MaxTableBytes bounds NumRows*RowBytes (64 PiB), so every offset of
	// the format fits an int64 with room to spare. On 32-bit systems the
	// bound is the largest slice instead.
	MaxTableBytes int64 = 1 << 56
)

// Spec names a table and its shape: NumRows rows of RowBytes bytes each.
type Spec struct {
	Name     string // table name; see ValidName
	NumRows  int64  // rows, at least 1
	RowBytes int    // bytes per row, at least 1
}

// Size returns NumRows*RowBytes, the bytes of the row region. It is only
// meaningful for a spec that Validate accepts.
func (s Spec) Size() int64 { return s.NumRows * int64(s.RowBytes) }

// String formats the spec as name[NumRows x RowBytes B].
func (s Spec) String() string {
	return fmt.Sprintf("%q[%d x %d B]", clip(s.Name), s.NumRows, s.RowBytes)
}

// maxSize is the largest row region this build can map.
func maxSize() int64 { return min(MaxTableBytes, int64(math.MaxInt)) }

// Validate checks the name (see ValidName), that NumRows and RowBytes are
// at least 1 and that Size does not exceed MaxTableBytes (or, on 32-bit
// systems, the largest slice). It returns a [*SpecError] matching
// [ErrBadSpec].
func (s Spec) Validate() error {
	if err := ValidName(s.Name); err != nil {
		return &SpecError{Spec: s, Field: "Name", Reason: err.(*NameError).Reason, Err: err}
	}
	if s.NumRows < 1 {
		return &SpecError{Spec: s, Field: "NumRows", Reason: "must be at least 1"}
	}
	if s.RowBytes < 1 {
		return &SpecError{Spec: s, Field: "RowBytes", Reason: "must be at least 1"}
	}
	limit := maxSize()
	if int64(s.RowBytes) > limit || s.NumRows > limit/int64(s.RowBytes) {
		return &SpecError{Spec: s, Field: "Size", Reason: fmt.Sprintf("NumRows*RowBytes exceeds %d bytes", limit)}
	}
	return nil
}

// ValidName checks a table or namespace name: 1 to MaxNameLen bytes of
// [A-Za-z0-9._-], not starting with '.' (so "." and "..", hidden files and
// the hidden temporary files of Create are never names). It returns a
// [*NameError] matching [ErrBadName].
func ValidName(name string) error {
	if name == "" {
		return &NameError{Name: name, Reason: "empty"}
	}
	if len(name) > MaxNameLen {
		return &NameError{Name: name, Reason: fmt.Sprintf("%d bytes, longer than %d", len(name), MaxNameLen)}
	}
	if name[0] == '.' {
		return &NameError{Name: name, Reason: "starts with '.'"}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return &NameError{Name: name, Reason: fmt.Sprintf("byte %d is %q; allowed are A-Z a-z 0-9 . _ -", i, c)}
		}
	}
	return nil
}

// FileName returns the file name of a published table: name + Ext.
func FileName(name string) string { return name + Ext }

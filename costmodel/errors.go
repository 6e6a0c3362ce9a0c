package costmodel

import (
	"errors"
	"strings"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers test with errors.Is; the typed errors below carry the detail.
var (
	// ErrInvalidParams reports Params that fail Validate: a bandwidth or
	// rate that is not positive and finite, a queue depth below one, a
	// negative duration, and so on.
	ErrInvalidParams = errors.New("costmodel: invalid parameters")

	// ErrInvalidGeometry reports a Geometry (or a Run) that cannot describe
	// a normalized operation: negative counts, more spans than fragments,
	// fewer bytes than fragments, totals that overflow.
	ErrInvalidGeometry = errors.New("costmodel: invalid geometry")

	// ErrShortBuffer reports an output slice shorter than its input.
	ErrShortBuffer = errors.New("costmodel: output buffer too short")

	// ErrInvalidOptions reports CalibrateOptions or Moving settings out of
	// range.
	ErrInvalidOptions = errors.New("costmodel: invalid options")

	// ErrInvalidSample reports a measurement fed to Moving that cannot be
	// true (a non-positive duration or count). It is dropped.
	ErrInvalidSample = errors.New("costmodel: invalid sample")
)

// FieldError names the field that made a value invalid. Err is one of the
// sentinels above.
type FieldError struct {
	Field  string // "Params.BNet", "Geometry.M", "runs[3].S", "CalibrateOptions.Budget"
	Value  string // the offending value, formatted
	Reason string // what the value must be
	Err    error
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Err != nil {
		b.WriteString(e.Err.Error())
		b.WriteString(": ")
	}
	b.WriteString(e.Field)
	if e.Value != "" {
		b.WriteString(" = ")
		b.WriteString(e.Value)
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

func (e *FieldError) Unwrap() error { return e.Err }

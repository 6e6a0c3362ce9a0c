package snapshot

import (
	"errors"
	"fmt"
	"strings"
)

// Errors returned by the package. Detailed failures wrap one of these in a
// typed error ([*NameError], [*SpecError], [*OptionError], [*SourceError],
// [*OpError], [*CorruptError], [*SpecMismatchError], [*PinError]); test for
// them with [errors.Is] and read the details with [errors.As].
var (
	// ErrNotSupported is returned by Create, CreateFrom, Open, Verify,
	// Remove and CleanTemp on systems other than Linux.
	ErrNotSupported = errors.New("snapshot: not supported on this system")
	// ErrBadName is wrapped by [*NameError] for a table or namespace name
	// that breaks the naming rules (see [ValidName]).
	ErrBadName = errors.New("snapshot: invalid name")
	// ErrBadSpec is matched by [*SpecError] for a [Spec] that Validate
	// rejects; nothing is read or written.
	ErrBadSpec = errors.New("snapshot: invalid table spec")
	// ErrBadOptions is wrapped by [*OptionError] for an option out of range.
	ErrBadOptions = errors.New("snapshot: invalid options")
	// ErrSourceSize is matched by [*SourceError] when the rows given to
	// Create, or read by CreateFrom, are not exactly Spec.Size bytes.
	ErrSourceSize = errors.New("snapshot: row source size differs from the spec")
	// ErrExists is returned (inside [*OpError]) when Create finds the table
	// already published: tables are create-only and never overwritten.
	ErrExists = errors.New("snapshot: table exists")
	// ErrNotExist is returned (inside [*OpError]) by Open and Remove when
	// the table file is absent.
	ErrNotExist = errors.New("snapshot: table does not exist")
	// ErrCorrupt is wrapped by [*CorruptError] when a table file fails a
	// check: header field, header or checksum-table CRC, nonzero padding
	// before row 0, a row block's CRC, a file longer than its header says,
	// a file that is not a regular file.
	ErrCorrupt = errors.New("snapshot: corrupt table file")
	// ErrTruncated is wrapped by [*CorruptError] when a file is shorter than
	// its header (or than a header) says it must be.
	ErrTruncated = errors.New("snapshot: truncated table file")
	// ErrVersion is wrapped by [*CorruptError] for a format version this
	// package does not read.
	ErrVersion = errors.New("snapshot: unsupported format version")
	// ErrSpecMismatch is wrapped by [*SpecMismatchError] when Open finds a
	// table whose spec differs from the one the caller expects.
	ErrSpecMismatch = errors.New("snapshot: table spec differs from the expected spec")
	// ErrPin is matched by [*PinError] when [PinRequired] cannot lock a
	// table in memory, and is recorded in Table.PinErr when [PinBestEffort]
	// falls back to populated, unlocked pages.
	ErrPin = errors.New("snapshot: cannot pin table")
)

// NameError reports a name that breaks the naming rules.
type NameError struct {
	Name   string // the rejected name (possibly long or odd; printed quoted)
	Reason string // which rule it breaks
}

func (e *NameError) Error() string {
	return fmt.Sprintf("snapshot: invalid name %q: %s", clip(e.Name), e.Reason)
}

// Unwrap returns [ErrBadName].
func (e *NameError) Unwrap() error { return ErrBadName }

// SpecError reports a Spec field that [Spec.Validate] rejects. It matches
// [ErrBadSpec]; for a bad name it also wraps the [*NameError].
type SpecError struct {
	Spec   Spec   // the rejected spec
	Field  string // "Name", "NumRows", "RowBytes" or "Size"
	Reason string // what is wrong
	Err    error  // the *NameError for Field "Name", else nil
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("snapshot: invalid table spec %v: %s: %s", e.Spec, e.Field, e.Reason)
}

// Unwrap returns [ErrBadSpec] and, for a bad name, the [*NameError].
func (e *SpecError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrBadSpec, e.Err}
	}
	return []error{ErrBadSpec}
}

// OptionError reports an option out of range.
type OptionError struct {
	Field  string // e.g. "BlockBytes"
	Value  int64  // its value
	Reason string // the accepted range
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("snapshot: invalid options: %s=%d: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns [ErrBadOptions].
func (e *OptionError) Unwrap() error { return ErrBadOptions }

// SourceError reports a row source of the wrong size: a []byte whose
// length differs from Spec.Size, or a reader that ended early.
type SourceError struct {
	Table string // table name
	Want  int64  // Spec.Size
	Got   int64  // bytes given or read before the source ended
	Err   error  // io.ErrUnexpectedEOF for a reader that ended early, else nil
}

func (e *SourceError) Error() string {
	s := fmt.Sprintf("snapshot: table %q: row source has %d bytes, the spec needs %d", e.Table, e.Got, e.Want)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns [ErrSourceSize] and Err when set.
func (e *SourceError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrSourceSize, e.Err}
	}
	return []error{ErrSourceSize}
}

// OpError reports a failed file system step of Create, CreateFrom, Remove,
// Open, List or CleanTemp. When Create fails, everything it made is removed
// again before it returns; CleanupErr says when that removal itself failed
// (the only case where a hidden temporary file can remain; it is never
// listed or opened as a table and [CleanTemp] removes it).
type OpError struct {
	Op         string // "create", "remove", "open", "list", "clean"
	Dir        string // the table directory
	Name       string // the table name, "" when not about one table
	Step       string // the step that failed, e.g. "sync file", "write rows [0, 4096)"
	Err        error  // the cause: ErrExists, ErrNotExist, a *fs.PathError, ...
	CleanupErr error  // a failure while removing what the operation made, or nil
}

func (e *OpError) Error() string {
	var b strings.Builder
	b.WriteString("snapshot: ")
	b.WriteString(e.Op)
	if e.Name != "" {
		fmt.Fprintf(&b, " table %q", e.Name)
	}
	fmt.Fprintf(&b, " in %s: %s: %v", e.Dir, e.Step, e.Err)
	if e.CleanupErr != nil {
		fmt.Fprintf(&b, " (cleanup failed too: %v)", e.CleanupErr)
	}
	return b.String()
}

// Unwrap returns Err.
func (e *OpError) Unwrap() error { return e.Err }

// CorruptError reports a table file that fails a check. Offset locates the
// damage in the file; for a row block (Field "rows") FirstRow and EndRow
// give the damaged block's rows [FirstRow, EndRow).
type CorruptError struct {
	Path     string // the file, "" when decoding bytes not read from a file
	Field    string // "magic", "version", "header crc", "checksum table", "row padding", "rows", "file size", ...
	Offset   int64  // file offset of the field or damaged block
	FirstRow int64  // first row of the damaged block (Field "rows" only)
	EndRow   int64  // one past its last row (Field "rows" only)
	Detail   string // what was found versus expected
	Err      error  // ErrCorrupt, ErrTruncated or ErrVersion
}

func (e *CorruptError) Error() string {
	var b strings.Builder
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString(ErrCorrupt.Error())
	}
	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(e.Path)
	}
	fmt.Fprintf(&b, ": %s at offset %d", e.Field, e.Offset)
	if e.Field == fieldRows {
		fmt.Fprintf(&b, " (rows %d to %d)", e.FirstRow, e.EndRow-1)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap returns Err.
func (e *CorruptError) Unwrap() error { return e.Err }

// SpecMismatchError reports a table whose spec differs from the expected one.
type SpecMismatchError struct {
	Path string // the table file
	Want Spec   // what the caller expected
	Got  Spec   // what the file holds
}

func (e *SpecMismatchError) Error() string {
	return fmt.Sprintf("snapshot: %s: table is %v, expected %v", e.Path, e.Got, e.Want)
}

// Unwrap returns [ErrSpecMismatch].
func (e *SpecMismatchError) Unwrap() error { return ErrSpecMismatch }

// PinError reports a failure to pin a table's rows in memory.
type PinError struct {
	Path  string // the table file
	Op    string // "mlock"
	Bytes int64  // bytes it tried to pin
	Err   error  // the system's error (EPERM, ENOMEM, EAGAIN, ...)
}

func (e *PinError) Error() string {
	return fmt.Sprintf("snapshot: cannot pin table %s: %s of %d bytes: %v", e.Path, e.Op, e.Bytes, e.Err)
}

// Unwrap returns [ErrPin] and Err.
func (e *PinError) Unwrap() []error { return []error{ErrPin, e.Err} }

// clip shortens a name for an error message.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

package remote

import (
	"errors"
	"fmt"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
)

// Errors of the package. Detailed failures wrap one of these in a typed
// error (*ConfigError, *ArgError, *DecodeError, *NamespaceError,
// *MismatchError, *TableError, *IDError, *ArenaError, *TransferError);
// test for them with errors.Is.
var (
	// ErrInvalid reports a bad configuration or lookup argument: a shape
	// that disagrees with the ids, negative strides, overlapping output
	// rows, tables of different row sizes, an empty name.
	ErrInvalid = errors.New("remote: invalid argument")
	// ErrCorrupt reports a table list whose fields are inconsistent.
	ErrCorrupt = errors.New("remote: corrupt table list")
	// ErrTruncated reports a table list shorter than its header says.
	ErrTruncated = errors.New("remote: truncated table list")
	// ErrVersion reports a table list of a version this package does not
	// speak.
	ErrVersion = errors.New("remote: unsupported table list version")
	// ErrNamespace reports an owner that serves another namespace than
	// the one the client asked for.
	ErrNamespace = errors.New("remote: namespace mismatch")
	// ErrMismatch reports an owner whose table list disagrees with the
	// regions its segment exports.
	ErrMismatch = errors.New("remote: table list disagrees with the exports")
	// ErrUnknownTable reports a lookup naming a table the owner does not
	// serve.
	ErrUnknownTable = errors.New("remote: unknown table")
	// ErrIDRange reports an id that is neither -1 nor, after its column's
	// offset, a row of its table.
	ErrIDRange = lookup.ErrID
	// ErrNotInArena reports an output buffer that does not lie inside the
	// client's registered output arena.
	ErrNotInArena = errors.New("remote: output outside the registered arena")
	// ErrExhausted reports that the output arena had no free block of the
	// size asked for.
	ErrExhausted = errors.New("remote: output arena exhausted")
	// ErrTransfer reports a lookup whose transfers failed (the owner went
	// away, refused a request, the context ended).
	ErrTransfer = errors.New("remote: transfer failed")
	// ErrClosed reports a call on a closed client.
	ErrClosed = errors.New("remote: closed")
)

// ConfigError reports a ServerConfig or ClientConfig field that Serve or
// Dial rejected.
type ConfigError struct {
	Field  string // e.g. "Tables[2].Rows"
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("remote: config %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *ConfigError) Unwrap() error { return ErrInvalid }

// ArgError reports a lookup argument that Lookup rejected before writing
// anything. Err, when set, is the underlying cause (a planfmt overlap or
// bounds error for the output layout).
type ArgError struct {
	Field  string // e.g. "IDs", "KStride", "Tables"
	Reason string
	Err    error
}

func (e *ArgError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("remote: lookup %s: %s: %v", e.Field, e.Reason, e.Err)
	}
	return fmt.Sprintf("remote: lookup %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalid and, when set, Err.
func (e *ArgError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// DecodeError reports a malformed table list: the byte offset and field
// where decoding stopped and why.
type DecodeError struct {
	Offset int
	Field  string
	Reason string
	Err    error // ErrCorrupt, ErrTruncated or ErrVersion
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("remote: table list at byte %d (%s): %s", e.Offset, e.Field, e.Reason)
}

// Unwrap returns the sentinel.
func (e *DecodeError) Unwrap() error { return e.Err }

// NamespaceError reports an owner serving another namespace.
type NamespaceError struct {
	Want, Got string
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("remote: owner serves namespace %q, not %q", e.Got, e.Want)
}

// Unwrap returns ErrNamespace.
func (e *NamespaceError) Unwrap() error { return ErrNamespace }

// MismatchError reports a table whose export is missing or disagrees with
// its spec.
type MismatchError struct {
	Table  string
	Reason string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("remote: table %q: %s", e.Table, e.Reason)
}

// Unwrap returns ErrMismatch.
func (e *MismatchError) Unwrap() error { return ErrMismatch }

// TableError reports a lookup column naming an unknown table.
type TableError struct {
	Column int
	Name   string
}

func (e *TableError) Error() string {
	return fmt.Sprintf("remote: lookup column %d: table %q is not served", e.Column, e.Name)
}

// Unwrap returns ErrUnknownTable.
func (e *TableError) Unwrap() error { return ErrUnknownTable }

// IDError reports the first invalid id a lookup found.
type IDError struct {
	Token, Column int    // position in the [T,K] ids
	ID            int64  // the id as given
	Offset        int64  // the column's offset (row = ID - Offset)
	Table         string // the column's table
	Rows          int64  // the table's row count
}

func (e *IDError) Error() string {
	return fmt.Sprintf("remote: lookup id %d at [%d,%d] (offset %d) is not -1 nor a row of table %q (%d rows)",
		e.ID, e.Token, e.Column, e.Offset, e.Table, e.Rows)
}

// Unwrap returns ErrIDRange.
func (e *IDError) Unwrap() error { return ErrIDRange }

// ArenaError reports an output buffer outside the client's arena.
type ArenaError struct {
	Len    int // the output buffer's length
	Reason string
}

func (e *ArenaError) Error() string {
	return fmt.Sprintf("remote: output of %d bytes: %s", e.Len, e.Reason)
}

// Unwrap returns ErrNotInArena.
func (e *ArenaError) Unwrap() error { return ErrNotInArena }

// TransferError reports the first failed operation of a lookup.
type TransferError struct {
	Table   string // the operation's table
	Columns int    // how many columns it carried
	Err     error  // the engine's error (a *engine.OpError, a context error, ...)
}

func (e *TransferError) Error() string {
	return fmt.Sprintf("remote: lookup from table %q (%d columns): %v", e.Table, e.Columns, e.Err)
}

// Unwrap returns ErrTransfer and the cause.
func (e *TransferError) Unwrap() []error { return []error{ErrTransfer, e.Err} }

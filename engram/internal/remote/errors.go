package remote

import (
	"errors"
	"fmt"
)

// Errors of the package. Detailed failures wrap one of these in a typed
// error (*ConfigError, *ArgError, *DecodeError, *NamespaceError,
// *MismatchError, *TransferError); test for them with errors.Is. A
// lookup's request is checked by package lookup and fails with its errors
// (lookup.ErrShape, lookup.ErrID, lookup.ErrUnregisteredOutput, ...), the
// ones package engram returns for local lookups. Like those, every
// message starts with the user-facing package's prefix, "engram:".
var (
	// ErrInvalid reports a bad configuration or NewOutput argument.
	ErrInvalid = errors.New("engram: invalid argument")
	// ErrCorrupt reports a table list whose fields are inconsistent.
	ErrCorrupt = errors.New("engram: corrupt table list")
	// ErrTruncated reports a table list shorter than its header says.
	ErrTruncated = errors.New("engram: truncated table list")
	// ErrVersion reports a table list of a version this package does not
	// speak.
	ErrVersion = errors.New("engram: unsupported table list version")
	// ErrNamespace reports an owner that serves another namespace than
	// the one the client asked for.
	ErrNamespace = errors.New("engram: namespace mismatch")
	// ErrMismatch reports an owner whose table list disagrees with the
	// regions its segment exports.
	ErrMismatch = errors.New("engram: table list disagrees with the exports")
	// ErrExhausted reports that the output arena had no free block of the
	// size asked for.
	ErrExhausted = errors.New("engram: output arena exhausted")
	// ErrTransfer reports a lookup whose transfers failed (the owner went
	// away, refused a request, the context ended).
	ErrTransfer = errors.New("engram: transfer failed")
	// ErrClosed reports a call on a closed client.
	ErrClosed = errors.New("engram: remote client closed")
)

// ConfigError reports a ServerConfig or ClientConfig field that Serve or
// Dial rejected.
type ConfigError struct {
	Field  string // e.g. "Tables[2].Rows"
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("engram: config %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *ConfigError) Unwrap() error { return ErrInvalid }

// ArgError reports an argument that a Client method (NewOutput) rejected.
type ArgError struct {
	Field  string // e.g. "n"
	Reason string
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("engram: argument %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *ArgError) Unwrap() error { return ErrInvalid }

// DecodeError reports a malformed table list: the byte offset and field
// where decoding stopped and why.
type DecodeError struct {
	Offset int
	Field  string
	Reason string
	Err    error // ErrCorrupt, ErrTruncated or ErrVersion
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("engram: table list at byte %d (%s): %s", e.Offset, e.Field, e.Reason)
}

// Unwrap returns the sentinel.
func (e *DecodeError) Unwrap() error { return e.Err }

// NamespaceError reports an owner serving another namespace.
type NamespaceError struct {
	Want, Got string
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("engram: owner serves namespace %q, not %q", e.Got, e.Want)
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
	return fmt.Sprintf("engram: table %q: %s", e.Table, e.Reason)
}

// Unwrap returns ErrMismatch.
func (e *MismatchError) Unwrap() error { return ErrMismatch }

// TransferError reports the first failed operation of a lookup.
type TransferError struct {
	Table   string // the operation's table
	Columns int    // how many columns it carried
	Err     error  // the engine's error (a *engine.OpError, a context error, ...)
}

func (e *TransferError) Error() string {
	return fmt.Sprintf("engram: lookup from table %q (%d columns): %v", e.Table, e.Columns, e.Err)
}

// Unwrap returns ErrTransfer and the cause.
func (e *TransferError) Unwrap() []error { return []error{ErrTransfer, e.Err} }

// ShardError reports a lookup of a sharded table whose shard had no
// replica left: every owner of rows [Lo, Hi) of Table failed a transfer
// (this lookup's or an earlier one's). Err is the last failure, when this
// lookup saw one.
type ShardError struct {
	Table  string
	Lo, Hi int64
	Addrs  []string
	Err    error
}

func (e *ShardError) Error() string {
	msg := fmt.Sprintf("engram: table %q rows [%d, %d): no replica left of %v", e.Table, e.Lo, e.Hi, e.Addrs)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrTransfer and the last failure.
func (e *ShardError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrTransfer}
	}
	return []error{ErrTransfer, e.Err}
}

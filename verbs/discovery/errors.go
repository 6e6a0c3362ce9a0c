package discovery

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error a Directory returns for one of these
// conditions matches the sentinel with errors.Is; the typed errors below carry
// the detail.
var (
	// ErrNotFound: no live record has the name.
	ErrNotFound = errors.New("discovery: record not found")
	// ErrExists: a live owner already holds the name. See ExistsError.
	ErrExists = errors.New("discovery: name held by a live owner")
	// ErrInvalidName: a name or prefix breaks the naming rules. See NameError.
	ErrInvalidName = errors.New("discovery: invalid name")
	// ErrInvalidRecord: a record field breaks the record rules. See RecordError.
	ErrInvalidRecord = errors.New("discovery: invalid record")
	// ErrClosed: the directory was closed.
	ErrClosed = errors.New("discovery: directory closed")
	// ErrWithdrawn: the registration was withdrawn by its Close.
	ErrWithdrawn = errors.New("discovery: registration withdrawn")
	// ErrExpired: the record reached its Expires time.
	ErrExpired = errors.New("discovery: record expired")
	// ErrLost: the owner could no longer keep its record alive (for example
	// an etcd lease that expired or was revoked by someone else).
	ErrLost = errors.New("discovery: registration lost")
	// ErrCorrupt: stored directory data could not be decoded. See CorruptError.
	ErrCorrupt = errors.New("discovery: corrupt directory data")
	// ErrFull: the directory cannot hold one more record (the file backend
	// keeps its file under 16 MiB).
	ErrFull = errors.New("discovery: directory full")
	// ErrNotSupported: the backend does not work on this platform.
	ErrNotSupported = errors.New("discovery: not supported on this platform")
)

// NameError reports a name or name prefix that breaks the naming rules (see
// the package documentation). It matches ErrInvalidName.
type NameError struct {
	Name   string // the rejected name or prefix
	Reason string // which rule it breaks
}

func (e *NameError) Error() string {
	return fmt.Sprintf("discovery: invalid name %q: %s", e.Name, e.Reason)
}

// Unwrap returns ErrInvalidName.
func (e *NameError) Unwrap() error { return ErrInvalidName }

// RecordError reports a record field that breaks the record rules. It matches
// ErrInvalidRecord.
type RecordError struct {
	Name   string // the record's name
	Field  string // the offending field: "Transport", "Addr", "Attrs[key]", ...
	Reason string // which rule it breaks
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("discovery: invalid record %q: %s: %s", e.Name, e.Field, e.Reason)
}

// Unwrap returns ErrInvalidRecord.
func (e *RecordError) Unwrap() error { return ErrInvalidRecord }

// ExistsError reports a Publish refused because a live owner holds the name.
// It matches ErrExists.
type ExistsError struct {
	Name   string
	Holder Record // the record of the live owner, as the directory holds it
}

func (e *ExistsError) Error() string {
	return fmt.Sprintf("discovery: name %q held by live owner %q (revision %d)", e.Name, e.Holder.Owner, e.Holder.Revision)
}

// Unwrap returns ErrExists.
func (e *ExistsError) Unwrap() error { return ErrExists }

// CorruptError reports stored directory data that could not be decoded: a
// directory file, or a value under an etcd key. It matches ErrCorrupt and,
// when set, Err.
type CorruptError struct {
	Source string // the file path or key that held the data
	Reason string // what is wrong
	Err    error  // the underlying decoding error, or nil
}

func (e *CorruptError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("discovery: corrupt data in %s: %s: %v", e.Source, e.Reason, e.Err)
	}
	return fmt.Sprintf("discovery: corrupt data in %s: %s", e.Source, e.Reason)
}

// Unwrap returns ErrCorrupt and the underlying error, if any.
func (e *CorruptError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorrupt, e.Err}
	}
	return []error{ErrCorrupt}
}

package verbs

import (
	"errors"
	"fmt"
)

// Errors of the transport layer, the scatter executor and the gather
// service. Detailed failures wrap one of these in a typed error
// ([*RemoteError], [*PostError], [*CallError], [*ProtocolError],
// [*AdmitError] here; engine.GatherError, engine.OpError,
// engine.InvalidOpError and engine.WireError in verbs/engine); test for
// them with [errors.Is].
var (
	// ErrBadKey means a work request named a memory key that is not
	// registered (locally) or not exported (remotely).
	ErrBadKey = errors.New("verbs: unknown memory key")
	// ErrAccess means the region does not permit the operation: a READ
	// from a region without remote read, a WRITE to a region without remote
	// write, or a local side without [AccessLocal].
	ErrAccess = errors.New("verbs: access not permitted")
	// ErrBounds means offset and length do not lie inside the region
	// (including offsets whose sum with the length overflows).
	ErrBounds = errors.New("verbs: out of bounds")
	// ErrClosed is returned by operations on a closed connection, segment
	// or transport, and carried by the completions of work requests that
	// were outstanding when the connection ended.
	ErrClosed = errors.New("verbs: closed")
	// ErrQueueFull is returned by Post when no work request fits in the
	// free queue depth; poll completions and post again.
	ErrQueueFull = errors.New("verbs: queue full")
	// ErrNotSupported is returned for operations the backend cannot do
	// (exposing plain Registered memory over shm, a platform without the
	// syscalls) and by Call for a method that has no handler.
	ErrNotSupported = errors.New("verbs: not supported")
	// ErrProtocol means a peer sent a malformed frame or handshake; the
	// connection that carried it is closed.
	ErrProtocol = errors.New("verbs: protocol violation")
	// ErrInUse is returned by Deregister for a region that an open segment
	// exports or an open connection exposes.
	ErrInUse = errors.New("verbs: region in use")
	// ErrInvalid is returned for a bad argument: an empty buffer, unknown
	// access bits, a duplicate export name, an option out of range.
	ErrInvalid = errors.New("verbs: invalid argument")
	// ErrNotAdmitted means a segment's admission policy
	// (ListenOptions.Admit) refused the peer: Connect fails with it, and
	// the owner reports an [*AdmitError] wrapping it.
	ErrNotAdmitted = errors.New("verbs: peer not admitted")
	// ErrHandler is wrapped by [*CallError] when the owner's handler
	// returned an error.
	ErrHandler = errors.New("verbs: handler failed")

	// Errors of the scatter executor and the gather service.
	// ErrGatherRefused is wrapped by an engine.GatherError when the gather
	// service rejected a command: it did not decode under the service's
	// limits, named a region the owner does not export or the requester
	// did not expose, reached outside a window, lacked the access it
	// needs or had overlapping destinations. Nothing was read or written.
	ErrGatherRefused = errors.New("verbs: gather command refused")
	// ErrStagingExhausted is wrapped by an engine.GatherError when no staging
	// slot became free within the service's acquire deadline. Nothing was
	// written.
	ErrStagingExhausted = errors.New("verbs: staging exhausted")
	// ErrGatherAborted is wrapped by an engine.GatherError when a command's
	// transfers failed after it started; part of its destination may have
	// been written.
	ErrGatherAborted = errors.New("verbs: gather aborted")
)

// RemoteError is the error of a failed [Completion]: the work request was
// rejected by the side that owns the remote region (key, access, bounds),
// or it was still outstanding when the connection ended (StatusClosed; then
// Cause, when known, says why the connection ended).
type RemoteError struct {
	ID     uint64 // the work request's ID
	Status Status // why it failed; never StatusOK
	Cause  error  // for StatusClosed: what ended the connection, or nil
}

func (e *RemoteError) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("verbs: work request %d: %s: %v", e.ID, e.Status, e.Cause)
	}
	return fmt.Sprintf("verbs: work request %d: %s", e.ID, e.Status)
}

// Unwrap returns the sentinel for Status and, when set, Cause.
func (e *RemoteError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Status.Err(), e.Cause}
	}
	return []error{e.Status.Err()}
}

// PostError is returned by Post when the local side of a work request is
// invalid (unknown local key, a region without [AccessLocal], bounds) or a
// field is malformed (unknown Op). Nothing of that batch was posted.
type PostError struct {
	Index int    // position of the offending work request in the batch
	ID    uint64 // its ID
	Err   error  // ErrBadKey, ErrAccess, ErrBounds or ErrInvalid
}

func (e *PostError) Error() string {
	return fmt.Sprintf("verbs: post: work request %d (index %d): %v", e.ID, e.Index, e.Err)
}

func (e *PostError) Unwrap() error { return e.Err }

// CallError is returned by Conn.Call when the owner answered with an
// error: no handler for the method (wraps ErrNotSupported) or the handler
// failed (wraps ErrHandler; Message is the handler's error text).
type CallError struct {
	Method  uint16
	Status  Status // StatusNotSupported or StatusHandler
	Message string // the owner's error text, at most MaxErrorMessage bytes
}

// MaxErrorMessage is the longest handler error text sent back to a caller;
// longer texts are cut.
const MaxErrorMessage = 1024

func (e *CallError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("verbs: call method %d: %s: %s", e.Method, e.Status, e.Message)
	}
	return fmt.Sprintf("verbs: call method %d: %s", e.Method, e.Status)
}

func (e *CallError) Unwrap() error { return e.Status.Err() }

// ProtocolError describes a malformed frame or handshake received from a
// peer. The connection that carried it is closed.
type ProtocolError struct {
	Peer   string // the remote address, when known
	Stage  string // "handshake", "frame", "payload", ...
	Reason string // what was wrong
}

func (e *ProtocolError) Error() string {
	if e.Peer != "" {
		return fmt.Sprintf("verbs: protocol violation from %s: %s: %s", e.Peer, e.Stage, e.Reason)
	}
	return fmt.Sprintf("verbs: protocol violation: %s: %s", e.Stage, e.Reason)
}

func (e *ProtocolError) Unwrap() error { return ErrProtocol }

package verbs

import (
	"errors"
	"fmt"
)

// Errors of the scatter executor and the gather service. Detailed failures
// wrap one of these (or a transport sentinel such as ErrInvalid, ErrClosed
// or ErrProtocol) in a typed error (*GatherError, *OpError,
// *InvalidOpError, *WireError); test for them with errors.Is.
var (
	// ErrGatherRefused is wrapped by a [*GatherError] when the gather
	// service rejected a command: it did not decode under the service's
	// limits, named a region the owner does not export or the requester
	// did not expose, reached outside a window, lacked the access it
	// needs or had overlapping destinations. Nothing was read or written.
	ErrGatherRefused = errors.New("verbs: gather command refused")
	// ErrStagingExhausted is wrapped by a [*GatherError] when no staging
	// slot became free within the service's acquire deadline. Nothing was
	// written.
	ErrStagingExhausted = errors.New("verbs: staging exhausted")
	// ErrGatherAborted is wrapped by a [*GatherError] when a command's
	// transfers failed after it started; part of its destination may have
	// been written.
	ErrGatherAborted = errors.New("verbs: gather aborted")
)

// GatherError is the error a gather service handler returns; the
// requester receives its text in a [*CallError] (see # Format for the
// text's shape).
type GatherError struct {
	Code  GatherCode
	Stage string // "decode", "source", "destination", "normalize", "staging", "transfer", ...
	Err   error
}

func (e *GatherError) Error() string {
	return fmt.Sprintf("%s%s: %s: %v", gatherErrPrefix, e.Code, e.Stage, e.Err)
}

// Unwrap returns the sentinel of Code and the cause.
func (e *GatherError) Unwrap() []error {
	var s error
	switch e.Code {
	case GatherRefused:
		s = ErrGatherRefused
	case GatherExhausted:
		s = ErrStagingExhausted
	default:
		s = ErrGatherAborted
	}
	return []error{s, e.Err}
}

// InvalidOpError reports a [ScatterOp] that Submit rejected before doing
// anything: a missing field, a region without the access the direction
// needs, an extent that does not fit its region.
type InvalidOpError struct {
	Field  string // e.g. "Local", "Plan.SrcExtent"
	Reason string
}

func (e *InvalidOpError) Error() string {
	return fmt.Sprintf("verbs: invalid scatter op: %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *InvalidOpError) Unwrap() error { return ErrInvalid }

// OpError is the error of an operation that failed as a whole: its direct
// transfers failed (Err), possibly after a gather attempt failed first
// (Gather), or its context ended. No part of a failed operation is
// reported as done; the planned destination bytes are undefined.
type OpError struct {
	OpID   uint64
	Mode   Mode  // the mode that failed last
	Err    error // why the operation failed
	Gather error // the gather failure that made it fall back, if any
}

func (e *OpError) Error() string {
	if e.Gather != nil {
		return fmt.Sprintf("verbs: scatter op %d (%s after gather failed: %v): %v", e.OpID, e.Mode, e.Gather, e.Err)
	}
	return fmt.Sprintf("verbs: scatter op %d (%s): %v", e.OpID, e.Mode, e.Err)
}

// Unwrap returns Err and, when set, Gather.
func (e *OpError) Unwrap() []error {
	if e.Gather == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Gather}
}

// WireError reports a malformed gather info or reply message (see
// # Format).
type WireError struct {
	Message string // "info" or "reply"
	Field   string
	Reason  string
}

func (e *WireError) Error() string {
	return fmt.Sprintf("verbs: gather %s message: %s: %s", e.Message, e.Field, e.Reason)
}

// Unwrap returns ErrProtocol.
func (e *WireError) Unwrap() error { return ErrProtocol }

package gatherwire

import (
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
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
		s = verbs.ErrGatherRefused
	case GatherExhausted:
		s = verbs.ErrStagingExhausted
	default:
		s = verbs.ErrGatherAborted
	}
	return []error{s, e.Err}
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
func (e *WireError) Unwrap() error { return verbs.ErrProtocol }

// InvalidOpError reports a scatter operation (or a configuration) rejected before doing
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
func (e *InvalidOpError) Unwrap() error { return verbs.ErrInvalid }

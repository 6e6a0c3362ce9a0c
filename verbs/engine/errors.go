package engine

import (
	"fmt"

	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"
)

// InvalidOpError reports a [ScatterOp] that Submit rejected before doing
// anything (a missing field, a region without the access the direction
// needs, an extent that does not fit its region), or a configuration that
// New, gather.NewService or PackOnly rejected.
type InvalidOpError = gatherwire.InvalidOpError

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

package bench

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of the benchmark. Detailed failures wrap one of these in a typed
// error (*FlagError, *VerifyError, *OwnerError, *WorkloadError,
// *JSONLineError); test for
// them with errors.Is.
var (
	// ErrUsage is wrapped by a *FlagError when the command line is
	// invalid: an unknown value, a number out of range, flags that
	// contradict each other.
	ErrUsage = errors.New("scatterbench: invalid usage")
	// ErrVerify is wrapped by a *VerifyError when a destination does not
	// hold the bytes the plan should have moved there. The run fails.
	ErrVerify = errors.New("scatterbench: payload verification failed")
	// ErrOwner is wrapped by an *OwnerError when the owner could not be
	// started, found or stopped cleanly (including leaked leases).
	ErrOwner = errors.New("scatterbench: owner failed")
	// ErrWorkload is wrapped by a *WorkloadError when a workload failed
	// (its setup, an operation, its verification) or did not run. The
	// run goes on with the next workload and fails at the end.
	ErrWorkload = errors.New("scatterbench: workload failed")
	// ErrNoFigure is returned for a figure that has no panel to draw.
	ErrNoFigure = errors.New("scatterbench: figure has nothing to draw")
	// ErrJSONLines is wrapped by a *JSONLineError when ReadPasses meets a
	// line it cannot read.
	ErrJSONLines = errors.New("scatterbench: unreadable JSON lines")
)

// FlagError reports a flag value that Parse rejected.
type FlagError struct {
	Flag   string // "-reps", "-workloads", ...
	Value  string
	Reason string
}

func (e *FlagError) Error() string {
	return fmt.Sprintf("scatterbench: %s %q: %s", e.Flag, e.Value, e.Reason)
}

// Unwrap returns ErrUsage.
func (e *FlagError) Unwrap() error { return ErrUsage }

// VerifyError reports the first wrong byte of a verified repetition.
type VerifyError struct {
	Workload, Mode string
	Caller         int
	// Fragment is the index of the fragment (in plan order) whose bytes
	// are wrong, or -1 for bytes between fragments (which must keep the
	// poison written before the repetition).
	Fragment int
	// Offset is the destination offset of the first wrong byte, relative
	// to the destination extent; Want and Got are its expected and actual
	// values.
	Offset    uint64
	Want, Got byte
}

func (e *VerifyError) Error() string {
	where := fmt.Sprintf("fragment %d", e.Fragment)
	if e.Fragment < 0 {
		where = "a gap between fragments (poison overwritten)"
	}
	return fmt.Sprintf("scatterbench: %s/%s caller %d: destination byte %d (%s) is %#02x, want %#02x",
		e.Workload, e.Mode, e.Caller, e.Offset, where, e.Got, e.Want)
}

// Unwrap returns ErrVerify.
func (e *VerifyError) Unwrap() error { return ErrVerify }

// OwnerError reports an owner that failed.
type OwnerError struct {
	Owner  string // "inproc", "process", "netns"
	Stage  string // "start", "lookup", "connect", "close"
	Detail string // the owner's stderr tail, when there is one
	Err    error
}

func (e *OwnerError) Error() string {
	s := fmt.Sprintf("scatterbench: %s owner: %s: %v", e.Owner, e.Stage, e.Err)
	if e.Detail != "" {
		s += "\n" + e.Detail
	}
	return s
}

// Unwrap returns ErrOwner and the cause.
func (e *OwnerError) Unwrap() []error { return []error{ErrOwner, e.Err} }

// WorkloadError reports a workload that failed or did not run; Err is
// the cause (a *VerifyError, an *OwnerError, an operation's error, ...).
type WorkloadError struct {
	Transport, Workload string
	// NotRun is set when the workload never started: the pass's owner
	// could not start, an earlier workload lost the connection to it, or
	// the run was interrupted.
	NotRun bool
	Err    error
}

func (e *WorkloadError) Error() string {
	what := "failed"
	if e.NotRun {
		what = "not run"
	}
	return fmt.Sprintf("scatterbench: %s over %s %s: %v", e.Workload, e.Transport, what, e.Err)
}

// Unwrap returns ErrWorkload and the cause.
func (e *WorkloadError) Unwrap() []error { return []error{ErrWorkload, e.Err} }

// Status is StatusFailed or StatusNotRun.
func (e *WorkloadError) Status() string {
	if e.NotRun {
		return StatusNotRun
	}
	return StatusFailed
}

// Reason is the cause's first line: what the table and the goals show
// (the JSON carries the whole message).
func (e *WorkloadError) Reason() string {
	s, _, _ := strings.Cut(e.Err.Error(), "\n")
	return s
}

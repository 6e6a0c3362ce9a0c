package bench

import (
	"errors"
	"fmt"
)

// Errors of the benchmark. Detailed failures wrap one of these in a typed
// error (*FlagError, *VerifyError, *OwnerError); test for them with
// errors.Is.
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

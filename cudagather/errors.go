package cudagather

import (
	"errors"
	"fmt"
)

// Errors of the package; typed errors wrap them.
var (
	// ErrNotSupported is returned by every entry point of a build without
	// the `cuda` tag, and where the driver lacks what a call needs.
	ErrNotSupported = errors.New("cudagather: CUDA not supported in this build")
	// ErrInvalid is a bad argument: shapes, strides, sizes, nil tables.
	ErrInvalid = errors.New("cudagather: invalid argument")
	// ErrClosed is returned by calls on a closed context, table or graph.
	ErrClosed = errors.New("cudagather: closed")
	// ErrBusy is returned by Context.Close while tables or graphs of the
	// context are open.
	ErrBusy = errors.New("cudagather: tables or graphs still open")
	// ErrBadID is wrapped by an *IDError: an id was neither -1 nor a row
	// of its column's table.
	ErrBadID = errors.New("cudagather: id out of range")
	// ErrStagedCapture is returned by a lookup that asks for HostStaged on
	// a stream being captured into a graph: the staged path reads the ids
	// back and gathers on the CPU, which a graph cannot replay. HostAuto
	// (or HostZeroCopy) captures the zero-copy path instead.
	ErrStagedCapture = errors.New("cudagather: a CPU-staged lookup cannot be captured into a graph; use HostZeroCopy or HostAuto")
	// ErrDriver wraps a failed CUDA driver call (*DriverError).
	ErrDriver = errors.New("cudagather: CUDA driver call failed")
)

// ArgError is a rejected argument.
type ArgError struct {
	Field, Reason string
}

func (e *ArgError) Error() string { return "cudagather: " + e.Field + ": " + e.Reason }

// Unwrap returns ErrInvalid.
func (e *ArgError) Unwrap() error { return ErrInvalid }

// IDError reports the first bad id a lookup met, by position.
type IDError struct {
	T, K int
}

func (e *IDError) Error() string {
	return fmt.Sprintf("cudagather: id at [%d,%d] is neither -1 nor a row of its table", e.T, e.K)
}

// Unwrap returns ErrBadID.
func (e *IDError) Unwrap() error { return ErrBadID }

// DriverError is a failed CUDA driver call.
type DriverError struct {
	Call string
	Code int
	Msg  string
}

func (e *DriverError) Error() string {
	return fmt.Sprintf("cudagather: %s: CUDA error %d (%s)", e.Call, e.Code, e.Msg)
}

// Unwrap returns ErrDriver.
func (e *DriverError) Unwrap() error { return ErrDriver }

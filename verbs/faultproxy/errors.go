package faultproxy

import (
	"errors"
	"fmt"
)

// Errors of the proxy. Detailed failures wrap one of these; test for them
// with errors.Is.
var (
	// ErrClosed is returned by Set on a closed proxy.
	ErrClosed = errors.New("faultproxy: closed")
	// ErrFault is wrapped by a [*FaultError] when Set is given a fault it
	// cannot apply.
	ErrFault = errors.New("faultproxy: invalid fault")
	// ErrOptions is wrapped by the error of New for unusable Options.
	ErrOptions = errors.New("faultproxy: invalid options")
)

// FaultError reports a field of a Fault that Set refused.
type FaultError struct {
	Kind   Kind
	Field  string
	Reason string
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("faultproxy: fault %s: %s: %s", e.Kind, e.Field, e.Reason)
}

// Unwrap returns ErrFault.
func (e *FaultError) Unwrap() error { return ErrFault }

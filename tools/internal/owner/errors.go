package owner

import (
	"errors"
	"fmt"
)

// Errors of the owner. Detailed failures wrap one of these in a typed
// error (*ConfigError, *ControlError); test for them with errors.Is.
var (
	// ErrConfig is wrapped by a *ConfigError when Start or Main rejects a
	// configuration: a missing or contradictory data source, a size out of
	// range, an unknown transport, a discovery name without a directory.
	ErrConfig = errors.New("owner: invalid configuration")
	// ErrControl is wrapped by a *ControlError when a control method
	// (MethodStats, MethodPackOnly) receives a malformed or unacceptable
	// request. Nothing was changed.
	ErrControl = errors.New("owner: bad control request")
	// ErrLeak is returned by Close when staging leases were still
	// outstanding; Report.Leak lists them.
	ErrLeak = errors.New("owner: staging leases leaked")
	// ErrNotSupported is returned where the platform lacks what the data
	// source needs (file mappings and anonymous memory need Linux).
	ErrNotSupported = errors.New("owner: not supported on this platform")
)

// ConfigError reports a configuration field that Start (or Main) rejected.
type ConfigError struct {
	Field  string // Config field or command-line flag, e.g. "Size" or "-size"
	Value  string // the rejected value, as text
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("owner: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("owner: %s %q: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// ControlError reports a control request the owner refused (see "# Format"
// in the package documentation).
type ControlError struct {
	Method uint16
	Field  string
	Reason string
	Err    error // a cause, such as a planfmt decode error; may be nil
}

func (e *ControlError) Error() string {
	s := fmt.Sprintf("owner: control method %#04x: %s: %s", e.Method, e.Field, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrControl and the cause, if any.
func (e *ControlError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrControl, e.Err}
	}
	return []error{ErrControl}
}

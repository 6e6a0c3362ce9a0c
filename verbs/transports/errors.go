package transports

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrUnknown is wrapped by the error of New, Check and LocalAddr for a
	// name that is no known transport (an *UnknownError).
	ErrUnknown = errors.New("transports: unknown transport")
)

// UnknownError is the error for a name that is no known transport.
type UnknownError struct {
	Name string // the name asked for
}

// Error names the known transports: `transports: unknown transport "udp":
// want tcp or shm`.
func (e *UnknownError) Error() string {
	return fmt.Sprintf("transports: unknown transport %q: %s", e.Name, e.Want())
}

// Want says what is known instead, as a reason a caller's own error can
// carry: "want tcp or shm".
func (e *UnknownError) Want() string { return "want " + strings.Join(Names(), " or ") }

// Unwrap returns ErrUnknown.
func (e *UnknownError) Unwrap() error { return ErrUnknown }

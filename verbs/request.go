package verbs

import "fmt"

// Op is the operation of a work request.
type Op uint8

const (
	// OpRead copies Len bytes from the remote region at RemoteOff into the
	// local region at LocalOff.
	OpRead Op = 1
	// OpWrite copies Len bytes from the local region at LocalOff into the
	// remote region at RemoteOff.
	OpWrite Op = 2
)

// String returns "READ", "WRITE" or the number.
func (o Op) String() string {
	switch o {
	case OpRead:
		return "READ"
	case OpWrite:
		return "WRITE"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// WorkRequest is one one-sided operation. It is a plain value: Post reads
// the slice and does not keep it, so the caller may reuse the slice as soon
// as Post returns. The memory it names is another matter: the local range
// of a WRITE must not change, and the local range of a READ must not be
// read, until the request's completion has been polled.
type WorkRequest struct {
	ID        uint64 // caller's cookie, returned in the Completion
	Op        Op     // OpRead or OpWrite
	Len       uint32 // bytes to move; 0 is a valid no-op that still completes
	LocalKey  Key    // a region registered with this side's transport
	LocalOff  uint64 // offset in the local region
	RemoteKey Key    // a region the other side exported (or exposed)
	RemoteOff uint64 // offset in the remote region
}

// Status is the outcome of a work request (and of a control call).
type Status uint8

const (
	StatusOK           Status = iota // done
	StatusBadKey                     // remote key not exported: ErrBadKey
	StatusAccess                     // remote region forbids the op: ErrAccess
	StatusBounds                     // remote range outside the region: ErrBounds
	StatusClosed                     // connection ended first: ErrClosed
	StatusNotSupported               // no handler for a call: ErrNotSupported
	StatusHandler                    // the call's handler failed: ErrHandler

	statusCount
)

// Valid reports whether s is a known status.
func (s Status) Valid() bool { return s < statusCount }

// Err returns the sentinel error for s, or nil for StatusOK.
func (s Status) Err() error {
	switch s {
	case StatusOK:
		return nil
	case StatusBadKey:
		return ErrBadKey
	case StatusAccess:
		return ErrAccess
	case StatusBounds:
		return ErrBounds
	case StatusClosed:
		return ErrClosed
	case StatusNotSupported:
		return ErrNotSupported
	case StatusHandler:
		return ErrHandler
	}
	return ErrProtocol
}

// String names the status.
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusBadKey:
		return "bad key"
	case StatusAccess:
		return "access denied"
	case StatusBounds:
		return "out of bounds"
	case StatusClosed:
		return "closed"
	case StatusNotSupported:
		return "not supported"
	case StatusHandler:
		return "handler failed"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Completion reports the outcome of one posted work request. Err is nil
// when Status is StatusOK, and otherwise a [*RemoteError] for the request.
type Completion struct {
	ID     uint64 // the WorkRequest's ID
	Status Status
	Err    error
}

// Span returns buf[off:off+n] if that range lies inside buf (with no
// overflow in off+n), and false otherwise. Transports validate every range
// with it.
func Span(buf []byte, off uint64, n uint32) ([]byte, bool) {
	size := uint64(len(buf))
	if off > size || uint64(n) > size-off {
		return nil, false
	}
	return buf[off : off+uint64(n)], true
}

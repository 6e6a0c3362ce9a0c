package main

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/cudagather"
	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/engram/snapshot"
	"github.com/scatterkit/scatterkit/verbs/transports"
)

// code is an sk_error code (docs/capi.md); exports.go checks at compile
// time that each equals its C enum value.
type code int32

const (
	codeOK      code = 0
	codeInval   code = -1
	codeID      code = -2
	codeNoTable code = -3
	codeExist   code = -4
	codeClosed  code = -5
	codeIO      code = -6
	codeNoMem   code = -7
	codeNotSup  code = -8
)

// Errors of the ABI's own checks; engram's errors pass through as they
// are. Each is detailed by a typed error below; test with errors.Is.
var (
	// errHandle: a handle that is freed, stale, of another kind or never
	// handed out ([*HandleError]).
	errHandle = errors.New("capi: handle closed or unknown")
	// errArg: an argument the ABI rejects before engram sees it: a
	// length, count or pointer that does not describe memory, bad JSON,
	// an id width other than 32 or 64 ([*ArgError]).
	errArg = errors.New("capi: invalid argument")
	// errTooMany: the handle table of a kind is full.
	errTooMany = errors.New("capi: too many handles")
	// errNoMemory: a buffer's memory could not be mapped.
	errNoMemory = errors.New("capi: out of memory")
	// errNotSupported: something this platform or build lacks.
	errNotSupported = errors.New("capi: not supported")
	// errAborted: a populate stream ended by sk_populate_abort or
	// sk_close; nothing was published.
	errAborted = errors.New("capi: populate aborted")
	// errPanic: a Go panic recovered at the boundary ([*PanicError]).
	errPanic = errors.New("capi: internal error")
)

// HandleError details an errHandle.
type HandleError struct {
	Handle uint64
	Want   kind
}

func (e *HandleError) Error() string {
	return fmt.Sprintf("%v: %s handle %#x", errHandle, e.Want, e.Handle)
}

// Unwrap returns errHandle.
func (e *HandleError) Unwrap() error { return errHandle }

// ArgError details an errArg.
type ArgError struct {
	Arg    string // the C parameter, e.g. "out_len"
	Reason string
}

func (e *ArgError) Error() string { return fmt.Sprintf("%v: %s: %s", errArg, e.Arg, e.Reason) }

// Unwrap returns errArg.
func (e *ArgError) Unwrap() error { return errArg }

func badArg(arg, format string, a ...any) error {
	return &ArgError{Arg: arg, Reason: fmt.Sprintf(format, a...)}
}

// PanicError is a panic recovered at the boundary: a broken invariant,
// reported as SK_EIO instead of crashing the host process.
type PanicError struct {
	Value any
}

func (e *PanicError) Error() string { return fmt.Sprintf("%v: panic: %v", errPanic, e.Value) }

// Unwrap returns errPanic.
func (e *PanicError) Unwrap() error { return errPanic }

// protect runs f, turning a panic into a *PanicError. It is the body of
// every export; f does not escape, so a closure costs no allocation.
func protect(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r}
		}
	}()
	return f()
}

// invalid are the sentinels that mean a bad argument or configuration
// (SK_EINVAL, a ValueError in Python).
var invalid = [...]error{
	errArg,
	engram.ErrShape, engram.ErrRowBytes, engram.ErrOutput, engram.ErrUnregisteredOutput,
	engram.ErrConfig, engram.ErrRowsSize, engram.ErrBadLayer,
	snapshot.ErrSourceSize, snapshot.ErrSpecMismatch, snapshot.ErrBadName, snapshot.ErrBadSpec,
	transports.ErrUnknown,
	cudagather.ErrInvalid,
}

// classify maps an error to its code, in this order: an *engram.IDError
// or a *cudagather.IDError (SK_EID); a closed store, handle or device
// context (SK_ECLOSED); an unknown table
// (SK_ENOTABLE); a populated table (SK_EEXIST); no buffer space
// (SK_ENOMEM); what the store, platform or build cannot do, such as
// writing a remote store or CUDA in a library without it (SK_ENOTSUP); a bad argument (SK_EINVAL); anything else,
// file, transport and driver failures and a table without rows included
// (SK_EIO).
func classify(err error) code {
	var ide *engram.IDError
	var gide *cudagather.IDError
	switch {
	case err == nil:
		return codeOK
	case errors.As(err, &ide), errors.As(err, &gide):
		return codeID
	case errors.Is(err, errHandle), errors.Is(err, engram.ErrClosed), errors.Is(err, cudagather.ErrClosed):
		return codeClosed
	case errors.Is(err, engram.ErrUnknownTable):
		return codeNoTable
	case errors.Is(err, engram.ErrExists):
		return codeExist
	case errors.Is(err, bufferpool.ErrExhausted), errors.Is(err, bufferpool.ErrTooLarge),
		errors.Is(err, errNoMemory), errors.Is(err, errTooMany):
		return codeNoMem
	case errors.Is(err, engram.ErrReadOnly), errors.Is(err, errNotSupported),
		errors.Is(err, bufferpool.ErrNotSupported), errors.Is(err, snapshot.ErrNotSupported),
		errors.Is(err, cudagather.ErrNotSupported):
		return codeNotSup
	}
	for _, s := range invalid {
		if errors.Is(err, s) {
			return codeInval
		}
	}
	return codeIO
}

// msgLen is sk_error.msg's size, its NUL included.
const msgLen = 1024

// cError is sk_error as Go lays it out; exports.go checks at compile time
// that its size and field offsets are C's.
type cError struct {
	Code     int32
	_        int32
	T, K, ID int64
	Msg      [msgLen]byte
}

// set fills e for err (not nil) and returns err's code: t, k and id are
// the bad id's position and value for SK_EID, else -1 (a device lookup's
// bad id, reported by sk_cuda_status, has its position only: id is -1); the message is
// err's, cut at a UTF-8 boundary to fit with its NUL.
func (e *cError) set(err error) code {
	c := classify(err)
	e.Code, e.T, e.K, e.ID = int32(c), -1, -1, -1
	if ide := (*engram.IDError)(nil); errors.As(err, &ide) {
		e.T, e.K, e.ID = int64(ide.T), int64(ide.K), ide.ID
	} else if gide := (*cudagather.IDError)(nil); errors.As(err, &gide) {
		e.T, e.K = int64(gide.T), int64(gide.K)
	}
	msg := err.Error()
	if len(msg) > msgLen-1 {
		n := msgLen - 1
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
		msg = msg[:n]
	}
	n := copy(e.Msg[:], msg)
	e.Msg[n] = 0
	return c
}

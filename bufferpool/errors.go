package bufferpool

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"
)

// Errors returned by the pool. Detailed failures wrap one of these in a typed
// error ([*ConfigError], [*AcquireError], [*LeaseError], [*LockError],
// [*ArenaError], [*LeakError]); test for them with [errors.Is].
var (
	// ErrNotSupported is returned by [New] on platforms without the arena
	// syscalls (everything but Linux).
	ErrNotSupported = errors.New("bufferpool: not supported on this platform")
	// ErrInvalidConfig is wrapped by [*ConfigError] when [New] rejects a Config.
	ErrInvalidConfig = errors.New("bufferpool: invalid config")
	// ErrInvalidSize is returned for a lease of zero or negative bytes.
	ErrInvalidSize = errors.New("bufferpool: invalid lease size")
	// ErrTooLarge is returned at once for a lease larger than the largest
	// size class: it could never be granted, so it never waits.
	ErrTooLarge = errors.New("bufferpool: lease larger than the largest size class")
	// ErrExhausted means no block of the needed class was free: TryAcquire
	// returns it bare (no allocation on the fallback path); a blocking acquire
	// whose context or timeout ended wraps it in [*AcquireError].
	ErrExhausted = errors.New("bufferpool: staging exhausted")
	// ErrClosed is returned by acquires after [Pool.Close], including to
	// callers that were waiting when Close ran, and by a second Close after
	// the arena was unmapped.
	ErrClosed = errors.New("bufferpool: pool closed")
	// ErrDoubleRelease is returned (inside [*LeaseError]) when a lease is
	// released again, or when a stale copy of a released lease is released.
	// The allocator is left untouched.
	ErrDoubleRelease = errors.New("bufferpool: lease already released")
	// ErrInvalidLease is returned when releasing the zero Lease.
	ErrInvalidLease = errors.New("bufferpool: invalid lease")
	// ErrLockRefused is wrapped by [*LockError] when mlock of the arena fails.
	ErrLockRefused = errors.New("bufferpool: arena lock refused")
	// ErrRegister is returned by [New] when Config.Register fails.
	ErrRegister = errors.New("bufferpool: arena registration failed")
	// ErrDeregister is returned by [Pool.Close] when the deregister function
	// returned by Config.Register fails; the arena stays mapped.
	ErrDeregister = errors.New("bufferpool: arena deregistration failed")
	// ErrLeak is wrapped by [*LeakError] when Close finds outstanding leases.
	ErrLeak = errors.New("bufferpool: leases outstanding at close")
)

// ConfigError reports a Config field that [New] rejected.
type ConfigError struct {
	Field  string // the Config field, e.g. "MinSlot"
	Value  int64  // its value
	Reason string // what is wrong with it
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("bufferpool: invalid config: %s=%d: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns [ErrInvalidConfig].
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// AcquireError reports a lease request that could not be granted.
type AcquireError struct {
	Size   int           // bytes requested
	Limit  int           // the largest size class (set with ErrTooLarge)
	Waited time.Duration // time spent queued before giving up
	Err    error         // ErrInvalidSize, ErrTooLarge or ErrExhausted
	Cause  error         // why a wait ended: the context's error, or context.DeadlineExceeded for a timeout
}

func (e *AcquireError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "acquire %d bytes: %v", e.Size, e.Err)
	if e.Limit > 0 {
		fmt.Fprintf(&b, " (largest class %d)", e.Limit)
	}
	if e.Cause != nil {
		fmt.Fprintf(&b, " after waiting %v: %v", e.Waited, e.Cause)
	}
	return b.String()
}

// Unwrap returns Err and, when set, Cause, so both [errors.Is](err,
// ErrExhausted) and errors.Is(err, context.DeadlineExceeded) hold after a
// timed-out wait.
func (e *AcquireError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// LeaseError reports a release that was refused.
type LeaseError struct {
	Offset int   // the lease's arena offset
	Size   int   // the lease's size
	Err    error // ErrDoubleRelease or ErrInvalidLease
}

func (e *LeaseError) Error() string {
	return fmt.Sprintf("release lease at offset %d (%d bytes): %v", e.Offset, e.Size, e.Err)
}

// Unwrap returns Err.
func (e *LeaseError) Unwrap() error { return e.Err }

// LockError reports that mlock of the arena was refused while Config.Lock was
// [LockRequire]. Errno is the system's answer (EPERM or ENOMEM without
// CAP_IPC_LOCK beyond RLIMIT_MEMLOCK, EAGAIN when memory is short).
type LockError struct {
	Size  int   // bytes that were to be locked
	Errno error // the syscall error
}

func (e *LockError) Error() string {
	return fmt.Sprintf("bufferpool: arena lock refused: mlock %d bytes: %v", e.Size, e.Errno)
}

// Unwrap returns [ErrLockRefused] and the syscall error.
func (e *LockError) Unwrap() []error { return []error{ErrLockRefused, e.Errno} }

// ArenaError reports a failed mapping syscall.
type ArenaError struct {
	Op   string // "mmap" or "munmap"
	Size int    // bytes involved
	Err  error  // the syscall error
}

func (e *ArenaError) Error() string {
	return fmt.Sprintf("bufferpool: %s %d bytes: %v", e.Op, e.Size, e.Err)
}

// Unwrap returns the syscall error.
func (e *ArenaError) Unwrap() error { return e.Err }

// LeakedLease describes one lease still outstanding at Close.
type LeakedLease struct {
	Offset int    // arena offset
	Size   int    // bytes requested
	Class  int    // bytes of the size class it holds
	Label  string // label given at acquire, if any
	Caller string // "function file:line" of the acquire, when Config.TrackCallers is set
}

func (l LeakedLease) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "offset=%d size=%d class=%d", l.Offset, l.Size, l.Class)
	if l.Label != "" {
		fmt.Fprintf(&b, " label=%q", l.Label)
	}
	if l.Caller != "" {
		fmt.Fprintf(&b, " at %s", l.Caller)
	}
	return b.String()
}

// LeakError is returned by [Pool.Close] when leases are outstanding. The
// arena stays mapped (their memory stays valid); release them and call Close
// again.
type LeakError struct {
	Leases []LeakedLease // ordered by offset
}

// leakListMax bounds how many leases Error spells out.
const leakListMax = 8

func (e *LeakError) Error() string {
	var b strings.Builder
	total := 0
	for _, l := range e.Leases {
		total += l.Class
	}
	fmt.Fprintf(&b, "bufferpool: %d leases outstanding at close (%d bytes)", len(e.Leases), total)
	for i, l := range e.Leases {
		if i == leakListMax {
			fmt.Fprintf(&b, "; and %d more", len(e.Leases)-leakListMax)
			break
		}
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		b.WriteString(sep)
		b.WriteString(l.String())
	}
	return b.String()
}

// Unwrap returns [ErrLeak].
func (e *LeakError) Unwrap() error { return ErrLeak }

// callerString resolves a program counter recorded by runtime.Callers.
func callerString(pc uintptr) string {
	if pc == 0 {
		return ""
	}
	frames := runtime.CallersFrames([]uintptr{pc})
	f, _ := frames.Next()
	if f.Function == "" && f.File == "" {
		return ""
	}
	return fmt.Sprintf("%s %s:%d", f.Function, f.File, f.Line)
}

package probe

import (
	"errors"
	"fmt"
	"strings"
)

// Errors the profiler reports; match them with errors.Is.
var (
	// ErrNotRoot: loading BPF programs and attaching uprobes needs root
	// (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN).
	ErrNotRoot = errors.New("scatterprof: needs root (CAP_BPF + CAP_PERFMON or CAP_SYS_ADMIN) to load BPF programs and attach uprobes")
	// ErrNoBPF: the kernel refused to load the programs or create the maps
	// (no BPF syscall, or uprobe programs not supported).
	ErrNoBPF = errors.New("scatterprof: the kernel cannot load the BPF programs (needs CONFIG_BPF_SYSCALL and CONFIG_BPF_EVENTS)")
	// ErrNoUprobes: the kernel has no uprobe support (CONFIG_UPROBE_EVENTS).
	ErrNoUprobes = errors.New("scatterprof: the kernel has no uprobe support (needs CONFIG_UPROBES and CONFIG_UPROBE_EVENTS)")
	// ErrStripped: the target's executable has no symbol table.
	ErrStripped = errors.New("scatterprof: the executable is stripped (no .symtab); build it without -ldflags=\"-s -w\"")
	// ErrNoMarkers: the executable does not contain the engine's stage
	// markers (it does not link package verbs).
	ErrNoMarkers = errors.New("scatterprof: the executable has no scatterkit stage markers (it does not link github.com/scatterkit/scatterkit/verbs)")
	// ErrMarkerABI: the executable's markers are not the code this
	// profiler knows how to probe (another scatterkit version).
	ErrMarkerABI = errors.New("scatterprof: the executable's stage markers do not match this profiler's probe ABI (build both from the same scatterkit version)")
	// ErrTargetExited: the process is gone (or never was).
	ErrTargetExited = errors.New("scatterprof: no such process (it exited, or never existed)")
	// ErrNotSupported: this platform cannot run the profiler (Linux on
	// amd64 only: the programs read the Go ABI0 stack through pt_regs).
	ErrNotSupported = errors.New("scatterprof: not supported on this platform (linux/amd64 only)")
	// ErrClosed: the profiler was closed.
	ErrClosed = errors.New("scatterprof: profiler closed")
)

// ExecError reports an executable the profiler cannot use.
type ExecError struct {
	Path string
	PID  int // 0 when no process is involved
	Err  error
}

func (e *ExecError) Error() string {
	// The sentinels carry the command's prefix; say it once, in front.
	msg := strings.TrimPrefix(e.Err.Error(), "scatterprof: ")
	if e.PID != 0 {
		return fmt.Sprintf("scatterprof: process %d (%s): %s", e.PID, e.Path, msg)
	}
	return fmt.Sprintf("scatterprof: %s: %s", e.Path, msg)
}

func (e *ExecError) Unwrap() error { return e.Err }

package probe

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/scatterkit/scatterkit/verbs/stage"
)

// AttachSelf probes the markers of the profiler's own process. It finds
// them through the running code (stage.Entries and /proc/self/maps), not
// the symbol table, so it works in binaries that `go run` and `go test`
// stripped.
func (p *Profiler) AttachSelf() (*Target, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.coll == nil {
		return nil, ErrClosed
	}
	pid := os.Getpid()
	if t, ok := p.targets[pid]; ok {
		return t, nil
	}
	b, e, n := stage.Entries()
	if b == 0 || e == 0 || n == 0 {
		return nil, ErrNotSupported
	}
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, &ExecError{PID: pid, Path: "/proc/self/exe", Err: err}
	}
	var m Markers
	if m.Begin, err = probePoint(b, BeginSymbol); err == nil {
		if m.End, err = probePoint(e, EndSymbol); err == nil {
			m.Next, err = probePoint(n, NextSymbol)
		}
	}
	if err != nil {
		return nil, &ExecError{PID: pid, Path: exe, Err: err}
	}
	return p.attachLocked(pid, exePath(pid), exe, m)
}

// probePoint checks a marker's code in the executable file and returns
// the file offset of its probe point.
func probePoint(addr uintptr, sym string) (uint64, error) {
	off, err := fileOffset(addr)
	if err != nil {
		return 0, err
	}
	want, probe := codeFor(sym)
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	code := make([]byte, len(want))
	if _, err := f.ReadAt(code, int64(off)); err != nil {
		return 0, err
	}
	if string(code) != string(want) {
		return 0, fmt.Errorf("marker %s: code % x: %w", sym, code, ErrMarkerABI)
	}
	return off + probe, nil
}

// fileOffset maps an address of this process's code to its offset in the
// executable, through the mapping that holds it.
func fileOffset(addr uintptr) (uint64, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 {
			continue
		}
		lo, hi, ok := strings.Cut(fs[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(fs[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || uint64(addr) < start || uint64(addr) >= end {
			continue
		}
		if !strings.Contains(fs[1], "x") {
			return 0, fmt.Errorf("marker at %#x lies in a mapping that is not executable", addr)
		}
		return uint64(addr) - start + off, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("marker at %#x lies in no mapping of /proc/self/maps", addr)
}

package discovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// selfHolder returns the identity of this process (ID left empty).
func selfHolder() (holder, error) { return selfOnce() }

var selfOnce = sync.OnceValues(func() (holder, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return holder{}, fmt.Errorf("discovery: read boot id: %w", err)
	}
	h := holder{PID: os.Getpid(), Boot: string(bytes.TrimSpace(boot))}
	if h.Boot == "" || len(h.Boot) > maxBootIDLen {
		return holder{}, fmt.Errorf("discovery: unexpected boot id %q", h.Boot)
	}
	stat, err := readProcStat(h.PID)
	if err != nil {
		return holder{}, err
	}
	h.Start = stat.start
	if h.PIDNS, err = pidNamespace(h.PID); err != nil {
		return holder{}, err
	}
	return h, nil
})

func pidNamespace(pid int) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/pid", &st); err != nil {
		return 0, fmt.Errorf("discovery: pid namespace of %d: %w", pid, err)
	}
	return st.Ino, nil
}

type procStat struct {
	state byte   // field 3
	start uint64 // field 22, clock ticks after boot
}

// readProcStat parses /proc/PID/stat. The command name (field 2) is in
// parentheses and may hold spaces and parentheses, so fields are counted from
// the last ')'.
func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return procStat{}, fmt.Errorf("discovery: /proc/%d/stat: no command name", pid)
	}
	fields := bytes.Fields(data[end+1:]) // fields[0] is field 3
	if len(fields) < 20 || len(fields[0]) != 1 {
		return procStat{}, fmt.Errorf("discovery: /proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	start, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("discovery: /proc/%d/stat: start time: %w", pid, err)
	}
	return procStat{state: fields[0][0], start: start}, nil
}

// processAlive reports whether the process h names still runs. A process of
// another boot is dead; one of another pid namespace cannot be checked and
// counts as alive; otherwise it lives while /proc/PID exists with the same
// start time and is not a zombie. When /proc cannot be read for another
// reason, it counts as alive: a record is never dropped on a doubt.
func processAlive(h, self holder) bool {
	if h.Boot != self.Boot {
		return false
	}
	if h.PIDNS != self.PIDNS {
		return true
	}
	st, err := readProcStat(h.PID)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return false
	}
	if err != nil {
		return true
	}
	return st.start == h.Start && st.state != 'Z' && st.state != 'X'
}

// lockFile takes an exclusive flock on path (created if missing) and returns
// its release. It polls so that it can give up when ctx ends.
func lockFile(ctx context.Context, path string) (func(), error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("discovery: open lock file: %w", &fs.PathError{Op: "open", Path: path, Err: err})
	}
	wait := 50 * time.Microsecond
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Close(fd) }, nil // closing the descriptor drops the lock
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			unix.Close(fd)
			return nil, fmt.Errorf("discovery: lock %s: %w", path, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			unix.Close(fd)
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Millisecond)
	}
}

// fileID returns the device and inode of a stat result.
func fileID(fi fs.FileInfo) (dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true // Dev is 32 bits on some ports
}

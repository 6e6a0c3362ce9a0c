//go:build linux

package bufferpool

import (
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// arenaSys holds the syscalls whose failures the tests inject.
type arenaSys struct {
	madvise func(b []byte, advice int) error
	mlock   func(b []byte) error
}

var hostSys = arenaSys{madvise: unix.Madvise, mlock: unix.Mlock}

// arena is one anonymous private mapping.
type arena struct {
	mem    []byte         // the usable mapping, aligned to the huge-page size when advised
	base   unsafe.Pointer // start of mem, for munmap
	length uintptr        // len(mem)
	stats  ArenaStats
}

const (
	thpSysfs           = "/sys/kernel/mm/transparent_hugepage/"
	defaultHugePageLen = 2 << 20
)

// hugePageSize returns the PMD huge page size the kernel reports, or 2 MiB.
func hugePageSize() int {
	b, err := os.ReadFile(thpSysfs + "hpage_pmd_size")
	if err != nil {
		return defaultHugePageLen
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !isPow2(n) {
		return defaultHugePageLen
	}
	return n
}

// thpMode returns the bracketed word of THP's "enabled" file ("always",
// "madvise" or "never"), or "" when it cannot be read.
func thpMode() string {
	b, err := os.ReadFile(thpSysfs + "enabled")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.IndexByte(s, '[')
	j := strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}

// mapArena maps capacity bytes (a multiple of the page size), then advises,
// locks and prefaults them as the config asks. On error nothing stays mapped.
func mapArena(capacity int, cfg *Config, sys arenaSys) (*arena, error) {
	page := os.Getpagesize()
	a := &arena{stats: ArenaStats{PageSize: page}}
	align := page
	if !cfg.NoHugePages {
		a.stats.HugePageSize = hugePageSize()
		if capacity >= a.stats.HugePageSize {
			// Align to and round up to whole huge pages, so every huge page
			// of the arena can be backed by one PMD entry.
			align = a.stats.HugePageSize
		}
	}
	length := (capacity + align - 1) &^ (align - 1)
	slack := align - page
	raw, err := unix.MmapPtr(-1, 0, nil, uintptr(length+slack),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, &ArenaError{Op: "mmap", Size: length + slack, Err: err}
	}
	start := uintptr(raw)
	aligned := (start + uintptr(align-1)) &^ uintptr(align-1)
	if head := aligned - start; head > 0 {
		if err := unix.MunmapPtr(raw, head); err != nil {
			_ = unix.MunmapPtr(raw, uintptr(length+slack))
			return nil, &ArenaError{Op: "munmap", Size: int(head), Err: err}
		}
	}
	a.base = unsafe.Add(raw, aligned-start)
	a.length = uintptr(length)
	if tail := uintptr(slack) - (aligned - start); tail > 0 {
		if err := unix.MunmapPtr(unsafe.Add(a.base, length), tail); err != nil {
			_ = unix.MunmapPtr(a.base, uintptr(length)+tail)
			return nil, &ArenaError{Op: "munmap", Size: int(tail), Err: err}
		}
	}
	a.mem = unsafe.Slice((*byte)(a.base), length)
	a.stats.MappedBytes = length
	a.stats.Mapped = true

	if !cfg.NoHugePages {
		a.stats.THPMode = thpMode()
		// EINVAL means a kernel without THP; any error only leaves the arena
		// on base pages, so it is recorded, never fatal.
		if err := sys.madvise(a.mem, unix.MADV_HUGEPAGE); err != nil {
			a.stats.HugePageErr = err
		} else {
			a.stats.HugePages = a.stats.THPMode != "never"
		}
	}

	used := a.mem[:capacity]
	if cfg.Lock != LockNone {
		if err := sys.mlock(used); err != nil {
			if cfg.Lock == LockRequire {
				_ = a.unmap()
				return nil, &LockError{Size: capacity, Errno: err}
			}
			a.stats.LockErr = err
		} else {
			a.stats.Locked = true
			a.stats.Prefaulted = true // mlock faults every page in
		}
	}
	if cfg.Prefault && !a.stats.Prefaulted {
		prefault(used, page, sys)
		a.stats.Prefaulted = true
	}
	return a, nil
}

// prefault faults every page in, in one call where the kernel supports
// MADV_POPULATE_WRITE (5.14+), else by writing one byte per page.
func prefault(b []byte, page int, sys arenaSys) {
	if err := sys.madvise(b, unix.MADV_POPULATE_WRITE); err == nil {
		return
	}
	for i := 0; i < len(b); i += page {
		b[i] = 0
	}
}

func (a *arena) unmap() error {
	if a.base == nil {
		return nil
	}
	if err := unix.MunmapPtr(a.base, a.length); err != nil {
		return &ArenaError{Op: "munmap", Size: int(a.length), Err: err}
	}
	a.base, a.mem, a.length = nil, nil, 0
	return nil
}

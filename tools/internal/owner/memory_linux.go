package owner

import (
	"errors"
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// mapping is memory this package mapped itself; unmap releases it.
type mapping struct {
	buf []byte
}

func (m *mapping) unmap() error {
	if m == nil || m.buf == nil {
		return nil
	}
	err := unix.Munmap(m.buf)
	m.buf = nil
	if err != nil {
		return fmt.Errorf("owner: munmap: %w", err)
	}
	return nil
}

// mapFile maps the whole file at path shared, read-only or read-write.
func mapFile(path string, writable bool) (*mapping, error) {
	flag, prot := os.O_RDONLY, unix.PROT_READ
	if writable {
		flag, prot = os.O_RDWR, unix.PROT_READ|unix.PROT_WRITE
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("owner: data file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("owner: data file: %w", err)
	}
	switch {
	case !st.Mode().IsRegular():
		return nil, &ConfigError{Field: "File", Value: path, Reason: "not a regular file"}
	case st.Size() == 0:
		return nil, &ConfigError{Field: "File", Value: path, Reason: "empty: nothing to serve"}
	case st.Size() > math.MaxInt || st.Size() > MaxDataBytes:
		return nil, &ConfigError{Field: "File", Value: path, Reason: fmt.Sprintf("%d bytes is more than this owner maps", st.Size())}
	}
	buf, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("owner: mmap %s: %w", path, err)
	}
	return &mapping{buf: buf}, nil
}

// mapAnon maps size bytes of private anonymous memory, advised for
// transparent huge pages unless noHuge (random-row packing then takes
// fewer TLB misses). The advice is best effort.
func mapAnon(size int, noHuge bool) (*mapping, error) {
	buf, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("owner: mmap %d bytes: %w", size, err)
	}
	if !noHuge {
		if err := unix.Madvise(buf, unix.MADV_HUGEPAGE); err != nil && !errors.Is(err, unix.EINVAL) {
			_ = unix.Munmap(buf)
			return nil, fmt.Errorf("owner: madvise: %w", err)
		}
	}
	return &mapping{buf: buf}, nil
}

//go:build linux

package shm

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/scatterkit/scatterkit/verbs"
)

// Seals. Every shared memfd is sealed against resizing, so a mapping of
// it can never fault with SIGBUS. One that peers may only read is also
// sealed against writes (F_SEAL_FUTURE_WRITE, after this process mapped
// it writable): from then on the kernel refuses write(2), new writable
// shared mappings, mprotect to writable and hole punching through any
// descriptor of it, including one a peer reopens read-write through
// /proc. Only this process's own mapping made before the seal can write.
// F_SEAL_SEAL comes last, so nobody can add or change seals.
const (
	sizeSeals  = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	writeSeals = unix.F_SEAL_FUTURE_WRITE
)

// memfd is an Alloc'ed region's file and mapping.
type memfd struct {
	fd  int
	mem []byte

	mu   sync.Mutex
	rofd int // read-only descriptor for peers with read access only; -1 until needed
}

// newMemfd creates a memfd of size bytes, maps it and seals it; peersWrite
// false seals it against every write but through this mapping.
func newMemfd(size int, populate, peersWrite bool) (*memfd, error) {
	fd, err := unix.MemfdCreate("scatterkit", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	fail := func(what string, err error) (*memfd, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: %s: %w", what, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail(fmt.Sprintf("ftruncate %d", size), err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, sizeSeals); err != nil {
		return fail("seal memfd", err)
	}
	flags := unix.MAP_SHARED
	if populate {
		flags |= unix.MAP_POPULATE
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return fail(fmt.Sprintf("mmap %d", size), err)
	}
	last := unix.F_SEAL_SEAL
	if !peersWrite {
		last |= writeSeals
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, last); err != nil {
		_ = unix.Munmap(mem)
		return fail("seal memfd against writes", err)
	}
	return &memfd{fd: fd, mem: mem, rofd: -1}, nil
}

// shareFD returns the descriptor to send to a peer allowed access: the
// read-write one when the peer may write, otherwise a read-only reopening,
// so the kernel refuses the peer a writable mapping.
func (m *memfd) shareFD(access verbs.Access) (int, error) {
	if access&verbs.AccessRemoteWrite != 0 {
		return m.fd, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rofd < 0 {
		fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", m.fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, fmt.Errorf("shm: reopen memfd read-only: %w", err)
		}
		m.rofd = fd
	}
	return m.rofd, nil
}

// free unmaps and closes.
func (m *memfd) free() error {
	err := unix.Munmap(m.mem)
	unix.Close(m.fd)
	if m.rofd >= 0 {
		unix.Close(m.rofd)
	}
	m.mem = nil
	if err != nil {
		return fmt.Errorf("shm: munmap: %w", err)
	}
	return nil
}

// mapPeer validates a descriptor received from a peer for a region of
// size bytes and maps it (writable only if write is set). The descriptor
// must be a sealed memfd (it can neither shrink nor grow) at least size
// bytes long; a descriptor opened read-only fails a writable mapping.
func mapPeer(fd int, size uint64, write, populate bool) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("descriptor is not a regular file")
	}
	if st.Size < 0 || uint64(st.Size) < size {
		return nil, fmt.Errorf("file of %d bytes for a region of %d", st.Size, size)
	}
	got, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("get seals: %w", err)
	}
	if got&sizeSeals != sizeSeals {
		return nil, fmt.Errorf("memfd not sealed against resizing (seals %#x)", got)
	}
	if size > uint64(int(^uint(0)>>1)) {
		return nil, fmt.Errorf("region of %d bytes", size)
	}
	prot := unix.PROT_READ
	if write {
		prot |= unix.PROT_WRITE
	}
	flags := unix.MAP_SHARED
	if populate {
		flags |= unix.MAP_POPULATE
	}
	mem, err := unix.Mmap(fd, 0, int(size), prot, flags)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return mem, nil
}

func unmapAll(maps [][]byte) {
	for _, m := range maps {
		if m != nil {
			_ = unix.Munmap(m)
		}
	}
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

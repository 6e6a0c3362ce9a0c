//go:build linux

package shm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/scatterkit/scatterkit/verbs/internal/frame"
)

// TestReadOnlyExportsRefuseWrites attacks the descriptors of regions a
// peer may only read (a read-only export and the probe region) the way a
// hostile local process would: reopen through /proc read-write, then
// pwrite, a writable shared mapping, mprotect of a read-only mapping,
// hole punching and resizing. The kernel must refuse every one, and the
// owner's bytes stay as they were.
func TestReadOnlyExportsRefuseWrites(t *testing.T) {
	f := newFixture(t)
	before := bytes.Clone(f.ro.Bytes())
	nc := dial(t, f.addr)
	sendHello(t, nc, nil, nil)
	var w frame.Hello
	fds, err := readHandshake(nc, frame.TypeWelcome, &w)
	require.NoError(t, err)
	defer closeFDs(fds)
	require.Len(t, fds, 3) // rw, ro, probe
	for i, name := range []string{"ro", "probe"} {
		fd := fds[i+1]
		t.Run(name, func(t *testing.T) {
			refused := func(what string, err error) {
				t.Helper()
				require.Error(t, err, "%s of a read-only region succeeded", what)
			}
			rw, err := unix.Open("/proc/self/fd/"+itoa(fd), unix.O_RDWR|unix.O_CLOEXEC, 0)
			if err == nil {
				defer unix.Close(rw)
				_, err = unix.Pwrite(rw, []byte{0x5a}, 3)
				refused("pwrite through a read-write reopening", err)
				m, err := unix.Mmap(rw, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
				if err == nil {
					m[5] ^= 0xff
					_ = unix.Munmap(m)
				}
				refused("a writable shared mapping", err)
				m, err = unix.Mmap(rw, 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
				require.NoError(t, err)
				err = unix.Mprotect(m, unix.PROT_READ|unix.PROT_WRITE)
				if err == nil {
					m[6] ^= 0xff
				}
				_ = unix.Munmap(m)
				refused("mprotect to writable", err)
				refused("hole punching", unix.Fallocate(rw, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096))
				refused("ftruncate", unix.Ftruncate(rw, 0))
			} else {
				require.True(t, errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM), "reopen: %v", err)
			}
			refused("hole punching on the descriptor sent", unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096))
		})
	}
	require.Equal(t, before, f.ro.Bytes(), "the owner's read-only export changed")
	f.requireHealthy(t)
}

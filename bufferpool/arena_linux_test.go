//go:build linux

package bufferpool

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// resident counts the resident pages of b (mincore).
func resident(t testing.TB, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// mappedAt reports whether any mapping of this process covers addr.
func mappedAt(t testing.TB, addr uintptr) bool {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(s.Text(), "%x-%x", &lo, &hi); err != nil {
			continue
		}
		if lo <= addr && addr < hi {
			return true
		}
	}
	require.NoError(t, s.Err())
	return false
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// fakeSys wraps the host syscalls, failing the ones a test asks for and
// remembering the address they were called on.
type fakeSys struct {
	mlockErr    error
	hugeErr     error
	populateErr error
	lockedAddr  uintptr
	populated   bool
}

func (f *fakeSys) sys() arenaSys {
	return arenaSys{
		mlock: func(b []byte) error {
			f.lockedAddr = addrOf(b)
			if f.mlockErr != nil {
				return f.mlockErr
			}
			return unix.Mlock(b)
		},
		madvise: func(b []byte, advice int) error {
			switch advice {
			case unix.MADV_HUGEPAGE:
				if f.hugeErr != nil {
					return f.hugeErr
				}
			case unix.MADV_POPULATE_WRITE:
				f.populated = true
				if f.populateErr != nil {
					return f.populateErr
				}
			}
			return unix.Madvise(b, advice)
		},
	}
}

func newFakePool(t *testing.T, cfg Config, f *fakeSys) (*Pool, error) {
	t.Helper()
	p, err := newPool(cfg, f.sys())
	if err == nil {
		t.Cleanup(func() {
			if err := p.Close(); !errors.Is(err, ErrClosed) {
				require.NoError(t, err)
			}
		})
	}
	return p, err
}

func TestLockRequireRefused(t *testing.T) {
	for _, errno := range []error{unix.EPERM, unix.ENOMEM, unix.EAGAIN} {
		t.Run(errno.Error(), func(t *testing.T) {
			f := &fakeSys{mlockErr: errno}
			p, err := newFakePool(t, Config{Budget: 8 * page, MinSlot: page, Lock: LockRequire}, f)
			require.Nil(t, p)
			require.ErrorIs(t, err, ErrLockRefused)
			require.ErrorIs(t, err, errno)
			var le *LockError
			require.True(t, errors.As(err, &le))
			require.Equal(t, 8*page, le.Size)
			require.NotZero(t, f.lockedAddr)
			require.False(t, mappedAt(t, f.lockedAddr), "the arena must be unmapped after a refused lock")
		})
	}
}

func TestLockBestEffortRefused(t *testing.T) {
	for _, prefault := range []bool{false, true} {
		t.Run(fmt.Sprintf("prefault=%v", prefault), func(t *testing.T) {
			f := &fakeSys{mlockErr: unix.EPERM}
			p, err := newFakePool(t, Config{Budget: 8 * page, MinSlot: page, Lock: LockBestEffort, Prefault: prefault, NoHugePages: true}, f)
			require.NoError(t, err)
			a := p.Stats().Arena
			require.False(t, a.Locked)
			require.ErrorIs(t, a.LockErr, unix.EPERM)
			require.Equal(t, prefault, a.Prefaulted)
			want := 0
			if prefault {
				want = 8
			}
			require.Equal(t, want, resident(t, p.Arena()), "resident pages")
		})
	}
}

// TestLockRequireReal locks for real: it needs CAP_IPC_LOCK or a large
// enough RLIMIT_MEMLOCK, and skips with the reason when refused.
func TestLockRequireReal(t *testing.T) {
	cfg := Config{Budget: 16 << 20, MinSlot: 64 << 10, Lock: LockRequire}
	p, err := New(cfg)
	if errors.Is(err, ErrLockRefused) {
		t.Skipf("mlock of %d bytes refused (not root, RLIMIT_MEMLOCK too low?): %v", cfg.Budget, err)
	}
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	a := p.Stats().Arena
	require.True(t, a.Locked)
	require.NoError(t, a.LockErr)
	require.True(t, a.Prefaulted)
	require.Equal(t, cfg.Budget/page, resident(t, p.Arena()), "a locked arena is resident")
}

func TestLockBestEffortReal(t *testing.T) {
	p := newTestPool(t, Config{Budget: 1 << 20, MinSlot: page, Lock: LockBestEffort, NoHugePages: true})
	a := p.Stats().Arena
	require.Equal(t, a.LockErr == nil, a.Locked, "Locked iff no LockErr")
	if !a.Locked {
		t.Logf("mlock refused here: %v", a.LockErr)
	}
}

func TestPrefault(t *testing.T) {
	cases := []struct {
		name     string
		cfg      Config
		f        fakeSys
		resident bool
	}{
		{"none", Config{Budget: 32 * page, MinSlot: page, NoHugePages: true}, fakeSys{}, false},
		{"populate", Config{Budget: 32 * page, MinSlot: page, NoHugePages: true, Prefault: true}, fakeSys{}, true},
		{"touch fallback", Config{Budget: 32 * page, MinSlot: page, NoHugePages: true, Prefault: true}, fakeSys{populateErr: unix.EINVAL}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newFakePool(t, tc.cfg, &tc.f)
			require.NoError(t, err)
			require.Equal(t, tc.cfg.Prefault, tc.f.populated, "MADV_POPULATE_WRITE tried")
			require.Equal(t, tc.resident, p.Stats().Arena.Prefaulted)
			want := 0
			if tc.resident {
				want = 32
			}
			require.Equal(t, want, resident(t, p.Arena()), "resident pages")
		})
	}
}

func TestHugePages(t *testing.T) {
	huge := hugePageSize()
	mode := thpMode()
	cases := []struct {
		name        string
		cfg         Config
		hugeErr     error
		mapped      int
		aligned     int
		wantAdvised bool
	}{
		{"advised", Config{Budget: 2*huge + 1, MinSlot: 64 << 10}, nil, 3 * huge, huge, mode == "always" || mode == "madvise"},
		{"no THP in kernel", Config{Budget: 2 * huge, MinSlot: 64 << 10}, unix.EINVAL, 2 * huge, huge, false},
		{"smaller than a huge page", Config{Budget: 16 * page, MinSlot: page}, nil, 16 * page, page, mode == "always" || mode == "madvise"},
		{"disabled", Config{Budget: 2*huge + 1, MinSlot: 64 << 10, NoHugePages: true}, nil, 2*huge + 64<<10, page, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSys{hugeErr: tc.hugeErr}
			p, err := newFakePool(t, tc.cfg, f)
			require.NoError(t, err)
			a := p.Stats().Arena
			require.Equal(t, tc.mapped, a.MappedBytes)
			require.Zero(t, addrOf(p.Arena())%uintptr(tc.aligned), "arena alignment")
			require.Equal(t, tc.wantAdvised, a.HugePages)
			if tc.hugeErr != nil {
				require.ErrorIs(t, a.HugePageErr, tc.hugeErr)
			}
			if tc.cfg.NoHugePages {
				require.Zero(t, a.HugePageSize)
				require.Empty(t, a.THPMode)
			} else {
				require.Equal(t, huge, a.HugePageSize)
				require.Equal(t, mode, a.THPMode)
			}
			// The whole mapping is readable and writable.
			b := p.Arena()
			b[0], b[len(b)-1] = 1, 2
			require.Equal(t, byte(1), b[0])
		})
	}
}

func TestUnmapOnFailureAndClose(t *testing.T) {
	var addr uintptr
	_, err := New(Config{
		Budget: 4 * page, MinSlot: page, NoHugePages: true,
		Register: func(a []byte) (func() error, error) {
			addr = addrOf(a)
			return nil, errors.New("refused")
		},
	})
	require.ErrorIs(t, err, ErrRegister)
	require.False(t, mappedAt(t, addr), "a failed New must unmap the arena")

	p, err := New(Config{Budget: 4 * page, MinSlot: page, NoHugePages: true})
	require.NoError(t, err)
	addr = addrOf(p.Arena())
	require.True(t, mappedAt(t, addr))
	require.NoError(t, p.Close())
	require.False(t, mappedAt(t, addr), "Close must unmap the arena")
}

func TestTHPModeParse(t *testing.T) {
	// thpMode reads the live system file; its answer must be one of the
	// kernel's words, or "" when the file is missing.
	m := thpMode()
	if _, err := os.Stat(thpSysfs + "enabled"); err != nil {
		require.Empty(t, m)
		return
	}
	require.True(t, strings.Contains("always madvise never", m) && m != "", "unexpected THP mode %q", m)
}

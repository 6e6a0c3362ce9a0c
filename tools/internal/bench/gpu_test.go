package bench

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostDevice is device memory for tests of -dst gpu: host bytes whose
// CopyIn lands only when its wait is called (so a bounce slot reused
// early lands the wrong bytes and fails verification), which can be told
// to corrupt one landed byte.
type hostDevice struct {
	mu      sync.Mutex
	mem     []byte
	copies  int
	corrupt bool
	pinned  int
}

func (d *hostDevice) DeviceLen() uint64 { return uint64(len(d.mem)) }

func (d *hostDevice) CopyIn(devOff uint64, src []byte, runs [][2]uint64) (func() error, error) {
	rs := append([][2]uint64(nil), runs...)
	return func() error {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, r := range rs {
			if r[0]+r[1] > uint64(len(src)) || devOff+r[0]+r[1] > uint64(len(d.mem)) {
				return fmt.Errorf("run %v at %d past the source or the memory", r, devOff)
			}
			copy(d.mem[devOff+r[0]:], src[r[0]:r[0]+r[1]])
			if d.corrupt && r[1] > 0 {
				d.mem[devOff+r[0]] ^= 0x10
				d.corrupt = false
			}
		}
		d.copies++
		return nil
	}, nil
}

func (d *hostDevice) Upload(off uint64, b []byte) error   { copy(d.mem[off:], b); return nil }
func (d *hostDevice) Download(off uint64, b []byte) error { copy(b, d.mem[off:]); return nil }
func (d *hostDevice) Pin([]byte) (func() error, error) {
	d.pinned++
	return func() error { d.pinned--; return nil }, nil
}
func (d *hostDevice) Describe() string { return "host (test)" }
func (d *hostDevice) Close() error     { return nil }

// withDevice installs a hostDevice factory for the test.
func withDevice(t *testing.T, corrupt bool) *[]*hostDevice {
	t.Helper()
	made := &[]*hostDevice{}
	old := newDeviceMem
	newDeviceMem = func(n int) (deviceMem, error) {
		d := &hostDevice{mem: make([]byte, n), corrupt: corrupt}
		*made = append(*made, d)
		return d, nil
	}
	t.Cleanup(func() { newDeviceMem = old })
	return made
}

// TestDstGPU runs READ workloads into (fake) device memory over tcp and
// shm, every mode and two callers: every operation is a DoDevice whose
// landed bytes are read back and verified, the h2d-copy and host-dst
// ceilings are measured, nothing leaks and the pins are released; a
// corrupted device byte fails verification; and -dst gpu refuses what it
// cannot run.
func TestDstGPU(t *testing.T) {
	for _, tr := range []string{"tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			made := withDevice(t, false)
			c := tinyConfig(t, tr, OwnerInproc, tinyWorkloads[0], tinyWorkloads[1])
			c.DstGPU, c.Callers = true, 2
			passes, lines, err := run(t, c)
			require.NoError(t, err)
			require.NoError(t, passes[0].Err)
			require.Zero(t, passes[0].Leaked)
			checkLines(t, c, tr, lines)
			for _, w := range passes[0].Workloads {
				require.Equal(t, 2*(len(c.Modes)+1), w.Verified)
				for _, name := range []string{CeilingH2D, CeilingHostDst} {
					require.Positive(t, w.ceiling(name), "%s of %s", name, w.Workload.Name)
				}
			}
			require.Len(t, *made, 1)
			require.Positive(t, (*made)[0].copies)
			require.Zero(t, (*made)[0].pinned, "pins released")
		})
	}
	t.Run("corrupt", func(t *testing.T) {
		withDevice(t, true)
		c := tinyConfig(t, "tcp", OwnerInproc, tinyWorkloads[0])
		c.DstGPU, c.Modes = true, Modes[1:2]
		_, _, err := run(t, c)
		require.ErrorIs(t, err, ErrVerify)
	})
	t.Run("flags", func(t *testing.T) {
		old := newDeviceMem
		newDeviceMem = nil
		_, err := Parse([]string{"-dst", "gpu"}, nil)
		newDeviceMem = old
		var fe *FlagError
		require.True(t, errors.As(err, &fe))
		require.Contains(t, err.Error(), "-tags cuda")
		withDevice(t, false)
		c, err := Parse([]string{"-dst", "gpu", "-workloads", "many-small"}, nil)
		require.NoError(t, err)
		require.True(t, c.DstGPU)
		_, err = Parse([]string{"-dst", "gpu", "-workloads", "engram-remote-t16"}, nil)
		require.ErrorAs(t, err, &fe)
		_, err = Parse([]string{"-dst", "gpu", "-workloads", "many-small-3owners"}, nil)
		require.ErrorAs(t, err, &fe)
		c, err = Parse([]string{"-dst", "gpu", "-frags", "1000"}, nil)
		require.NoError(t, err)
		require.True(t, c.DstGPU)
	})
}

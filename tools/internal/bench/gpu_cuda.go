//go:build cuda

package bench

import (
	"fmt"

	"github.com/scatterkit/scatterkit/cudagather"
)

func init() { newDeviceMem = newCUDAMem }

// cudaMem is device memory of GPU 0 (cudagather), its copies on a stream
// of its own.
type cudaMem struct {
	*cudagather.DeviceBuffer
	c *cudagather.Context
	s cudagather.Stream
}

func newCUDAMem(n int) (deviceMem, error) {
	c, err := cudagather.NewContext(0)
	if err != nil {
		return nil, err
	}
	s, err := c.NewStream()
	if err != nil {
		return nil, fmt.Errorf("%w (closing: %v)", err, c.Close())
	}
	b, err := c.NewDeviceBuffer(int64(n), s)
	if err != nil {
		return nil, fmt.Errorf("%w (closing: %v, %v)", err, c.DestroyStream(s), c.Close())
	}
	return &cudaMem{DeviceBuffer: b, c: c, s: s}, nil
}

func (m *cudaMem) Upload(off uint64, b []byte) error {
	if err := m.c.Sync(m.s); err != nil {
		return err
	}
	return m.c.CopyIn(m.Ptr()+cudagather.DevPtr(off), b)
}

func (m *cudaMem) Download(off uint64, b []byte) error {
	if err := m.c.Sync(m.s); err != nil {
		return err
	}
	return m.c.CopyOut(b, m.Ptr()+cudagather.DevPtr(off))
}

func (m *cudaMem) Pin(b []byte) (func() error, error) { return m.c.PinHost(b) }

func (m *cudaMem) Describe() string { return "cuda:0" }

func (m *cudaMem) Close() error {
	err := m.DeviceBuffer.Close()
	if e := m.c.DestroyStream(m.s); err == nil {
		err = e
	}
	if e := m.c.Close(); err == nil {
		err = e
	}
	return err
}

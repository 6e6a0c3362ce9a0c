//go:build !cuda

package cudagather

import "time"

// Supported reports whether this build has CUDA support (the `cuda`
// tag). It is false here: every entry point returns ErrNotSupported.
const Supported = false

// Context is a CUDA context; without the `cuda` tag none can be made.
type Context struct{}

// Graph is a captured CUDA graph; without the `cuda` tag none exists.
type Graph struct{}

// NewContext returns ErrNotSupported in a build without the `cuda` tag.
func NewContext(ordinal int) (*Context, error) { return nil, ErrNotSupported }

// Warmup returns ErrNotSupported.
func (c *Context) Warmup(s Stream) error { return ErrNotSupported }

// Close returns ErrNotSupported.
func (c *Context) Close() error { return ErrNotSupported }

// Alloc returns ErrNotSupported.
func (c *Context) Alloc(n int64) (DevPtr, error) { return 0, ErrNotSupported }

// Free returns ErrNotSupported.
func (c *Context) Free(p DevPtr) error { return ErrNotSupported }

// CopyIn returns ErrNotSupported.
func (c *Context) CopyIn(dst DevPtr, src []byte) error { return ErrNotSupported }

// CopyOut returns ErrNotSupported.
func (c *Context) CopyOut(dst []byte, src DevPtr) error { return ErrNotSupported }

// CopyDevice returns ErrNotSupported.
func (c *Context) CopyDevice(dst, src DevPtr, n int64, s Stream) error { return ErrNotSupported }

// Memset returns ErrNotSupported.
func (c *Context) Memset(p DevPtr, v byte, n int64, s Stream) error { return ErrNotSupported }

// NewStream returns ErrNotSupported.
func (c *Context) NewStream() (Stream, error) { return 0, ErrNotSupported }

// DestroyStream returns ErrNotSupported.
func (c *Context) DestroyStream(s Stream) error { return ErrNotSupported }

// Sync returns ErrNotSupported.
func (c *Context) Sync(s Stream) error { return ErrNotSupported }

// RegisterHost returns ErrNotSupported.
func (c *Context) RegisterHost(rows []byte, numRows int64, rowBytes int) (*Table, error) {
	return nil, ErrNotSupported
}

// Upload returns ErrNotSupported.
func (c *Context) Upload(rows []byte, numRows int64, rowBytes int) (*Table, error) {
	return nil, ErrNotSupported
}

// Close returns ErrNotSupported.
func (t *Table) Close() error { return ErrNotSupported }

// Calibration reports no calibration.
func (t *Table) Calibration() (HostCalibration, bool) { return HostCalibration{}, false }

// CalibrateHost returns ErrNotSupported.
func (c *Context) CalibrateHost(t *Table) (HostCalibration, error) {
	return HostCalibration{}, ErrNotSupported
}

// SetHostPath returns ErrNotSupported.
func (c *Context) SetHostPath(p HostPath) error { return ErrNotSupported }

// StagedWorkers returns ErrNotSupported.
func (c *Context) StagedWorkers(n int) error { return ErrNotSupported }

// Lookup returns ErrNotSupported.
func (c *Context) Lookup(s Stream, r *Request) error { return ErrNotSupported }

// Status returns ErrNotSupported.
func (c *Context) Status(s Stream, k int) error { return ErrNotSupported }

// Capture returns ErrNotSupported.
func (c *Context) Capture(s Stream, f func() error) (*Graph, error) { return nil, ErrNotSupported }

// Launch returns ErrNotSupported.
func (g *Graph) Launch(s Stream) error { return ErrNotSupported }

// Close returns ErrNotSupported.
func (g *Graph) Close() error { return ErrNotSupported }

// LaunchExec returns ErrNotSupported.
func (c *Context) LaunchExec(exec uintptr, s Stream) error { return ErrNotSupported }

func (c *Context) addHandle(t *Table) uint64 { return 0 }

func (c *Context) handle(h uint64) (*Table, error) { return nil, ErrNotSupported }

func (c *Context) takeHandle(h uint64) (*Table, error) { return nil, ErrNotSupported }

// DeviceBuffer is device memory scatter READs land in; without the `cuda`
// tag none can be made.
type DeviceBuffer struct{}

// NewDeviceBuffer returns ErrNotSupported.
func (c *Context) NewDeviceBuffer(n int64, s Stream) (*DeviceBuffer, error) {
	return nil, ErrNotSupported
}

// WrapDevice returns ErrNotSupported.
func (c *Context) WrapDevice(p DevPtr, n int64, s Stream) (*DeviceBuffer, error) {
	return nil, ErrNotSupported
}

// PinHost returns ErrNotSupported.
func (c *Context) PinHost(p []byte) (func() error, error) { return nil, ErrNotSupported }

// ReadBack needs the `cuda` build tag.
func (c *Context) ReadBack(dst []byte, src DevPtr, s Stream) error { return ErrNotSupported }

// Ptr returns 0.
func (b *DeviceBuffer) Ptr() DevPtr { return 0 }

// DeviceLen returns 0.
func (b *DeviceBuffer) DeviceLen() uint64 { return 0 }

// CopyIn returns ErrNotSupported.
func (b *DeviceBuffer) CopyIn(devOff uint64, src []byte, runs [][2]uint64) (func() error, error) {
	return nil, ErrNotSupported
}

// Close returns ErrNotSupported.
func (b *DeviceBuffer) Close() error { return ErrNotSupported }

// HostLookup is a lookup whose rows a host function fetches; without the
// `cuda` tag none can be made.
type HostLookup struct{}

// NewHostLookup returns ErrNotSupported.
func (c *Context) NewHostLookup(cfg HostLookupConfig) (*HostLookup, error) {
	return nil, ErrNotSupported
}

// Enqueue returns ErrNotSupported.
func (hl *HostLookup) Enqueue(s Stream, ids, out DevPtr, outBytes, off, tStride, kStride int64) error {
	return ErrNotSupported
}

// Fetches returns 0, 0.
func (hl *HostLookup) Fetches() (ran, failed int64) { return 0, 0 }

// Close returns ErrNotSupported.
func (hl *HostLookup) Close() error { return ErrNotSupported }

// Capturing returns ErrNotSupported.
func (c *Context) Capturing(s Stream) (bool, error) { return false, ErrNotSupported }

// Proxied returns false.
func (hl *HostLookup) Proxied() bool { return false }

// SetProxySpin returns ErrNotSupported.
func (c *Context) SetProxySpin(d time.Duration) error { return ErrNotSupported }

// CopyDevice2D returns ErrNotSupported.
func (c *Context) CopyDevice2D(s Stream, cs []DeviceCopy) error { return ErrNotSupported }

// ExportIPC returns ErrNotSupported.
func (c *Context) ExportIPC(p DevPtr) (IPCHandle, error) { return IPCHandle{}, ErrNotSupported }

// OpenIPC returns ErrNotSupported.
func (c *Context) OpenIPC(h IPCHandle) (DevPtr, error) { return 0, ErrNotSupported }

// CloseIPC returns ErrNotSupported.
func (c *Context) CloseIPC(p DevPtr) error { return ErrNotSupported }

//go:build cuda

package cudagather

/*
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

// sk_copy_runs copies nruns runs {off, len} of src (pinned host memory)
// to dst+off on s, then records e: one cgo call per piece, not per run.
// Runs of one length at one pitch (a strided layout's rows: every K-th
// row of a token-major output, a column of a head-major one) go as one
// two-dimensional copy each, so a piece of many short rows costs a copy
// per regular stretch, not per row; bytes between the runs are never
// written. A lone run is a plain copy.
static CUresult sk_copy_runs(CUcontext ctx, CUdeviceptr dst, const char *src, const uint64_t *runs, size_t nruns, CUstream s, CUevent e) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	size_t i = 0;
	while (i < nruns) {
		uint64_t off = runs[2*i], n = runs[2*i+1];
		if (n == 0) { i++; continue; }
		// The stretch from run i: runs of length n, each pitch after the last.
		size_t j = i + 1;
		uint64_t pitch = 0;
		if (j < nruns && runs[2*j+1] == n && runs[2*j] > off) {
			pitch = runs[2*j] - off;
			while (j < nruns && runs[2*j+1] == n && runs[2*j] == off + (uint64_t)(j - i) * pitch) j++;
		}
		if (j - i >= 2 && pitch >= n && pitch < ((uint64_t)1 << 31)) {
			CUDA_MEMCPY2D m = {0};
			m.srcMemoryType = CU_MEMORYTYPE_HOST;
			m.srcHost = src + off;
			m.srcPitch = (size_t)pitch;
			m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
			m.dstDevice = dst + off;
			m.dstPitch = (size_t)pitch;
			m.WidthInBytes = (size_t)n;
			m.Height = j - i;
			r = cuMemcpy2DAsync(&m, s);
			if (r != CUDA_SUCCESS) return r;
			i = j;
			continue;
		}
		r = cuMemcpyHtoDAsync(dst + off, src + off, (size_t)n, s);
		if (r != CUDA_SUCCESS) return r;
		i++;
	}
	return cuEventRecord(e, s);
}

static CUresult sk_pin(CUcontext ctx, void *p, size_t n) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_PORTABLE);
}

static CUresult sk_unpin(CUcontext ctx, void *p) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuMemHostUnregister(p);
}

static CUresult sk_devbuf_event_create(CUcontext ctx, CUevent *e) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuEventCreate(e, CU_EVENT_DISABLE_TIMING);
}

static CUresult sk_devbuf_event_sync(CUcontext ctx, CUevent e) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuEventSynchronize(e);
}

static CUresult sk_devbuf_event_destroy(CUcontext ctx, CUevent e) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuEventDestroy(e);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// DeviceBuffer is device memory that scatter READs land in: it satisfies
// verbs/engine.DeviceDst (structurally; this package does not import the
// engine), so Engine.DoDevice copies each landed piece in from its bounce
// region, run by run, on the buffer's stream, in stream order. Completion
// of a copy is an event; the engine waits for it before reusing the
// bounce slot.
type DeviceBuffer struct {
	c   *Context
	ptr DevPtr
	n   uint64
	s   Stream
	own bool // from NewDeviceBuffer: Close frees it

	mu     sync.Mutex
	free   []C.CUevent // recorded and waited for: reusable
	all    []C.CUevent
	closed bool
}

// NewDeviceBuffer allocates n bytes of device memory whose copies run on
// s (0: the legacy stream).
func (c *Context) NewDeviceBuffer(n int64, s Stream) (*DeviceBuffer, error) {
	p, err := c.Alloc(n)
	if err != nil {
		return nil, err
	}
	return &DeviceBuffer{c: c, ptr: p, n: uint64(n), s: s, own: true}, nil
}

// WrapDevice makes a DeviceBuffer of n bytes of the caller's device
// memory at p (a tensor's, say), copies on s; Close does not free it.
func (c *Context) WrapDevice(p DevPtr, n int64, s Stream) (*DeviceBuffer, error) {
	if p == 0 || n <= 0 {
		return nil, &ArgError{Field: "WrapDevice", Reason: fmt.Sprintf("pointer %#x, %d bytes", uintptr(p), n)}
	}
	if err := c.enter(); err != nil {
		return nil, err
	}
	return &DeviceBuffer{c: c, ptr: p, n: uint64(n), s: s}, nil
}

// Ptr is the buffer's device address.
func (b *DeviceBuffer) Ptr() DevPtr { return b.ptr }

// DeviceLen is the buffer's size in bytes.
func (b *DeviceBuffer) DeviceLen() uint64 { return b.n }

// CopyIn starts copying each run {off, n} of src to the buffer at
// devOff+off on the buffer's stream and returns the wait for all of them.
// src must be pinned host memory (Context.PinHost, or memory the driver
// allocated) that stays valid and unchanged until wait returns.
func (b *DeviceBuffer) CopyIn(devOff uint64, src []byte, runs [][2]uint64) (func() error, error) {
	for i, r := range runs {
		if r[0] > uint64(len(src)) || r[1] > uint64(len(src))-r[0] {
			return nil, &ArgError{Field: "runs", Reason: fmt.Sprintf("run %d [%d, +%d) past the source's %d B", i, r[0], r[1], len(src))}
		}
		if devOff > b.n || r[0] > b.n-devOff || r[1] > b.n-devOff-r[0] {
			return nil, &ArgError{Field: "runs", Reason: fmt.Sprintf("run %d lands at [%d, +%d), past the buffer's %d B", i, devOff+r[0], r[1], b.n)}
		}
	}
	if err := b.c.enter(); err != nil {
		return nil, err
	}
	e, err := b.event()
	if err != nil {
		return nil, err
	}
	if len(src) == 0 || len(runs) == 0 {
		src = make([]byte, 1) // no run reads it; the event alone is recorded
		runs = nil
	}
	var rp *C.uint64_t
	if len(runs) > 0 {
		rp = (*C.uint64_t)(unsafe.Pointer(&runs[0][0]))
	}
	runtime.LockOSThread()
	r := C.sk_copy_runs(b.c.ctx, C.CUdeviceptr(uintptr(b.ptr)+uintptr(devOff)), (*C.char)(unsafe.Pointer(&src[0])), rp,
		C.size_t(len(runs)), cstream(b.s), e)
	runtime.UnlockOSThread()
	if r != C.CUDA_SUCCESS {
		b.put(e) // never recorded, or recorded after a failed copy: sync it below
		return nil, driverErr("cuMemcpyHtoDAsync", r)
	}
	var once sync.Once
	var werr error
	return func() error {
		once.Do(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			werr = driverErr("cuEventSynchronize", C.sk_devbuf_event_sync(b.c.ctx, e))
			b.put(e)
		})
		return werr
	}, nil
}

// event takes a free event, or makes one.
func (b *DeviceBuffer) event() (C.CUevent, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if n := len(b.free); n > 0 {
		e := b.free[n-1]
		b.free = b.free[:n-1]
		return e, nil
	}
	var e C.CUevent
	runtime.LockOSThread()
	r := C.sk_devbuf_event_create(b.c.ctx, &e)
	runtime.UnlockOSThread()
	if r != C.CUDA_SUCCESS {
		return nil, driverErr("cuEventCreate", r)
	}
	b.all = append(b.all, e)
	return e, nil
}

func (b *DeviceBuffer) put(e C.CUevent) {
	b.mu.Lock()
	b.free = append(b.free, e)
	b.mu.Unlock()
}

// Close waits for the buffer's copies and releases its events, and its
// memory when NewDeviceBuffer allocated it. The engine must have waited
// for its copies (DoDevice returns after them).
func (b *DeviceBuffer) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	all := b.all
	b.all, b.free = nil, nil
	b.mu.Unlock()
	var errs []error
	runtime.LockOSThread()
	for _, e := range all {
		errs = append(errs, driverErr("cuEventSynchronize", C.sk_devbuf_event_sync(b.c.ctx, e)),
			driverErr("cuEventDestroy", C.sk_devbuf_event_destroy(b.c.ctx, e)))
	}
	runtime.UnlockOSThread()
	if b.own {
		errs = append(errs, b.c.Free(b.ptr))
	}
	return errors.Join(errs...)
}

// PinHost registers host memory (page-aligned, such as a transport's
// registered region) with the driver, so copies from it are asynchronous
// DMA: a DoDevice bounce region. It returns the function that unregisters
// it; nothing may copy from it then.
func (c *Context) PinHost(p []byte) (func() error, error) {
	if len(p) == 0 {
		return nil, &ArgError{Field: "PinHost", Reason: "empty"}
	}
	if err := c.enter(); err != nil {
		return nil, err
	}
	ptr := unsafe.Pointer(&p[0])
	runtime.LockOSThread()
	r := C.sk_pin(c.ctx, ptr, C.size_t(len(p)))
	runtime.UnlockOSThread()
	if r != C.CUDA_SUCCESS {
		return nil, driverErr("cuMemHostRegister", r)
	}
	var once sync.Once
	var uerr error
	return func() error {
		once.Do(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			uerr = driverErr("cuMemHostUnregister", C.sk_unpin(c.ctx, ptr))
		})
		return uerr
	}, nil
}

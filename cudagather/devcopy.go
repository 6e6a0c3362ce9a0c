//go:build cuda

package cudagather

/*
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// sk_dcopy is DeviceCopy as Go lays it out (six 8-byte fields).
typedef struct {
	uint64_t dst, src;
	int64_t dpitch, spitch, width, rows;
} sk_dcopy;

// sk_copy_device enqueues n device-to-device copies on s in one cgo call:
// a 2-D copy each, or row by row where a pitch passes the driver's limit
// (maxPitch); a single row is a plain copy. Addresses are unified (this
// device's, a peer's, or an IPC mapping's).
static CUresult sk_copy_device(CUcontext ctx, const sk_dcopy *cs, size_t n, CUstream s, int64_t maxPitch) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	for (size_t i = 0; i < n; i++) {
		const sk_dcopy *c = &cs[i];
		if (c->width == 0 || c->rows == 0) continue;
		if (c->rows == 1) {
			r = cuMemcpyAsync((CUdeviceptr)c->dst, (CUdeviceptr)c->src, (size_t)c->width, s);
		} else if (c->dpitch <= maxPitch && c->spitch <= maxPitch && c->width <= maxPitch) {
			CUDA_MEMCPY2D m;
			memset(&m, 0, sizeof m);
			m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
			m.srcDevice = (CUdeviceptr)c->src;
			m.srcPitch = (size_t)c->spitch;
			m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
			m.dstDevice = (CUdeviceptr)c->dst;
			m.dstPitch = (size_t)c->dpitch;
			m.WidthInBytes = (size_t)c->width;
			m.Height = (size_t)c->rows;
			r = cuMemcpy2DAsync(&m, s);
		} else {
			for (int64_t k = 0; k < c->rows && r == CUDA_SUCCESS; k++) {
				r = cuMemcpyAsync((CUdeviceptr)(c->dst + (uint64_t)(k * c->dpitch)), (CUdeviceptr)(c->src + (uint64_t)(k * c->spitch)), (size_t)c->width, s);
			}
		}
		if (r != CUDA_SUCCESS) return r;
	}
	return CUDA_SUCCESS;
}

static CUresult sk_ipc_export(CUcontext ctx, CUdeviceptr p, void *out) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	CUipcMemHandle h;
	r = cuIpcGetMemHandle(&h, p);
	if (r == CUDA_SUCCESS) memcpy(out, &h, sizeof h);
	return r;
}

static CUresult sk_ipc_open(CUcontext ctx, const void *in, CUdeviceptr *p) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	CUipcMemHandle h;
	memcpy(&h, in, sizeof h);
	return cuIpcOpenMemHandle(p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
}

static CUresult sk_ipc_close(CUcontext ctx, CUdeviceptr p) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuIpcCloseMemHandle(p);
}
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// sizeof(CUipcMemHandle) is IPCHandle's.
var _ [unsafe.Sizeof(C.CUipcMemHandle{}) - unsafe.Sizeof(IPCHandle{})]struct{}
var _ [unsafe.Sizeof(IPCHandle{}) - unsafe.Sizeof(C.CUipcMemHandle{})]struct{}

// DeviceCopy's layout is sk_dcopy's.
var _ [unsafe.Sizeof(C.sk_dcopy{}) - unsafe.Sizeof(DeviceCopy{})]struct{}
var _ [unsafe.Sizeof(DeviceCopy{}) - unsafe.Sizeof(C.sk_dcopy{})]struct{}

// CopyDevice2D enqueues copies on s in order, in one cgo call: each a 2-D
// device-to-device copy (row by row where a pitch passes the driver's
// limit). They are checked first (an *ArgError enqueues none); the
// addresses' bounds are the caller's. It returns at once: the bytes are
// in place when s reaches that point (one completion for the batch: an
// event or a Sync after it).
func (c *Context) CopyDevice2D(s Stream, cs []DeviceCopy) error {
	if err := c.enter(); err != nil {
		return err
	}
	if err := checkCopies(cs); err != nil {
		return err
	}
	if len(cs) == 0 {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return driverErr("cuMemcpy2DAsync (device to device)",
		C.sk_copy_device(c.ctx, (*C.sk_dcopy)(unsafe.Pointer(&cs[0])), C.size_t(len(cs)), cstream(s), C.int64_t(c.maxPitch)))
}

// ExportIPC returns the IPC handle of the device allocation at p (from
// Alloc: cuMemAlloc memory; pool memory has none).
func (c *Context) ExportIPC(p DevPtr) (IPCHandle, error) {
	var h IPCHandle
	if err := c.enter(); err != nil {
		return h, err
	}
	if p == 0 {
		return h, &ArgError{Field: "ExportIPC", Reason: "nil address"}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return h, driverErr("cuIpcGetMemHandle", C.sk_ipc_export(c.ctx, C.CUdeviceptr(p), unsafe.Pointer(&h[0])))
}

// OpenIPC maps another process's device allocation (its ExportIPC
// handle) into this context and returns its address here (peer access
// enabled lazily when it lies on another device). A process cannot open
// its own handles. CloseIPC unmaps it; the exporter must keep the
// allocation until then.
func (c *Context) OpenIPC(h IPCHandle) (DevPtr, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	var p C.CUdeviceptr
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := driverErr("cuIpcOpenMemHandle", C.sk_ipc_open(c.ctx, unsafe.Pointer(&h[0]), &p)); err != nil {
		return 0, err
	}
	return DevPtr(p), nil
}

// CloseIPC unmaps an allocation OpenIPC mapped; work that uses it must
// have finished.
func (c *Context) CloseIPC(p DevPtr) error {
	if err := c.enter(); err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return driverErr("cuIpcCloseMemHandle", C.sk_ipc_close(c.ctx, C.CUdeviceptr(p)))
}

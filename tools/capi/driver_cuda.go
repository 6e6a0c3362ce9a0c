//go:build cuda

package main

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

// The three driver calls capi makes itself; every lookup, table and graph
// goes through cudagather.

// sk_device_count: 0 devices (and CUDA_SUCCESS) where the driver has none.
static CUresult sk_device_count(int *n) {
	*n = 0;
	CUresult r = cuInit(0);
	if (r == CUDA_ERROR_NO_DEVICE) return CUDA_SUCCESS;
	if (r != CUDA_SUCCESS) return r;
	return cuDeviceGetCount(n);
}

// sk_device_sync waits for all work on device ordinal's primary context
// (every stream), leaving the thread's current context as it was.
static CUresult sk_device_sync(int ordinal) {
	CUdevice dev;
	CUcontext ctx, prev = NULL;
	CUresult r = cuDeviceGet(&dev, ordinal);
	if (r != CUDA_SUCCESS) return r;
	r = cuCtxGetCurrent(&prev);
	if (r != CUDA_SUCCESS) return r;
	r = cuDevicePrimaryCtxRetain(&ctx, dev);
	if (r != CUDA_SUCCESS) return r;
	r = cuCtxSetCurrent(ctx);
	if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
	cuCtxSetCurrent(prev);
	cuDevicePrimaryCtxRelease(dev);
	return r;
}

static CUcontext sk_ctx_get(void) {
	CUcontext c = NULL;
	if (cuCtxGetCurrent(&c) != CUDA_SUCCESS) return NULL;
	return c;
}

static void sk_ctx_set(CUcontext c) { cuCtxSetCurrent(c); }

static const char *sk_driver_errstr(CUresult r) {
	const char *s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == NULL) return "unknown";
	return s;
}
*/
import "C"

import "github.com/scatterkit/scatterkit/cudagather"

// driverErr is a failed driver call as cudagather reports its own.
func driverErr(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return &cudagather.DriverError{Call: call, Code: int(r), Msg: C.GoString(C.sk_driver_errstr(r))}
}

// deviceCount is how many CUDA devices the driver reports (0 where it
// has none).
func deviceCount() (int, error) {
	var n C.int
	if err := driverErr("cuDeviceGetCount", C.sk_device_count(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// syncDevice waits for all pending work on the device (detach's
// precondition for unmapping its tables, whatever stream the lookups
// used).
func syncDevice(ordinal int) error {
	return driverErr("cuCtxSynchronize", C.sk_device_sync(C.int(ordinal)))
}

// driverContext is the calling thread's current CUDA context.
type driverContext struct{ c C.CUcontext }

// currentContext returns the calling thread's current context (which
// cudagather's calls replace with their device's primary context).
func currentContext() driverContext { return driverContext{C.sk_ctx_get()} }

// setContext makes c the calling thread's current context again.
func setContext(c driverContext) { C.sk_ctx_set(c.c) }

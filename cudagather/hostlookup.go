//go:build cuda

package cudagather

/*
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

extern void skHostLookupRun(uintptr_t h);

// sk_hl_cb is the host function of a host lookup: the driver calls it on
// its own thread when the stream reaches it, with the lookup's handle.
static void CUDA_CB sk_hl_cb(void *ud) { skHostLookupRun((uintptr_t)ud); }

// sk_hl_alloc takes a host lookup's pinned host memory and device memory
// with this thread in relaxed capture mode: a capture in global mode (the
// default, torch's too) refuses allocations otherwise, and these are not
// part of what is captured.
static CUresult sk_hl_alloc(CUcontext ctx, size_t hostBytes, void **host, size_t devBytes, CUdeviceptr *dev) {
	*host = NULL;
	*dev = 0;
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
	r = cuThreadExchangeStreamCaptureMode(&m);
	if (r != CUDA_SUCCESS) return r;
	r = cuMemHostAlloc(host, hostBytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
	if (r == CUDA_SUCCESS) {
		r = cuMemAlloc(dev, devBytes);
		if (r != CUDA_SUCCESS) {
			cuMemFreeHost(*host);
			*host = NULL;
			*dev = 0;
		}
	}
	cuThreadExchangeStreamCaptureMode(&m);
	return r;
}

static CUresult sk_hl_free(CUcontext ctx, void *host, CUdeviceptr dev) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
	r = cuThreadExchangeStreamCaptureMode(&m);
	if (r != CUDA_SUCCESS) return r;
	CUresult r1 = cuMemFree(dev);
	CUresult r2 = cuMemFreeHost(host);
	cuThreadExchangeStreamCaptureMode(&m);
	return r1 != CUDA_SUCCESS ? r1 : r2;
}

// sk_hl_pinned reports whether the driver knows host addresses p and q
// (pinned or registered memory): 1 yes, 0 no (relaxed capture mode, as
// for the allocations).
static int sk_hl_pinned(CUcontext ctx, void *p, void *q) {
	if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return 0;
	CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
	if (cuThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS) return 0;
	unsigned int t = 0, u = 0;
	int ok = cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS &&
	         cuPointerGetAttribute(&u, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)q) == CUDA_SUCCESS &&
	         t == CU_MEMORYTYPE_HOST && u == CU_MEMORYTYPE_HOST;
	cuThreadExchangeStreamCaptureMode(&m);
	return ok;
}

// sk_hl_enqueue enqueues a host lookup's steps before its placing pass,
// in one cgo call: the ids back to pinned host memory, the host function,
// then the row indices and the staged rows to the device.
static CUresult sk_hl_enqueue(CUcontext ctx, CUstream s, void *idsHost, CUdeviceptr ids, size_t idsBytes, uintptr_t h,
                              CUdeviceptr idxDev, void *idxHost, size_t idxBytes,
                              CUdeviceptr rowsDev, void *rowsHost, size_t rowsBytes) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	r = cuMemcpyDtoHAsync(idsHost, ids, idsBytes, s);
	if (r == CUDA_SUCCESS) r = cuLaunchHostFunc(s, sk_hl_cb, (void *)h);
	if (r == CUDA_SUCCESS) r = cuMemcpyHtoDAsync(idxDev, idxHost, idxBytes, s);
	if (r == CUDA_SUCCESS) r = cuMemcpyHtoDAsync(rowsDev, rowsHost, rowsBytes, s);
	return r;
}
// sk_hp_mapped returns the device address of pinned host memory p
// (allocated with CU_MEMHOSTALLOC_DEVICEMAP).
static CUresult sk_hp_mapped(CUcontext ctx, void *p, CUdeviceptr *d) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuMemHostGetDevicePointer(d, p, 0);
}

// sk_hp_enqueue enqueues a proxied host lookup's steps before its placing
// pass: the ids back to pinned host memory; the request word set (the
// write fenced after the copy); the wait for the done word, which the
// proxy sets once the rows and indices are staged, and its reset; then
// the indices and rows to the device. The _v2 memory operations are the
// ones every driver enables.
static CUresult sk_hp_enqueue(CUcontext ctx, CUstream s, void *idsHost, CUdeviceptr ids, size_t idsBytes,
                              CUdeviceptr req, CUdeviceptr done,
                              CUdeviceptr idxDev, void *idxHost, size_t idxBytes,
                              CUdeviceptr rowsDev, void *rowsHost, size_t rowsBytes) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	r = cuMemcpyDtoHAsync(idsHost, ids, idsBytes, s);
	if (r == CUDA_SUCCESS) r = cuStreamWriteValue32_v2(s, req, 1, CU_STREAM_WRITE_VALUE_DEFAULT);
	if (r == CUDA_SUCCESS) r = cuStreamWaitValue32_v2(s, done, 1, CU_STREAM_WAIT_VALUE_EQ);
	if (r == CUDA_SUCCESS) r = cuStreamWriteValue32_v2(s, done, 0, CU_STREAM_WRITE_VALUE_DEFAULT);
	if (r == CUDA_SUCCESS) r = cuMemcpyHtoDAsync(idxDev, idxHost, idxBytes, s);
	if (r == CUDA_SUCCESS) r = cuMemcpyHtoDAsync(rowsDev, rowsHost, rowsBytes, s);
	return r;
}

// sk_hp_probe reports whether this driver captures and replays the
// stream memory operations the proxy needs: a write and a wait on a
// mapped host word, captured on a stream of its own, instantiated,
// launched and waited for (relaxed capture mode). 1 yes, 0 no.
static int sk_hp_probe(CUcontext ctx, CUdeviceptr word) {
	if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return 0;
	CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
	if (cuThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS) return 0;
	int ok = 0;
	CUstream s = NULL;
	CUgraph g = NULL;
	CUgraphExec e = NULL;
	if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS) {
		if (cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS) {
			CUresult r = cuStreamWriteValue32_v2(s, word, 1, CU_STREAM_WRITE_VALUE_DEFAULT);
			if (r == CUDA_SUCCESS) r = cuStreamWaitValue32_v2(s, word, 1, CU_STREAM_WAIT_VALUE_EQ);
			if (r == CUDA_SUCCESS) r = cuStreamWriteValue32_v2(s, word, 2, CU_STREAM_WRITE_VALUE_DEFAULT);
			CUresult r2 = cuStreamEndCapture(s, &g);
			if (r == CUDA_SUCCESS && r2 == CUDA_SUCCESS &&
			    cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS &&
			    cuGraphLaunch(e, s) == CUDA_SUCCESS && cuStreamSynchronize(s) == CUDA_SUCCESS) {
				ok = 1;
			}
			if (e) cuGraphExecDestroy(e);
			if (g) cuGraphDestroy(g);
		}
		cuStreamDestroy(s);
	}
	cuThreadExchangeStreamCaptureMode(&m);
	return ok;
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// HostLookup is a lookup whose rows a host function fetches, enqueued on
// a stream as device work, so that it runs in stream order without the
// caller waiting, and can be captured into a graph and replayed with new
// ids: the stream copies the ids to pinned host memory and hands them to
// the fetch, waits for it, copies the fetched rows and their row indices
// to device memory, and one placing pass (the gather of a device table)
// writes them into the output in its layout. It is how a remote Engram
// lookup rides a model step's stream and its CUDA graph (the C ABI's
// sk_cuda_lookup on a remote store under capture).
//
// The hand-over takes one of two forms. Where the driver captures stream
// memory operations (probed once per context, at Warmup), the stream sets
// a request word in mapped host memory and waits on a done word: the
// context's proxy goroutine, which polls the request words (busily while
// requests come, Context.SetProxySpin; with short sleeps otherwise), runs
// the fetch and sets the done word. Elsewhere the fetch runs inside a host
// function of the stream (a host node of the graph), which puts the
// driver's dispatch of a host function on the lookup's path.
//
// A failed fetch never faults the device and never traps: the indices
// are all set to -1, so the placing pass writes nothing, the stream goes
// on, and Context.Status reports a *HostLookupError.
//
// The lookups of one HostLookup share its staging, so they must run one
// after another: enqueue them on one stream (the replays of a graph are
// serialized by the driver). A graph holding it must not be replayed
// after Close.
type HostLookup struct {
	c       *Context
	h       uintptr // its handle in hostLookups (the host function's argument)
	t, k    int
	n       int64 // T*K
	ids64   bool
	idBytes int64
	fetch   func(ctx context.Context, ids32 []int32, ids64 []int64, rows []byte) error
	timeout time.Duration

	host    []byte // pinned: ids [n*idBytes], indices [n*4], own rows
	ids32   []int32
	ids64v  []int64
	idx     []int32
	rows    []byte
	dev     DevPtr // device: indices [n*4, padded], rows
	idxDev  DevPtr
	rowsDev DevPtr
	tabs    []Table
	ptrs    []*Table

	ended             chan struct{} // host-function form: a fetch's end, to the driver's thread
	fetches, failures atomic.Int64

	// The proxy form: the request and done words (mapped host memory)
	// and their device addresses.
	proxied        bool
	req, ack       *uint32
	reqDev, ackDev DevPtr

	mu     sync.Mutex // Enqueue and Close
	closed bool
	// broken: an Enqueue's driver calls failed part of the way (a request
	// may be set with no wait after it, which would release the next
	// lookup's wait early); later Enqueues are refused.
	broken error
}

// hostMailbox is the bytes at the start of a host lookup's pinned block
// that hold its request and done words (a cache line each, 256-aligned
// for the ids after them).
const hostMailbox = 256

// hostLookups maps handles to open host lookups: the host function gets
// a handle, never a Go pointer.
var (
	hostLookups sync.Map // uintptr -> *HostLookup
	nextHL      atomic.Uintptr
)

// NewHostLookup makes a host lookup of cfg's shape and fetch. Its pinned
// host memory (ids, indices, and the staging unless cfg.Rows gives it)
// and device memory (indices and staged rows) are allocated here, with the
// calling thread in relaxed capture mode, so it can be made inside a
// capture. Close frees them.
func (c *Context) NewHostLookup(cfg HostLookupConfig) (*HostLookup, error) {
	idBytes, rowsBytes, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if err := c.enter(); err != nil {
		return nil, err
	}
	n := int64(cfg.T) * int64(cfg.K)
	if cfg.Rows != nil {
		runtime.LockOSThread()
		ok := C.sk_hl_pinned(c.ctx, unsafe.Pointer(&cfg.Rows[0]), unsafe.Pointer(&cfg.Rows[len(cfg.Rows)-1])) != 0
		runtime.UnlockOSThread()
		if !ok {
			return nil, &ArgError{Field: "HostLookupConfig.Rows", Reason: "not pinned host memory (Context.PinHost it, or leave Rows nil)"}
		}
	}
	align := func(v int64) int64 { return (v + 255) &^ 255 }
	// The host block: the mailbox (request and done words, a cache line
	// each), the ids, the indices, the staging unless the caller's.
	idsAt := int64(hostMailbox)
	idxAt := idsAt + align(n*idBytes)
	rowsAt := idxAt + align(n*4)
	hostBytes := rowsAt
	if cfg.Rows == nil {
		hostBytes += rowsBytes
	}
	devRowsAt := align(n * 4)
	var hp unsafe.Pointer
	var dp C.CUdeviceptr
	runtime.LockOSThread()
	r := C.sk_hl_alloc(c.ctx, C.size_t(hostBytes), &hp, C.size_t(devRowsAt+rowsBytes), &dp)
	runtime.UnlockOSThread()
	if r != C.CUDA_SUCCESS {
		return nil, driverErr("host lookup: cuMemHostAlloc/cuMemAlloc", r)
	}
	hl := &HostLookup{c: c, t: cfg.T, k: cfg.K, n: n, ids64: cfg.IDs64, idBytes: idBytes, fetch: cfg.Fetch,
		timeout: cfg.Timeout, host: unsafe.Slice((*byte)(hp), hostBytes), dev: DevPtr(dp), ended: make(chan struct{}, 1)}
	hl.req, hl.ack = (*uint32)(hp), (*uint32)(unsafe.Add(hp, 64))
	if cfg.IDs64 {
		hl.ids64v = unsafe.Slice((*int64)(unsafe.Add(hp, idsAt)), n)
	} else {
		hl.ids32 = unsafe.Slice((*int32)(unsafe.Add(hp, idsAt)), n)
	}
	hl.idx = unsafe.Slice((*int32)(unsafe.Add(hp, idxAt)), n)
	for i := range hl.idx {
		hl.idx[i] = -1 // nothing fetched yet
	}
	hl.rows = cfg.Rows
	if hl.rows == nil {
		hl.rows = hl.host[rowsAt : rowsAt+rowsBytes]
	}
	hl.idxDev, hl.rowsDev = hl.dev, hl.dev+DevPtr(devRowsAt)
	hl.tabs, hl.ptrs = make([]Table, cfg.K), make([]*Table, cfg.K)
	for k := range hl.tabs {
		hl.tabs[k] = Table{c: c, ptr: hl.rowsDev, rows: n, rowBytes: cfg.RowBytes}
		hl.ptrs[k] = &hl.tabs[k]
	}
	if c.useProxy() {
		var d C.CUdeviceptr
		runtime.LockOSThread()
		r := C.sk_hp_mapped(c.ctx, hp, &d)
		if r != C.CUDA_SUCCESS {
			C.sk_hl_free(c.ctx, hp, dp)
			runtime.UnlockOSThread()
			return nil, driverErr("host lookup: the mailbox's device address", r)
		}
		runtime.UnlockOSThread()
		hl.proxied, hl.reqDev, hl.ackDev = true, DevPtr(d), DevPtr(d)+64
	}
	hl.h = nextHL.Add(1)
	hostLookups.Store(hl.h, hl)
	if hl.proxied {
		c.register(hl)
	}
	c.mu.Lock()
	c.hostLookups++
	c.mu.Unlock()
	return hl, nil
}

// Enqueue enqueues one lookup on s: ids ([T,K] of the configured width in
// device memory) read when the stream reaches it, rows landing at out:
// row (t, k) at out + off + t*tStride + k*kStride, inside outBytes. The
// output is checked here (an *ArgError enqueues nothing); the ids are the
// fetch's to check. It returns at once; inside a capture it records the
// lookup into the graph, which fetches whatever ids the id buffer holds
// at each replay.
func (hl *HostLookup) Enqueue(s Stream, ids, out DevPtr, outBytes, off, tStride, kStride int64) error {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	if hl.closed {
		return ErrClosed
	}
	if hl.broken != nil {
		return fmt.Errorf("cudagather: host lookup unusable after a failed enqueue: %w", hl.broken)
	}
	c := hl.c
	if err := c.enter(); err != nil {
		return err
	}
	if ids == 0 || uintptr(ids)%uintptr(hl.idBytes) != 0 {
		return &ArgError{Field: "ids", Reason: fmt.Sprintf("device address %#x: nil or not aligned to %d bytes", uintptr(ids), hl.idBytes)}
	}
	pr := Request{Tables: hl.ptrs, IDs: hl.idxDev, T: hl.t, K: hl.k, Out: out, OutBytes: outBytes,
		Off: off, TStride: tStride, KStride: kStride}
	p := c.getPlan()
	defer c.putPlan(p)
	if err := pr.check(p, c.status, c.sms); err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	idsHost := unsafe.Pointer(&hl.host[hostMailbox])
	if hl.proxied {
		r := C.sk_hp_enqueue(c.ctx, cstream(s), idsHost, C.CUdeviceptr(ids), C.size_t(hl.n*hl.idBytes),
			C.CUdeviceptr(hl.reqDev), C.CUdeviceptr(hl.ackDev),
			C.CUdeviceptr(hl.idxDev), unsafe.Pointer(&hl.idx[0]), C.size_t(hl.n*4),
			C.CUdeviceptr(hl.rowsDev), unsafe.Pointer(&hl.rows[0]), C.size_t(len(hl.rows)))
		if r != C.CUDA_SUCCESS {
			hl.broken = driverErr("host lookup: copies, request and wait", r)
			return hl.broken
		}
		return c.enqueue(s, &pr, p)
	}
	r := C.sk_hl_enqueue(c.ctx, cstream(s), idsHost, C.CUdeviceptr(ids), C.size_t(hl.n*hl.idBytes), C.uintptr_t(hl.h),
		C.CUdeviceptr(hl.idxDev), unsafe.Pointer(&hl.idx[0]), C.size_t(hl.n*4),
		C.CUdeviceptr(hl.rowsDev), unsafe.Pointer(&hl.rows[0]), C.size_t(len(hl.rows)))
	if r != C.CUDA_SUCCESS {
		return driverErr("host lookup: copies and host function", r)
	}
	return c.enqueue(s, &pr, p)
}

// Proxied reports whether the lookup hands its ids to the context's proxy
// (stream memory operations) rather than running its fetch in a host
// function.
func (hl *HostLookup) Proxied() bool { return hl.proxied }

// Fetches returns how many fetches ran, and how many of them failed.
func (hl *HostLookup) Fetches() (ran, failed int64) { return hl.fetches.Load(), hl.failures.Load() }

// Close frees the host lookup's memory. No lookup of it may be pending,
// and no graph holding it may be replayed afterwards. Idempotent.
func (hl *HostLookup) Close() error {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	if hl.closed {
		return nil
	}
	hl.closed = true
	if hl.proxied {
		hl.c.unregister(hl)
	}
	hostLookups.Delete(hl.h)
	runtime.LockOSThread()
	r := C.sk_hl_free(hl.c.ctx, unsafe.Pointer(&hl.host[0]), C.CUdeviceptr(hl.dev))
	runtime.UnlockOSThread()
	hl.host, hl.rows, hl.idx, hl.ids32, hl.ids64v = nil, nil, nil, nil, nil
	hl.c.mu.Lock()
	hl.c.hostLookups--
	hl.c.mu.Unlock()
	return driverErr("host lookup: cuMemFree/cuMemFreeHost", r)
}

// run is a request's work (on a goroutine of the proxy's, or for a host
// function): the fetch, bounded by the timeout, then the row indices (i, or -1 for an id of -1), or all -1 and the
// error recorded for Status when the fetch fails.
func (hl *HostLookup) run() {
	hl.fetches.Add(1)
	defer func() {
		if p := recover(); p != nil {
			hl.fail(fmt.Errorf("panic: %v", p))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), hl.timeout)
	err := hl.fetch(ctx, hl.ids32, hl.ids64v, hl.rows)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // it finished, but past its deadline: its rows may be partial
	}
	cancel()
	if err != nil {
		hl.fail(err)
		return
	}
	if hl.ids64 {
		stagedIndices(hl.idx, hl.ids64v)
	} else {
		stagedIndices(hl.idx, hl.ids32)
	}
}

// stagedIndices sets idx[i] to i, the staged row of id i, or to -1 where
// the id is -1 (its row was not fetched and is left untouched).
func stagedIndices[T int32 | int64](idx []int32, ids []T) {
	for i, id := range ids {
		idx[i] = int32(i)
		if id == -1 {
			idx[i] = -1
		}
	}
}

// fail leaves every output row as it was (all indices -1) and records
// err for Status.
func (hl *HostLookup) fail(err error) {
	for i := range hl.idx {
		hl.idx[i] = -1
	}
	hl.failures.Add(1)
	hl.c.recordHostErr(&HostLookupError{Err: err})
}

// recordHostErr keeps the first host lookup failure since the last
// Status. Its own lock, never c.mu: Status holds c.mu while it waits
// for a stream, which may be waiting for this host function.
func (c *Context) recordHostErr(err error) {
	c.hostErrMu.Lock()
	if c.hostErr == nil {
		c.hostErr = err
	}
	c.hostErrMu.Unlock()
}

// takeHostErr returns and clears the recorded host lookup failure.
func (c *Context) takeHostErr() error {
	c.hostErrMu.Lock()
	defer c.hostErrMu.Unlock()
	err := c.hostErr
	c.hostErr = nil
	return err
}

// runHostLookup is skHostLookupRun's body: a closed (or unknown) handle
// does nothing, leaving the indices as the last fetch left them (a graph
// replayed after Close is the caller's error, documented). The fetch runs
// on a goroutine of its own while the driver's thread waits for it once:
// a callback's goroutine is locked to that thread, so every wait inside
// the fetch (a remote lookup has several) would cost a hand-off between
// OS threads (the first H200 run: a captured T=16 remote lookup 1.39x
// the host lookup and a copy, with the fetch run in the callback).
func runHostLookup(h uintptr) {
	v, ok := hostLookups.Load(h)
	if !ok {
		return
	}
	hl := v.(*HostLookup)
	go func() {
		hl.run()
		hl.ended <- struct{}{}
	}()
	<-hl.ended
}

// Capturing reports whether s is being captured into a graph.
func (c *Context) Capturing(s Stream) (bool, error) {
	if err := c.enter(); err != nil {
		return false, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return c.capturing(s)
}

// useProxy reports whether host lookups can use the proxy (the driver
// captures and replays stream memory operations on mapped host memory).
func (c *Context) useProxy() bool {
	c.probe.once.Do(func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var hp unsafe.Pointer
		var dp C.CUdeviceptr
		if C.sk_hl_alloc(c.ctx, 4096, &hp, 256, &dp) != C.CUDA_SUCCESS {
			return
		}
		defer C.sk_hl_free(c.ctx, hp, dp)
		var d C.CUdeviceptr
		if C.sk_hp_mapped(c.ctx, hp, &d) != C.CUDA_SUCCESS {
			return
		}
		c.probe.ok = C.sk_hp_probe(c.ctx, d) != 0 && *(*uint32)(hp) == 2
	})
	return c.probe.ok
}

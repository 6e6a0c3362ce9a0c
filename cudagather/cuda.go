//go:build cuda

package cudagather

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stddef.h>
#include <string.h>

// One cgo call per launch: make the context current on this thread, then
// launch with the packed parameter block (copied by the driver).
static CUresult sk_launch(CUcontext ctx, CUfunction f, unsigned int grid, unsigned int block,
                          CUstream s, void *args, size_t size) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	void *cfg[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
	return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, NULL, cfg);
}

// sk_launch_params: the same launch through kernelParams (one pointer to
// the parameter block), and without making the context current (the
// caller's thread already has it), for comparing launch paths.
static CUresult sk_launch_params(CUcontext ctx, CUfunction f, unsigned int grid, unsigned int block,
                                 CUstream s, void *args, int setctx) {
	if (setctx) {
		CUresult r = cuCtxSetCurrent(ctx);
		if (r != CUDA_SUCCESS) return r;
	}
	void *params[] = {args};
	return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL);
}

// sk_pool_create makes the context's stream-ordered memory pool for the
// ordering scratch (*pool stays NULL where the device has no pools); the
// pool keeps up to keep bytes between lookups instead of returning them.
static CUresult sk_pool_create(CUcontext ctx, CUdevice dev, unsigned long long keep, CUmemoryPool *pool) {
	*pool = NULL;
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	int ok = 0;
	r = cuDeviceGetAttribute(&ok, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev);
	if (r != CUDA_SUCCESS || !ok) return r;
	CUmemPoolProps props;
	memset(&props, 0, sizeof props);
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = dev;
	r = cuMemPoolCreate(pool, &props);
	if (r != CUDA_SUCCESS) {
		*pool = NULL;
		return r;
	}
	cuuint64_t k = keep;
	r = cuMemPoolSetAttribute(*pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &k);
	if (r != CUDA_SUCCESS) {
		cuMemPoolDestroy(*pool);
		*pool = NULL;
	}
	return r;
}

static CUresult sk_pool_destroy(CUcontext ctx, CUmemoryPool pool) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuMemPoolDestroy(pool);
}

// sk_launch_ordered enqueues an ordered lookup on s in one cgo call: the
// scratch from the pool (stream-ordered, so it is a memory node when
// captured), its counts zeroed, the three ordering kernels, the ordered
// gather, and the scratch's release. Without scratch (the pool cannot
// grow) the plain gather runs instead. args[order_at] holds the scratch's address only
// while the launches copy the block.
static CUresult sk_launch_ordered(CUcontext ctx, CUmemoryPool pool, CUstream s,
                                  CUfunction count, CUfunction scan, CUfunction place, CUfunction gather, CUfunction plain,
                                  unsigned int grid_n, unsigned int grid_g, void *args, size_t size,
                                  size_t order_at, size_t scratch, unsigned int buckets) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	void *cfg[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
	CUdeviceptr d = 0;
	if (cuMemAllocFromPoolAsync(&d, scratch, pool, s) != CUDA_SUCCESS) {
		return cuLaunchKernel(plain, grid_g, 1, 1, 256, 1, 1, 0, s, NULL, cfg);
	}
	unsigned long long *order = (unsigned long long *)((char *)args + order_at);
	*order = d;
	r = cuMemsetD32Async(d, 0, buckets, s);
	if (r == CUDA_SUCCESS) r = cuLaunchKernel(count, grid_n, 1, 1, 256, 1, 1, 0, s, NULL, cfg);
	if (r == CUDA_SUCCESS) r = cuLaunchKernel(scan, 1, 1, 1, 1024, 1, 1, 0, s, NULL, cfg);
	if (r == CUDA_SUCCESS) r = cuLaunchKernel(place, grid_n, 1, 1, 256, 1, 1, 0, s, NULL, cfg);
	if (r == CUDA_SUCCESS) r = cuLaunchKernel(gather, grid_g, 1, 1, 256, 1, 1, 0, s, NULL, cfg);
	*order = 0;
	CUresult f = cuMemFreeAsync(d, s);
	return r != CUDA_SUCCESS ? r : f;
}

static CUresult sk_register(CUcontext ctx, void *p, size_t n, CUdeviceptr *d) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	r = cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_READ_ONLY | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
	if (r != CUDA_SUCCESS) return r;
	r = cuMemHostGetDevicePointer(d, p, 0);
	if (r != CUDA_SUCCESS) cuMemHostUnregister(p);
	return r;
}

static CUresult sk_unregister(CUcontext ctx, void *p) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuMemHostUnregister(p);
}

static CUresult sk_begin_capture(CUcontext ctx, CUstream s) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
}

static CUresult sk_end_capture(CUcontext ctx, CUstream s, CUgraph *g, CUgraphExec *e) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	r = cuStreamEndCapture(s, g);
	if (r != CUDA_SUCCESS) return r;
	r = cuGraphInstantiateWithFlags(e, *g, 0);
	if (r != CUDA_SUCCESS) cuGraphDestroy(*g);
	return r;
}

static CUresult sk_graph_launch(CUcontext ctx, CUgraphExec e, CUstream s) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuGraphLaunch(e, s);
}

static CUresult sk_graph_destroy(CUcontext ctx, CUgraph g, CUgraphExec e) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	cuGraphExecDestroy(e);
	return cuGraphDestroy(g);
}

static CUresult sk_sync(CUcontext ctx, CUstream s) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuStreamSynchronize(s);
}

static CUresult sk_memset_async(CUcontext ctx, CUdeviceptr p, unsigned char v, size_t n, CUstream s) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuMemsetD8Async(p, v, n, s);
}

static CUresult sk_dtoh_async(CUcontext ctx, void *dst, CUdeviceptr src, size_t n, CUstream s) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuMemcpyDtoHAsync(dst, src, n, s);
}

static CUresult sk_occupancy(CUfunction f, int *blocks) {
	return cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, f, 256, 0);
}

static const char *sk_errstr(CUresult r) {
	const char *s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == NULL) return "unknown";
	return s;
}
*/
import "C"

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"
)

//go:embed kernels/gather.ptx
var gatherPTX string

// Supported reports whether this build has CUDA support (the `cuda`
// tag). A device may still be missing at run time.
const Supported = true

// Context is a CUDA context (the device's primary context, shared with
// the CUDA runtime and frameworks in the process) with the gather module
// loaded. Its methods are safe for concurrent use.
type Context struct {
	dev cu.Device
	ctx C.CUcontext
	sms int
	// maxPitch is the driver's largest pitch of a 2-D copy (CopyDevice2D).
	maxPitch int64
	fns      map[string]C.CUfunction // by full name (base, _c8/_c64, _o, _checked)
	occ      map[string]int          // resident 256-thread blocks per SM, by full name
	status   DevPtr                  // 8-byte status word
	pool     C.CUmemoryPool          // ordering scratch (nil: ordered lookups run unordered)

	worker chan func() // the locked OS thread that owns the context's lifetime

	mu     sync.Mutex
	closed bool
	tables int
	graphs int
	// hostLookups counts open HostLookups (Close waits for none).
	hostLookups int
	plans       []*plan // free launch parameter blocks
	hs          map[uint64]*Table
	nextH       uint64
	host        [8]byte // status read-back (Status serializes on mu)
	// hostBad is the smallest flat index of a bad id a CPU-staged lookup
	// met since the last Status, or -1.
	hostBad int64
	// hostErr is the first failed fetch of a HostLookup since the last
	// Status (under hostErrMu, never c.mu: see recordHostErr).
	hostErrMu sync.Mutex
	hostErr   error
	// The host lookups' proxy (hostproxy.go), started by the first
	// proxied HostLookup; probe says whether lookups can be proxied.
	probe     proxyProbe
	px        atomic.Pointer[proxy]
	pxMu      sync.Mutex
	proxySpin atomic.Int64

	stg stager // CPU-staged lookups (staged.go)
	// calClass holds the last calibration of each class of host lookups
	// (tableSet.key: the row size and the span of the lookup's tables).
	calClass map[calKey]HostCalibration
	// hostDefault is the HostPath of requests that leave Host as
	// HostAuto (SetHostPath).
	hostDefault atomic.Uint32
}

// cstream reinterprets a Stream handle as the driver's CUstream.
func cstream(s Stream) C.CUstream { return *(*C.CUstream)(unsafe.Pointer(&s)) }

func driverErr(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return &DriverError{Call: call, Code: int(r), Msg: C.GoString(C.sk_errstr(r))}
}

func cuErr(call string, err error) error {
	if err == nil {
		return nil
	}
	return &DriverError{Call: call, Code: -1, Msg: err.Error()}
}

// NewContext retains device ordinal's primary context, loads the gather
// module and allocates the status word, on a dedicated locked OS thread
// that also releases them at Close.
func NewContext(ordinal int) (*Context, error) {
	c := &Context{worker: make(chan func()), fns: map[string]C.CUfunction{}, occ: map[string]int{}, hostBad: -1}
	c.proxySpin.Store(int64(DefaultProxySpin))
	errc := make(chan error, 1)
	go c.run(ordinal, errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	return c, nil
}

// run is the context's thread: it sets the context up, then runs the
// closures Close sends (the teardown) until the channel closes.
func (c *Context) run(ordinal int, errc chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := c.setup(ordinal)
	errc <- err
	if err != nil {
		return
	}
	for f := range c.worker {
		f()
	}
}

func (c *Context) setup(ordinal int) error {
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return cuErr("cuDeviceGet", err)
	}
	c.dev = dev
	if c.sms, err = dev.Attribute(cu.MultiprocessorCount); err != nil {
		return cuErr("cuDeviceGetAttribute", err)
	}
	mp, err := dev.Attribute(cu.MaxPitch)
	if err != nil {
		return cuErr("cuDeviceGetAttribute", err)
	}
	c.maxPitch = int64(mp)
	pctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return cuErr("cuDevicePrimaryCtxRetain", err)
	}
	if err := cu.SetCurrentContext(pctx); err != nil {
		_ = dev.ReleasePrimaryCtx()
		return cuErr("cuCtxSetCurrent", err)
	}
	c.ctx = *(*C.CUcontext)(unsafe.Pointer(&pctx))
	ptx := gatherPTX
	if path := os.Getenv("CUDAGATHER_PTX"); path != "" {
		// Development override: a freshly generated module, before it is
		// committed and embedded.
		b, err := os.ReadFile(path)
		if err != nil {
			_ = dev.ReleasePrimaryCtx()
			return fmt.Errorf("cudagather: CUDAGATHER_PTX: %w", err)
		}
		ptx = string(b)
	}
	mod, err := cu.LoadData(ptx)
	if err != nil {
		_ = dev.ReleasePrimaryCtx()
		return cuErr("cuModuleLoadData", err)
	}
	var names []string
	for _, b := range kernelBases {
		for _, c := range []string{"_c8", "_c64", "_c8_o", "_c64_o"} {
			names = append(names, b+c, b+c+"_checked")
		}
	}
	for _, b := range []string{"sk_validate", "sk_order_count", "sk_order_scan", "sk_order_place"} {
		names = append(names, b+"_c8", b+"_c64")
	}
	for _, n := range names {
		f, err := mod.Function(n)
		if err != nil {
			_ = dev.ReleasePrimaryCtx()
			return cuErr("cuModuleGetFunction "+n, err)
		}
		cf := *(*C.CUfunction)(unsafe.Pointer(&f))
		var blocks C.int
		if r := C.sk_occupancy(cf, &blocks); r != C.CUDA_SUCCESS {
			_ = dev.ReleasePrimaryCtx()
			return driverErr("cuOccupancyMaxActiveBlocksPerMultiprocessor", r)
		}
		c.fns[n], c.occ[n] = cf, max(int(blocks), 1)
	}
	st, err := cu.MemAlloc(8)
	if err != nil {
		_ = dev.ReleasePrimaryCtx()
		return cuErr("cuMemAlloc", err)
	}
	if err := cu.MemsetD8(st, 0, 8); err != nil {
		_ = cu.MemFree(st)
		_ = dev.ReleasePrimaryCtx()
		return cuErr("cuMemsetD8", err)
	}
	c.status = DevPtr(st)
	if r := C.sk_pool_create(c.ctx, C.CUdevice(c.dev), poolKeep, &c.pool); r != C.CUDA_SUCCESS {
		_ = cu.MemFree(st)
		_ = dev.ReleasePrimaryCtx()
		return driverErr("cuMemPoolCreate", r)
	}
	return nil
}

// poolKeep is how much ordering scratch the pool keeps between lookups
// (4 bytes a row: 64 MiB is a 16M-row lookup's).
const poolKeep = 64 << 20

// orderBuckets is SK_BUCKETS in kernels/gather.cu.
const orderBuckets = 4096

// onThread runs f on the context's own thread.
func (c *Context) onThread(f func() error) error {
	done := make(chan error, 1)
	c.worker <- func() { done <- f() }
	return <-done
}

// Warmup does what must happen before a lookup is captured into a graph:
// the module is loaded and the status word allocated by NewContext; Warmup
// also launches one empty lookup on s and synchronizes, so the driver has
// finished any lazy loading of the kernels, and probes once whether host
// lookups can hand their ids to the proxy (HostLookup).
func (c *Context) Warmup(s Stream) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	for name, f := range c.fns {
		var args [argsSize]byte // T = K = 0: the kernel returns at once
		// (the _checked kernels read the status word first: it must be real)
		binary.LittleEndian.PutUint64(args[16:], uint64(c.status))
		size := paramSize(MaxColumns)
		if strings.Contains(name, "_c8") {
			size = paramSize(1)
		}
		if r := C.sk_launch(c.ctx, f, 1, 32, cstream(s), unsafe.Pointer(&args[0]), C.size_t(size)); r != C.CUDA_SUCCESS {
			return driverErr("cuLaunchKernel "+name, r)
		}
	}
	if err := c.Sync(s); err != nil {
		return err
	}
	c.useProxy()
	return nil
}

// Close releases the context (the primary context is released, not
// destroyed: other users keep it). It fails with ErrBusy while tables or
// graphs of the context are open. It is idempotent.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if c.tables > 0 || c.graphs > 0 || c.hostLookups > 0 {
		return fmt.Errorf("%w: %d tables, %d graphs, %d host lookups", ErrBusy, c.tables, c.graphs, c.hostLookups)
	}
	c.closed = true
	c.stopProxy()
	err := c.onThread(func() error {
		c.stg.mu.Lock()
		es := c.freeStager()
		c.stg.mu.Unlock()
		e1 := cuErr("cuMemFree", cu.MemFree(cu.DevicePtr(c.status)))
		var e0 error
		if c.pool != nil {
			e0 = driverErr("cuMemPoolDestroy", C.sk_pool_destroy(c.ctx, c.pool))
		}
		e2 := cuErr("cuDevicePrimaryCtxRelease", c.dev.ReleasePrimaryCtx())
		return errors.Join(es, e0, e1, e2)
	})
	close(c.worker)
	return err
}

func (c *Context) enter() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return nil
}

// Alloc returns n bytes of device memory.
func (c *Context) Alloc(n int64) (DevPtr, error) {
	if n <= 0 {
		return 0, &ArgError{Field: "n", Reason: fmt.Sprintf("%d bytes", n)}
	}
	if err := c.enter(); err != nil {
		return 0, err
	}
	var p cu.DevicePtr
	err := c.current(func() error {
		var err error
		p, err = cu.MemAlloc(n)
		return cuErr("cuMemAlloc", err)
	})
	return DevPtr(p), err
}

// Free frees device memory from Alloc. Pending work must not use it.
func (c *Context) Free(p DevPtr) error {
	if err := c.enter(); err != nil {
		return err
	}
	return c.current(func() error { return cuErr("cuMemFree", cu.MemFree(cu.DevicePtr(p))) })
}

// CopyIn copies src to device memory at dst (synchronous).
func (c *Context) CopyIn(dst DevPtr, src []byte) error {
	if err := c.enter(); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	return c.current(func() error {
		if err := cu.MemcpyHtoD(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src))); err != nil {
			return cuErr("cuMemcpyHtoD", err)
		}
		// From pageable memory cuMemcpyHtoD returns once src is staged,
		// not once it has landed: a kernel on a non-blocking stream could
		// run before the rest of the DMA and see (or be overwritten by)
		// it. Wait for the legacy stream, so the copy is complete.
		return driverErr("cuStreamSynchronize", C.cuStreamSynchronize(nil))
	})
}

// CopyOut copies device memory at src into dst (synchronous).
func (c *Context) CopyOut(dst []byte, src DevPtr) error {
	if err := c.enter(); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	return c.current(func() error {
		return cuErr("cuMemcpyDtoH", cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst))))
	})
}

// CopyDevice copies n bytes of device memory from src to dst, in order
// on s.
func (c *Context) CopyDevice(dst, src DevPtr, n int64, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	cs := *(*cu.Stream)(unsafe.Pointer(&s))
	return c.current(func() error {
		return cuErr("cuMemcpyDtoDAsync", cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), n, cs))
	})
}

// Memset fills n bytes at p with v, in order on s.
func (c *Context) Memset(p DevPtr, v byte, n int64, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	return driverErr("cuMemsetD8Async", C.sk_memset_async(c.ctx, C.CUdeviceptr(p), C.uchar(v), C.size_t(n), cstream(s)))
}

// current runs f with the context current on a locked thread.
func (c *Context) current(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := C.cuCtxSetCurrent(c.ctx); r != C.CUDA_SUCCESS {
		return driverErr("cuCtxSetCurrent", r)
	}
	return f()
}

// NewStream creates a non-blocking stream of the context.
func (c *Context) NewStream() (Stream, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	var s cu.Stream
	err := c.current(func() error {
		var err error
		s, err = cu.MakeStream(cu.NonBlocking)
		return cuErr("cuStreamCreate", err)
	})
	return *(*Stream)(unsafe.Pointer(&s)), err
}

// DestroyStream destroys a stream from NewStream.
func (c *Context) DestroyStream(s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	cs := *(*cu.Stream)(unsafe.Pointer(&s))
	return c.current(func() error { return cuErr("cuStreamDestroy", cs.Destroy()) })
}

// Sync waits until s has done all its work.
func (c *Context) Sync(s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	return driverErr("cuStreamSynchronize", C.sk_sync(c.ctx, cstream(s)))
}

// RegisterHost registers rows (numRows x rowBytes bytes of host memory
// that stays valid and unchanged until the table is closed, e.g. an mmap'd
// snapshot, MAP_SHARED and read-only) with the driver, pinned in full and
// mapped into the device's address space read-only: lookups read it over
// PCIe (zero-copy).
func (c *Context) RegisterHost(rows []byte, numRows int64, rowBytes int) (*Table, error) {
	if err := checkTable(rows, numRows, rowBytes); err != nil {
		return nil, err
	}
	if err := c.enter(); err != nil {
		return nil, err
	}
	var d C.CUdeviceptr
	if r := C.sk_register(c.ctx, unsafe.Pointer(&rows[0]), C.size_t(len(rows)), &d); r != C.CUDA_SUCCESS {
		return nil, driverErr("cuMemHostRegister", r)
	}
	return c.addTable(&Table{c: c, ptr: DevPtr(d), rows: numRows, rowBytes: rowBytes, host: rows}), nil
}

// registerHostSlices is RegisterHost with the memory registered in
// slices of slice bytes (a multiple of the page size), one driver
// registration each, for comparing how the device translates a table
// registered whole and in pieces (BenchmarkHostTableBacking). The slices
// must map to one contiguous device range (they do where host and device
// share addresses, as on every 64-bit platform with unified addressing).
func (c *Context) registerHostSlices(rows []byte, numRows int64, rowBytes int, slice int64) (*Table, error) {
	if err := checkTable(rows, numRows, rowBytes); err != nil {
		return nil, err
	}
	if slice < 4096 || slice%4096 != 0 {
		return nil, &ArgError{Field: "slice", Reason: fmt.Sprintf("%d bytes: a positive multiple of 4096", slice)}
	}
	if err := c.enter(); err != nil {
		return nil, err
	}
	var base DevPtr
	undo := func(upto int64) {
		for off := int64(0); off < upto; off += slice {
			_ = C.sk_unregister(c.ctx, unsafe.Pointer(&rows[off]))
		}
	}
	for off := int64(0); off < int64(len(rows)); off += slice {
		var d C.CUdeviceptr
		n := min(slice, int64(len(rows))-off)
		if r := C.sk_register(c.ctx, unsafe.Pointer(&rows[off]), C.size_t(n), &d); r != C.CUDA_SUCCESS {
			undo(off)
			return nil, driverErr("cuMemHostRegister", r)
		}
		if off == 0 {
			base = DevPtr(d)
		} else if DevPtr(d) != base+DevPtr(off) {
			undo(off + slice)
			return nil, &ArgError{Field: "slice", Reason: "the slices' device addresses are not contiguous"}
		}
	}
	return c.addTable(&Table{c: c, ptr: base, rows: numRows, rowBytes: rowBytes, host: rows, slice: slice}), nil
}

// Upload copies rows into device memory as a device table.
func (c *Context) Upload(rows []byte, numRows int64, rowBytes int) (*Table, error) {
	if err := checkTable(rows, numRows, rowBytes); err != nil {
		return nil, err
	}
	p, err := c.Alloc(int64(len(rows)))
	if err != nil {
		return nil, err
	}
	if err := c.CopyIn(p, rows); err != nil {
		_ = c.Free(p)
		return nil, err
	}
	return c.addTable(&Table{c: c, ptr: p, rows: numRows, rowBytes: rowBytes}), nil
}

func (c *Context) addTable(t *Table) *Table {
	c.mu.Lock()
	c.tables++
	c.mu.Unlock()
	return t
}

// Close unregisters (host) or frees (device) the table. Work that reads
// it must have finished. It is idempotent.
func (t *Table) Close() error {
	if t.ptr == 0 {
		return nil
	}
	var err error
	if t.host != nil && t.slice > 0 {
		for off := int64(0); off < int64(len(t.host)); off += t.slice {
			err = firstErr(err, driverErr("cuMemHostUnregister", C.sk_unregister(t.c.ctx, unsafe.Pointer(&t.host[off]))))
		}
	} else if t.host != nil {
		err = driverErr("cuMemHostUnregister", C.sk_unregister(t.c.ctx, unsafe.Pointer(&t.host[0])))
	} else {
		err = t.c.Free(t.ptr)
	}
	t.ptr, t.host = 0, nil
	t.c.mu.Lock()
	t.c.tables--
	t.c.mu.Unlock()
	return err
}

func (c *Context) addHandle(t *Table) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hs == nil {
		c.hs = map[uint64]*Table{}
	}
	c.nextH++
	c.hs[c.nextH] = t
	return c.nextH
}

func (c *Context) handle(h uint64) (*Table, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.hs[h]
	if !ok {
		return nil, &ArgError{Field: "table handle", Reason: "unknown or unmapped"}
	}
	return t, nil
}

func (c *Context) takeHandle(h uint64) (*Table, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.hs[h]
	if !ok {
		return nil, &ArgError{Field: "table handle", Reason: "unknown or unmapped"}
	}
	delete(c.hs, h)
	return t, nil
}

func (c *Context) getPlan() *plan {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.plans); n > 0 {
		p := c.plans[n-1]
		c.plans = c.plans[:n-1]
		return p
	}
	return new(plan)
}

func (c *Context) putPlan(p *plan) {
	c.mu.Lock()
	if len(c.plans) < 64 {
		c.plans = append(c.plans, p)
	}
	c.mu.Unlock()
}

// Lookup checks r on the host and enqueues its kernel (two, for a strict
// lookup) on s. It returns at once; the rows are in place when s reaches
// that point. Bad ids are reported by Status.
func (c *Context) Lookup(s Stream, r *Request) error {
	if err := c.enter(); err != nil {
		return err
	}
	p := c.getPlan()
	defer c.putPlan(p)
	if err := r.check(p, c.status, c.sms); err != nil {
		return err
	}
	if p.n == 0 {
		return nil
	}
	if p.allHost {
		path, tz, err := c.hostPath(s, r, p.n)
		if err != nil {
			return err
		}
		switch path {
		case HostStaged:
			return c.lookupStaged(s, r, p)
		case HostSplit:
			return c.lookupSplit(s, r, p, tz)
		}
	}
	return c.enqueue(s, r, p)
}

// enqueue launches a checked plan's kernels on s.
func (c *Context) enqueue(s Stream, r *Request, p *plan) error {
	suffix := "_c64"
	if paramCols(r.K) == 8 {
		suffix = "_c8"
	}
	name, checked := p.kernel.name+suffix, ""
	if r.Strict {
		if err := c.launch("sk_validate"+suffix, p, (p.n+255)/256, s); err != nil {
			return err
		}
		checked = "_checked"
	}
	warps := (p.n + int64(p.kernel.perWarp) - 1) / int64(p.kernel.perWarp)
	if p.ordered && c.pool != nil {
		return c.launchOrdered(name+"_o"+checked, name+checked, suffix, p, (warps+7)/8, s)
	}
	return c.launch(name+checked, p, (warps+7)/8, s)
}

// launchOrdered enqueues the ordering kernels and the ordered gather
// (kernel name) of an ordered plan on s; plain is the same gather
// unordered, for when the pool has no scratch to give.
func (c *Context) launchOrdered(name, plain, suffix string, p *plan, blocks int64, s Stream) error {
	fs := [5]C.CUfunction{}
	for i, n := range [...]string{"sk_order_count" + suffix, "sk_order_scan" + suffix, "sk_order_place" + suffix, name, plain} {
		f, ok := c.fns[n]
		if !ok {
			return &DriverError{Call: "kernel " + n, Code: -1, Msg: "not in the module"}
		}
		fs[i] = f
	}
	gridN := max(1, min((p.n+255)/256, int64(c.sms)*int64(c.occ["sk_order_place"+suffix])))
	gridG := max(1, min(blocks, int64(c.sms)*int64(c.occ[name])))
	scratch := 4 * (2*orderBuckets + p.n)
	r := C.sk_launch_ordered(c.ctx, c.pool, cstream(s), fs[0], fs[1], fs[2], fs[3], fs[4], C.uint(gridN), C.uint(gridG),
		p.argp(), C.size_t(p.size), argsOrder, C.size_t(scratch), orderBuckets)
	if r != C.CUDA_SUCCESS { // the call's name is built only for an error (a lookup allocates nothing)
		return driverErr("ordered lookup "+name, r)
	}
	return nil
}

// launch launches kernel name with p's parameters: blocks of 256 threads,
// at most as many as are resident at once (the kernels loop over their
// rows), so no block waits for a second wave.
func (c *Context) launch(name string, p *plan, blocks int64, s Stream) error {
	f, ok := c.fns[name]
	if !ok {
		return &DriverError{Call: "kernel " + name, Code: -1, Msg: "not in the module"}
	}
	blocks = max(1, min(blocks, int64(c.sms)*int64(c.occ[name])))
	r := C.sk_launch(c.ctx, f, C.uint(blocks), 256, cstream(s), p.argp(), C.size_t(p.size))
	if r != C.CUDA_SUCCESS { // the call's name is built only for an error (a lookup allocates nothing)
		return driverErr("cuLaunchKernel "+name, r)
	}
	return nil
}

// argp is the address of p's parameter block, for a C call. Computed in
// Go and passed as a plain pointer: written in the call's arguments as
// unsafe.Pointer(&p.args[0]), cgo's pointer check would receive the whole
// 1.6 KiB array as an interface value, one heap allocation per launch.
func (p *plan) argp() unsafe.Pointer { return unsafe.Pointer(&p.args[0]) }

// launchParams is launchRaw through kernelParams; setctx 0 skips
// cuCtxSetCurrent (benchmarks).
func launchParams(c *Context, f C.CUfunction, blocks int64, s Stream, p *plan, setctx int) C.CUresult {
	return C.sk_launch_params(c.ctx, f, C.uint(max(blocks, 1)), 256, cstream(s), p.argp(), C.int(setctx))
}

// launchRaw launches f with p's parameters on blocks blocks (benchmarks).
func launchRaw(c *Context, f C.CUfunction, blocks int64, s Stream, p *plan) C.CUresult {
	return C.sk_launch(c.ctx, f, C.uint(max(blocks, 1)), 256, cstream(s), p.argp(), C.size_t(p.size))
}

// Status synchronizes s, then returns the first bad id any lookup since
// the last Status met (an *IDError) and the first failed fetch of a
// HostLookup (a *HostLookupError), joined when both happened, or nil, and
// clears the records. The records are the context's: with lookups on
// several streams, synchronize them all first.
func (c *Context) Status(s Stream, k int) error {
	if err := c.Sync(s); err != nil {
		return err
	}
	herr := c.takeHostErr()
	if err := c.deviceStatus(s, k); err != nil || herr != nil {
		if err == nil {
			return herr
		}
		if herr == nil {
			return err
		}
		return errors.Join(herr, err)
	}
	return nil
}

// deviceStatus is Status's bad-id record, s synchronized.
func (c *Context) deviceStatus(s Stream, k int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	// Under c.mu: the raw driver calls, not the methods (they take c.mu).
	cs := cstream(s)
	if r := C.sk_dtoh_async(c.ctx, unsafe.Pointer(&c.host[0]), C.CUdeviceptr(c.status), 8, cs); r != C.CUDA_SUCCESS {
		return driverErr("cuMemcpyDtoHAsync", r)
	}
	if r := C.sk_sync(c.ctx, cs); r != C.CUDA_SUCCESS {
		return driverErr("cuStreamSynchronize", r)
	}
	v := *(*uint64)(unsafe.Pointer(&c.host[0]))
	// CPU-staged lookups check their ids on the host: the first bad id
	// of either record.
	i := c.hostBad
	c.hostBad = -1
	if v == 0 && i < 0 {
		return nil
	}
	if v != 0 {
		if r := C.sk_memset_async(c.ctx, C.CUdeviceptr(c.status), 0, 8, cs); r != C.CUDA_SUCCESS {
			return driverErr("cuMemsetD8Async", r)
		}
		if r := C.sk_sync(c.ctx, cs); r != C.CUDA_SUCCESS {
			return driverErr("cuStreamSynchronize", r)
		}
		if d := statusIndex(v); i < 0 || d < i {
			i = d
		}
	}
	if k < 1 {
		k = 1
	}
	return &IDError{T: int(i / int64(k)), K: int(i % int64(k))}
}

// Graph is an instantiated CUDA graph captured from a stream.
type Graph struct {
	c    *Context
	g    C.CUgraph
	exec C.CUgraphExec
}

// Capture records what f enqueues on s (lookups, memsets) into a graph
// instead of running it. Call Warmup first. f must only enqueue work on s.
func (c *Context) Capture(s Stream, f func() error) (*Graph, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	cs := cstream(s)
	if r := C.sk_begin_capture(c.ctx, cs); r != C.CUDA_SUCCESS {
		return nil, driverErr("cuStreamBeginCapture", r)
	}
	ferr := f()
	g := &Graph{c: c}
	r := C.sk_end_capture(c.ctx, cs, &g.g, &g.exec)
	if ferr != nil {
		if r == C.CUDA_SUCCESS {
			_ = C.sk_graph_destroy(c.ctx, g.g, g.exec)
		}
		return nil, ferr
	}
	if r != C.CUDA_SUCCESS {
		return nil, driverErr("cuStreamEndCapture/cuGraphInstantiate", r)
	}
	c.mu.Lock()
	c.graphs++
	c.mu.Unlock()
	return g, nil
}

// Launch replays the graph on s.
func (g *Graph) Launch(s Stream) error {
	if g.exec == nil {
		return ErrClosed
	}
	return driverErr("cuGraphLaunch", C.sk_graph_launch(g.c.ctx, g.exec, cstream(s)))
}

// LaunchExec launches a graph instantiated elsewhere (a CUgraphExec of
// this context's device, e.g. one a torch.cuda.CUDAGraph holds) on s, as
// Launch launches a Graph of Capture's: for benchmarks that compare
// graphs' contents under one launcher.
func (c *Context) LaunchExec(exec uintptr, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	return driverErr("cuGraphLaunch", C.sk_graph_launch(c.ctx, *(*C.CUgraphExec)(unsafe.Pointer(&exec)), cstream(s)))
}

// Close destroys the graph; no replay of it may be pending. Idempotent.
func (g *Graph) Close() error {
	if g.exec == nil {
		return nil
	}
	err := driverErr("cuGraphDestroy", C.sk_graph_destroy(g.c.ctx, g.g, g.exec))
	g.exec, g.g = nil, nil
	g.c.mu.Lock()
	g.c.graphs--
	g.c.mu.Unlock()
	return err
}

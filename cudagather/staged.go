//go:build cuda

package cudagather

/*
#include <cuda.h>
#include <stddef.h>

static CUresult sk_host_alloc(CUcontext ctx, size_t n, void **p) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuMemHostAlloc(p, n, CU_MEMHOSTALLOC_PORTABLE);
}

static CUresult sk_host_free(CUcontext ctx, void *p) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuMemFreeHost(p);
}

static CUresult sk_event_create(CUcontext ctx, CUevent *e) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuEventCreate(e, CU_EVENT_DISABLE_TIMING);
}

static CUresult sk_event_destroy(CUcontext ctx, CUevent e) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuEventDestroy(e);
}

static CUresult sk_event_sync(CUcontext ctx, CUevent e) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuEventSynchronize(e);
}

// sk_capturing sets *yes when s is being captured into a graph.
static CUresult sk_capturing(CUcontext ctx, CUstream s, int *yes) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	r = cuStreamIsCapturing(s, &st);
	*yes = st != CU_STREAM_CAPTURE_STATUS_NONE;
	return r;
}

// sk_ids_back reads n bytes of ids back into pinned memory and waits for
// them (and for everything before them on s).
static CUresult sk_ids_back(CUcontext ctx, void *dst, CUdeviceptr src, size_t n, CUstream s) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	r = cuMemcpyDtoHAsync(dst, src, n, s);
	if (r != CUDA_SUCCESS) return r;
	return cuStreamSynchronize(s);
}

// sk_stage_alloc takes the device side of a staged lookup from the pool,
// in order on s.
static CUresult sk_stage_alloc(CUcontext ctx, CUmemoryPool pool, size_t n, CUstream s, CUdeviceptr *d) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuMemAllocFromPoolAsync(d, n, pool, s);
}

static CUresult sk_stage_free(CUcontext ctx, CUdeviceptr d, CUstream s) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuMemFreeAsync(d, s);
}

// sk_copy_in copies a staged chunk to the device on s and records e after
// it (the chunk's pinned slot is free again once e completes).
static CUresult sk_copy_in(CUcontext ctx, CUdeviceptr dst, const void *src, size_t n, CUstream s, CUevent e) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	r = cuMemcpyHtoDAsync(dst, src, n, s);
	if (r != CUDA_SUCCESS) return r;
	return cuEventRecord(e, s);
}
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Staging of CPU-staged lookups (HostStaged): stagedSlots pinned slots of
// stagedChunk bytes each, filled in turn, so the CPU gathers one chunk
// while the copy engine moves the one before.
var (
	stagedChunk int64 = 2 << 20
	stagedSlots       = 3
)

// stager holds a context's CPU-staged lookup machinery: the pinned slots,
// pinned buffers for the ids read back and the staged ids sent down, the
// events that say when each may be written again, and the CPU workers.
// One staged lookup runs at a time per context (mu).
type stager struct {
	mu      sync.Mutex
	workers int
	work    chan stagedTask
	started bool

	slots    [][]byte // pinned, stagedChunk each
	slotEv   []C.CUevent
	slotUsed []bool
	ids      []byte // pinned: the request's ids, read back
	sids     []byte // pinned: the staged ids (int32 flat rows, -1 for rows not staged)
	sidsEv   C.CUevent
	sidsUsed bool

	// The lookup in progress, read by the workers.
	cur stagedLookup
	bad atomic.Int64 // the smallest flat index of a bad id, or -1
	wg  sync.WaitGroup
	// Device tables standing for the staging in the placing pass.
	tabs [MaxColumns]Table
	ptrs [MaxColumns]*Table
}

// stagedLookup is what the workers of one staged lookup read.
type stagedLookup struct {
	k        int64
	rowBytes int64
	id64     bool
	ids32    []int32
	ids64    []int64
	sids     []int32
	host     [MaxColumns][]byte
	rows     [MaxColumns]int64
	offs     [MaxColumns]int64
}

// stagedTask is a worker's share of one chunk: flat rows [lo, hi), which
// land in slot at (r - base) * R.
type stagedTask struct {
	lo, hi, base int64
	slot         []byte
	validate     bool // only check the ids (strict lookups)
}

// StagedWorkers sets the CPU threads a HostStaged lookup gathers with
// (default: GOMAXPROCS at the first staged lookup). n < 1 is an error;
// it takes effect before the first staged lookup only.
func (c *Context) StagedWorkers(n int) error {
	if n < 1 {
		return &ArgError{Field: "workers", Reason: fmt.Sprintf("%d: at least 1", n)}
	}
	c.stg.mu.Lock()
	defer c.stg.mu.Unlock()
	if !c.stg.started {
		c.stg.workers = n
	}
	return nil
}

// start allocates the pinned slots and starts the workers (under stg.mu).
func (c *Context) startStager() error {
	st := &c.stg
	if st.started {
		return nil
	}
	if st.workers == 0 {
		st.workers = runtime.GOMAXPROCS(0)
	}
	for range stagedSlots {
		b, err := c.pinned(stagedChunk)
		if err != nil {
			c.freeStager()
			return err
		}
		var ev C.CUevent
		if r := C.sk_event_create(c.ctx, &ev); r != C.CUDA_SUCCESS {
			c.freePinned(b)
			c.freeStager()
			return driverErr("cuEventCreate", r)
		}
		st.slots, st.slotEv, st.slotUsed = append(st.slots, b), append(st.slotEv, ev), append(st.slotUsed, false)
	}
	if r := C.sk_event_create(c.ctx, &st.sidsEv); r != C.CUDA_SUCCESS {
		c.freeStager()
		return driverErr("cuEventCreate", r)
	}
	st.work = make(chan stagedTask, st.workers)
	for range st.workers {
		go c.stagedWorker()
	}
	st.started = true
	return nil
}

// freeStager releases what startStager allocated (at Close, or when it
// failed half way); the workers end with their channel.
func (c *Context) freeStager() error {
	st := &c.stg
	var err error
	for i, b := range st.slots {
		if st.slotUsed[i] {
			_ = C.sk_event_sync(c.ctx, st.slotEv[i])
		}
		err = firstErr(err, c.freePinned(b))
		err = firstErr(err, driverErr("cuEventDestroy", C.sk_event_destroy(c.ctx, st.slotEv[i])))
	}
	if st.sidsEv != nil {
		if st.sidsUsed {
			_ = C.sk_event_sync(c.ctx, st.sidsEv)
		}
		err = firstErr(err, driverErr("cuEventDestroy", C.sk_event_destroy(c.ctx, st.sidsEv)))
	}
	err = firstErr(err, c.freePinned(st.ids))
	err = firstErr(err, c.freePinned(st.sids))
	if st.work != nil {
		close(st.work)
	}
	*st = stager{workers: st.workers}
	return err
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// pinned returns n bytes of pinned host memory.
func (c *Context) pinned(n int64) ([]byte, error) {
	var p unsafe.Pointer
	if r := C.sk_host_alloc(c.ctx, C.size_t(n), &p); r != C.CUDA_SUCCESS {
		return nil, driverErr("cuMemHostAlloc", r)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func (c *Context) freePinned(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return driverErr("cuMemFreeHost", C.sk_host_free(c.ctx, unsafe.Pointer(&b[0])))
}

// grow makes *b at least n bytes of pinned memory, waiting for ev (the
// last copy out of it) before freeing a smaller one.
func (c *Context) grow(b *[]byte, n int64) error {
	if int64(len(*b)) >= n {
		return nil
	}
	if err := c.freePinned(*b); err != nil {
		return err
	}
	*b = nil
	nb, err := c.pinned(max(n, 1<<20))
	if err != nil {
		return err
	}
	*b = nb
	return nil
}

// capturing reports whether s is being captured into a graph.
func (c *Context) capturing(s Stream) (bool, error) {
	var yes C.int
	if r := C.sk_capturing(c.ctx, cstream(s), &yes); r != C.CUDA_SUCCESS {
		return false, driverErr("cuStreamIsCapturing", r)
	}
	return yes != 0, nil
}

// lookupStaged runs a checked plan p of r (every table a host table) on
// the CPU-staged path: the ids read back (synchronizing s), the rows
// gathered by the workers into pinned slots chunk by chunk while each
// chunk already gathered is copied to device staging on s, then one
// device pass on s places the staged rows in the output (a gather from
// the staging, as from a device table, whose ids are the flat row
// indices, -1 where a row was not staged). Bad ids are recorded for
// Status; a strict lookup with one writes nothing.
func (c *Context) lookupStaged(s Stream, r *Request, p *plan) error {
	if c.pool == nil {
		return fmt.Errorf("%w: CPU-staged lookups need the device's stream-ordered memory pools", ErrNotSupported)
	}
	if p.n > 1<<31-1 {
		return &ArgError{Field: "T/K", Reason: fmt.Sprintf("%d rows: a staged lookup takes at most 2^31-1", p.n)}
	}
	st := &c.stg
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := c.startStager(); err != nil {
		return err
	}
	n, R := p.n, p.rowBytes
	idSize := int64(4)
	if r.IDs64 {
		idSize = 8
	}
	// The pinned ids and staged ids of the last lookup may still be in
	// flight: wait for the staged ids' copy before reusing either.
	if st.sidsUsed {
		if rc := C.sk_event_sync(c.ctx, st.sidsEv); rc != C.CUDA_SUCCESS {
			return driverErr("cuEventSynchronize", rc)
		}
		st.sidsUsed = false
	}
	if err := c.grow(&st.ids, n*idSize); err != nil {
		return err
	}
	if err := c.grow(&st.sids, n*4); err != nil {
		return err
	}
	if rc := C.sk_ids_back(c.ctx, unsafe.Pointer(&st.ids[0]), C.CUdeviceptr(r.IDs), C.size_t(n*idSize), cstream(s)); rc != C.CUDA_SUCCESS {
		return driverErr("ids read-back", rc)
	}
	cur := &st.cur
	cur.k, cur.rowBytes, cur.id64 = int64(r.K), R, r.IDs64
	if r.IDs64 {
		cur.ids64, cur.ids32 = unsafe.Slice((*int64)(unsafe.Pointer(&st.ids[0])), n), nil
	} else {
		cur.ids32, cur.ids64 = unsafe.Slice((*int32)(unsafe.Pointer(&st.ids[0])), n), nil
	}
	cur.sids = unsafe.Slice((*int32)(unsafe.Pointer(&st.sids[0])), n)
	for k, t := range r.Tables {
		cur.host[k], cur.rows[k], cur.offs[k] = t.host, t.rows, 0
		if r.Offsets != nil {
			cur.offs[k] = r.Offsets[k]
		}
	}
	st.bad.Store(-1)
	if r.Strict {
		c.runTasks(0, n, 0, nil, true)
		if b := st.bad.Load(); b >= 0 {
			c.recordHostBad(b)
			return nil // strict: nothing written
		}
	}
	// The device side: n rows of staging and n staged ids, from the
	// pool, in order on s.
	var dev C.CUdeviceptr
	if rc := C.sk_stage_alloc(c.ctx, c.pool, C.size_t(n*R+n*4), cstream(s), &dev); rc != C.CUDA_SUCCESS {
		return driverErr("cuMemAllocFromPoolAsync (staging)", rc)
	}
	devIDs := C.CUdeviceptr(uintptr(dev) + uintptr(n*R))
	per := max(stagedChunk/R, 1)
	var err error
	for j, a := int64(0), int64(0); a < n; j, a = j+1, a+per {
		b := min(a+per, n)
		slot := int(j % int64(len(st.slots)))
		if st.slotUsed[slot] {
			if rc := C.sk_event_sync(c.ctx, st.slotEv[slot]); rc != C.CUDA_SUCCESS {
				err = driverErr("cuEventSynchronize", rc)
				break
			}
		}
		c.runTasks(a, b, a, st.slots[slot], false)
		if rc := C.sk_copy_in(c.ctx, C.CUdeviceptr(uintptr(dev)+uintptr(a*R)), unsafe.Pointer(&st.slots[slot][0]),
			C.size_t((b-a)*R), cstream(s), st.slotEv[slot]); rc != C.CUDA_SUCCESS {
			err = driverErr("staged copy", rc)
			break
		}
		st.slotUsed[slot] = true
	}
	if err == nil {
		if rc := C.sk_copy_in(c.ctx, devIDs, unsafe.Pointer(&st.sids[0]), C.size_t(n*4), cstream(s), st.sidsEv); rc != C.CUDA_SUCCESS {
			err = driverErr("staged ids copy", rc)
		} else {
			st.sidsUsed = true
		}
	}
	if err == nil {
		err = c.placeStaged(s, r, DevPtr(dev), DevPtr(devIDs), n)
	}
	ferr := driverErr("cuMemFreeAsync (staging)", C.sk_stage_free(c.ctx, dev, cstream(s)))
	if b := st.bad.Load(); b >= 0 {
		c.recordHostBad(b)
	}
	return firstErr(err, ferr)
}

// placeStaged launches the pass that moves n staged rows at stage (flat
// row i at i*R) into r's output, with the staged ids at ids.
func (c *Context) placeStaged(s Stream, r *Request, stage, ids DevPtr, n int64) error {
	st := &c.stg
	pr := *r
	R := int(st.cur.rowBytes)
	for k := range r.K {
		st.tabs[k] = Table{c: c, ptr: stage, rows: n, rowBytes: R}
		st.ptrs[k] = &st.tabs[k]
	}
	pr.Tables, pr.IDs, pr.IDs64, pr.Offsets, pr.Strict = st.ptrs[:r.K], ids, false, nil, false
	p := c.getPlan()
	defer c.putPlan(p)
	if err := pr.check(p, c.status, c.sms); err != nil {
		return err
	}
	return c.enqueue(s, &pr, p)
}

// runTasks has the workers gather flat rows [lo, hi) into slot (row r at
// (r - base) * R), or only check them (validate), and waits.
func (c *Context) runTasks(lo, hi, base int64, slot []byte, validate bool) {
	st := &c.stg
	w := int64(st.workers)
	per := (hi - lo + w - 1) / w
	// Shares of at least 256 rows: a tiny chunk is not worth waking every
	// worker for.
	per = max(per, 256)
	for a := lo; a < hi; a += per {
		st.wg.Add(1)
		st.work <- stagedTask{lo: a, hi: min(a+per, hi), base: base, slot: slot, validate: validate}
	}
	st.wg.Wait()
}

// stagedWorker runs tasks until the context closes.
func (c *Context) stagedWorker() {
	st := &c.stg
	for t := range st.work {
		st.cur.gather(t, &st.bad)
		st.wg.Done()
	}
}

// gather does one task: for each flat row, its id read, checked against
// its column's table, and (unless validating) the row copied into the slot
// and its staged id set: the flat index, or -1 for -1 and bad ids. The
// first bad id (smallest index) goes into bad.
func (l *stagedLookup) gather(t stagedTask, bad *atomic.Int64) {
	R := l.rowBytes
	k := t.lo % l.k
	first := int64(-1)
	for i := t.lo; i < t.hi; i++ {
		var id int64
		if l.id64 {
			id = l.ids64[i]
		} else {
			id = int64(l.ids32[i])
		}
		sid := int32(-1)
		if id != -1 {
			row := id - l.offs[k]
			if row < 0 || row >= l.rows[k] {
				if first < 0 {
					first = i
				}
			} else if !t.validate {
				o := (i - t.base) * R
				copy(t.slot[o:o+R], l.host[k][row*R:row*R+R])
				sid = int32(i)
			}
		}
		if !t.validate {
			l.sids[i] = sid
		}
		if k++; k == l.k {
			k = 0
		}
	}
	if first >= 0 {
		for {
			cur := bad.Load()
			if cur >= 0 && cur <= first || bad.CompareAndSwap(cur, first) {
				break
			}
		}
	}
}

// recordHostBad keeps the smallest flat index of a bad id met on the CPU
// since the last Status.
func (c *Context) recordHostBad(i int64) {
	c.mu.Lock()
	if c.hostBad < 0 || i < c.hostBad {
		c.hostBad = i
	}
	c.mu.Unlock()
}

// Calibration returns the table's calibration, if it has one.
func (t *Table) Calibration() (HostCalibration, bool) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.cal == nil {
		return HostCalibration{}, false
	}
	return *t.cal, true
}

// CalibrateHost measures both host paths on t (a host table): lookups of
// two sizes of random rows over the whole table, each timed to its
// stream's completion (median of three after a warm-up), and fits each
// path's fixed and per-row cost. HostAuto lookups calibrate a table on
// first use; a caller may do it ahead (it takes tens of milliseconds). It
// must not run while its stream is being captured (it uses a stream of
// its own).
func (c *Context) CalibrateHost(t *Table) (HostCalibration, error) {
	if err := c.enter(); err != nil {
		return HostCalibration{}, err
	}
	if t == nil || t.ptr == 0 {
		return HostCalibration{}, &ArgError{Field: "table", Reason: "nil or closed"}
	}
	if t.host == nil {
		return HostCalibration{}, &ArgError{Field: "table", Reason: "a device table (only host tables have two paths)"}
	}
	if c.pool == nil {
		return HostCalibration{}, fmt.Errorf("%w: CPU-staged lookups need the device's stream-ordered memory pools", ErrNotSupported)
	}
	R := int64(t.rowBytes)
	hi := min(int64(65536), max((64<<20)/R, 64))
	lo := max(hi/4, 16)
	s, err := c.NewStream()
	if err != nil {
		return HostCalibration{}, err
	}
	defer c.DestroyStream(s)
	id64 := t.rows > 1<<31-1
	idb := make([]byte, hi*8)
	seed := uint64(t.rows)*0x9e3779b97f4a7c15 ^ uint64(R)
	for i := range hi {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		v := int64(seed % uint64(t.rows))
		if id64 {
			binary.LittleEndian.PutUint64(idb[8*i:], uint64(v))
		} else {
			binary.LittleEndian.PutUint32(idb[4*i:], uint32(v))
		}
	}
	ids, err := c.Alloc(hi * 8)
	if err != nil {
		return HostCalibration{}, err
	}
	defer c.Free(ids)
	if err := c.CopyIn(ids, idb); err != nil {
		return HostCalibration{}, err
	}
	out, err := c.Alloc(hi * R)
	if err != nil {
		return HostCalibration{}, err
	}
	defer c.Free(out)
	var tabs [1]*Table
	tabs[0] = t
	time1 := func(n int64, path HostPath) (time.Duration, error) {
		r := &Request{Tables: tabs[:], IDs: ids, IDs64: id64, T: int(n), K: 1, Out: out, OutBytes: n * R, Host: path}
		r.TokenMajor(int(R))
		var ds [4]time.Duration
		for i := range ds {
			t0 := time.Now()
			if err := c.Lookup(s, r); err != nil {
				return 0, err
			}
			if err := c.Sync(s); err != nil {
				return 0, err
			}
			ds[i] = time.Since(t0)
		}
		slices.Sort(ds[1:])
		return ds[2], nil
	}
	var cal HostCalibration
	cal.Rows = [2]int64{lo, hi}
	for _, path := range [...]HostPath{HostZeroCopy, HostStaged} {
		a, err := time1(lo, path)
		if err != nil {
			return HostCalibration{}, err
		}
		b, err := time1(hi, path)
		if err != nil {
			return HostCalibration{}, err
		}
		per := max((b-a).Seconds()/float64(hi-lo), 0)
		fixed := max(a-time.Duration(per*float64(lo)*1e9), 0)
		if path == HostZeroCopy {
			cal.ZeroCopyFixed, cal.ZeroCopyPerRow = fixed, per
		} else {
			cal.StagedFixed, cal.StagedPerRow = fixed, per
		}
	}
	// (Its ids are rows of the table: it leaves the status word alone.)
	c.mu.Lock()
	t.cal = &cal
	c.mu.Unlock()
	return cal, nil
}

// hostPath settles the path of a checked lookup whose tables are all host
// tables: HostZeroCopy and HostStaged as asked (HostStaged refused while
// s is captured), HostAuto from the tables' calibrations (made now for a
// table without one), zero-copy while capturing or without the memory
// pools the staged path needs.
func (c *Context) hostPath(s Stream, r *Request, n int64) (HostPath, error) {
	if r.Host == HostZeroCopy {
		return HostZeroCopy, nil
	}
	capt, err := c.capturing(s)
	if err != nil {
		return 0, err
	}
	if r.Host == HostStaged {
		if capt {
			return 0, ErrStagedCapture
		}
		return HostStaged, nil
	}
	if capt || c.pool == nil {
		return HostZeroCopy, nil
	}
	// The columns' predictions, averaged: each column is a share of the
	// rows.
	var z, st time.Duration
	for _, t := range r.Tables {
		cal, ok := t.Calibration()
		if !ok {
			if cal, err = c.CalibrateHost(t); err != nil {
				return 0, err
			}
		}
		zk, sk := cal.Predict(n)
		z += zk / time.Duration(r.K)
		st += sk / time.Duration(r.K)
	}
	if st < z {
		return HostStaged, nil
	}
	return HostZeroCopy, nil
}

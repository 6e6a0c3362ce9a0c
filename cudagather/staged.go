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

// sk_capturing returns 1 when s is being captured into a graph, 0 when
// not, and -1 - the error code when the driver fails (a plain result, not
// through a pointer: a Go variable passed by address would escape to the
// heap, an allocation per lookup).
static long long sk_capturing(CUcontext ctx, CUstream s) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return -1 - (long long)r;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	r = cuStreamIsCapturing(s, &st);
	if (r != CUDA_SUCCESS) return -1 - (long long)r;
	return st != CU_STREAM_CAPTURE_STATUS_NONE;
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

static CUresult sk_stream_create(CUcontext ctx, CUstream *s) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuStreamCreate(s, CU_STREAM_NON_BLOCKING);
}

static CUresult sk_stream_destroy(CUcontext ctx, CUstream s) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	return cuStreamDestroy(s);
}

// sk_order makes to wait, in stream order, for what from holds now.
static CUresult sk_order(CUcontext ctx, CUstream from, CUstream to, CUevent e) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	r = cuEventRecord(e, from);
	if (r != CUDA_SUCCESS) return r;
	return cuStreamWaitEvent(to, e, 0);
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
// stagedChunk bytes each (32 MiB in all), chunk c in slot c % stagedSlots,
// so the workers gather later chunks while the copy engine moves earlier
// ones; stagedBlock rows (rowgather.go) at most are what a worker claims
// at a time.
var (
	stagedChunk int64 = 2 << 20
	stagedSlots       = 16
)

// stager holds a context's CPU-staged lookup machinery: the pinned slots,
// pinned buffers for the ids read back and the staged ids sent down, the
// events that say when each may be written again, and the CPU workers.
// One staged lookup runs at a time per context (mu).
type stager struct {
	mu      sync.Mutex
	workers int
	start   chan struct{} // one token per worker wakes it for a lookup
	gate    gate          // woken workers wait here until the lookup is set up
	woken   bool          // the workers are awake at the closed gate
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
	// A split's zero-copy part runs on side, ordered after the caller's
	// stream by before and the caller's stream after it by after.
	side          Stream
	before, after C.CUevent
	// arrived marks the chunks the workers have finished (the caller
	// copies them out in order).
	arrived []bool
}

// stagedLookup is what the workers of one staged lookup read, and how
// they share it: blocks of rows claimed in order (next), each chunk's
// blocks counted down (left), the chunk whose last block a worker
// finished sent on done, and a slot written only once the chunk before
// it there has been copied out (free, under cond).
type stagedLookup struct {
	rowSource // the columns' tables (gather copies the rows)
	id64      bool
	validate  bool // strict lookups' first pass: only check the ids
	ids32     []int32
	ids64     []int64
	sids      []int32

	n, per, block int64 // rows, rows per chunk, rows per block
	blocks        int64
	next          atomic.Int64
	left          []atomic.Int64 // per chunk: blocks not yet done
	done          chan int64     // chunks whose every block is done
	slots         [][]byte
	free          []int64 // per slot: the first chunk it may take (under mu)
	mu            sync.Mutex
	cond          sync.Cond
}

// SetHostPath sets the path of the context's lookups from host tables
// whose Request.Host is HostAuto (the default of handle-based lookups,
// LookupTables): HostAuto (the default), or one path for all of them.
// HostZeroCopy keeps every lookup asynchronous: none reads its ids back
// or synchronizes with its stream.
func (c *Context) SetHostPath(p HostPath) error {
	if p > HostSplit {
		return &ArgError{Field: "path", Reason: p.String() + ": unknown path"}
	}
	c.hostDefault.Store(uint32(p))
	return nil
}

// StagedWorkers sets the CPU threads a HostStaged lookup gathers with
// (default: GOMAXPROCS-1 at the first staged lookup, one left for the
// caller, which copies the chunks out). n < 1 is an error;
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
		// One P is left to the caller, which copies each chunk out as
		// soon as its rows are in: with every P busy gathering it would
		// wait for a preemption to run.
		st.workers = max(runtime.GOMAXPROCS(0)-1, 1)
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
	var side C.CUstream
	if r := C.sk_stream_create(c.ctx, &side); r != C.CUDA_SUCCESS {
		c.freeStager()
		return driverErr("cuStreamCreate", r)
	}
	st.side = *(*Stream)(unsafe.Pointer(&side))
	// (&st.before in the call itself: cgo then checks the field, not the
	// whole Context, which holds Go pointers.)
	if r := C.sk_event_create(c.ctx, &st.before); r != C.CUDA_SUCCESS {
		c.freeStager()
		return driverErr("cuEventCreate", r)
	}
	if r := C.sk_event_create(c.ctx, &st.after); r != C.CUDA_SUCCESS {
		c.freeStager()
		return driverErr("cuEventCreate", r)
	}
	st.start = make(chan struct{}, st.workers)
	st.cur.cond.L = &st.cur.mu
	st.gate.cond.L = &st.gate.mu
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
	if st.side != 0 {
		err = firstErr(err, driverErr("cuStreamDestroy", C.sk_stream_destroy(c.ctx, cstream(st.side))))
	}
	for _, e := range []C.CUevent{st.before, st.after} {
		if e != nil {
			err = firstErr(err, driverErr("cuEventDestroy", C.sk_event_destroy(c.ctx, e)))
		}
	}
	err = firstErr(err, c.freePinned(st.ids))
	err = firstErr(err, c.freePinned(st.sids))
	if st.start != nil {
		close(st.start)
	}
	// Field by field: st.mu is held by the caller (a struct assignment
	// would reset it), and cur's condition variable keeps its lock.
	st.start, st.started = nil, false
	st.slots, st.slotEv, st.slotUsed = nil, nil, nil
	st.ids, st.sids, st.sidsEv, st.sidsUsed = nil, nil, nil, false
	st.side, st.before, st.after = 0, nil, nil
	st.cur.ids32, st.cur.ids64, st.cur.sids, st.cur.slots = nil, nil, nil, nil
	st.cur.host = [MaxColumns][]byte{}
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

// grow makes *b at least n bytes of pinned memory (the caller has waited
// for the last copy out of it).
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
	v := C.sk_capturing(c.ctx, cstream(s))
	if v < 0 {
		return false, driverErr("cuStreamIsCapturing", C.CUresult(-1-v))
	}
	return v != 0, nil
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
	return c.stagedLocked(s, r, p, 0)
}

// stagedPhase, when set (by a benchmark), is told each phase of a staged
// lookup as it ends: 1 the ids read back, 2 the workers started, 3 every
// chunk's copy issued, 4 the workers done, 5 the placing pass enqueued.
var stagedPhase func(phase int)

// stagedBusy, when set (by a benchmark), is told when each worker began
// and ended its share of a staged lookup.
var stagedBusy func(from, to time.Time)

// stagedLocked is lookupStaged under stg.mu, the stager started; base is
// the flat index of r's first row in the lookup it is part of (a split's
// staged tokens), for the bad ids it records.
func (c *Context) stagedLocked(s Stream, r *Request, p *plan, base int64) error {
	st := &c.stg
	// The workers are woken now, to wait at the gate while the ids are
	// read back: parked goroutines wake one after another (each woken
	// thread wakes the next), tens of microseconds apart on a virtual
	// machine, which the ids' wait for the stream hides.
	c.wakeWorkers()
	defer c.dismissWorkers()
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
	if stagedPhase != nil {
		stagedPhase(1)
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
		c.runWorkers(n, 0, true)
		if b := st.bad.Load(); b >= 0 {
			c.recordHostBad(base + b)
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
	chunks := (n + per - 1) / per
	// Slots still being copied out by the last lookup are waited for, and
	// chunk s may take slot s.
	for i := range st.slots {
		if st.slotUsed[i] {
			if rc := C.sk_event_sync(c.ctx, st.slotEv[i]); rc != C.CUDA_SUCCESS {
				_ = C.sk_stage_free(c.ctx, dev, cstream(s))
				return driverErr("cuEventSynchronize", rc)
			}
			st.slotUsed[i] = false
		}
	}
	cur.prepare(chunks, len(st.slots))
	cur.slots = st.slots
	c.startWorkers(n, per, false)
	if stagedPhase != nil {
		stagedPhase(2)
	}
	// Copy each chunk out in order once its rows are in; after chunk c's
	// copy, wait for the copy S/2 chunks back and hand its slot on, so
	// the workers find a free slot half the slots ahead.
	S := int64(len(st.slots))
	var err error
	if int64(cap(st.arrived)) < chunks {
		st.arrived = make([]bool, chunks)
	}
	arrived := st.arrived[:chunks]
	clear(arrived)
	for c0 := int64(0); c0 < chunks; c0++ {
		for !arrived[c0] {
			arrived[<-cur.done] = true
		}
		if err != nil {
			continue // keep receiving: the workers finish the lookup
		}
		a, b := c0*per, min((c0+1)*per, n)
		slot := int(c0 % S)
		if rc := C.sk_copy_in(c.ctx, C.CUdeviceptr(uintptr(dev)+uintptr(a*R)), unsafe.Pointer(&st.slots[slot][0]),
			C.size_t((b-a)*R), cstream(s), st.slotEv[slot]); rc != C.CUDA_SUCCESS {
			err = driverErr("staged copy", rc)
			cur.release() // let the workers finish without waiting for slots
			continue
		}
		st.slotUsed[slot] = true
		if back := c0 - S/2; back >= 0 {
			bs := int(back % S)
			if rc := C.sk_event_sync(c.ctx, st.slotEv[bs]); rc != C.CUDA_SUCCESS {
				err = driverErr("cuEventSynchronize", rc)
				cur.release()
				continue
			}
			cur.freeSlot(bs, back+S)
		}
	}
	if stagedPhase != nil {
		stagedPhase(3)
	}
	st.wg.Wait()
	if stagedPhase != nil {
		stagedPhase(4)
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
	if stagedPhase != nil {
		stagedPhase(5)
	}
	ferr := driverErr("cuMemFreeAsync (staging)", C.sk_stage_free(c.ctx, dev, cstream(s)))
	if b := st.bad.Load(); b >= 0 {
		c.recordHostBad(base + b)
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

// wakeWorkers wakes the workers for a lookup: they wait at the gate until
// startWorkers gives them its rows, or dismissWorkers none.
func (c *Context) wakeWorkers() {
	st := &c.stg
	if st.woken {
		return
	}
	st.gate.open.Store(false)
	st.woken = true
	st.wg.Add(st.workers)
	for range st.workers {
		st.start <- struct{}{}
	}
}

// dismissWorkers sends woken workers that were given no rows back to
// sleep, and waits for them.
func (c *Context) dismissWorkers() {
	st := &c.stg
	if !st.woken {
		return
	}
	st.cur.blocks = 0
	st.cur.next.Store(0)
	st.woken = false
	st.gate.release()
	st.wg.Wait()
}

// startWorkers starts the workers (waking them unless they are awake at
// the gate) on the lookup's n rows in chunks of per rows (validate: only
// check the ids, no chunks); runWorkers also waits.
func (c *Context) startWorkers(n, per int64, validate bool) {
	c.wakeWorkers()
	st := &c.stg
	l := &st.cur
	l.n, l.per, l.validate = n, per, validate
	l.block = max(min(stagedBlock, per), 1)
	if validate {
		l.block = stagedBlock
	}
	// A block never straddles two chunks: blocks are counted per chunk.
	if validate {
		l.blocks = (n + l.block - 1) / l.block
	} else {
		bpc := (per + l.block - 1) / l.block
		chunks := (n + per - 1) / per
		last := n - (chunks-1)*per
		l.blocks = (chunks-1)*bpc + (last+l.block-1)/l.block
	}
	l.next.Store(0)
	st.woken = false
	st.gate.release()
}

func (c *Context) runWorkers(n, per int64, validate bool) {
	c.startWorkers(n, max(per, 1), validate)
	c.stg.wg.Wait()
}

// prepare sizes the per-chunk counters and the chunk queue for chunks
// chunks over slots slots (chunk s may take slot s first).
func (l *stagedLookup) prepare(chunks int64, slots int) {
	if int64(cap(l.left)) < chunks {
		l.left = make([]atomic.Int64, chunks)
	}
	l.left = l.left[:chunks]
	for i := range l.left {
		l.left[i].Store(0)
	}
	if int64(cap(l.done)) < chunks {
		l.done = make(chan int64, chunks)
	}
	l.mu.Lock()
	l.free = l.free[:0]
	for i := range slots {
		l.free = append(l.free, int64(i))
	}
	l.mu.Unlock()
}

// freeSlot lets chunk next write slot s.
func (l *stagedLookup) freeSlot(s int, next int64) {
	l.mu.Lock()
	l.free[s] = next
	l.mu.Unlock()
	l.cond.Broadcast()
}

// release frees every slot for every chunk (a failed lookup's workers
// finish their blocks without waiting; what they write is not copied).
func (l *stagedLookup) release() {
	l.mu.Lock()
	for i := range l.free {
		l.free[i] = 1 << 62
	}
	l.mu.Unlock()
	l.cond.Broadcast()
}

// waitSlot blocks until chunk c may write its slot.
func (l *stagedLookup) waitSlot(c int64) {
	s := int(c % int64(len(l.free)))
	l.mu.Lock()
	for l.free[s] < c {
		l.cond.Wait()
	}
	l.mu.Unlock()
}

// stagedWorker works on each lookup it is started on until the context
// closes: it claims blocks until none is left. Between lookups it stays
// awake for gateSpin (await), then sleeps.
func (c *Context) stagedWorker() {
	st := &c.stg
	for await(st.start, gateSpin) {
		st.gate.pass()
		l := &st.cur
		var t0 time.Time
		if stagedBusy != nil {
			t0 = time.Now()
		}
		for {
			b := l.next.Add(1) - 1
			if b >= l.blocks {
				break
			}
			l.work(b, &st.bad)
		}
		if stagedBusy != nil {
			stagedBusy(t0, time.Now())
		}
		st.wg.Done()
	}
}

// work does block b: its rows' ids read and checked against their
// column's table, and (unless validating) each row copied into its
// chunk's slot and its staged id set: the flat index, or -1 for -1 and
// bad ids. The first bad id (smallest index) goes into bad. The worker
// that finishes a chunk's last block queues the chunk.
func (l *stagedLookup) work(b int64, bad *atomic.Int64) {
	var lo, hi, chunk int64
	var slot []byte
	if l.validate {
		lo, hi = b*l.block, min((b+1)*l.block, l.n)
	} else {
		bpc := (l.per + l.block - 1) / l.block
		chunk = b / bpc
		lo = chunk*l.per + (b%bpc)*l.block
		hi = min(lo+l.block, min((chunk+1)*l.per, l.n))
		if b%bpc == 0 {
			// The first block of a chunk counts the chunk's blocks.
			n := min((chunk+1)*l.per, l.n) - chunk*l.per
			l.left[chunk].Add((n + l.block - 1) / l.block)
		}
		l.waitSlot(chunk)
		slot = l.slots[chunk%int64(len(l.slots))]
	}
	first := l.gather(slot, l.ids32, l.ids64, l.sids, lo, hi, chunk*l.per, rowAhead)
	if first >= 0 {
		for {
			cur := bad.Load()
			if cur >= 0 && cur <= first || bad.CompareAndSwap(cur, first) {
				break
			}
		}
	}
	if !l.validate {
		// Blocks of a chunk may finish before its first block counted
		// them: each block subtracts one, the first adds them all, and the
		// one that brings the count to zero after the first queues it.
		if l.left[chunk].Add(-1) == 0 {
			l.done <- chunk
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
// three sizes of random rows over the whole table (calibrationRows), each
// timed to its stream's completion (median of three after a warm-up), and
// a split at the largest size against what its parts predict. HostAuto
// lookups calibrate on first use the class of the tables they read (their
// row size and the power of two of their tables' spans together: see
// tableSet); a caller may calibrate a table ahead (it takes about a tenth
// of a second: the largest size is 262,144 rows), which stands for the
// lookups of that table alone and of tables of its class. It must not
// run while its stream is being captured (it uses a stream of its own).
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
	set := setOf([]*Table{t})
	cal, err := c.calibrate(&set)
	if err != nil {
		return HostCalibration{}, err
	}
	c.mu.Lock()
	t.cal = &cal
	c.mu.Unlock()
	return cal, nil
}

// calibrate measures set's class (see CalibrateHost): each probe spreads
// its rows over the set's tables, one column each, and the result is
// kept for the class.
func (c *Context) calibrate(set *tableSet) (HostCalibration, error) {
	tabs := set.t[:set.n]
	R := int64(tabs[0].rowBytes)
	if R > stagedChunk {
		return HostCalibration{}, &ArgError{Field: "table", Reason: fmt.Sprintf("rows of %d bytes: only the zero-copy path reads rows larger than %d", R, stagedChunk)}
	}
	if c.pool == nil {
		return HostCalibration{}, fmt.Errorf("%w: CPU-staged lookups need the device's stream-ordered memory pools", ErrNotSupported)
	}
	K := int64(len(tabs))
	var sizes [3]int64
	for i, n := range calibrationRows(R) {
		sizes[i] = max(n/K, 1) * K // whole tokens of K columns
	}
	hi := sizes[2]
	s, err := c.NewStream()
	if err != nil {
		return HostCalibration{}, err
	}
	defer c.DestroyStream(s)
	id64 := false
	for _, t := range tabs {
		id64 = id64 || t.rows > 1<<31-1
	}
	idb := make([]byte, hi*8)
	seed := set.span*0x9e3779b97f4a7c15 ^ uint64(R)
	for i := range hi {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		v := int64(seed % uint64(tabs[i%K].rows)) // token-major: column i%K reads table i%K
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
	time1 := func(n int64, path HostPath) (time.Duration, error) {
		r := &Request{Tables: tabs, IDs: ids, IDs64: id64, T: int(n / K), K: int(K), Out: out, OutBytes: n * R, Host: path}
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
	cal := HostCalibration{Rows: sizes}
	for i, n := range sizes {
		z, err := time1(n, HostZeroCopy)
		if err != nil {
			return HostCalibration{}, err
		}
		st, err := time1(n, HostStaged)
		if err != nil {
			return HostCalibration{}, err
		}
		cal.ZeroCopy[i], cal.Staged[i] = z, st
	}
	// A split, at the largest size with the tokens the two curves
	// balance: its parts share the link and the host's memory, so it is
	// measured against what they predict. (The class holds the curves
	// meanwhile, which the split's own choice of tokens reads.)
	key := set.key()
	c.mu.Lock()
	if c.calClass == nil {
		c.calClass = map[calKey]HostCalibration{}
	}
	prev, had := c.calClass[key]
	c.calClass[key] = cal
	c.mu.Unlock()
	var f hostFigures
	f.add(cal)
	f.done()
	sr := &Request{Tables: tabs, T: int(hi / K), K: int(K)}
	if pred := f.splitTime(sr, f.balance(sr)); pred > 0 && hi/K >= 2 {
		d, err := time1(hi, HostSplit)
		if err != nil {
			c.mu.Lock()
			if had {
				c.calClass[key] = prev
			} else {
				delete(c.calClass, key)
			}
			c.mu.Unlock()
			return HostCalibration{}, err
		}
		cal.SplitFactor = min(max(d.Seconds()/pred, 0.5), 100)
	}
	// (Its ids are rows of the tables: it leaves the status word alone.)
	c.mu.Lock()
	c.calClass[key] = cal
	c.mu.Unlock()
	return cal, nil
}

// hostPath settles the path of a checked lookup whose tables are all host
// tables: HostZeroCopy, HostStaged and HostSplit as asked (the last two
// refused while s is captured), HostAuto from the tables' calibrations
// (made now for a table without one): the fastest predicted of
// zero-copy, staged, and a split whose zero-copy tokens tz and staged
// tokens take equal predicted times (not for strict lookups, which need
// every id checked before anything is written); zero-copy while
// capturing or without the memory pools the staged path needs. tz is the
// split's zero-copy tokens.
func (c *Context) hostPath(s Stream, r *Request, n int64) (path HostPath, tz int, err error) {
	want := r.Host
	if want == HostAuto {
		want = HostPath(c.hostDefault.Load())
	}
	if want == HostZeroCopy {
		return HostZeroCopy, 0, nil
	}
	// A row larger than a pinned slot cannot be staged.
	if R := int64(r.Tables[0].rowBytes); R > stagedChunk {
		if want == HostAuto {
			return HostZeroCopy, 0, nil
		}
		return 0, 0, &ArgError{Field: "Host", Reason: fmt.Sprintf("%s: rows of %d bytes; the staged path takes rows of at most %d", want, R, stagedChunk)}
	}
	if want == HostAuto {
		// What the calibrations at hand predict zero-copy (every small
		// lookup) needs no further call: no capture check on its way.
		if f, ok := c.hostFigures(r, false); ok {
			if p, _ := f.choose(r, n); p == HostZeroCopy {
				return HostZeroCopy, 0, nil
			}
		}
	}
	capt, err := c.capturing(s)
	if err != nil {
		return 0, 0, err
	}
	if want == HostStaged || want == HostSplit {
		if capt {
			return 0, 0, ErrStagedCapture
		}
		// A strict lookup writes nothing when any id is bad, which two
		// parts checking their own ids cannot promise: it is staged whole.
		if want == HostStaged || r.T < 2 || r.Strict {
			return HostStaged, 0, nil
		}
	}
	if want == HostAuto && (capt || c.pool == nil) {
		return HostZeroCopy, 0, nil
	}
	f, _ := c.hostFigures(r, true)
	if f.err != nil {
		return 0, 0, f.err
	}
	path, tz = f.choose(r, n)
	if want == HostSplit {
		return HostSplit, tz, nil
	}
	return path, tz, nil
}

// hostFigures is the calibration r's lookup is priced by: that of its one
// table when the caller calibrated it, else that of its tables' class
// (tableSet: their row size and their spans together, measured once for
// a store of many like lookups), or, with calibrate, one made now. ok is
// false when there is none (and calibrate is false).
func (c *Context) hostFigures(r *Request, calibrate bool) (f hostFigures, ok bool) {
	set := setOf(r.Tables)
	if set.n == 0 {
		return hostFigures{}, false
	}
	key := set.key()
	c.mu.Lock() // t.cal and calClass are written under c.mu
	cal, have := HostCalibration{}, false
	if t := set.t[0]; set.n == 1 && t.cal != nil {
		cal, have = *t.cal, true
	} else {
		cal, have = c.calClass[key]
	}
	c.mu.Unlock()
	if !have {
		if !calibrate {
			return hostFigures{}, false
		}
		var err error
		if cal, err = c.calibrate(&set); err != nil {
			return hostFigures{err: err}, false
		}
	}
	f.add(cal)
	f.done()
	return f, true
}

// lookupSplit runs a checked plan p of r (every table a host table) as a
// split: its first tz tokens zero-copy, on the stager's side stream
// (ordered after what s holds), while the CPU stages the other tokens on
// s; s then waits for the zero-copy part. The two parts are requests of
// their own over the same ids and output (the staged one's ids and
// output start tz tokens in), so they keep every semantic of a lookup.
func (c *Context) lookupSplit(s Stream, r *Request, p *plan, tz int) error {
	if c.pool == nil {
		return fmt.Errorf("%w: CPU-staged lookups need the device's stream-ordered memory pools", ErrNotSupported)
	}
	st := &c.stg
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := c.startStager(); err != nil {
		return err
	}
	idSize := int64(4)
	if r.IDs64 {
		idSize = 8
	}
	zr, sr := *r, *r
	zr.T, zr.Host = tz, HostZeroCopy
	sr.T, sr.Host = r.T-tz, HostStaged
	sr.IDs = r.IDs + DevPtr(int64(tz)*int64(r.K)*idSize)
	sr.Off = r.Off + int64(tz)*r.TStride
	pz, ps := c.getPlan(), c.getPlan()
	defer c.putPlan(pz)
	defer c.putPlan(ps)
	if err := zr.check(pz, c.status, c.sms); err != nil {
		return err
	}
	if err := sr.check(ps, c.status, c.sms); err != nil {
		return err
	}
	if rc := C.sk_order(c.ctx, cstream(s), cstream(st.side), st.before); rc != C.CUDA_SUCCESS {
		return driverErr("split: order the side stream", rc)
	}
	var zerr, serr error
	if pz.n > 0 {
		zerr = c.enqueue(st.side, &zr, pz)
	}
	if ps.n > 0 {
		serr = c.stagedLocked(s, &sr, ps, int64(tz)*int64(r.K))
	}
	if rc := C.sk_order(c.ctx, cstream(st.side), cstream(s), st.after); rc != C.CUDA_SUCCESS {
		return firstErr(firstErr(zerr, serr), driverErr("split: order the caller's stream", rc))
	}
	return firstErr(zerr, serr)
}

// ReadBack copies len(dst) bytes at device address src into dst in s's
// order, after s's earlier work, and waits for them (synchronizing s): a
// remote lookup's ids read back before the host sends them. A stream
// being captured into a graph is refused with an *ArgError (the wait
// cannot be captured), before anything is enqueued.
func (c *Context) ReadBack(dst []byte, src DevPtr, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	if src == 0 {
		return &ArgError{Field: "src", Reason: "NULL"}
	}
	capt, err := c.capturing(s)
	if err != nil {
		return err
	}
	if capt {
		return &ArgError{Field: "stream", Reason: "being captured into a graph: reading ids back waits for the stream, which a capture forbids"}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return driverErr("cuMemcpyDtoHAsync", C.sk_ids_back(c.ctx, unsafe.Pointer(&dst[0]), C.CUdeviceptr(uintptr(src)), C.size_t(len(dst)), cstream(s)))
}

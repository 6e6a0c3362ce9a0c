package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/scatterkit/scatterkit/cudagather"
	"github.com/scatterkit/scatterkit/engram"
)

// sk_cuda_attach's flags (SK_CUDA_HOST, SK_CUDA_STRICT in docs/capi.md).
const (
	// cudaHost maps the snapshots zero-copy (registered host memory read
	// over PCIe) instead of copying the tables into device memory.
	cudaHost int32 = 1
	// cudaStrict validates a lookup's ids first: with a bad id the lookup
	// writes nothing (one more launch).
	cudaStrict int32 = 2
	// cudaAsync keeps every lookup from host tables zero-copy, so none
	// reads its ids back or synchronizes with its stream (cudagather's
	// SetHostPath(HostZeroCopy)); without it the context picks the path.
	cudaAsync int32 = 4
)

// errNoCUDA is what every sk_cuda_* call but sk_cuda_available returns in
// a library built without the `cuda` tag.
var errNoCUDA = fmt.Errorf("%w: this library is built without CUDA (libscatterkit_cuda.so has it)", errNotSupported)

// deviceObj is an attachment (sk_cuda_attach): a cudagather context on
// one device and the store's populated tables mapped for it. The context
// lives on cudagather's own locked OS thread (created, module loaded and
// destroyed there); each call makes it current on the caller's thread for
// its duration, and cudaCall puts the caller's context back.
type deviceObj struct {
	st      *storeObj
	ordinal int
	flags   int32
	ctx     *cudagather.Context
	dt      *engram.DeviceTables // a local store's
	// remote: the attachment of a remote store (dt nil): its lookups read
	// the ids back and land the owner's rows in device memory through
	// the store's buffer memory (engram.Store.LookupDevice); pinned: this
	// attachment pinned that memory and unpins it at release.
	remote, pinned bool
	idsBuf         sync.Pool // *[]byte: ids read back

	// captured holds a remote store's lookups captured into graphs (each
	// a host lookup and the store buffer its fetch lands in), kept until
	// the attachment is released: a graph may replay them until then.
	capMu    sync.Mutex
	captured []capturedLookup

	// mu: lookups, warmups and status reads hold it shared, release
	// exclusively, so the context is never closed under a call.
	mu     sync.RWMutex
	closed bool
}

// gatherDevice is the context as the store's engram.Device, strict when
// the attachment asked for it (engram's DeviceTables.Lookup itself asks
// for plain lookups).
type gatherDevice struct {
	*cudagather.Context
	strict bool
}

// LookupTables forwards to the context, strict when either side says so.
func (g gatherDevice) LookupTables(stream uintptr, tables []uint64, ids uintptr, ids64 bool, t, k int,
	out uintptr, outBytes, off, tStride, kStride int64, offsets []int64, strict bool) error {
	return g.Context.LookupTables(stream, tables, ids, ids64, t, k, out, outBytes, off, tStride, kStride, offsets,
		strict || g.strict)
}

var _ engram.Device = gatherDevice{}

// cudaCall runs f on one locked OS thread and restores that thread's
// current CUDA context afterwards: cudagather makes its device's primary
// context current on the calling thread, and the caller (torch, say) may
// have another device's current there.
func cudaCall(f func() error) error {
	if !cudagather.Supported {
		return errNoCUDA
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c := currentContext()
	defer setContext(c)
	return f()
}

// cudaAvailable is sk_cuda_available: the number of CUDA devices, 0 in a
// library without CUDA.
func cudaAvailable() (int, error) {
	if !cudagather.Supported {
		return 0, nil
	}
	return deviceCount()
}

// getDevice resolves a device handle.
func getDevice(h uint64) (*deviceObj, error) {
	if !cudagather.Supported {
		return nil, errNoCUDA
	}
	d := devices.get(h)
	if d == nil {
		return nil, &HandleError{Handle: h, Want: kindDevice}
	}
	return d, nil
}

// enter takes d shared for one call; false once d is released.
func (d *deviceObj) enter() bool {
	d.mu.RLock()
	if d.closed {
		d.mu.RUnlock()
		return false
	}
	return true
}

// attachMu serializes attaches, so that the one-host-attachment check and
// the adoption of the new attachment are one step.
var attachMu sync.Mutex

// attach is sk_cuda_attach: a context on device ordinal, warmed up (on a
// stream of its own, so that no lookup has a one-time step left), and the
// store's populated tables mapped for it.
func attach(store uint64, ordinal, flags int32) (uint64, error) {
	var h uint64
	err := cudaCall(func() error {
		attachMu.Lock()
		defer attachMu.Unlock()
		st, err := getStore(store)
		if err != nil {
			return err
		}
		if flags&^(cudaHost|cudaStrict|cudaAsync) != 0 {
			return badArg("flags", "%#x: unknown bits (SK_CUDA_HOST %d, SK_CUDA_STRICT %d, SK_CUDA_ASYNC %d)", flags, cudaHost, cudaStrict, cudaAsync)
		}
		if flags&cudaAsync != 0 && flags&cudaHost == 0 {
			return badArg("flags", "SK_CUDA_ASYNC without SK_CUDA_HOST: it settles how host tables are read, and a device-copy attachment reads none")
		}
		if st.tr != nil && flags&cudaAsync != 0 {
			return badArg("flags", "SK_CUDA_ASYNC on a remote store: a remote lookup reads its ids back and waits for its rows")
		}
		n, err := deviceCount()
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: no CUDA device", errNotSupported)
		}
		if ordinal < 0 || int(ordinal) >= n {
			return badArg("device", "%d: the driver has %d devices", ordinal, n)
		}
		if flags&cudaHost != 0 && st.hostAttached() {
			return badArg("flags", "SK_CUDA_HOST: the store already has a host attachment (a snapshot is registered with the driver once per process)")
		}
		ctx, err := cudagather.NewContext(int(ordinal))
		if err != nil {
			return err
		}
		d := &deviceObj{st: st, ordinal: int(ordinal), flags: flags, ctx: ctx}
		if flags&cudaAsync != 0 {
			if err := ctx.SetHostPath(cudagather.HostZeroCopy); err != nil {
				return errors.Join(err, ctx.Close())
			}
		}
		if err := warmupContext(ctx); err != nil {
			return errors.Join(err, ctx.Close())
		}
		if st.tr != nil {
			// A remote store: its buffer memory pinned once, by the first
			// attachment (portable: every context copies from it).
			d.remote = true
			if st.captureSpin >= 0 {
				if err := ctx.SetProxySpin(st.captureSpin); err != nil {
					return errors.Join(err, ctx.Close())
				}
			}
			if !st.remotePinned() {
				if err := st.s.PinBuffers(ctx.PinHost); err != nil {
					return errors.Join(err, ctx.Close())
				}
				d.pinned = true
			}
		} else {
			dev := gatherDevice{Context: ctx, strict: flags&cudaStrict != 0}
			if d.dt, err = st.s.AttachDevice(dev, engram.DeviceOptions{Host: flags&cudaHost != 0}); err != nil {
				return errors.Join(err, ctx.Close())
			}
		}
		if h, err = adopt(st, devices, d, devicesOf); err != nil {
			return errors.Join(err, d.release())
		}
		return nil
	})
	return h, err
}

// hostAttached reports whether st has an attachment with SK_CUDA_HOST
// (a local store's: a remote store's attachments map no snapshot).
func (st *storeObj) hostAttached() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, d := range st.devices {
		if d.flags&cudaHost != 0 && !d.remote {
			return true
		}
	}
	return false
}

// remotePinned reports whether an attachment of st pinned its buffer
// memory.
func (st *storeObj) remotePinned() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, d := range st.devices {
		if d.pinned {
			return true
		}
	}
	return false
}

// warmupContext runs the context's warmup on a stream of its own (not the
// legacy default stream, which would wait on the process's other blocking
// streams).
func warmupContext(ctx *cudagather.Context) error {
	s, err := ctx.NewStream()
	if err != nil {
		return err
	}
	return errors.Join(ctx.Warmup(s), ctx.DestroyStream(s))
}

// release detaches d: no call of d runs past this point, the device's
// pending work is waited for, the tables are unmapped and the context
// closed.
func (d *deviceObj) release() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return cudaCall(func() error {
		err := syncDevice(d.ordinal)
		err = errors.Join(err, d.releaseCaptured())
		if d.dt != nil {
			err = errors.Join(err, d.dt.Close())
		}
		if d.pinned {
			err = errors.Join(err, d.st.s.UnpinBuffers())
		}
		return errors.Join(err, d.ctx.Close())
	})
}

// detach is sk_cuda_detach.
func detach(h uint64) error {
	if !cudagather.Supported {
		return errNoCUDA
	}
	d := devices.take(h)
	if d == nil {
		return &HandleError{Handle: h, Want: kindDevice}
	}
	if !disown(d.st, devicesOf, h) {
		return nil // the store's close has it
	}
	return d.release()
}

// warmup is sk_cuda_warmup: cudagather's Warmup on stream (every kernel
// launched once, lazy module loading done) and the stream synchronized.
func warmup(h uint64, stream uint64) error {
	d, err := getDevice(h)
	if err != nil {
		return err
	}
	if !d.enter() {
		return &HandleError{Handle: h, Want: kindDevice}
	}
	defer d.mu.RUnlock()
	return cudaCall(func() error { return d.ctx.Warmup(cudagather.Stream(stream)) })
}

// status is sk_cuda_status: stream synchronized, then the first bad id
// any lookup of the attachment met since the last status read (a
// *cudagather.IDError, its flat index decoded with k), cleared.
func status(h uint64, stream uint64, k int32) error {
	d, err := getDevice(h)
	if err != nil {
		return err
	}
	if k < 1 || k > cudagather.MaxColumns {
		return badArg("k", "%d: want 1 to %d", k, cudagather.MaxColumns)
	}
	if !d.enter() {
		return &HandleError{Handle: h, Want: kindDevice}
	}
	defer d.mu.RUnlock()
	return cudaCall(func() error { return d.ctx.Status(cudagather.Stream(stream), int(k)) })
}

// deviceLookupArgs are sk_cuda_lookup's arguments as C passes them: ids
// and out are device addresses, offsets host memory.
type deviceLookupArgs struct {
	dev, cols, stream             uint64
	t                             int64
	k                             int32
	ids                           uint64
	idBits                        int32
	out                           uint64
	outLen, off, tStride, kStride int64
	offsets                       unsafe.Pointer
}

// check is what the ABI checks itself, before any handle is resolved:
// the shape, the id width and alignment (a misaligned id faults the
// device, which poisons the context for the whole process), device
// ranges that wrap the address space, and the host offsets. The output's
// bounds, strides and overlap are cudagather's to check.
func (a *deviceLookupArgs) check() error {
	k := int64(a.k)
	switch {
	case a.t < 0:
		return badArg("t", "%d: negative", a.t)
	case k < 0 || k > cudagather.MaxColumns:
		return badArg("k", "%d: want 0 to %d columns", k, cudagather.MaxColumns)
	case k > 0 && a.t > math.MaxInt64/k:
		return badArg("t", "%d x k %d ids: overflows", a.t, k)
	case a.idBits != 32 && a.idBits != 64:
		return badArg("id_bits", "%d: want 32 or 64", a.idBits)
	case a.outLen < 0:
		return badArg("out_len", "%d: negative", a.outLen)
	}
	n := a.t * k
	size := uint64(a.idBits / 8)
	if n > 0 {
		switch {
		case a.ids == 0:
			return badArg("ids", "NULL for %d ids", n)
		case a.ids%size != 0:
			return badArg("ids", "device address %#x not aligned to %d bytes", a.ids, size)
		case uint64(n) > math.MaxUint64/size || a.ids+uint64(n)*size-1 < a.ids:
			return badArg("ids", "%d ids at %#x: past the end of the address space", n, a.ids)
		case a.out == 0:
			return badArg("out", "NULL")
		case a.outLen > 0 && a.out+uint64(a.outLen)-1 < a.out:
			return badArg("out", "%d bytes at %#x: past the end of the address space", a.outLen, a.out)
		}
	}
	if a.offsets != nil {
		if err := span("offsets", a.offsets, k, 8); err != nil {
			return err
		}
	}
	return nil
}

// preparedDeviceLookup is a checked device lookup with its handles
// resolved; d is held shared until done.
type preparedDeviceLookup struct {
	d     *deviceObj
	names []string
	a     *deviceLookupArgs
	opts  engram.LookupOptions
}

// prepare checks a, resolves its handles and takes the attachment shared
// (done releases it).
func (a *deviceLookupArgs) prepare(pl *preparedDeviceLookup) error {
	d, err := getDevice(a.dev)
	if err != nil {
		return err
	}
	if err := a.check(); err != nil {
		return err
	}
	c := columns.get(a.cols)
	if c == nil {
		return &HandleError{Handle: a.cols, Want: kindColumns}
	}
	if c.st != d.st {
		return badArg("cols", "a column set of another store")
	}
	if len(c.names) != int(a.k) {
		return badArg("k", "%d, but the column set has %d names", a.k, len(c.names))
	}
	if !d.enter() {
		return &HandleError{Handle: a.dev, Want: kindDevice}
	}
	pl.d, pl.names, pl.a = d, c.names, a
	pl.opts.Offsets = nil
	if a.offsets != nil {
		pl.opts.Offsets = unsafe.Slice((*int64)(a.offsets), a.k)
	}
	return nil
}

func (pl *preparedDeviceLookup) done() { pl.d.mu.RUnlock() }

// run enqueues the lookup on stream; it returns before the kernel runs.
// A remote store's lookup (runRemote) returns once its rows are in
// device memory.
func (pl *preparedDeviceLookup) run(stream uint64) error {
	a := pl.a
	if pl.d.remote {
		return pl.runRemote(stream)
	}
	return pl.d.dt.Lookup(uintptr(stream), pl.names, uintptr(a.ids), a.idBits == 64, int(a.t), int(a.k),
		uintptr(a.out), a.outLen, a.off, a.tStride, a.kStride, &pl.opts)
}

// runRemote is a remote store's lookup into device memory: the ids read
// back after the stream's earlier work (synchronizing it; a stream being
// captured is refused), the request checked in full on the host (a bad
// id writes nothing), the rows landed in the output through the store's
// pinned buffer memory by copies on the stream, waited for.
func (pl *preparedDeviceLookup) runRemote(stream uint64) error {
	a, d := pl.a, pl.d
	n := a.t * int64(a.k)
	if n == 0 {
		return nil
	}
	if a.outLen <= 0 {
		return badArg("out_len", "%d: no room for %d rows", a.outLen, n)
	}
	s := cudagather.Stream(stream)
	capt, err := d.ctx.Capturing(s)
	if err != nil {
		return err
	}
	if capt {
		return pl.captureRemote(s)
	}
	size := int64(a.idBits / 8)
	bp, _ := d.idsBuf.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer d.idsBuf.Put(bp)
	if int64(cap(*bp)) < n*size {
		*bp = make([]byte, n*size)
	}
	b := (*bp)[:n*size]
	if err := d.ctx.ReadBack(b, cudagather.DevPtr(a.ids), s); err != nil {
		return err
	}
	var ids engram.IDs
	if a.idBits == 64 {
		ids = engram.IDs64(unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), n), int(a.t), int(a.k))
	} else {
		ids = engram.IDs32(unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), n), int(a.t), int(a.k))
	}
	buf, err := d.ctx.WrapDevice(cudagather.DevPtr(a.out), a.outLen, s)
	if err != nil {
		return err
	}
	out := engram.DeviceOutput{Dst: buf, Off: int(a.off), TStride: int(a.tStride), KStride: int(a.kStride)}
	err = d.st.s.LookupDevice(context.Background(), pl.names, ids, out, &pl.opts)
	return errors.Join(err, buf.Close())
}

// capturedLookup is a remote lookup captured into a graph.
type capturedLookup struct {
	hl  *cudagather.HostLookup
	buf *engram.Buffer
}

// maxCaptured bounds the captured remote lookups one attachment holds
// (each holds T*K rows of the store's buffer memory and a little pinned
// and device memory until the attachment is released).
const maxCaptured = 4096

// captureRemote records a remote store's lookup into the graph being
// captured on s, as a cudagather host lookup: at each replay the stream
// copies the ids to pinned host memory and hands them to the context's
// proxy (a host node where the driver cannot capture the hand-over),
// which runs the store's lookup of them (checked whole, as sk_lookup
// checks) into a buffer of the store's pinned buffer memory; the rows go
// on to the output by two copies and the placing pass, in stream order. A failed or timed-out fetch
// (a bad id, an owner gone) writes no output row, the stream goes on,
// and sk_cuda_status reports it.
func (pl *preparedDeviceLookup) captureRemote(s cudagather.Stream) error {
	a, d := pl.a, pl.d
	st := d.st.s
	rowBytes := 0
	for i, name := range pl.names {
		spec, err := st.TableSpec(name)
		if err != nil {
			return err
		}
		if i == 0 {
			rowBytes = spec.RowBytes
		} else if spec.RowBytes != rowBytes {
			return badArg("cols", "table %q has %d-byte rows, %q %d: one lookup's rows have one size", name, spec.RowBytes, pl.names[0], rowBytes)
		}
	}
	d.capMu.Lock()
	defer d.capMu.Unlock()
	if len(d.captured) >= maxCaptured {
		return fmt.Errorf("%w: %d remote lookups captured on this attachment (detach it to free them)", errTooMany, len(d.captured))
	}
	t, k := int(a.t), int(a.k)
	buf, err := st.NewBuffer(t * k * rowBytes)
	if err != nil {
		return err
	}
	names := pl.names // the column set's, never changed
	opts := &engram.LookupOptions{}
	if pl.opts.Offsets != nil {
		opts.Offsets = slices.Clone(pl.opts.Offsets) // the caller's memory is theirs after the call
	}
	fetch := func(ctx context.Context, ids32 []int32, ids64 []int64, rows []byte) error {
		ids := engram.IDs32(ids32, t, k)
		if ids64 != nil {
			ids = engram.IDs64(ids64, t, k)
		}
		return st.LookupContext(ctx, names, ids, engram.TokenMajor(rows, t, k, rowBytes), opts)
	}
	hl, err := d.ctx.NewHostLookup(cudagather.HostLookupConfig{T: t, K: k, RowBytes: rowBytes, IDs64: a.idBits == 64,
		Rows: buf.Bytes(), Fetch: fetch}) // each fetch bounded by cudagather.DefaultHostLookupTimeout (10 s)
	if err != nil {
		buf.Release()
		return err
	}
	if err := hl.Enqueue(s, cudagather.DevPtr(a.ids), cudagather.DevPtr(a.out), a.outLen, a.off, a.tStride, a.kStride); err != nil {
		err = errors.Join(err, hl.Close())
		buf.Release()
		return err
	}
	d.captured = append(d.captured, capturedLookup{hl: hl, buf: buf})
	return nil
}

// releaseCaptured frees the captured remote lookups (the device's work
// waited for first).
func (d *deviceObj) releaseCaptured() error {
	d.capMu.Lock()
	defer d.capMu.Unlock()
	var err error
	for _, c := range d.captured {
		err = errors.Join(err, c.hl.Close())
		c.buf.Release()
	}
	d.captured = nil
	return err
}

// deviceLookup is sk_cuda_lookup.
func deviceLookup(a *deviceLookupArgs) error {
	return cudaCall(func() error {
		var pl preparedDeviceLookup
		if err := a.prepare(&pl); err != nil {
			return err
		}
		defer pl.done()
		return pl.run(a.stream)
	})
}

// benchGraph is sk_cuda_bench_graph: the lookup captured into a graph on
// stream (not the legacy default stream, which cannot be captured),
// replayed once, then n times; it returns the time of the n replays and
// the stream's synchronization after them.
func benchGraph(a *deviceLookupArgs, n int64) (time.Duration, error) {
	var d time.Duration
	err := cudaCall(func() (err error) {
		if n < 1 {
			return badArg("n", "%d: want at least 1", n)
		}
		if a.stream == 0 {
			return badArg("stream", "0: the legacy default stream cannot be captured")
		}
		var pl preparedDeviceLookup
		if err := a.prepare(&pl); err != nil {
			return err
		}
		defer pl.done()
		ctx, s := pl.d.ctx, cudagather.Stream(a.stream)
		g, err := ctx.Capture(s, func() error { return pl.run(a.stream) })
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, ctx.Sync(s), g.Close()) }()
		d, err = timeLaunches(n, func() error { return g.Launch(s) }, func() error { return ctx.Sync(s) })
		return err
	})
	return d, err
}

// timeLaunches launches once and synchronizes (warm-up), then launches n
// times and returns the time of those launches and the synchronization
// after them: the loop of benchGraph and benchReplay.
func timeLaunches(n int64, launch, sync func() error) (time.Duration, error) {
	if err := launch(); err != nil {
		return 0, err
	}
	if err := sync(); err != nil {
		return 0, err
	}
	t0 := time.Now()
	for range n {
		if err := launch(); err != nil {
			return 0, err
		}
	}
	if err := sync(); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// benchReplay is sk_cuda_bench_replay: a graph instantiated elsewhere
// (exec, a CUgraphExec of dev's device, such as a torch.cuda.CUDAGraph's)
// launched by the loop benchGraph times its own graph with: once, then n
// times, timing the n launches and the stream's synchronization after
// them. It tells a graph's content from its launcher's cost.
func benchReplay(h, exec, stream uint64, n int64) (time.Duration, error) {
	var d time.Duration
	err := cudaCall(func() error {
		if n < 1 {
			return badArg("n", "%d: want at least 1", n)
		}
		if exec == 0 {
			return badArg("exec", "NULL")
		}
		dv, err := getDevice(h)
		if err != nil {
			return err
		}
		if !dv.enter() {
			return &HandleError{Handle: h, Want: kindDevice}
		}
		defer dv.mu.RUnlock()
		ctx, s := dv.ctx, cudagather.Stream(stream)
		d, err = timeLaunches(n, func() error { return ctx.LaunchExec(uintptr(exec), s) }, func() error { return ctx.Sync(s) })
		return err
	})
	return d, err
}

//go:build ucx

package ucx

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/endpoints"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
	"github.com/scatterkit/scatterkit/verbs/ucx/internal/ucp"
)

// Transport is the UCX backend of verbs.Transport. Create it with New;
// all methods are safe for concurrent use. One UCX worker, on one locked
// thread (the progress loop), carries every connection and segment of
// the transport: their endpoints, their keys and their one-sided
// operations.
type Transport struct {
	cfg  Config
	ctx  *ucp.Context
	lp   *loop
	addr []byte // the worker's address, sent in handshakes
	reg  *regtab.Registry
	open endpoints.Set

	// active holds the queues with operations in flight; only the loop's
	// thread touches it (progress).
	active map[*queue]struct{}
}

var _ verbs.Transport = (*Transport)(nil)

// Supported reports whether this build has UCX support.
func Supported() bool { return true }

// New returns a UCX transport: a UCX context (configured from the
// environment: UCX_TLS, UCX_NET_DEVICES, ...) with one worker. It fails
// when UCX cannot start (no usable transport, for instance).
func New(cfg Config) (*Transport, error) {
	ctx, err := ucp.NewContext()
	if err != nil {
		return nil, fmt.Errorf("ucx: %w", err)
	}
	lp, err := newLoop(ctx)
	if err != nil {
		ctx.Close()
		return nil, fmt.Errorf("ucx: %w", err)
	}
	t := &Transport{cfg: cfg.withDefaults(), ctx: ctx, lp: lp, reg: regtab.NewRegistry(), active: map[*queue]struct{}{}}
	var aerr error
	if err := lp.do(func() {
		t.addr, aerr = lp.w.Address()
		lp.watch(t.progress)
	}); err != nil || aerr != nil {
		lp.close()
		ctx.Close()
		return nil, fmt.Errorf("ucx: worker address: %w", errors.Join(err, aerr))
	}
	return t, nil
}

// Name implements verbs.Transport: "ucx".
func (*Transport) Name() string { return "ucx" }

// progress runs on the loop's thread after each pass of the worker: the
// active queues collect their finished operations. True while any has
// operations in flight.
func (t *Transport) progress() bool {
	for q := range t.active {
		if !q.collect() {
			delete(t.active, q)
		}
	}
	return len(t.active) > 0
}

// regMem is a region's UCX side: its registration (with the remote
// access of the region) and packed key, and, made when a peer granted
// read only is shown a region it may not write, a read-only registration
// of the same memory (which an adapter that checks keys enforces).
type regMem struct {
	buf    []byte
	acc    verbs.Access // as registered
	mem    *ucp.Mem
	packed []byte
	pin    *runtime.Pinner // Register'ed memory: kept in place while UCX holds it
	mapped bool            // anonymous memory of ours: unmapped at the end (UCX's own, Alloc'ed, goes with mem)

	roMu     sync.Mutex
	ro       *ucp.Mem
	roPacked []byte
}

// base is the region's address in this process, as peers name it.
func (m *regMem) base() uint64 { return uint64(uintptr(unsafe.Pointer(&m.buf[0]))) }

// newMem registers buf with the context (on the loop's thread) for access.
func (t *Transport) newMem(buf []byte, access verbs.Access) (*regMem, error) {
	m := &regMem{buf: buf, acc: access}
	var err error
	if derr := t.lp.do(func() {
		if m.mem, err = t.ctx.Map(unsafe.Pointer(&buf[0]), len(buf), access.Has(verbs.AccessRemoteRead), access.Has(verbs.AccessRemoteWrite)); err != nil {
			return
		}
		if m.packed, err = m.mem.PackKey(); err != nil {
			_ = m.mem.Unmap()
		}
	}); derr != nil {
		return nil, derr
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// packedFor is the packed key a peer granted access is given for the
// region: the region's own, or a read-only registration's when the region
// permits writes and the peer may not write.
func (t *Transport) packedFor(m *regMem, granted verbs.Access) ([]byte, error) {
	if !m.acc.Has(verbs.AccessRemoteWrite) || granted.Has(verbs.AccessRemoteWrite) {
		return m.packed, nil
	}
	m.roMu.Lock()
	defer m.roMu.Unlock()
	if m.ro != nil {
		return m.roPacked, nil
	}
	var err error
	if derr := t.lp.do(func() {
		var ro *ucp.Mem
		if ro, err = t.ctx.Map(unsafe.Pointer(&m.buf[0]), len(m.buf), true, false); err != nil {
			return
		}
		var p []byte
		if p, err = ro.PackKey(); err != nil {
			_ = ro.Unmap()
			return
		}
		m.ro, m.roPacked = ro, p
	}); derr != nil {
		return nil, derr
	}
	return m.roPacked, err
}

// free deregisters m from UCX and releases its memory.
func (t *Transport) free(m *regMem) error {
	var err error
	unmap := func() {
		if m.ro != nil {
			err = m.ro.Unmap() // before mem, which may free the memory
		}
		err = errors.Join(err, m.mem.Unmap())
	}
	if derr := t.lp.do(unmap); derr != nil {
		unmap() // the loop has ended: its thread no longer uses the context
	}
	if m.pin != nil {
		m.pin.Unpin()
	}
	if m.mapped {
		err = errors.Join(err, unix.Munmap(m.buf))
	}
	return err
}

// Register registers caller-owned memory with UCX (it stays pinned in
// place until Deregister). Such a region can be exported and exposed.
func (t *Transport) Register(buf []byte, access verbs.Access) (*verbs.Region, error) {
	r, err := verbs.NewRegion(buf, access)
	if err != nil {
		return nil, fmt.Errorf("ucx: register: %w", err)
	}
	pin := new(runtime.Pinner)
	pin.Pin(&buf[0]) // (nothing for memory that is not Go's)
	m, err := t.newMem(buf, access)
	if err != nil {
		pin.Unpin()
		return nil, fmt.Errorf("ucx: register: %w", err)
	}
	m.pin = pin
	if err := t.reg.Add(r, m); err != nil {
		return nil, errors.Join(fmt.Errorf("ucx: %w", err), t.free(m))
	}
	return r, nil
}

// Alloc returns a region of size bytes, zeroed, that UCX allocates and
// registers: on one host from a segment its shared-memory transports map,
// so a peer's operations there are copies (over cma they would be a
// system call each).
func (t *Transport) Alloc(size int, access verbs.Access) (*verbs.Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("ucx: alloc of %d bytes: %w", size, verbs.ErrInvalid)
	}
	if !access.Valid() {
		return nil, fmt.Errorf("ucx: alloc access %s: %w", access, verbs.ErrInvalid)
	}
	m := &regMem{acc: access}
	var err error
	if derr := t.lp.do(func() {
		var p unsafe.Pointer
		if m.mem, p, err = t.ctx.Alloc(size, access.Has(verbs.AccessRemoteRead), access.Has(verbs.AccessRemoteWrite)); err != nil {
			return
		}
		m.buf = unsafe.Slice((*byte)(p), size)
		if m.packed, err = m.mem.PackKey(); err != nil {
			_ = m.mem.Unmap()
		}
	}); derr != nil {
		return nil, fmt.Errorf("ucx: alloc: %w", derr)
	}
	if err != nil {
		return nil, fmt.Errorf("ucx: alloc of %d bytes: %w", size, err)
	}
	clear(m.buf)
	r, err := verbs.NewRegion(m.buf, access)
	if err == nil {
		err = t.reg.Add(r, m)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("ucx: alloc: %w", err), t.free(m))
	}
	return r, nil
}

// Deregister forgets r, deregisters it from UCX and, for Alloc'ed memory,
// unmaps it.
func (t *Transport) Deregister(r *verbs.Region) error {
	e, err := t.reg.Remove(r)
	if err != nil {
		return fmt.Errorf("ucx: %w", err)
	}
	return t.free(e.Data.(*regMem))
}

// Listen serves exports at addr, a TCP address (host:port) for the
// handshake and the control calls; the one-sided operations go through
// UCX.
func (t *Transport) Listen(addr string, exports []verbs.Export, opts verbs.ListenOptions) (verbs.Segment, error) {
	return t.listen(addr, exports, opts)
}

// Connect connects to the segment at addr.
func (t *Transport) Connect(ctx context.Context, addr string, opts verbs.ConnectOptions) (verbs.Conn, error) {
	return t.connect(ctx, addr, opts)
}

// Close closes every segment and connection, deregisters every region
// and ends the worker and the context.
func (t *Transport) Close() error {
	if !t.open.Close() {
		return nil
	}
	var errs []error
	for _, e := range t.reg.CloseAll() {
		errs = append(errs, t.free(e.Data.(*regMem)))
	}
	t.lp.close()
	t.ctx.Close()
	return errors.Join(errs...)
}

// attachment builds this side's attachment for the listed regions (their
// entries, in order, and the access the peer was granted), and the probe
// when there is one.
func (t *Transport) attachment(listed []verbs.RegionInfo, mems []*regMem, granted verbs.Access, probe *regMem, probeKey verbs.Key) (*Attachment, error) {
	a := &Attachment{Worker: t.addr}
	for i, ri := range listed {
		p, err := t.packedFor(mems[i], granted)
		if err != nil {
			return nil, err
		}
		a.Regions = append(a.Regions, RegionKey{Key: ri.Key, Base: mems[i].base(), Packed: p})
	}
	if probe != nil {
		a.Regions = append(a.Regions, RegionKey{Key: probeKey, Base: probe.base(), Packed: probe.packed})
	}
	return a, nil
}

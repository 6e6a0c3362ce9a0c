package bufferpool

import (
	"context"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool is staging memory leased in size classes from one mapped arena. All
// methods are safe for concurrent use.
type Pool struct {
	geo          geometry
	arena        []byte // capacity bytes; never changes after New
	am           *arena
	trackCallers bool

	closeMu    sync.Mutex // serializes Close
	deregister func() error

	mu       sync.Mutex
	alloc    buddy
	meta     []slotMeta // per unit; valid at the first unit of an allocated block
	waitHead *waiter
	waitTail *waiter
	spare    *waiter // recycled waiters
	closed   bool
	unmapped bool
	st       counters
}

// slotMeta describes the lease on the block starting at a unit.
type slotMeta struct {
	gen   atomic.Uint64 // bumped at every grant and every release
	size  int
	label string
	pc    uintptr
}

type counters struct {
	inUse, requested, peak, leases int
	acquires, releases, waits      uint64
	exhausted, timedOut            uint64
	waiting                        int
	waitTime                       time.Duration
}

// waiter is one queued acquire. It is recycled through Pool.spare, so a
// queued acquire allocates only its channel, once per waiter ever created.
type waiter struct {
	next, prev *waiter
	order      int
	size       int
	label      string
	pc         uintptr
	ready      chan struct{} // capacity 1; signalled once done is set
	done       bool
	lease      Lease
	err        error
}

// New maps the arena, applies the huge-page, lock and prefault settings,
// calls Config.Register, and returns the pool. On any failure nothing stays
// mapped.
func New(cfg Config) (*Pool, error) { return newPool(cfg, hostSys) }

func newPool(cfg Config, sys arenaSys) (*Pool, error) {
	geo, err := cfg.geometry()
	if err != nil {
		return nil, err
	}
	am, err := mapArena(geo.capacity, &cfg, sys)
	if err != nil {
		return nil, err
	}
	p := &Pool{
		geo:          geo,
		arena:        am.mem[:geo.capacity:geo.capacity],
		am:           am,
		trackCallers: cfg.TrackCallers,
		alloc:        newBuddy(geo.units, geo.maxOrder),
		meta:         make([]slotMeta, geo.units),
	}
	if cfg.Register != nil {
		dereg, err := cfg.Register(p.arena)
		if err != nil {
			if uerr := am.unmap(); uerr != nil {
				return nil, fmt.Errorf("%w: %w (and unmapping the arena: %w)", ErrRegister, err, uerr)
			}
			return nil, fmt.Errorf("%w: %w", ErrRegister, err)
		}
		p.deregister = dereg
	}
	return p, nil
}

// Arena returns the whole arena (Stats().Budget bytes), for transports that
// register it after New; lease offsets are relative to its start. It returns
// nil once Close has unmapped the arena.
func (p *Pool) Arena() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.unmapped {
		return nil
	}
	return p.arena
}

func (p *Pool) classBytes(order int) int { return 1 << (int(p.geo.minShift) + order) }

// orderFor maps a request to its size class.
func (p *Pool) orderFor(size int) (int, error) {
	if size <= 0 {
		return 0, &AcquireError{Size: size, Err: ErrInvalidSize}
	}
	units := (size-1)>>p.geo.minShift + 1
	order := bits.Len(uint(units - 1))
	if order > p.geo.maxOrder {
		return 0, &AcquireError{Size: size, Limit: p.classBytes(p.geo.maxOrder), Err: ErrTooLarge}
	}
	return order, nil
}

// callerPC returns the program counter of the user's call into an exported
// acquire method (which must call callerPC directly), or 0.
func (p *Pool) callerPC() uintptr {
	if !p.trackCallers {
		return 0
	}
	var pcs [1]uintptr
	// Skip runtime.Callers, callerPC and the exported method.
	if runtime.Callers(3, pcs[:]) == 0 {
		return 0
	}
	return pcs[0]
}

// TryAcquire leases size bytes without blocking. It returns ErrExhausted
// (bare, without allocating) when no block of the needed class is free or
// when blocking acquires are queued (it never overtakes them).
func (p *Pool) TryAcquire(size int) (Lease, error) {
	return p.try(size, "", p.callerPC())
}

// TryAcquireLabeled is TryAcquire with a label reported if the lease leaks.
func (p *Pool) TryAcquireLabeled(size int, label string) (Lease, error) {
	return p.try(size, label, p.callerPC())
}

// Acquire leases size bytes, waiting in FIFO order until they are free, the
// context ends (an [*AcquireError] wrapping ErrExhausted and the context's
// error) or the pool is closed (ErrClosed). A request above the largest
// class fails at once with ErrTooLarge. A grant that races with the end of
// the context wins: the lease is returned and must be released. A nil
// context never ends.
func (p *Pool) Acquire(ctx context.Context, size int) (Lease, error) {
	return p.wait(orBackground(ctx), 0, size, "", p.callerPC())
}

// AcquireLabeled is Acquire with a label reported if the lease leaks.
func (p *Pool) AcquireLabeled(ctx context.Context, size int, label string) (Lease, error) {
	return p.wait(orBackground(ctx), 0, size, label, p.callerPC())
}

// orBackground treats a nil context as one that never ends.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// AcquireTimeout is Acquire bounded by a timeout instead of a context; a
// timeout <= 0 makes it TryAcquire. It allocates a timer only when it has to
// wait.
func (p *Pool) AcquireTimeout(size int, timeout time.Duration) (Lease, error) {
	if timeout <= 0 {
		return p.try(size, "", p.callerPC())
	}
	return p.wait(nil, timeout, size, "", p.callerPC())
}

func (p *Pool) try(size int, label string, pc uintptr) (Lease, error) {
	order, err := p.orderFor(size)
	if err != nil {
		return Lease{}, err
	}
	p.mu.Lock()
	if l, done, err := p.grantNowLocked(order, size, label, pc); done {
		p.mu.Unlock()
		return l, err
	}
	p.st.exhausted++
	p.mu.Unlock()
	return Lease{}, ErrExhausted
}

// grantNowLocked settles an acquire that needs no waiting: ErrClosed on a
// closed pool, or a lease when nobody waits (waiters are served first in,
// first out) and a block of the order is free. done is false when the
// caller must give up or queue. p.mu is held.
func (p *Pool) grantNowLocked(order, size int, label string, pc uintptr) (l Lease, done bool, err error) {
	if p.closed {
		return Lease{}, true, ErrClosed
	}
	if p.waitHead != nil {
		return Lease{}, false, nil
	}
	u, ok := p.alloc.alloc(order)
	if !ok {
		return Lease{}, false, nil
	}
	return p.grantLocked(u, order, size, label, pc), true, nil
}

// wait is the blocking acquire: bounded by ctx when it is not nil, else by
// timeout (> 0).
func (p *Pool) wait(ctx context.Context, timeout time.Duration, size int, label string, pc uintptr) (Lease, error) {
	order, err := p.orderFor(size)
	if err != nil {
		return Lease{}, err
	}
	p.mu.Lock()
	if l, done, err := p.grantNowLocked(order, size, label, pc); done {
		p.mu.Unlock()
		return l, err
	}
	var done <-chan struct{}
	if ctx != nil {
		if cerr := ctx.Err(); cerr != nil {
			p.st.timedOut++
			p.mu.Unlock()
			return Lease{}, &AcquireError{Size: size, Err: ErrExhausted, Cause: cerr}
		}
		done = ctx.Done()
	}
	w := p.newWaiterLocked()
	w.order, w.size, w.label, w.pc = order, size, label, pc
	p.enqueueLocked(w)
	p.st.waits++
	p.mu.Unlock()

	start := time.Now()
	var expired <-chan time.Time
	if ctx == nil {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	var cause error
	select {
	case <-w.ready:
	case <-done:
		cause = ctx.Err()
	case <-expired:
		cause = context.DeadlineExceeded
	}
	waited := time.Since(start)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.st.waitTime += waited
	if w.done {
		// Granted (or closed) before or while the wait ended: the grant wins.
		l, err := w.lease, w.err
		p.recycleLocked(w)
		return l, err
	}
	wasHead := p.waitHead == w
	p.dequeueLocked(w)
	p.recycleLocked(w)
	p.st.timedOut++
	if wasHead {
		// The head blocked everyone behind it; they may fit now.
		p.serveLocked()
	}
	return Lease{}, &AcquireError{Size: size, Waited: waited, Err: ErrExhausted, Cause: cause}
}

// grantLocked stamps an allocated block with a new generation and accounts
// for it.
func (p *Pool) grantLocked(u int32, order, size int, label string, pc uintptr) Lease {
	m := &p.meta[u]
	m.size, m.label, m.pc = size, label, pc
	gen := m.gen.Add(1)
	class := p.classBytes(order)
	p.st.inUse += class
	p.st.requested += size
	p.st.peak = max(p.st.peak, p.st.inUse)
	p.st.leases++
	p.st.acquires++
	return Lease{p: p, off: int(u) << p.geo.minShift, size: size, gen: gen}
}

func (p *Pool) release(l Lease) error {
	u := int32(l.off >> p.geo.minShift)
	p.mu.Lock()
	defer p.mu.Unlock()
	order := p.alloc.allocated(u)
	if order < 0 || p.meta[u].gen.Load() != l.gen || l.off&(1<<p.geo.minShift-1) != 0 {
		return &LeaseError{Offset: l.off, Size: l.size, Err: ErrDoubleRelease}
	}
	m := &p.meta[u]
	m.gen.Add(1)
	p.st.inUse -= p.classBytes(order)
	p.st.requested -= m.size
	p.st.leases--
	p.st.releases++
	m.size, m.label, m.pc = 0, "", 0
	if !p.alloc.free(u) {
		panic("bufferpool: allocator lost a live block")
	}
	if p.waitHead != nil {
		p.serveLocked()
	}
	return nil
}

// serveLocked grants queued acquires in FIFO order while the head fits, and
// fails them all with ErrClosed once the pool is closed. It stops at the
// first head that does not fit: later, smaller waiters never overtake it.
func (p *Pool) serveLocked() {
	for w := p.waitHead; w != nil; w = p.waitHead {
		if p.closed {
			w.err = ErrClosed
		} else {
			u, ok := p.alloc.alloc(w.order)
			if !ok {
				return
			}
			w.lease = p.grantLocked(u, w.order, w.size, w.label, w.pc)
		}
		p.dequeueLocked(w)
		w.done = true
		w.ready <- struct{}{}
	}
}

func (p *Pool) newWaiterLocked() *waiter {
	w := p.spare
	if w == nil {
		return &waiter{ready: make(chan struct{}, 1)}
	}
	p.spare = w.next
	w.next = nil
	return w
}

func (p *Pool) recycleLocked(w *waiter) {
	select {
	case <-w.ready:
	default:
	}
	*w = waiter{ready: w.ready, next: p.spare}
	p.spare = w
}

func (p *Pool) enqueueLocked(w *waiter) {
	w.prev, w.next = p.waitTail, nil
	if p.waitTail != nil {
		p.waitTail.next = w
	} else {
		p.waitHead = w
	}
	p.waitTail = w
	p.st.waiting++
}

func (p *Pool) dequeueLocked(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		p.waitHead = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		p.waitTail = w.prev
	}
	w.next, w.prev = nil, nil
	p.st.waiting--
}

// Stats returns a snapshot of the pool's accounting.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	largest := 0
	if k := p.alloc.largestFree(); k >= 0 {
		largest = p.classBytes(k)
	}
	a := p.am.stats
	a.Mapped = !p.unmapped
	return Stats{
		Budget:      p.geo.capacity,
		MinSlot:     p.classBytes(0),
		MaxSlot:     p.classBytes(p.geo.maxOrder),
		InUse:       p.st.inUse,
		Requested:   p.st.requested,
		Peak:        p.st.peak,
		LargestFree: largest,
		Leases:      p.st.leases,
		Acquires:    p.st.acquires,
		Releases:    p.st.releases,
		Waits:       p.st.waits,
		WaitTime:    p.st.waitTime,
		Waiting:     p.st.waiting,
		Exhausted:   p.st.exhausted,
		TimedOut:    p.st.timedOut,
		Closed:      p.closed,
		Arena:       a,
	}
}

// Close stops the pool: later acquires return ErrClosed and queued ones are
// woken with ErrClosed. If leases are outstanding it returns a [*LeakError]
// listing them and leaves the arena mapped, so their memory stays valid;
// release them and call Close again. Otherwise it calls the deregister
// function from Config.Register (on its error Close returns ErrDeregister and
// keeps the arena mapped; a later Close retries) and unmaps the arena. Close
// after the arena was unmapped returns ErrClosed.
func (p *Pool) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()

	p.mu.Lock()
	if p.unmapped {
		p.mu.Unlock()
		return ErrClosed
	}
	p.closed = true
	p.serveLocked()
	if p.st.leases > 0 {
		err := p.leakErrorLocked()
		p.mu.Unlock()
		return err
	}
	p.mu.Unlock()

	// Closed with no lease: nothing can touch the arena any more, so the
	// user's deregister function runs without the lock.
	if p.deregister != nil {
		if err := p.deregister(); err != nil {
			return fmt.Errorf("%w: %w", ErrDeregister, err)
		}
		p.deregister = nil
	}
	if err := p.am.unmap(); err != nil {
		return err
	}
	p.mu.Lock()
	p.unmapped = true
	p.mu.Unlock()
	return nil
}

func (p *Pool) leakErrorLocked() *LeakError {
	e := &LeakError{Leases: make([]LeakedLease, 0, p.st.leases)}
	for u := range p.alloc.units {
		order := p.alloc.allocated(int32(u))
		if order < 0 {
			continue
		}
		m := &p.meta[u]
		e.Leases = append(e.Leases, LeakedLease{
			Offset: u << p.geo.minShift,
			Size:   m.size,
			Class:  p.classBytes(order),
			Label:  m.label,
			Caller: callerString(m.pc),
		})
	}
	return e
}

package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/scatterkit/scatterkit/verbs"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

// directPart is one batch of work requests of an operation that a
// connection's driver posts and completes: the direct part of an
// operation, or the fallback of its gather part. Every request of a part
// carries the same ID (driver slot and generation), so completions are
// routed to their part in O(1) without per-request state.
type directPart struct {
	op  *Operation
	wrs []verbs.WorkRequest

	// Driver state, under driver.mu.
	slot        uint32
	posted      int
	outstanding int
	pending     bool // in the driver's pending queue (requests left to post)
	err         error
	first, last time.Time   // first post, last completion
	nextDone    *directPart // link in the driver's list of finished parts

	// The spans a mapped part copies (ranges plans, hybrid and fallback
	// parts), their offsets in the part's stream and its payload. Each
	// part owns its list: a hybrid's direct part may still be copying
	// when its gather part fails and the fallback part starts.
	spans     []planfmt.Range
	stream    []uint64
	spanBytes uint64
}

// driver polls one Conn's completions in batches, routes them to their
// parts and posts pending requests as the queue frees up, in FIFO order of
// parts. Its goroutine starts with the first part and runs until the Conn
// closes or the Engine does.
type driver struct {
	cs *connState

	mu       sync.Mutex
	parts    []*directPart // by slot
	gens     []uint32
	free     []uint32
	pending  []*directPart
	head     int
	inflight int
	started  bool
	dead     error
	finished *directPart // parts to report once the lock is dropped
	comps    []verbs.Completion
}

func (d *driver) init(cs *connState) { d.cs = cs }

func (d *driver) isDead() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dead != nil
}

// reserve assigns p a slot and returns the ID its requests carry.
func (d *driver) reserve(p *directPart) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var s uint32
	if n := len(d.free); n > 0 {
		s = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		s = uint32(len(d.parts))
		d.parts = append(d.parts, nil)
		d.gens = append(d.gens, 0)
	}
	d.gens[s]++
	// Reset the part under the lock: once it is in d.parts, kill may look
	// at it, and it must see a part with nothing in flight.
	p.posted, p.outstanding, p.err, p.pending = 0, 0, nil, false
	p.first, p.last = time.Time{}, time.Time{}
	d.parts[s] = p
	p.slot = s
	return uint64(s)<<32 | uint64(d.gens[s])
}

// release returns an unsubmitted part's slot.
func (d *driver) release(p *directPart) {
	d.mu.Lock()
	d.parts[p.slot] = nil
	d.free = append(d.free, p.slot)
	d.mu.Unlock()
}

// submit queues p (its requests carry the ID reserve returned) and posts
// what the queue takes now, on the caller's goroutine.
func (d *driver) submit(p *directPart) {
	d.mu.Lock()
	if d.dead != nil {
		p.err = d.dead
		d.finish(p)
	} else {
		p.pending = true
		d.pending = append(d.pending, p)
		d.pump()
		if !d.started {
			d.started = true
			e := d.cs.e
			e.wg.Add(1)
			go d.loop(e.ctx)
		}
	}
	fin := d.takeFinished()
	d.mu.Unlock()
	d.report(fin)
}

// pump posts pending requests while the queue takes them. Called with
// d.mu held.
func (d *driver) pump() {
	for d.head < len(d.pending) {
		p := d.pending[d.head]
		if p.err == nil {
			if err := p.op.ctx.Err(); err != nil {
				p.err = err
			}
		}
		if p.err == nil {
			if p.posted == 0 && p.first.IsZero() {
				p.first = time.Now() // (shm copies inside Post)
			}
			stage.Begin(p.op.id, stage.Post)
			n, err := d.cs.conn.Post(p.wrs[p.posted:])
			stage.End(p.op.id, stage.Post, uint64(n))
			if n > 0 {
				p.posted += n
				p.outstanding += n
				d.inflight += n
			}
			if p.posted < len(p.wrs) {
				if err == nil || errors.Is(err, verbs.ErrQueueFull) {
					break // the queue is full: completions will free it
				}
				p.err = err
			}
		}
		// p is fully posted or failed: it leaves the queue.
		p.pending = false
		d.pending[d.head] = nil
		d.head++
		if p.outstanding == 0 {
			d.finish(p)
		}
	}
	if d.head == len(d.pending) {
		d.pending, d.head = d.pending[:0], 0
	}
}

// finish retires p. Called with d.mu held.
func (d *driver) finish(p *directPart) {
	d.parts[p.slot] = nil
	d.free = append(d.free, p.slot)
	p.nextDone = d.finished
	d.finished = p
}

// takeFinished hands the finished parts to the caller. Called with d.mu
// held; the caller reports them after dropping it.
func (d *driver) takeFinished() *directPart {
	f := d.finished
	d.finished = nil
	return f
}

// report tells the operations of finished parts.
func (d *driver) report(fin *directPart) {
	for p := fin; p != nil; {
		next := p.nextDone
		p.nextDone = nil
		p.op.directDone(p)
		p = next
	}
}

// loop is the driver goroutine.
func (d *driver) loop(ctx context.Context) {
	defer d.cs.e.wg.Done()
	d.comps = make([]verbs.Completion, d.cs.e.cfg.PollBatch)
	for {
		d.mu.Lock()
		want := 1
		if d.head < len(d.pending) && d.inflight >= 8 {
			// The queue is full and requests wait: take completions in
			// batches so each post fills a good part of it.
			want = min(d.inflight/4, len(d.comps))
		}
		d.mu.Unlock()
		n, err := d.cs.conn.Wait(ctx, d.comps, want)
		d.mu.Lock()
		now := time.Now()
		for i := range d.comps[:n] {
			d.dispatch(&d.comps[i], now)
		}
		clear(d.comps[:n])
		exit := false
		if err != nil && n == 0 {
			if ctx.Err() != nil {
				exit = true // the engine closed: no operation is in flight
			} else if !errors.Is(err, ctx.Err()) {
				d.kill(err)
				exit = true
			}
		}
		if !exit {
			d.pump()
		}
		fin := d.takeFinished()
		d.mu.Unlock()
		d.report(fin)
		if exit {
			d.cs.e.forget(d.cs)
			return
		}
	}
}

// dispatch routes one completion to its part. Called with d.mu held.
func (d *driver) dispatch(c *verbs.Completion, now time.Time) {
	s, gen := c.ID>>32, uint32(c.ID)
	if s >= uint64(len(d.parts)) || d.parts[s] == nil || d.gens[s] != gen {
		return // not the engine's: the Conn was used by someone else too
	}
	p := d.parts[s]
	p.outstanding--
	d.inflight--
	p.last = now
	if c.Err != nil && p.err == nil {
		p.err = c.Err
	}
	if p.outstanding == 0 && !p.pending {
		d.finish(p)
	}
}

// kill fails every part after the Conn ended (every completion was
// returned before Wait reported the end). Called with d.mu held.
func (d *driver) kill(err error) {
	d.dead = err
	for _, p := range d.pending[d.head:] {
		if p.err == nil {
			p.err = err
		}
		p.pending = false
		if p.outstanding == 0 {
			d.finish(p)
		}
	}
	d.pending, d.head = d.pending[:0], 0
	for _, p := range d.parts {
		if p != nil && !p.pending && p.outstanding > 0 {
			// Completions lost with the connection: nothing more comes.
			if p.err == nil {
				p.err = err
			}
			d.inflight -= p.outstanding
			p.outstanding = 0
			d.finish(p)
		}
	}
}

// directPiece is the largest work request a direct transfer posts: a
// longer span is cut into pieces of this size, so that it spreads over
// the connection's lanes (tcp sends each request whole on one lane) and
// the transport's copy workers, as the cost model's S/B_net assumes,
// instead of riding one of them. At 100 Gbit/s a piece is 84 us of
// transfer against about a microsecond of per-request cost.
const directPiece = 1 << 20

// spanRequests appends one work request per span (split into pieces of at
// most directPiece bytes) for op's direction.
func (op *Operation) spanRequest(wrs []verbs.WorkRequest, id uint64, src, dst, n uint64) []verbs.WorkRequest {
	var wr verbs.WorkRequest
	wr.ID = id
	wr.Op = op.sop.Dir
	wr.LocalKey = op.sop.Local.Key()
	wr.RemoteKey = op.sop.Remote.Key
	for n > 0 {
		l := min(n, directPiece)
		if op.sop.Dir == verbs.OpRead {
			wr.LocalOff, wr.RemoteOff = op.sop.LocalOff+dst, op.sop.RemoteOff+src
		} else {
			wr.LocalOff, wr.RemoteOff = op.sop.LocalOff+src, op.sop.RemoteOff+dst
		}
		wr.Len = uint32(l)
		wrs = append(wrs, wr)
		src, dst, n = src+l, dst+l, n-l
	}
	return wrs
}

// rangeRequests appends the requests of a list of ranges.
func (op *Operation) rangeRequests(wrs []verbs.WorkRequest, id uint64, rs []planfmt.Range) []verbs.WorkRequest {
	for _, r := range rs {
		wrs = op.spanRequest(wrs, id, r.Src, r.Dst, r.Len)
	}
	return wrs
}

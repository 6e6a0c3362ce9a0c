package structobj

// The fence: the space of an expired reservation goes back to the
// allocator only once nothing its connection sent can land in it (see
// the package doc, Expiry and the fence).

import (
	"context"

	"github.com/scatterkit/scatterkit/verbs"
)

// quarantine is the space of a connection's ended reservations, kept
// out of the allocator until nothing the connection sent can land in it.
type quarantine struct {
	conn  uint64
	exts  []extent
	bytes uint64
}

// evictLocked ends connection conn, one of whose reservations expired: a
// WRITE it issued under that reservation may still be on its way (the
// client is frozen, slow or cut off), so its space must not be reused
// before the connection is fenced. Every reservation of conn ends
// (buried: a Commit or Abort of it still running is told it expired),
// their space is quarantined, and the connection is evicted
// (verbs.Segment.Evict). A goroutine gives the space back once the fence
// has closed and no handler call of conn is running (a gather service's
// WRITE command scatters into the region on its handler's goroutine), so
// neither o.mu nor the sweeper waits. A fence that never closes (an shm
// client that never lets go of its mapping) keeps its space quarantined
// until Close.
func (o *Owner) evictLocked(conn uint64) {
	q, waiting := o.quar[conn]
	if !waiting {
		q = &quarantine{conn: conn}
	}
	n := len(q.exts)
	for id, r := range o.res {
		if r.conn != conn {
			continue
		}
		delete(o.res, id)
		o.pending -= r.ext.len
		q.exts = append(q.exts, r.ext)
		q.bytes += r.ext.len
		o.quarBytes += r.ext.len
		o.buryLocked(id, conn)
		o.expiredRes.Add(1)
	}
	o.quarExts += len(q.exts) - n
	if waiting {
		return // evicted already: its fence is awaited
	}
	o.evictions.Add(1)
	o.quar[conn] = q
	o.fences.Add(1)
	go o.awaitFence(q, o.seg.Evict(conn))
}

// awaitFence gives q's space back once fence has closed and no handler
// call of q's connection is running; after Close, never.
func (o *Owner) awaitFence(q *quarantine, fence <-chan struct{}) {
	defer o.fences.Done()
	select {
	case <-fence:
	case <-o.stopFences:
		return
	}
	// No call of the connection arrives now: wait for those running.
	select {
	case <-o.callsDone(q.conn):
	case <-o.stopFences:
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed { // Close has dropped everything
		return
	}
	delete(o.quar, q.conn)
	for _, e := range q.exts {
		o.alloc.release(e)
	}
	o.quarBytes -= q.bytes
	o.quarExts -= len(q.exts)
}

// trackedSegment is the owner's segment with every handler registered
// through it counted while it runs, by connection.
type trackedSegment struct {
	verbs.Segment
	o *Owner
}

// Handle registers h wrapped so that its calls are counted.
func (s trackedSegment) Handle(method uint16, h verbs.Handler) {
	if h == nil {
		s.Segment.Handle(method, nil)
		return
	}
	o := s.o
	s.Segment.Handle(method, verbs.HandlerFunc(func(ctx context.Context, p verbs.Peer, req, resp []byte) ([]byte, error) {
		conn := p.ConnID()
		o.enterCall(conn)
		defer o.leaveCall(conn)
		return h.ServeCall(ctx, p, req, resp)
	}))
}

func (o *Owner) enterCall(conn uint64) {
	o.callsMu.Lock()
	o.running[conn]++
	o.callsMu.Unlock()
}

func (o *Owner) leaveCall(conn uint64) {
	o.callsMu.Lock()
	defer o.callsMu.Unlock()
	if n := o.running[conn] - 1; n > 0 {
		o.running[conn] = n
		return
	}
	delete(o.running, conn)
	if ch := o.drains[conn]; ch != nil {
		close(ch)
		delete(o.drains, conn)
	}
}

// callsDone returns a channel closed once no handler call of conn is
// running.
func (o *Owner) callsDone(conn uint64) <-chan struct{} {
	o.callsMu.Lock()
	defer o.callsMu.Unlock()
	if o.running[conn] == 0 {
		return closedChan
	}
	ch := o.drains[conn]
	if ch == nil {
		ch = make(chan struct{})
		o.drains[conn] = ch
	}
	return ch
}

// closedChan is a channel that is closed.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

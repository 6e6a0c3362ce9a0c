package structobj

// The fence: the space of an expired reservation goes back to the
// allocator only once nothing its connection sent can land in it (see
// the package doc, Expiry and the fence).

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
// has closed (which includes the connection's handler calls having
// returned: a gather service's WRITE command scatters into the region on
// its handler's goroutine), so neither o.mu nor the sweeper waits. A
// fence that never closes (an shm client that never lets go of its
// mapping) keeps its space quarantined until Close.
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

// awaitFence gives q's space back once fence has closed; after Close,
// never.
func (o *Owner) awaitFence(q *quarantine, fence <-chan struct{}) {
	defer o.fences.Done()
	select {
	case <-fence:
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

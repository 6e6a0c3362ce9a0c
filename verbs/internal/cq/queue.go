package cq

import (
	"context"
	"fmt"
	"sync"

	"github.com/scatterkit/scatterkit/verbs"
)

// Queue is a bounded completion queue. Depth credits exist; Reserve takes
// them for work requests about to be posted, Poll and Wait return them as
// completions are handed out, so work in flight plus completions not yet
// polled never exceed the depth and Push never overflows the ring. All
// methods are safe for concurrent use.
type Queue struct {
	mu      sync.Mutex
	ring    []verbs.Completion
	head    int // index of the oldest completion
	count   int // completions in the ring
	credits int // free credits
	err     error
	epoch   uint64          // bumped by Reopen
	stale   error           // what holders of an earlier epoch get: the error that closed it
	waiters []chan struct{} // waiting in Wait, signalled by Push, Close and Reopen
	spare   []chan struct{} // reusable waiter channels
}

// New returns a queue of depth credits (depth >= 1).
func New(depth int) *Queue {
	return &Queue{ring: make([]verbs.Completion, depth), credits: depth}
}

// Depth returns the number of credits.
func (q *Queue) Depth() int { return len(q.ring) }

// Epoch returns the queue's epoch: 0 when new, one more after each
// Reopen.
func (q *Queue) Epoch() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.epoch
}

// Reopen starts the next epoch of a queue that is closed and has nothing
// in flight, so one queue serves a run of short-lived users (a backend's
// pooled Peers): queued completions are dropped, every credit is free and
// Reserve works again. The epoch-checked methods (ReserveAt, PollAt,
// WaitAt) called with an earlier epoch fail from now on with the error
// the queue was closed with, and waiters of earlier epochs wake to see
// it. While the queue is open or work is in flight Reopen changes nothing
// and returns false.
func (q *Queue) Reopen() (uint64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil || q.inFlightLocked() != 0 {
		return q.epoch, false
	}
	q.dropLocked()
	q.head, q.count, q.credits = 0, 0, len(q.ring)
	q.stale, q.err = q.err, nil
	q.epoch++
	q.wakeLocked()
	return q.epoch, true
}

// dropLocked clears the queued completions (and their error references).
func (q *Queue) dropLocked() {
	first := min(q.count, len(q.ring)-q.head)
	clear(q.ring[q.head : q.head+first])
	clear(q.ring[:q.count-first])
}

// staleLocked reports whether a caller of epoch e (checked) holds an
// earlier epoch.
func (q *Queue) staleLocked(checked bool, e uint64) bool { return checked && e != q.epoch }

// staleErr is what a caller of another epoch gets (ErrClosed for an epoch
// never issued).
func (q *Queue) staleErr() error {
	if q.stale == nil {
		return verbs.ErrClosed
	}
	return q.stale
}

// Reserve takes up to n credits and returns how many it took. With none
// free it returns 0 and verbs.ErrQueueFull; after Close, 0 and the close
// error.
func (q *Queue) Reserve(n int) (int, error) { return q.reserve(false, 0, n) }

// ReserveAt is Reserve for a user of epoch e: once the queue has moved
// past e it returns 0 and the error that closed e.
func (q *Queue) ReserveAt(e uint64, n int) (int, error) { return q.reserve(true, e, n) }

func (q *Queue) reserve(checked bool, e uint64, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.staleLocked(checked, e) {
		return 0, q.staleErr()
	}
	if q.err != nil {
		return 0, q.err
	}
	if q.credits == 0 {
		return 0, verbs.ErrQueueFull
	}
	n = min(n, q.credits)
	q.credits -= n
	return n, nil
}

// Release returns n reserved credits that were not used.
func (q *Queue) Release(n int) {
	if n <= 0 {
		return
	}
	q.mu.Lock()
	q.credits += n
	if q.credits+q.count > len(q.ring) {
		q.mu.Unlock()
		panic("cq: released more credits than reserved")
	}
	q.wakeLocked()
	q.mu.Unlock()
}

// Push publishes completions of reserved work requests. It never blocks.
// Completions pushed after Close are still delivered (a backend flushes
// its outstanding requests as StatusClosed completions that way).
func (q *Queue) Push(cs []verbs.Completion) {
	if len(cs) == 0 {
		return
	}
	q.mu.Lock()
	if q.count+len(cs)+q.credits > len(q.ring) {
		q.mu.Unlock()
		panic(fmt.Sprintf("cq: push of %d overflows (count %d, credits %d, depth %d)", len(cs), q.count, q.credits, len(q.ring)))
	}
	tail := (q.head + q.count) % len(q.ring)
	n := copy(q.ring[tail:], cs)
	copy(q.ring, cs[n:])
	q.count += len(cs)
	q.wakeLocked()
	q.mu.Unlock()
}

func (q *Queue) wakeLocked() {
	for i, w := range q.waiters {
		select {
		case w <- struct{}{}:
		default:
		}
		q.waiters[i] = nil
	}
	q.waiters = q.waiters[:0]
}

// take moves up to len(out) completions into out and returns their
// credits.
func (q *Queue) takeLocked(out []verbs.Completion) int {
	n := min(len(out), q.count)
	first := min(n, len(q.ring)-q.head)
	copy(out, q.ring[q.head:q.head+first])
	copy(out[first:n], q.ring[:n-first])
	clear(q.ring[q.head : q.head+first]) // drop error references
	clear(q.ring[:n-first])
	q.head = (q.head + n) % len(q.ring)
	q.count -= n
	q.credits += n
	return n
}

// Poll returns available completions without blocking; after Close, once
// nothing is queued or in flight, it returns 0 and the close error.
func (q *Queue) Poll(out []verbs.Completion) (int, error) { return q.poll(false, 0, out) }

// PollAt is Poll for a user of epoch e: once the queue has moved past e
// it returns 0 and the error that closed e.
func (q *Queue) PollAt(e uint64, out []verbs.Completion) (int, error) { return q.poll(true, e, out) }

func (q *Queue) poll(checked bool, e uint64, out []verbs.Completion) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.staleLocked(checked, e) {
		return 0, q.staleErr()
	}
	if q.count == 0 && q.err != nil && q.inFlightLocked() == 0 {
		return 0, q.err
	}
	return q.takeLocked(out), nil
}

// Wait blocks until min (clamped to [1, len(out)]) completions are
// available, the queue is closed with nothing in flight (then it returns
// what is left, or 0 and the close error), or ctx ends (0 and ctx.Err()).
func (q *Queue) Wait(ctx context.Context, out []verbs.Completion, min int) (int, error) {
	return q.wait(ctx, false, 0, out, min)
}

// WaitAt is Wait for a user of epoch e: once the queue has moved past e
// (also while it waits) it returns 0 and the error that closed e.
func (q *Queue) WaitAt(ctx context.Context, e uint64, out []verbs.Completion, min int) (int, error) {
	return q.wait(ctx, true, e, out, min)
}

func (q *Queue) wait(ctx context.Context, checked bool, e uint64, out []verbs.Completion, min int) (int, error) {
	if len(out) == 0 {
		return 0, fmt.Errorf("cq: wait with an empty slice: %w", verbs.ErrInvalid)
	}
	min = max(1, min)
	if min > len(out) {
		min = len(out)
	}
	q.mu.Lock()
	for {
		if q.staleLocked(checked, e) {
			err := q.staleErr()
			q.mu.Unlock()
			return 0, err
		}
		ended := q.err != nil && q.inFlightLocked() == 0
		if q.count >= min || (ended && q.count > 0) {
			n := q.takeLocked(out)
			q.mu.Unlock()
			return n, nil
		}
		if ended {
			err := q.err
			q.mu.Unlock()
			return 0, err
		}
		if err := ctx.Err(); err != nil {
			q.mu.Unlock()
			return 0, err
		}
		w := q.waiterLocked()
		q.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
		}
		q.mu.Lock()
		q.dropWaiterLocked(w)
	}
}

// Idle blocks until no credit is held by work in flight (every reserved
// credit has been pushed as a completion or released), or ctx ends.
func (q *Queue) Idle(ctx context.Context) error {
	q.mu.Lock()
	for q.inFlightLocked() > 0 {
		if err := ctx.Err(); err != nil {
			q.mu.Unlock()
			return err
		}
		w := q.waiterLocked()
		q.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
		}
		q.mu.Lock()
		q.dropWaiterLocked(w)
	}
	q.mu.Unlock()
	return nil
}

// InFlight returns the credits held by work not yet completed.
func (q *Queue) InFlight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.inFlightLocked()
}

func (q *Queue) inFlightLocked() int { return len(q.ring) - q.credits - q.count }

func (q *Queue) waiterLocked() chan struct{} {
	var w chan struct{}
	if n := len(q.spare); n > 0 {
		w = q.spare[n-1]
		q.spare = q.spare[:n-1]
	} else {
		w = make(chan struct{}, 1)
	}
	q.waiters = append(q.waiters, w)
	return w
}

// dropWaiterLocked unregisters w (if a wake has not already) and keeps it
// for reuse, drained.
func (q *Queue) dropWaiterLocked(w chan struct{}) {
	for i, o := range q.waiters {
		if o == w {
			last := len(q.waiters) - 1
			q.waiters[i] = q.waiters[last]
			q.waiters[last] = nil
			q.waiters = q.waiters[:last]
			break
		}
	}
	select {
	case <-w:
	default:
	}
	q.spare = append(q.spare, w)
}

// Close makes Reserve fail with err from now on and wakes every waiter.
// Work still in flight must be completed by the backend (Push of
// StatusClosed completions); Poll and Wait return every completion, and
// report err only once nothing is queued or in flight. The first Close
// wins.
func (q *Queue) Close(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	q.wakeLocked()
	q.mu.Unlock()
}

// Err returns the close error, or nil while open.
func (q *Queue) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

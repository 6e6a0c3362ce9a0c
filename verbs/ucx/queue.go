//go:build ucx

package ucx

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/cq"
	"github.com/scatterkit/scatterkit/verbs/internal/peers"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
	"github.com/scatterkit/scatterkit/verbs/ucx/internal/ucp"
)

// queue is a verbs.Queue over a session's endpoint: Post checks every
// request against this side's registrations and the peer's regions (a
// one-sided operation is not seen by the peer's code, so the checks the
// other backends make when serving are made here), then hands the
// batch to the progress loop, which posts it in one call (ucp_get_nbx /
// ucp_put_nbx each) and collects its completions as the worker
// progresses. A batch with WRITEs is flushed: its completions are
// returned once the peer has the bytes, as on the other backends.
type queue struct {
	t     *Transport
	s     *session
	cq    *cq.Queue
	infos []verbs.RegionInfo

	postMu  sync.Mutex
	ops     []op
	comps   []verbs.Completion
	pending []op          // the ops run launches (under postMu)
	done    chan struct{} // the loop's signal that run has (under postMu)

	// The loop's thread only.
	flights []*flight
	spare   []*flight
}

// op is one checked request of a Post.
type op struct {
	id    uint64
	put   bool
	local unsafe.Pointer
	n     int
	raddr uint64
	key   *ucp.RKey
}

// flight is one posted batch: its requests' ids, and the flush that
// completes its puts.
type flight struct {
	b        *ucp.Batch
	ids      []uint64
	puts     bool
	flush    ucp.Request
	flushing bool
	failed   error // the flush's failure, or the batch could not be posted
	comps    []verbs.Completion
}

var _ peers.Poster = (*queue)(nil)

func newQueue(t *Transport, s *session, depth int) *queue {
	return &queue{t: t, s: s, cq: cq.New(depth), infos: s.remote.infos(), done: make(chan struct{}, 1)}
}

// run launches the pending ops (the loop's job of a Post).
func (q *queue) run() { q.launch(q.pending) }

// Post implements verbs.Queue.
func (q *queue) Post(wrs []verbs.WorkRequest) (int, error) { return q.post(wrs, false, 0) }

// PostAt implements peers.Poster.
func (q *queue) PostAt(wrs []verbs.WorkRequest, epoch uint64) (int, error) {
	return q.post(wrs, true, epoch)
}

// CQ implements peers.Poster.
func (q *queue) CQ() *cq.Queue { return q.cq }

// Poll implements verbs.Queue.
func (q *queue) Poll(out []verbs.Completion) (int, error) { return q.cq.Poll(out) }

// Wait implements verbs.Queue.
func (q *queue) Wait(ctx context.Context, out []verbs.Completion, min int) (int, error) {
	return q.cq.Wait(ctx, out, min)
}

// Remote implements verbs.Queue.
func (q *queue) Remote() []verbs.RegionInfo { return q.infos }

func (q *queue) post(wrs []verbs.WorkRequest, checked bool, epoch uint64) (int, error) {
	if len(wrs) == 0 {
		return 0, nil
	}
	q.postMu.Lock()
	defer q.postMu.Unlock()
	n, err := peers.Reserve("ucx", q.cq, len(wrs), checked, epoch)
	if n == 0 {
		return 0, err
	}
	wrs = wrs[:n]
	reg := q.t.reg
	reg.RLock()
	var lcur regtab.Cursor
	rcur := 0
	ops, comps := q.ops[:0], q.comps[:0]
	for i := range wrs {
		wr := &wrs[i]
		var need verbs.Access
		switch wr.Op {
		case verbs.OpRead:
			need = verbs.AccessRemoteRead
		case verbs.OpWrite:
			need = verbs.AccessRemoteWrite
		default:
			reg.RUnlock()
			q.cq.Release(n)
			return 0, &verbs.PostError{Index: i, ID: wr.ID, Err: fmt.Errorf("op %d: %w", wr.Op, verbs.ErrInvalid)}
		}
		local, err := reg.Local(&lcur, wr.LocalKey, wr.LocalOff, wr.Len)
		if err != nil {
			reg.RUnlock()
			q.cq.Release(n)
			return 0, &verbs.PostError{Index: i, ID: wr.ID, Err: err}
		}
		raddr, key, st := q.s.remote.resolve(&rcur, wr.RemoteKey, wr.RemoteOff, wr.Len, need)
		if st != verbs.StatusOK {
			comps = append(comps, verbs.Completion{ID: wr.ID, Status: st, Err: &verbs.RemoteError{ID: wr.ID, Status: st}})
			continue
		}
		if len(local) == 0 {
			comps = append(comps, verbs.Completion{ID: wr.ID}) // nothing to move
			continue
		}
		ops = append(ops, op{id: wr.ID, put: wr.Op == verbs.OpWrite, local: unsafe.Pointer(&local[0]), n: len(local), raddr: raddr, key: key})
	}
	reg.RUnlock()
	q.cq.Push(comps)
	if len(ops) > 0 {
		q.pending = ops
		if err := q.t.lp.submit(q, q.done); err != nil {
			q.closedAll(ops, err)
		}
		q.pending = nil
	}
	clear(ops)
	clear(comps)
	q.ops, q.comps = ops[:0], comps[:0]
	return n, nil
}

// closedAll completes ops with StatusClosed (the session or the loop
// ended before they were posted).
func (q *queue) closedAll(ops []op, cause error) {
	cs := make([]verbs.Completion, len(ops))
	for i, o := range ops {
		cs[i] = verbs.Completion{ID: o.id, Status: verbs.StatusClosed, Err: closedErr(cause)}
	}
	q.cq.Push(cs)
}

// launch posts ops as one batch (on the loop's thread).
func (q *queue) launch(ops []op) {
	if q.s.gone {
		q.closedAll(ops, q.s.goneErr)
		return
	}
	f := q.takeFlight(len(ops))
	for _, o := range ops {
		f.b.Add(ucp.OpGet+ucp.Op(boolInt(o.put)), q.s.ep, o.local, o.n, o.raddr, o.key)
		f.ids = append(f.ids, o.id)
		f.puts = f.puts || o.put
	}
	f.b.Post()
	if f.puts {
		// The puts complete once the peer has their bytes: a flush of the
		// endpoint (ordered after them) says so.
		r, err := q.s.ep.Flush()
		f.flush, f.failed = r, err
		f.flushing = err == nil && r.Pending()
	}
	if !q.collectFlight(f) {
		q.flights = append(q.flights, f)
		q.t.active[q] = struct{}{}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// takeFlight returns an empty flight whose batch holds n requests.
func (q *queue) takeFlight(n int) *flight {
	for i, f := range q.spare {
		if f.b.Cap() >= n {
			q.spare[i] = q.spare[len(q.spare)-1]
			q.spare = q.spare[:len(q.spare)-1]
			return f
		}
	}
	c := 64
	for c < n {
		c *= 2
	}
	return &flight{b: ucp.NewBatch(c)}
}

// collect gathers the finished flights' completions (on the loop's
// thread, from Transport.progress); true while any is in flight.
func (q *queue) collect() bool {
	keep := q.flights[:0]
	for _, f := range q.flights {
		if !q.collectFlight(f) {
			keep = append(keep, f)
		}
	}
	clear(q.flights[len(keep):])
	q.flights = keep
	return len(keep) > 0
}

// collectFlight completes f if every request and its flush are done, and
// reports whether it did.
func (q *queue) collectFlight(f *flight) bool {
	f.b.Poll(q.t.lp.w, 0)
	if f.flushing {
		done, err := q.t.lp.w.Check(&f.flush)
		if !done {
			return false
		}
		f.flushing, f.failed = false, err
	}
	for i := range f.ids {
		if done, _ := f.b.Status(i); !done {
			return false
		}
	}
	var broken error
	for i, id := range f.ids {
		_, err := f.b.Status(i)
		if err == nil && f.puts && f.failed != nil {
			err = f.failed
		}
		c := verbs.Completion{ID: id}
		if err != nil {
			// A failed operation is a broken endpoint (the peer is gone or
			// unreachable): the request fails as closed, and so does the
			// session.
			c.Status, c.Err = verbs.StatusClosed, closedErr(err)
			broken = err
		}
		f.comps = append(f.comps, c)
	}
	q.cq.Push(f.comps)
	clear(f.comps)
	f.comps, f.ids = f.comps[:0], f.ids[:0]
	f.puts, f.failed = false, nil
	if !f.b.Reset() {
		panic("ucx: a finished batch did not reset")
	}
	q.spare = append(q.spare, f)
	if broken != nil && !q.s.gone {
		go q.s.Fail(fmt.Errorf("ucx: operation failed: %w", broken))
	}
	return true
}

// inFlight reports whether q has flights (on the loop's thread).
func (q *queue) inFlight() bool { return len(q.flights) > 0 }

// freeBatches releases q's spare batches (on the loop's thread, once
// nothing is in flight).
func (q *queue) freeBatches() {
	for _, f := range q.spare {
		f.b.Free()
	}
	q.spare = nil
}

func closedErr(cause error) error { return peers.ClosedErr("ucx", cause) }

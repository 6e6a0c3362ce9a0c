//go:build linux

package shm

import (
	"context"
	"fmt"
	"sync"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/cq"
	"github.com/scatterkit/scatterkit/verbs/internal/peers"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

// mapping holds the other side's regions mapped into this process. Posts
// copy under RLock; the session unmaps under Lock once it has ended.
type mapping struct {
	mu    sync.RWMutex
	gone  error // set when unmapped: Post fails with it
	maps  [][]byte
	table *regtab.Table
	// visible indexes the listed regions (never the hidden probe) by key
	// for verbs.Mapper.
	visible map[verbs.Key]mappedRegion
}

// mappedRegion is one listed region of the other side as mapped here.
// mem is read-write exactly when access has AccessRemoteWrite.
type mappedRegion struct {
	mem    []byte
	access verbs.Access
}

func (m *mapping) unmap(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone != nil {
		return
	}
	m.gone = err
	unmapAll(m.maps)
	m.maps, m.visible = nil, nil
}

// copyOp is one validated copy of a batch.
type copyOp struct{ dst, src []byte }

// queue is a verbs.Queue over shared memory: Post validates every request
// and performs the copies at once, so completions are queued before it
// returns and nothing is ever in flight.
type queue struct {
	t     *Transport
	m     *mapping
	cq    *cq.Queue
	infos []verbs.RegionInfo

	postMu sync.Mutex
	ops    []copyOp
	comps  []verbs.Completion
}

func newQueue(t *Transport, m *mapping, depth int) *queue {
	return &queue{t: t, m: m, cq: cq.New(depth), infos: m.table.Infos()}
}

var _ peers.Poster = (*queue)(nil)

// Post implements verbs.Queue.
func (q *queue) Post(wrs []verbs.WorkRequest) (int, error) { return q.post(wrs, false, 0) }

// PostAt implements peers.Poster.
func (q *queue) PostAt(wrs []verbs.WorkRequest, epoch uint64) (int, error) {
	return q.post(wrs, true, epoch)
}

// CQ implements peers.Poster.
func (q *queue) CQ() *cq.Queue { return q.cq }

// post is Post; checked (a Peer's) posts only while the queue is still at
// epoch.
func (q *queue) post(wrs []verbs.WorkRequest, checked bool, epoch uint64) (int, error) {
	if len(wrs) == 0 {
		return 0, nil
	}
	q.postMu.Lock()
	defer q.postMu.Unlock()
	n, err := peers.Reserve("shm", q.cq, len(wrs), checked, epoch)
	if n == 0 {
		return 0, err
	}
	wrs = wrs[:n]
	q.m.mu.RLock()
	defer q.m.mu.RUnlock()
	if q.m.gone != nil {
		q.cq.Release(n)
		return 0, fmt.Errorf("shm: post: %w", q.m.gone)
	}
	reg := q.t.reg
	reg.RLock()
	defer reg.RUnlock()
	var lcur, rcur regtab.Cursor
	ops, comps := q.ops[:0], q.comps[:0]
	var total int
	for i := range wrs {
		wr := &wrs[i]
		var need verbs.Access
		switch wr.Op {
		case verbs.OpRead:
			need = verbs.AccessRemoteRead
		case verbs.OpWrite:
			need = verbs.AccessRemoteWrite
		default:
			q.cq.Release(n)
			return 0, &verbs.PostError{Index: i, ID: wr.ID, Err: fmt.Errorf("op %d: %w", wr.Op, verbs.ErrInvalid)}
		}
		local, err := reg.Local(&lcur, wr.LocalKey, wr.LocalOff, wr.Len)
		if err != nil {
			q.cq.Release(n)
			return 0, &verbs.PostError{Index: i, ID: wr.ID, Err: err}
		}
		remote, st := q.m.table.Resolve(&rcur, wr.RemoteKey, wr.RemoteOff, wr.Len, need)
		c := verbs.Completion{ID: wr.ID, Status: st}
		if st != verbs.StatusOK {
			c.Err = &verbs.RemoteError{ID: wr.ID, Status: st}
		} else if wr.Op == verbs.OpRead {
			ops = append(ops, copyOp{dst: local, src: remote})
			total += len(local)
		} else {
			ops = append(ops, copyOp{dst: remote, src: local})
			total += len(local)
		}
		comps = append(comps, c)
	}
	q.copy(ops, total)
	q.cq.Push(comps)
	clear(ops)
	clear(comps)
	q.ops, q.comps = ops[:0], comps[:0]
	return n, nil
}

// copy performs ops, split by bytes among up to CopyWorkers goroutines
// when the batch is large.
func (q *queue) copy(ops []copyOp, total int) {
	workers := q.t.cfg.CopyWorkers
	if workers <= 1 || total < q.t.cfg.ParallelMin || len(ops) < 2 {
		copyRun(ops)
		return
	}
	workers = min(workers, len(ops), total/(q.t.cfg.ParallelMin/workers+1)+1)
	per := total/workers + 1
	var wg sync.WaitGroup
	start, acc := 0, 0
	for i := range ops {
		acc += len(ops[i].dst)
		if acc >= per && i+1 < len(ops) {
			run := ops[start : i+1]
			wg.Go(func() { copyRun(run) })
			start, acc = i+1, 0
		}
	}
	copyRun(ops[start:])
	wg.Wait()
}

func copyRun(ops []copyOp) {
	for _, o := range ops {
		copy(o.dst, o.src)
	}
}

// Poll implements verbs.Queue.
func (q *queue) Poll(out []verbs.Completion) (int, error) { return q.cq.Poll(out) }

// Wait implements verbs.Queue.
func (q *queue) Wait(ctx context.Context, out []verbs.Completion, min int) (int, error) {
	return q.cq.Wait(ctx, out, min)
}

// Remote implements verbs.Queue.
func (q *queue) Remote() []verbs.RegionInfo { return q.infos }

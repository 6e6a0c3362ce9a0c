package tcp

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/cq"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/peers"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

// Frame IDs of READ/WRITE requests name the slot that waits for the
// answer: queue (24 bits) | generation (16 bits) | slot index (24 bits).
// The requester's queue is 0; each owner Peer has its own non-zero queue.
const (
	idSlotBits = 24
	idGenBits  = 16
	maxQueueID = 1<<24 - 1
)

func makeID(q uint32, gen uint16, idx uint32) uint64 {
	return uint64(q)<<(idSlotBits+idGenBits) | uint64(gen)<<idSlotBits | uint64(idx)
}

func splitID(id uint64) (q uint32, gen uint16, idx uint32) {
	return uint32(id >> (idSlotBits + idGenBits)), uint16(id >> idSlotBits), uint32(id & (1<<idSlotBits - 1))
}

// slot is one outstanding work request. The poster fills it and then
// publishes state (busy, generation); the lane reader that gets the answer
// claims it by swapping state back to idle, so a duplicate or stale answer
// is detected.
type slot struct {
	state atomic.Uint32 // gen<<1 | busy
	gen   uint16
	op    verbs.Op
	id    uint64
	mem   []byte // local side: READ destination, WRITE source
}

// initiator posts work requests on a session's lanes and collects their
// answers into a completion queue. The requester's Conn has one; on the
// owner each running call's Peer has its own, taken from the session's
// idle ones (see peer).
type initiator struct {
	s      *session
	qid    uint32
	cq     *cq.Queue
	remote []verbs.RegionInfo

	postMu sync.Mutex // serializes Post; held by flush
	slots  []slot
	batch  []uint32 // scratch: slot indices of the batch being posted
	next   int      // lane to start the next batch on
	ended  bool     // flushed: slots may not be posted again

	freeMu sync.Mutex
	free   []uint32
}

func newInitiator(s *session, qid uint32, depth int, remote []verbs.RegionInfo) *initiator {
	in := &initiator{s: s, qid: qid, cq: cq.New(depth), remote: remote,
		slots: make([]slot, depth), batch: make([]uint32, 0, depth), free: make([]uint32, depth)}
	for i := range in.free {
		in.free[i] = uint32(depth - 1 - i)
	}
	return in
}

var _ peers.Poster = (*initiator)(nil)

// Post implements verbs.Queue.
func (in *initiator) Post(wrs []verbs.WorkRequest) (int, error) { return in.post(wrs, false, 0) }

// PostAt implements peers.Poster.
func (in *initiator) PostAt(wrs []verbs.WorkRequest, epoch uint64) (int, error) {
	return in.post(wrs, true, epoch)
}

// CQ implements peers.Poster.
func (in *initiator) CQ() *cq.Queue { return in.cq }

// post is Post; checked (a Peer's) posts only while the queue is still at
// epoch.
func (in *initiator) post(wrs []verbs.WorkRequest, checked bool, epoch uint64) (int, error) {
	if len(wrs) == 0 {
		return 0, nil
	}
	in.postMu.Lock()
	defer in.postMu.Unlock()
	n, err := peers.Reserve("tcp", in.cq, len(wrs), checked, epoch)
	if n == 0 {
		return 0, err
	}
	wrs = wrs[:n]
	in.freeMu.Lock()
	in.batch = append(in.batch[:0], in.free[len(in.free)-n:]...)
	in.free = in.free[:len(in.free)-n]
	in.freeMu.Unlock()

	reg := in.s.t.reg
	reg.RLock()
	var cur regtab.Cursor
	var total uint64
	for i := range wrs {
		wr := &wrs[i]
		var err error
		var mem []byte
		if wr.Op != verbs.OpRead && wr.Op != verbs.OpWrite {
			err = fmt.Errorf("op %d: %w", wr.Op, verbs.ErrInvalid)
		} else {
			mem, err = reg.Local(&cur, wr.LocalKey, wr.LocalOff, wr.Len)
		}
		if err != nil {
			reg.RUnlock()
			in.freeMu.Lock()
			in.free = append(in.free, in.batch...)
			in.freeMu.Unlock()
			in.cq.Release(n)
			return 0, &verbs.PostError{Index: i, ID: wr.ID, Err: err}
		}
		sl := &in.slots[in.batch[i]]
		sl.op, sl.id, sl.mem = wr.Op, wr.ID, mem
		total += uint64(wr.Len)
	}
	reg.RUnlock()

	lanes := in.s.postLanes()
	if len(lanes) == 0 || in.ended {
		// The session is closing: flush will complete these slots.
		in.markBusy(wrs)
		return n, nil
	}
	// Spread the batch over the lanes by bytes, in contiguous runs, starting
	// with a different lane each batch.
	per := total/uint64(len(lanes)) + 1
	inline := in.s.t.cfg.InlineMax
	i := 0
	for k := 0; k < len(lanes) && i < len(wrs); k++ {
		l := lanes[(in.next+k)%len(lanes)]
		last := k == len(lanes)-1
		start := i
		var bytes uint64
		for ; i < len(wrs) && (last || bytes < per); i++ {
			bytes += uint64(wrs[i].Len) + frame.HeaderSize
		}
		run := wrs[start:i]
		idx := in.batch[start:i]
		for j := range run {
			sl := &in.slots[idx[j]]
			sl.gen++
			sl.state.Store(uint32(sl.gen)<<1 | 1)
		}
		// On a closed lane nothing is sent; flush completes the slots.
		if directPost {
			b := l.sq.get()
			in.encode(b, run, idx, inline)
			if err := l.sq.submitDirect(b, l.nc); err != nil {
				_ = l.nc.Close() // the lane's reader fails the session
			}
		} else {
			l.sq.appendFrames(func(b *batch) { in.encode(b, run, idx, inline) })
		}
	}
	in.next = (in.next + 1) % len(lanes)
	return n, nil
}

// encode appends the frames of a run of posted requests.
func (in *initiator) encode(b *batch, run []verbs.WorkRequest, idx []uint32, inline int) {
	for j := range run {
		wr := &run[j]
		sl := &in.slots[idx[j]]
		h := frame.Header{ID: makeID(in.qid, sl.gen, idx[j]), Key: uint64(wr.RemoteKey), Off: wr.RemoteOff, Len: wr.Len}
		if wr.Op == verbs.OpRead {
			h.Type = frame.TypeRead
			b.header(&h)
		} else {
			h.Type = frame.TypeWrite
			b.frame(&h, sl.mem, inline)
		}
	}
}

// markBusy publishes the batch's slots without sending anything.
func (in *initiator) markBusy(wrs []verbs.WorkRequest) {
	for i := range wrs {
		sl := &in.slots[in.batch[i]]
		sl.gen++
		sl.state.Store(uint32(sl.gen)<<1 | 1)
	}
}

// Poll implements verbs.Queue.
func (in *initiator) Poll(out []verbs.Completion) (int, error) { return in.cq.Poll(out) }

// Wait implements verbs.Queue.
func (in *initiator) Wait(ctx context.Context, out []verbs.Completion, min int) (int, error) {
	return in.cq.Wait(ctx, out, min)
}

// Remote implements verbs.Queue.
func (in *initiator) Remote() []verbs.RegionInfo { return in.remote }

// lookup finds the busy slot an answer (of generation gen, for op) is
// for; the caller claims it with a compare-and-swap of its state.
func (in *initiator) lookup(gen uint16, idx uint32, op verbs.Op) (*slot, bool) {
	if int(idx) >= len(in.slots) {
		return nil, false
	}
	sl := &in.slots[idx]
	if sl.state.Load() != uint32(gen)<<1|1 || sl.op != op {
		return nil, false
	}
	return sl, true
}

// release returns answered slots to the free list.
func (in *initiator) release(idx []uint32) {
	in.freeMu.Lock()
	in.free = append(in.free, idx...)
	in.freeMu.Unlock()
}

// flush ends the initiator: Post fails from now on, and every request
// still outstanding completes with StatusClosed. It runs once the lanes'
// readers have stopped.
func (in *initiator) flush(cause error) {
	in.cq.Close(closedErr(cause))
	in.postMu.Lock()
	defer in.postMu.Unlock()
	in.ended = true
	var cs []verbs.Completion
	var idx []uint32
	detail := cause
	if detail == verbs.ErrClosed {
		detail = nil
	}
	for i := range in.slots {
		sl := &in.slots[i]
		st := sl.state.Load()
		if st&1 == 0 {
			continue
		}
		sl.state.Store(st &^ 1)
		sl.mem = nil
		cs = append(cs, verbs.Completion{ID: sl.id, Status: verbs.StatusClosed,
			Err: &verbs.RemoteError{ID: sl.id, Status: verbs.StatusClosed, Cause: detail}})
		idx = append(idx, uint32(i))
	}
	in.release(idx)
	in.cq.Push(cs)
}

// closedErr is the error a closed queue reports: ErrClosed, with the
// cause when there is one.
func closedErr(cause error) error { return peers.ClosedErr("tcp", cause) }

package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/calls"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/listener"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

// session is one requester-owner connection (all its lanes), seen from
// either end. Both ends serve READ/WRITE frames against their own table
// (the owner: its exports; the requester: its exposures) and collect
// DATA/ACK answers for their initiators; the owner also runs control
// calls, and the requester waits for their replies.
type session struct {
	t      *Transport
	seg    *segment // owner side only
	owner  bool
	id     uint64
	token  uint64
	peer   string // remote address, for errors
	serve  *regtab.Table
	remote []verbs.RegionInfo // the other side's regions (owner: the requester's exposures)

	peerDepth int    // owner: queue depth of each Peer
	joined    []bool // owner: lanes that have joined (under mu)

	ctx    context.Context // ends when the session fails (handler contexts)
	cancel context.CancelFunc

	mu     sync.Mutex
	lanes  []*lane // attached lanes, in lane order where known
	closed bool
	cause  error
	queues map[uint32]*initiator // owner: Peer initiators by queue id (running and idle)
	nextQ  uint32
	params verbs.LinkParams // owner: as measured by the requester
	pinned []*regtab.Entry  // requester: exposures to unpin at the end

	calls *calls.Table  // requester: calls and pings awaiting answers
	main  *initiator    // requester: the Conn's queue
	sem   chan struct{} // owner: bounds running calls
	admit chan struct{} // owner: bounds outstanding calls

	callBytes listener.CallBytes // owner: bytes of call requests held
	laneShare atomic.Int64       // owner: lanes taken from the segment's MaxSegmentLanes
	checked   bool               // frames after the handshake carry checksums

	peerState // owner: pooled Peers, call jobs and handler workers

	wg     sync.WaitGroup // lane goroutines
	hwg    sync.WaitGroup // handler goroutines
	fenced chan struct{}  // closed once the lanes stopped and the handlers returned (see Segment.Evict)
	dead   chan struct{}  // closed once finalized
}

func newSession(t *Transport, owner bool, peer string) *session {
	s := &session{t: t, owner: owner, peer: peer, dead: make(chan struct{}), fenced: make(chan struct{}),
		queues: make(map[uint32]*initiator), calls: calls.NewTable()}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// lane is one TCP connection of a session with its reader and writer
// goroutines.
type lane struct {
	s   *session
	idx int
	nc  *net.TCPConn
	rd  *frame.Reader
	sq  sendq

	// Reader-goroutine state.
	out    *batch // responses not yet submitted
	cur    regtab.Cursor
	pendIn *initiator // initiator of the pending completions
	comps  []verbs.Completion
	freed  []uint32
}

const completionBatch = 1024

// attach adds a lane and starts its goroutines; false if the session has
// ended.
func (s *session) attach(l *lane) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	l.s = s
	l.sq.init()
	l.sq.checked = s.checked
	l.rd.Checked = s.checked // the handshake was checked either way
	l.comps = make([]verbs.Completion, 0, completionBatch)
	l.freed = make([]uint32, 0, completionBatch)
	s.lanes = append(s.lanes, l)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		err := l.sq.writeLoop(l.nc)
		s.fail(err)
	}()
	go func() {
		defer s.wg.Done()
		err := l.readLoop()
		var pe *verbs.ProtocolError
		if errors.As(err, &pe) && pe.Peer == "" {
			pe.Peer = s.peer
		}
		s.fail(err)
	}()
	return true
}

// postLanes returns the lanes to post on (nil once the session ended).
func (s *session) postLanes() []*lane {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	return s.lanes
}

// fail ends the session (once): it closes every lane, cancels handler
// contexts and finalizes in the background.
func (s *session) fail(err error) {
	if err == nil {
		err = verbs.ErrClosed
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.cause = err
	lanes := s.lanes
	s.mu.Unlock()
	s.cancel()
	for _, l := range lanes {
		_ = l.nc.Close()
		l.sq.close()
	}
	if s.owner && s.seg != nil && listener.Abnormal(err) {
		s.seg.report(err)
	}
	go s.finalize()
}

// finalize runs after fail: once the lane goroutines have stopped it
// completes every outstanding request and call with ErrClosed.
func (s *session) finalize() {
	s.wg.Wait() // no lane reads into, or sends from, local memory now
	s.mu.Lock()
	cause := s.cause
	queues := make([]*initiator, 0, len(s.queues)+1)
	for _, in := range s.queues {
		queues = append(queues, in)
	}
	pinned := s.pinned
	s.pinned = nil
	s.mu.Unlock()
	if s.main != nil {
		queues = append(queues, s.main)
	}
	for _, in := range queues {
		in.flush(cause)
	}
	s.calls.End(closedErr(cause))
	if pinned != nil {
		s.t.reg.Unpin(pinned)
	}
	if s.seg != nil {
		// A handler may still copy what the connection sent (a gather
		// WRITE scattering a chunk it read): fenced once they returned.
		s.hwg.Wait()
		s.giveBack()
		s.seg.forget(s)
	}
	close(s.fenced)
	close(s.dead)
}

// giveBack returns what an owner session took from its segment: its lanes
// and its idle call buffers. It is idempotent.
func (s *session) giveBack() {
	if n := s.laneShare.Swap(0); n != 0 {
		s.seg.lanes.Add(-n)
	}
	s.jobs.Drain()
}

// close ends the session and waits until it is finalized.
func (s *session) close() {
	s.fail(verbs.ErrClosed)
	<-s.dead
}

// route finds the initiator an answer belongs to.
func (s *session) route(q uint32) *initiator {
	if !s.owner {
		if q != 0 {
			return nil
		}
		return s.main
	}
	s.mu.Lock()
	in := s.queues[q]
	s.mu.Unlock()
	return in
}

func (l *lane) protocolErr(stage, reason string) error {
	return &verbs.ProtocolError{Peer: l.s.peer, Stage: stage, Reason: reason}
}

// respond returns the batch responses go into.
func (l *lane) respond() *batch {
	if l.out == nil {
		l.out = l.sq.getReader()
	}
	return l.out
}

// flushOut hands the responses to the writer. Only the owner's reader
// waits when too much output is queued: the requester's reader never
// blocks, so the owner's writer always drains and the wait cannot close a
// cycle.
func (l *lane) flushOut() {
	if l.out != nil {
		l.sq.submit(l.out, l.s.owner)
		l.out = nil
	}
}

// idle runs before the reader may block: completions are published and
// responses handed to the writer.
func (l *lane) idle() {
	l.publish()
	l.flushOut()
}

func (l *lane) publish() {
	if l.pendIn == nil {
		return
	}
	l.pendIn.release(l.freed)
	l.pendIn.cq.Push(l.comps)
	clear(l.comps)
	l.comps, l.freed, l.pendIn = l.comps[:0], l.freed[:0], nil
}

func (l *lane) complete(in *initiator, idx uint32, id uint64, st verbs.Status) {
	if l.pendIn != in {
		l.publish()
		l.pendIn = in
	}
	c := verbs.Completion{ID: id, Status: st}
	if st != verbs.StatusOK {
		c.Err = &verbs.RemoteError{ID: id, Status: st}
	}
	l.comps = append(l.comps, c)
	l.freed = append(l.freed, idx)
	if len(l.comps) == completionBatch {
		l.publish()
	}
}

// readLoop is the lane's reader goroutine.
func (l *lane) readLoop() error {
	defer l.publish()
	var h frame.Header
	inline := l.s.t.cfg.InlineMax
	for {
		if l.rd.Buffered() < frame.HeaderSize {
			l.idle()
		}
		if err := l.rd.Next(&h); err != nil {
			return err
		}
		var err error
		switch h.Type {
		case frame.TypeRead:
			l.onRead(&h, inline)
		case frame.TypeWrite:
			err = l.onWrite(&h)
		case frame.TypeData:
			err = l.onAnswer(&h, verbs.OpRead)
		case frame.TypeAck:
			err = l.onAnswer(&h, verbs.OpWrite)
		case frame.TypePing:
			if !l.s.owner {
				return l.protocolErr("frame", "PING to a requester")
			}
			l.respond().header(&frame.Header{Type: frame.TypePong, ID: h.ID})
		case frame.TypeCall:
			if !l.s.owner {
				return l.protocolErr("frame", "CALL to a requester")
			}
			err = l.onCall(&h)
		case frame.TypeParams:
			if !l.s.owner {
				return l.protocolErr("frame", "PARAMS to a requester")
			}
			err = l.onParams(&h)
		case frame.TypeReply, frame.TypePong:
			if l.s.owner {
				return l.protocolErr("frame", h.Type.String()+" to an owner")
			}
			err = l.onReply(&h)
		default:
			return l.protocolErr("frame", "unexpected "+h.Type.String())
		}
		if err != nil {
			return err
		}
	}
}

// onRead answers a READ with DATA from the served table.
func (l *lane) onRead(h *frame.Header, inline int) {
	mem, st := l.s.serve.Resolve(&l.cur, verbs.Key(h.Key), h.Off, h.Len, verbs.AccessRemoteRead)
	b := l.respond()
	r := frame.Header{Type: frame.TypeData, Status: st, ID: h.ID}
	if st == verbs.StatusOK {
		r.Len = h.Len
	}
	if st == verbs.StatusOK {
		b.frame(&r, mem, inline)
	} else {
		b.header(&r)
	}
	if b.bytes >= flushAt {
		l.flushOut()
	}
}

// onWrite reads a WRITE's payload straight into the served region, or
// drains it if the request is invalid, and answers with ACK.
func (l *lane) onWrite(h *frame.Header) error {
	mem, st := l.s.serve.Resolve(&l.cur, verbs.Key(h.Key), h.Off, h.Len, verbs.AccessRemoteWrite)
	if int(h.Len) > l.rd.Buffered() {
		l.idle()
	}
	var err error
	if st == verbs.StatusOK {
		err = l.rd.ReadFull(mem)
	} else {
		err = l.rd.Discard(uint64(h.Len))
	}
	if err != nil {
		return err
	}
	if err := l.rd.Verify(); err != nil {
		// The payload was damaged on the way: it may have landed (in the
		// range the peer was writing), but it is never acknowledged; the
		// connection ends and the request completes with ErrClosed.
		return err
	}
	l.respond().header(&frame.Header{Type: frame.TypeAck, Status: st, ID: h.ID})
	return nil
}

// onAnswer completes a READ (DATA, payload read straight into the local
// region) or a WRITE (ACK).
func (l *lane) onAnswer(h *frame.Header, op verbs.Op) error {
	q, gen, idx := splitID(h.ID)
	in := l.s.route(q)
	if in == nil {
		return l.protocolErr("frame", fmt.Sprintf("%s for unknown queue %d", h.Type, q))
	}
	sl, ok := in.lookup(gen, idx, op)
	if !ok {
		return l.protocolErr("frame", fmt.Sprintf("%s for no outstanding request (id %#x)", h.Type, h.ID))
	}
	if op == verbs.OpRead && h.Status == verbs.StatusOK {
		if int(h.Len) != len(sl.mem) {
			return l.protocolErr("frame", fmt.Sprintf("DATA of %d bytes for a READ of %d", h.Len, len(sl.mem)))
		}
		if int(h.Len) > l.rd.Buffered() {
			l.idle()
		}
		if err := l.rd.ReadFull(sl.mem); err != nil {
			return err
		}
		if err := l.rd.Verify(); err != nil {
			return err // never completed OK: the session fails it with ErrClosed
		}
	}
	if !sl.state.CompareAndSwap(uint32(gen)<<1|1, uint32(gen)<<1) {
		return l.protocolErr("frame", fmt.Sprintf("duplicate %s (id %#x)", h.Type, h.ID))
	}
	id := sl.id
	sl.mem = nil
	l.complete(in, idx, id, h.Status)
	return nil
}

func (l *lane) onParams(h *frame.Header) error {
	var b [frame.ParamsSize]byte
	if err := l.rd.ReadFull(b[:]); err != nil {
		return err
	}
	if err := l.rd.Verify(); err != nil {
		return err
	}
	p, err := frame.DecodeParams(b[:])
	if err != nil {
		return err
	}
	l.s.mu.Lock()
	l.s.params = p
	l.s.mu.Unlock()
	return nil
}

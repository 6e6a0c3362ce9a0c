package tcp

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/peers"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

// session is one requester-owner connection (all its lanes), seen from
// either end. Both ends serve READ/WRITE frames against their own table
// (the owner: its exports; the requester: its exposures) and collect
// DATA/ACK answers for their initiators; the owner also runs control
// calls, and the requester waits for their replies. The Session it embeds
// runs the calls, the owner's Peers (initiators) and the end; the lanes,
// the tables and the initiators' routing are this package's.
type session struct {
	peers.Session
	t      *Transport
	seg    *segment // owner side only
	token  uint64
	serve  *regtab.Table
	remote []verbs.RegionInfo // the other side's regions (owner: the requester's exposures)

	joined []bool // owner: lanes that have joined (under Mu)

	// Under Mu:
	lanes  []*lane               // attached lanes, in lane order where known
	queues map[uint32]*initiator // owner: Peer initiators by queue id (running and idle)
	nextQ  uint32
	pinned []*regtab.Entry // requester: exposures to unpin at the end

	main *initiator // requester: the Conn's queue

	laneShare atomic.Int64 // owner: lanes taken from the segment's MaxSegmentLanes
	checked   bool         // frames after the handshake carry checksums

	wg sync.WaitGroup // lane goroutines
}

var _ peers.Carrier = (*session)(nil)

func newSession(t *Transport, owner bool, peer string) *session {
	s := &session{t: t, queues: make(map[uint32]*initiator)}
	s.Init("tcp", owner, peer, s)
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
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.Closed() {
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
		s.Fail(err)
	}()
	go func() {
		defer s.wg.Done()
		err := l.readLoop()
		var pe *verbs.ProtocolError
		if errors.As(err, &pe) && pe.Peer == "" {
			pe.Peer = s.Peer
		}
		s.Fail(err)
	}()
	return true
}

// postLanes returns the lanes to post on (nil once the session ended).
func (s *session) postLanes() []*lane {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.Closed() {
		return nil
	}
	return s.lanes
}

// Shut implements peers.Carrier: every lane is closed, which stops its
// reader and writer.
func (s *session) Shut() {
	s.Mu.Lock()
	lanes := s.lanes // attach adds none once the session failed
	s.Mu.Unlock()
	for _, l := range lanes {
		_ = l.nc.Close()
		l.sq.close()
	}
}

// Finalize implements peers.Carrier: once the lane goroutines have
// stopped it completes every outstanding request and call with ErrClosed.
func (s *session) Finalize() {
	s.wg.Wait() // no lane reads into, or sends from, local memory now
	s.Mu.Lock()
	cause := s.Cause()
	queues := make([]*initiator, 0, len(s.queues)+1)
	for _, in := range s.queues {
		queues = append(queues, in)
	}
	pinned := s.pinned
	s.pinned = nil
	s.Mu.Unlock()
	if s.main != nil {
		queues = append(queues, s.main)
	}
	for _, in := range queues {
		in.flush(cause)
	}
	s.EndCalls(closedErr(cause))
	if pinned != nil {
		s.t.reg.Unpin(pinned)
	}
	if s.Owner {
		// A handler may still copy what the connection sent (a gather
		// WRITE scattering a chunk it read): fenced once they returned.
		s.WaitHandlers()
		s.giveLanes()
		s.Leave()
	}
	close(s.Fenced)
	close(s.Dead)
}

// giveLanes returns the lanes an owner session took from its segment's
// MaxSegmentLanes. It is idempotent.
func (s *session) giveLanes() {
	if n := s.laneShare.Swap(0); n != 0 {
		s.seg.lanes.Add(-n)
	}
}

// close ends the session and waits until it is finalized.
func (s *session) close() {
	s.Fail(verbs.ErrClosed)
	<-s.Dead
}

// NewPoster implements peers.Carrier: an initiator under a queue id of its
// own, which answers are routed by. It runs under Mu.
func (s *session) NewPoster(depth int) peers.Poster {
	for {
		s.nextQ = s.nextQ%maxQueueID + 1
		if _, used := s.queues[s.nextQ]; !used {
			break
		}
	}
	in := newInitiator(s, s.nextQ, depth, s.remote)
	if s.Closed() {
		// Finalize may have collected the queues already: end it here.
		in.ended = true
		in.cq.Close(closedErr(s.Cause()))
	}
	s.queues[in.qid] = in
	return in
}

// DropPoster implements peers.Carrier: the initiator's queue id is free
// again.
func (s *session) DropPoster(p peers.Poster) { delete(s.queues, p.(*initiator).qid) }

// Send implements peers.Carrier: a call goes on the lane its id picks. On
// a session that ended nothing is sent (Finalize fails the call).
func (s *session) Send(h frame.Header, payload []byte) {
	lanes := s.postLanes()
	if len(lanes) > 0 {
		lanes[h.ID%uint64(len(lanes))].sq.appendFrames(func(b *batch) {
			b.frameInline(&h, payload)
		})
	}
}

// route finds the initiator an answer belongs to.
func (s *session) route(q uint32) *initiator {
	if !s.Owner {
		if q != 0 {
			return nil
		}
		return s.main
	}
	s.Mu.Lock()
	in := s.queues[q]
	s.Mu.Unlock()
	return in
}

func (l *lane) protocolErr(stage, reason string) error {
	return &verbs.ProtocolError{Peer: l.s.Peer, Stage: stage, Reason: reason}
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
		l.sq.submit(l.out, l.s.Owner)
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
			if !l.s.Owner {
				return l.protocolErr("frame", "PING to a requester")
			}
			l.respond().header(&frame.Header{Type: frame.TypePong, ID: h.ID})
		case frame.TypeCall:
			if !l.s.Owner {
				return l.protocolErr("frame", "CALL to a requester")
			}
			err = l.onCall(&h)
		case frame.TypeParams:
			if !l.s.Owner {
				return l.protocolErr("frame", "PARAMS to a requester")
			}
			err = l.onParams(&h)
		case frame.TypeReply, frame.TypePong:
			if l.s.Owner {
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
	l.s.SetParams(p)
	return nil
}

// onReply delivers a REPLY or PONG to its waiting call.
func (l *lane) onReply(h *frame.Header) error {
	if h.Len > uint32(l.rd.Buffered()) {
		l.idle()
	}
	return l.s.Answer(l.rd, h)
}

// onCall reads a CALL and hands it to a handler goroutine (see
// peers.Session.OnCall): an answer at once joins this reader's responses,
// the handler's REPLY goes on this lane.
func (l *lane) onCall(h *frame.Header) error {
	if int(h.Len) > l.rd.Buffered() {
		l.idle()
	}
	return l.s.OnCall(l.rd, h, (*readerReply)(l), l)
}

// Reply implements peers.Replier for a handler's REPLY, sent from the
// handler's goroutine. A small one joins the lane's tail batch. A large
// one (ownBatchReply bytes or more: an inline gather reply's packed rows)
// is copied and checksummed into a batch of its own outside the lane's
// lock, then queued: the handlers answering on one lane, and its writer,
// never wait on one another's copies and checksums.
func (l *lane) Reply(h frame.Header, payload []byte) error {
	if len(payload) < ownBatchReply {
		l.sq.appendFrames(func(b *batch) {
			b.frameInline(&h, payload)
		})
		return nil
	}
	b := l.sq.get()
	b.frameInline(&h, payload)
	l.sq.submit(b, false)
	return nil
}

// ownBatchReply is the smallest REPLY payload framed in a batch of its
// own (Reply): a copy and checksum that take microseconds.
const ownBatchReply = 32 << 10

// readerReply is a lane as its own reader answers through it
// (peers.Replier): the answer joins the reader's batch of responses.
type readerReply lane

func (r *readerReply) Reply(h frame.Header, payload []byte) error {
	(*lane)(r).respond().frameInline(&h, payload)
	return nil
}

package tcp

import (
	"context"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/calls"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/listener"
)

// errPeerEnded is what a Peer reports once its call is over. It is built
// once: ending a call must not build an error.
var errPeerEnded = fmt.Errorf("tcp: peer of an ended call: %w", verbs.ErrClosed)

// Owner-side reuse bounds, per session.
const (
	keepPeers   = 16  // idle Peer initiators (queue and slots) kept
	keepWorkers = 16  // parked handler goroutines kept
	peerSlab    = 256 // Peer handles allocated at once
)

// peer is the verbs.Peer one call's handler gets: a pooled initiator and
// the epoch of its completion queue during that call. When the call ends
// the queue moves to a new epoch, so a Peer kept past its call fails with
// ErrClosed and can never post to, or take completions of, a later call
// that reuses the initiator. Handles are never reused: they are carved
// from slabs of peerSlab (one 16-byte allocation amortized over that many
// calls), so a stale handle stays distinct from every live one.
type peer struct {
	in    *initiator
	epoch uint64
}

var _ verbs.Peer = (*peer)(nil)

// Post implements verbs.Queue.
func (p *peer) Post(wrs []verbs.WorkRequest) (int, error) { return p.in.post(wrs, true, p.epoch) }

// Poll implements verbs.Queue.
func (p *peer) Poll(out []verbs.Completion) (int, error) { return p.in.cq.PollAt(p.epoch, out) }

// Wait implements verbs.Queue.
func (p *peer) Wait(ctx context.Context, out []verbs.Completion, min int) (int, error) {
	return p.in.cq.WaitAt(ctx, p.epoch, out, min)
}

// Remote implements verbs.Queue.
func (p *peer) Remote() []verbs.RegionInfo { return p.in.remote }

// ConnID implements verbs.Peer.
func (p *peer) ConnID() uint64 { return p.in.s.id }

// LinkParams implements verbs.Queue: the requester's measurements, with
// this Peer's queue depth.
func (p *peer) LinkParams() verbs.LinkParams {
	s := p.in.s
	s.mu.Lock()
	lp := s.params
	s.mu.Unlock()
	lp.QueueDepth = p.in.cq.Depth()
	return lp
}

// acquirePeer returns the Peer of a starting call: an idle initiator of
// the session (or a new one) under a fresh handle.
func (s *session) acquirePeer() *peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	var in *initiator
	if n := len(s.idlePeers); n > 0 {
		in = s.idlePeers[n-1]
		s.idlePeers[n-1] = nil
		s.idlePeers = s.idlePeers[:n-1]
	} else {
		for {
			s.nextQ = s.nextQ%maxQueueID + 1
			if _, used := s.queues[s.nextQ]; !used {
				break
			}
		}
		in = newInitiator(s, s.nextQ, s.peerDepth, s.remote)
		if s.closed {
			// finalize may have collected the queues already: end it here.
			in.ended = true
			in.cq.Close(closedErr(s.cause))
		}
		s.queues[in.qid] = in
	}
	if len(s.peerSlab) == 0 {
		s.peerSlab = make([]peer, peerSlab)
	}
	p := &s.peerSlab[0]
	s.peerSlab = s.peerSlab[1:]
	p.in, p.epoch = in, in.cq.Epoch()
	return p
}

// releasePeer ends a call's Peer: Posts fail from now on, every request
// it posted is answered (or flushed if the session ends), and the
// initiator goes back to the session's idle list under a new epoch.
func (s *session) releasePeer(p *peer) {
	in := p.in
	in.cq.Close(errPeerEnded)
	_ = in.cq.Idle(context.Background())
	in.postMu.Lock()
	ended := in.ended
	in.postMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if ended || s.closed {
		return // finalize flushes (or flushed) it
	}
	if len(s.idlePeers) < keepPeers {
		if _, ok := in.cq.Reopen(); ok {
			s.idlePeers = append(s.idlePeers, in)
			return
		}
	}
	delete(s.queues, in.qid)
}

// callJob is one CALL on its way through a handler; Via is the lane
// that read it, which carries the REPLY.
type callJob = calls.Job[*lane]

// startWorkers sets up the owner's handler goroutines.
func (s *session) startWorkers(maxCalls int) {
	s.workers = &calls.Workers[*callJob]{Run: s.serveCall, Stop: s.ctx.Done(), WG: &s.hwg,
		Keep: min(maxCalls, keepWorkers)}
}

// onCall reads a CALL and hands it to a handler goroutine.
func (l *lane) onCall(h *frame.Header) error {
	s := l.s
	if int(h.Len) > l.rd.Buffered() {
		l.idle()
	}
	if err := listener.TakeCall(&s.callBytes, &s.seg.callBytes, int64(h.Len)); err != nil {
		// Over the call-bytes limits: dropped as it is read, answered busy.
		if err := l.rd.Discard(uint64(h.Len)); err != nil {
			return err
		}
		if err := l.rd.Verify(); err != nil {
			return err
		}
		r, payload := calls.Reply(h.Method, h.ID, nil, err)
		l.respond().frameInline(&r, payload)
		return nil
	}
	j := s.jobs.Get(int(h.Len))
	if err := l.rd.ReadFull(j.Req); err != nil {
		s.putJob(j)
		return err
	}
	if err := l.rd.Verify(); err != nil {
		s.putJob(j) // a damaged request never reaches its handler
		return err
	}
	hd := s.seg.handler(h.Method)
	if hd == nil {
		s.putJob(j)
		l.respond().header(&frame.Header{Type: frame.TypeReply, Status: verbs.StatusNotSupported, Method: h.Method, ID: h.ID})
		return nil
	}
	// The reader never waits for a call slot: the answers the running
	// handlers wait for may be behind this frame. The call's goroutine
	// waits instead; only a requester with more than maxWaitingCalls calls
	// outstanding is cut off.
	select {
	case s.admit <- struct{}{}:
	default:
		s.putJob(j)
		return l.protocolErr("frame", fmt.Sprintf("more than %d calls outstanding", cap(s.admit)))
	}
	j.Via, j.ID, j.Method, j.Handler = l, h.ID, h.Method, hd
	s.workers.Go(j)
	return nil
}

// putJob returns a call's job to the pool and its request bytes to the
// call-bytes limits (a call that never reached its handler).
func (s *session) putJob(j *callJob) {
	s.giveCall(int64(len(j.Req)))
	s.jobs.Put(j)
}

// giveCall returns n bytes of a call's request to the call-bytes limits.
func (s *session) giveCall(n int64) {
	s.callBytes.Give(n)
	s.seg.callBytes.Give(n)
}

// maxWaitingCalls is how many calls a connection may have outstanding,
// per ListenOptions.MaxCalls that may run at once.
const maxWaitingCalls = 16

// serveCall runs a handler, waits for the work its Peer posted, and sends
// the REPLY.
func (s *session) serveCall(j *callJob) {
	defer s.jobs.Put(j)
	defer func() { <-s.admit }()
	n := int64(len(j.Req))
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		s.giveCall(n)
		return // the session ended; its caller gets ErrClosed
	}
	defer func() { <-s.sem }()
	p := s.acquirePeer()
	resp, err := j.Handler.ServeCall(s.ctx, p, j.Req, j.Resp[:0])
	// Every request the handler posted must be answered before the reply
	// goes out; if the session ends, flush answers them.
	s.releasePeer(p)
	s.giveCall(n) // done with the request: its bytes are free before the caller hears back
	r, payload := calls.Reply(j.Method, j.ID, resp, err)
	j.Via.sq.appendFrames(func(b *batch) {
		b.frameInline(&r, payload)
	})
	// resp was copied. A response the handler grew by appending to j.Resp
	// is kept for the job's next call (the Handler contract allows it), so
	// handlers with large replies allocate only while their replies grow.
	calls.KeepResp(j, resp, err)
}

// peerState is the owner-side reuse state of a session.
type peerState struct {
	idlePeers []*initiator // Peer initiators of ended calls, reopened
	peerSlab  []peer       // unused Peer handles (under mu)

	jobs    calls.Jobs[*lane]
	workers *calls.Workers[*callJob]
}

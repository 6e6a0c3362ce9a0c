//go:build linux

package shm

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
var errPeerEnded = fmt.Errorf("shm: peer of an ended call: %w", verbs.ErrClosed)

// Owner-side reuse bounds, per session.
const (
	keepPeers   = 16  // idle Peer queues kept
	keepWorkers = 16  // parked handler goroutines kept
	peerSlab    = 256 // Peer handles allocated at once
)

// peer is the verbs.Peer one call's handler gets: a pooled queue and the
// epoch of its completion queue during that call. When the call ends the
// queue moves to a new epoch, so a Peer kept past its call fails with
// ErrClosed and can never post to, or take completions of, a later call
// that reuses the queue. Handles are never reused: they are carved from
// slabs of peerSlab (one 16-byte allocation amortized over that many
// calls), so a stale handle stays distinct from every live one.
type peer struct {
	q     *queue
	epoch uint64
}

var _ verbs.Peer = (*peer)(nil)

// Post implements verbs.Queue.
func (p *peer) Post(wrs []verbs.WorkRequest) (int, error) { return p.q.post(wrs, true, p.epoch) }

// Poll implements verbs.Queue.
func (p *peer) Poll(out []verbs.Completion) (int, error) { return p.q.cq.PollAt(p.epoch, out) }

// Wait implements verbs.Queue.
func (p *peer) Wait(ctx context.Context, out []verbs.Completion, min int) (int, error) {
	return p.q.cq.WaitAt(ctx, p.epoch, out, min)
}

// Remote implements verbs.Queue.
func (p *peer) Remote() []verbs.RegionInfo { return p.q.infos }

// ConnID implements verbs.Peer.
func (p *peer) ConnID() uint64 { return p.q.s.id }

// LinkParams implements verbs.Queue: the requester's measurements, with
// this Peer's queue depth.
func (p *peer) LinkParams() verbs.LinkParams {
	s := p.q.s
	s.mu.Lock()
	lp := s.params
	s.mu.Unlock()
	lp.QueueDepth = p.q.cq.Depth()
	return lp
}

// acquirePeer returns the Peer of a starting call: an idle queue of the
// session (or a new one) under a fresh handle.
func (s *session) acquirePeer() *peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	var q *queue
	if n := len(s.idlePeers); n > 0 {
		q = s.idlePeers[n-1]
		s.idlePeers[n-1] = nil
		s.idlePeers = s.idlePeers[:n-1]
	} else {
		q = newQueue(s.t, s.maps, s.peerDepth)
		q.s = s
	}
	if len(s.peerSlab) == 0 {
		s.peerSlab = make([]peer, peerSlab)
	}
	p := &s.peerSlab[0]
	s.peerSlab = s.peerSlab[1:]
	p.q, p.epoch = q, q.cq.Epoch()
	return p
}

// releasePeer ends a call's Peer: Posts fail from now on (shm completes
// requests inside Post, so none is left in flight once a racing Post
// returns), and the queue goes back to the session's idle list under a
// new epoch.
func (s *session) releasePeer(p *peer) {
	q := p.q
	q.cq.Close(errPeerEnded)
	_ = q.cq.Idle(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.idlePeers) >= keepPeers {
		return
	}
	if _, ok := q.cq.Reopen(); ok {
		s.idlePeers = append(s.idlePeers, q)
	}
}

// callJob is one CALL on its way through a handler.
type callJob = calls.Job[struct{}]

// startWorkers sets up the owner's handler goroutines.
func (s *session) startWorkers(maxCalls int) {
	s.workers = &calls.Workers[*callJob]{Run: s.serveCall, Stop: s.ctx.Done(), WG: &s.hwg,
		Keep: min(maxCalls, keepWorkers)}
}

// onCall reads a CALL and hands it to a handler goroutine.
func (s *session) onCall(h *frame.Header) error {
	if err := listener.TakeCall(&s.callBytes, &s.seg.callBytes, int64(h.Len)); err != nil {
		// Over the call-bytes limits: dropped as it is read, answered busy.
		if err := s.rd.Discard(uint64(h.Len)); err != nil {
			return err
		}
		r, payload := calls.Reply(h.Method, h.ID, nil, err)
		return s.write(&r, payload)
	}
	j := s.jobs.Get(int(h.Len))
	if err := s.rd.ReadFull(j.Req); err != nil {
		s.putJob(j)
		return err
	}
	if s.ctx.Err() != nil {
		s.putJob(j) // the session ended: its calls are dropped
		return nil
	}
	hd := s.seg.handler(h.Method)
	if hd == nil {
		s.putJob(j)
		return s.write(&frame.Header{Type: frame.TypeReply, Status: verbs.StatusNotSupported, Method: h.Method, ID: h.ID}, nil)
	}
	// The reader does not wait for a call slot (pings and further calls
	// would queue behind it); the call's goroutine does. Only a requester
	// with more than maxWaitingCalls calls outstanding per running slot is
	// cut off.
	select {
	case s.admit <- struct{}{}:
	default:
		s.putJob(j)
		return s.protocolErr(fmt.Sprintf("more than %d calls outstanding", cap(s.admit)))
	}
	j.ID, j.Method, j.Handler = h.ID, h.Method, hd
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

// serveCall runs a handler and sends its REPLY. A shm Peer's work
// requests complete inside Post, so all of them are done by now.
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
	s.releasePeer(p)
	s.giveCall(n) // done with the request: its bytes are free before the caller hears back
	r, payload := calls.Reply(j.Method, j.ID, resp, err)
	_ = s.write(&r, payload)
	// resp was copied. A response the handler grew by appending to j.Resp
	// is kept for the job's next call (the Handler contract allows it), so
	// handlers with large replies allocate only while their replies grow.
	calls.KeepResp(j, resp, err)
}

// peerState is the owner-side reuse state of a session.
type peerState struct {
	idlePeers []*queue // Peer queues of ended calls, reopened (under mu)
	peerSlab  []peer   // unused Peer handles (under mu)

	jobs    calls.Jobs[struct{}]
	workers *calls.Workers[*callJob]
}

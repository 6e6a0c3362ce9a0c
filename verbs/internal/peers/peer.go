package peers

import (
	"context"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/cq"
)

// Poster is a backend's queue of work requests toward the other side of a
// session: the requester's Conn has one, and on the owner each running
// call's Peer has its own, taken from the session's idle ones.
type Poster interface {
	// PostAt is verbs.Queue.Post for a Peer: it posts only while CQ is
	// still at epoch (the Peer's call has not ended).
	PostAt(wrs []verbs.WorkRequest, epoch uint64) (int, error)
	// CQ is the queue's completion queue.
	CQ() *cq.Queue
	// Remote describes the regions on the other side (verbs.Queue.Remote).
	Remote() []verbs.RegionInfo
}

// Reserve takes credits of c for a Post of n work requests, a Peer's
// (checked) only while c is still at epoch, and returns how many it took.
// With none taken the error says why: a full queue's bare
// verbs.ErrQueueFull (polling a full queue must not allocate), anything
// else wrapped as "name: post".
func Reserve(name string, c *cq.Queue, n int, checked bool, epoch uint64) (int, error) {
	var got int
	var err error
	if checked {
		got, err = c.ReserveAt(epoch, n)
	} else {
		got, err = c.Reserve(n)
	}
	if got == 0 && err != nil && err != verbs.ErrQueueFull {
		err = fmt.Errorf("%s: post: %w", name, err)
	}
	return got, err
}

// Owner-side reuse bounds, per session.
const (
	keepPeers   = 16  // idle Peer queues kept
	keepWorkers = 16  // parked handler goroutines kept
	peerSlab    = 256 // Peer handles allocated at once
)

// Peer is the verbs.Peer one call's handler gets: a pooled queue and the
// epoch of its completion queue during that call (see "Peers" in the
// package doc). It is 16 bytes, so a slab of peerSlab handles is one 4 KiB
// allocation.
type Peer struct {
	q     *peerQueue
	epoch uint64
}

// peerQueue is a Peer queue of a session, pooled across calls, with what
// its Peers reach through it.
type peerQueue struct {
	s  *Session
	p  Poster
	cq *cq.Queue
}

var _ verbs.Peer = (*Peer)(nil)

// Post implements verbs.Queue.
func (p *Peer) Post(wrs []verbs.WorkRequest) (int, error) { return p.q.p.PostAt(wrs, p.epoch) }

// Poll implements verbs.Queue.
func (p *Peer) Poll(out []verbs.Completion) (int, error) { return p.q.cq.PollAt(p.epoch, out) }

// Wait implements verbs.Queue.
func (p *Peer) Wait(ctx context.Context, out []verbs.Completion, min int) (int, error) {
	return p.q.cq.WaitAt(ctx, p.epoch, out, min)
}

// Remote implements verbs.Queue.
func (p *Peer) Remote() []verbs.RegionInfo { return p.q.p.Remote() }

// ConnID implements verbs.Peer.
func (p *Peer) ConnID() uint64 { return p.q.s.ID }

// LinkParams implements verbs.Queue: the requester's measurements, with
// this Peer's queue depth.
func (p *Peer) LinkParams() verbs.LinkParams {
	s := p.q.s
	s.Mu.Lock()
	lp := s.params
	s.Mu.Unlock()
	lp.QueueDepth = p.q.cq.Depth()
	return lp
}

// acquirePeer returns the Peer of a starting call: an idle queue of the
// session (or a new one from the Carrier) under a fresh handle.
func (s *Session) acquirePeer() *Peer {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	var q *peerQueue
	if n := len(s.idlePeers); n > 0 {
		q = s.idlePeers[n-1]
		s.idlePeers[n-1] = nil
		s.idlePeers = s.idlePeers[:n-1]
	} else {
		p := s.c.NewPoster(s.peerDepth)
		q = &peerQueue{s: s, p: p, cq: p.CQ()}
	}
	if len(s.peerSlab) == 0 {
		s.peerSlab = make([]Peer, peerSlab)
	}
	p := &s.peerSlab[0]
	s.peerSlab = s.peerSlab[1:]
	p.q, p.epoch = q, q.cq.Epoch()
	return p
}

// releasePeer ends a call's Peer: Posts fail from now on, every request
// it posted is answered (shm completes them inside Post; on tcp Finalize
// flushes them if the session ends), and the queue goes back to the
// session's idle list under a new epoch. A closed session keeps nothing:
// its Finalize flushes (or flushed) the queue.
func (s *Session) releasePeer(p *Peer) {
	q := p.q
	q.cq.Close(s.seg.peerEnded)
	_ = q.cq.Idle(context.Background())
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.closed {
		return
	}
	if len(s.idlePeers) < keepPeers {
		if _, ok := q.cq.Reopen(); ok {
			s.idlePeers = append(s.idlePeers, q)
			return
		}
	}
	s.c.DropPoster(q.p)
}

package peers

import (
	"errors"
	"fmt"
	"sync"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/calls"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/listener"
)

// Replier sends a REPLY toward the requester of an owner's session.
type Replier interface {
	// Reply sends h and its payload. An error ends the reader that
	// called it (when a reader did).
	Reply(h frame.Header, payload []byte) error
}

// maxWaitingCalls is how many calls a connection may have outstanding,
// per ListenOptions.MaxCalls that may run at once.
const maxWaitingCalls = 16

// job is one CALL on its way through a handler; Via carries its REPLY.
type job = calls.Job[Replier]

// owner is the owner-side state of a Session.
type owner struct {
	seg       *shared // the segment whose calls the session serves
	peerDepth int     // queue depth of each Peer
	sem       chan struct{}
	admit     chan struct{}
	callBytes listener.CallBytes // bytes of call requests held

	idlePeers []*peerQueue // Peer queues of ended calls, reopened (under Mu)
	peerSlab  []Peer       // unused Peer handles (under Mu)

	jobs    calls.Jobs[Replier]
	workers *calls.Workers[*job]
	hwg     sync.WaitGroup // handler goroutines
}

// serve readies s to serve the calls of segment sg.
func (s *Session) serve(sg *shared) {
	o := &sg.Opts
	s.seg = sg
	s.peerDepth = o.QueueDepth
	s.sem = make(chan struct{}, o.MaxCalls)
	s.admit = make(chan struct{}, maxWaitingCalls*o.MaxCalls)
	s.workers = &calls.Workers[*job]{Run: s.serveCall, Stop: s.Ctx.Done(), WG: &s.hwg,
		Keep: min(o.MaxCalls, keepWorkers)}
	s.callBytes.Limit = o.MaxConnCallBytes
	s.jobs.Keep = &sg.keep
}

// OnCall reads a CALL (h, its request next in rd) and hands it to a
// handler goroutine, which sends the REPLY through via. A call that never
// reaches a handler is answered at once through now: one over the
// call-bytes limits (busy: its request is dropped as it is read) or for a
// method without a handler (not supported). A call read after the session
// ended is dropped. The returned error ends the reader: a failed read, a
// failed answer, or a requester with more than maxWaitingCalls calls
// outstanding per running slot.
func (s *Session) OnCall(rd *frame.Reader, h *frame.Header, now, via Replier) error {
	if err := listener.TakeCall(&s.callBytes, &s.seg.callBytes, int64(h.Len)); err != nil {
		if err := rd.Discard(uint64(h.Len)); err != nil {
			return err
		}
		if err := rd.Verify(); err != nil {
			return err
		}
		return now.Reply(calls.Reply(h.Method, h.ID, nil, err))
	}
	j := s.jobs.Get(int(h.Len))
	if err := rd.ReadFull(j.Req); err != nil {
		s.putJob(j)
		return err
	}
	if err := rd.Verify(); err != nil {
		s.putJob(j) // a damaged request never reaches its handler
		return err
	}
	if s.Ctx.Err() != nil {
		s.putJob(j) // the session ended: its calls are dropped
		return nil
	}
	hd := s.seg.handlers.Get(h.Method)
	if hd == nil {
		s.putJob(j)
		return now.Reply(frame.Header{Type: frame.TypeReply, Status: verbs.StatusNotSupported, Method: h.Method, ID: h.ID}, nil)
	}
	// The reader never waits for a call slot: pings, further calls and the
	// answers the running handlers wait for may be behind this frame. The
	// call's goroutine waits instead.
	select {
	case s.admit <- struct{}{}:
	default:
		s.putJob(j)
		return s.ProtocolErr(fmt.Sprintf("more than %d calls outstanding", cap(s.admit)))
	}
	j.Via, j.ID, j.Method, j.Handler = via, h.ID, h.Method, hd
	s.workers.Go(j)
	return nil
}

// putJob returns a call's job to the pool and its request bytes to the
// call-bytes limits (a call that never reached its handler).
func (s *Session) putJob(j *job) {
	s.giveCall(int64(len(j.Req)))
	s.jobs.Put(j)
}

// giveCall returns n bytes of a call's request to the call-bytes limits.
func (s *Session) giveCall(n int64) {
	s.callBytes.Give(n)
	s.seg.callBytes.Give(n)
}

// serveCall runs a handler, waits for the work its Peer posted, and sends
// the REPLY.
func (s *Session) serveCall(j *job) {
	defer s.jobs.Put(j)
	defer func() { <-s.admit }()
	n := int64(len(j.Req))
	select {
	case s.sem <- struct{}{}:
	case <-s.Ctx.Done():
		s.giveCall(n)
		return // the session ended; its caller gets ErrClosed
	}
	defer func() { <-s.sem }()
	p := s.acquirePeer()
	resp, err := j.Handler.ServeCall(s.Ctx, p, j.Req, j.Resp[:0])
	// Every request the handler posted is answered before the reply goes
	// out (or, if the session ends, flushed).
	s.releasePeer(p)
	s.giveCall(n) // done with the request: its bytes are free before the caller hears back
	_ = j.Via.Reply(calls.Reply(j.Method, j.ID, resp, err))
	// resp was copied. A response the handler grew by appending to j.Resp
	// is kept for the job's next call (the Handler contract allows it), so
	// handlers with large replies allocate only while their replies grow.
	calls.KeepResp(j, resp, err)
}

// WaitHandlers waits until every handler goroutine of an owner's session
// has returned; Finalize calls it once the session has failed.
func (s *Session) WaitHandlers() { s.hwg.Wait() }

// Leave ends an owner's session's part in its segment: its idle call
// buffers go back to the segment's budget and the segment forgets it.
// Finalize calls it last, after WaitHandlers.
func (s *Session) Leave() {
	s.jobs.Drain()
	s.seg.remove(s.ID)
}

// ReadFrames is the reader of a session whose frames travel on one stream
// (shm's Unix socket, ucx's control socket): it reads frames from rd
// until an error and dispatches them, on the owner CALL (served, its
// REPLY through via), PING (answered with a PONG through via) and PARAMS,
// on the requester REPLY and PONG. Any other frame is a protocol
// violation. The returned error, with a *verbs.ProtocolError naming the
// peer, is what the session fails with.
func (s *Session) ReadFrames(rd *frame.Reader, via Replier) error {
	var h frame.Header
	for {
		if err := rd.Next(&h); err != nil {
			var pe *verbs.ProtocolError
			if errors.As(err, &pe) {
				pe.Peer = s.Peer
			}
			return err
		}
		var err error
		switch {
		case s.Owner && h.Type == frame.TypeCall:
			err = s.OnCall(rd, &h, via, via)
		case s.Owner && h.Type == frame.TypePing:
			err = via.Reply(frame.Header{Type: frame.TypePong, ID: h.ID}, nil)
		case s.Owner && h.Type == frame.TypeParams:
			var b [frame.ParamsSize]byte
			if err = rd.ReadFull(b[:]); err == nil {
				var p verbs.LinkParams
				if p, err = frame.DecodeParams(b[:]); err == nil {
					s.SetParams(p)
				}
			}
		case !s.Owner && (h.Type == frame.TypeReply || h.Type == frame.TypePong):
			err = s.Answer(rd, &h)
		default:
			return s.ProtocolErr("unexpected " + h.Type.String())
		}
		if err != nil {
			return err
		}
	}
}

package peers

import (
	"context"
	"fmt"
	"sync"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/calls"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/listener"
)

// Carrier is what a backend adds to a Session: what carries its frames,
// and how the connection is torn down. The backend's session type, which
// embeds the Session, implements it.
type Carrier interface {
	// Send sends a frame of the requester's (h, then payload) toward the
	// owner: a CALL or PING, or PARAMS (id 0), from any goroutine. A
	// failure ends the session (which fails the call), so Send reports
	// nothing.
	Send(h frame.Header, payload []byte)
	// NewPoster returns a new queue of depth for an owner's Peer. It runs
	// under Mu.
	NewPoster(depth int) Poster
	// DropPoster forgets p, a Peer's queue that the open session does not
	// keep for a later call. It runs under Mu.
	DropPoster(p Poster)
	// Shut stops what carries the session's frames (tcp closes its
	// lanes). It runs once, in Fail, after Ctx ended, and must not block.
	Shut()
	// Finalize ends the session after Fail, on a goroutine of its own:
	// outstanding requests and calls fail, and it closes Fenced (when the
	// other side can no longer reach this side's memory) and Dead.
	Finalize()
}

// Session is the part of a backend's session that does not depend on how
// its bytes travel. Init it before use.
type Session struct {
	Owner bool   // the owner's side (it serves calls)
	ID    uint64 // the connection id (the owner's Segment.Add sets it)
	Peer  string // the other side, for errors

	// Ctx ends when the session fails; handlers get it.
	Ctx    context.Context
	cancel context.CancelFunc

	// Mu guards the session's state here and the backend's own (its lanes,
	// its queues). A queue's post lock, where there is one, is taken
	// before Mu, never under it.
	Mu     sync.Mutex
	closed bool
	cause  error
	params verbs.LinkParams // owner: as measured by the requester

	// Fenced is closed once nothing the other side sent, or may still
	// send, can reach this side's memory (see verbs.Segment.Evict), Dead
	// once the session is finalized. Finalize closes both.
	Fenced, Dead chan struct{}

	name  string  // the backend's name, for errors
	c     Carrier // the backend's part
	calls *calls.Table

	owner // owner side: calls served, pooled Peers
}

// Init readies s, the Session of a backend session c of the backend name
// ("shm", "tcp"), on the owner's side or the requester's, with the other
// side at peer.
func (s *Session) Init(name string, owner bool, peer string, c Carrier) {
	s.name, s.Owner, s.Peer, s.c = name, owner, peer, c
	s.Fenced, s.Dead = make(chan struct{}), make(chan struct{})
	s.calls = calls.NewTable()
	s.Ctx, s.cancel = context.WithCancel(context.Background())
}

// base is how a Segment reaches the Session of its backend's sessions.
func (s *Session) base() *Session { return s }

// Closed reports whether the session has failed. Call it with Mu held.
func (s *Session) Closed() bool { return s.closed }

// Cause is the error the session failed with (nil while open). Call it
// with Mu held.
func (s *Session) Cause() error { return s.cause }

// Fail ends the session once, with err as its cause (nil: ErrClosed):
// Ctx ends, the Carrier shuts, an abnormal end (listener.Abnormal) of an
// owner's session is reported to ListenOptions.OnError, and Finalize runs
// in the background.
func (s *Session) Fail(err error) {
	if err == nil {
		err = verbs.ErrClosed
	}
	s.Mu.Lock()
	if s.closed {
		s.Mu.Unlock()
		return
	}
	s.closed, s.cause = true, err
	s.Mu.Unlock()
	s.cancel()
	s.c.Shut()
	if s.seg != nil && listener.Abnormal(err) {
		s.seg.report(err)
	}
	go s.c.Finalize()
}

// ClosedErr is the error a closed connection of backend name reports:
// ErrClosed, with the cause when there is one.
func ClosedErr(name string, cause error) error {
	if cause == nil || cause == verbs.ErrClosed {
		return fmt.Errorf("%s: connection: %w", name, verbs.ErrClosed)
	}
	return fmt.Errorf("%s: connection: %w: %w", name, verbs.ErrClosed, cause)
}

// closedErr is ClosedErr of this session's backend.
func (s *Session) closedErr(cause error) error { return ClosedErr(s.name, cause) }

// SetParams records the link parameters the requester measured (a PARAMS
// frame); Peers report them.
func (s *Session) SetParams(p verbs.LinkParams) {
	s.Mu.Lock()
	s.params = p
	s.Mu.Unlock()
}

// Call sends a CALL and waits for its REPLY (verbs.Conn.Call).
func (s *Session) Call(ctx context.Context, method uint16, req, resp []byte) ([]byte, error) {
	return s.roundTrip(ctx, false, method, req, resp)
}

// Ping is one PING/PONG round trip.
func (s *Session) Ping(ctx context.Context) error {
	_, err := s.roundTrip(ctx, true, 0, nil, nil)
	return err
}

// roundTrip sends a CALL (or a PING) and waits for the answer.
func (s *Session) roundTrip(ctx context.Context, ping bool, method uint16, req, resp []byte) ([]byte, error) {
	if len(req) > frame.MaxMessage {
		return resp, fmt.Errorf("%s: call request of %d bytes, at most %d: %w", s.name, len(req), frame.MaxMessage, verbs.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return resp, fmt.Errorf("%s: call method %d: %w", s.name, method, err)
	}
	id, pc, err := s.calls.Start(ping, resp)
	if err != nil {
		return resp, err
	}
	h := frame.Header{Type: frame.TypeCall, Method: method, ID: id, Len: uint32(len(req))}
	if ping {
		h = frame.Header{Type: frame.TypePing, ID: id}
	}
	s.c.Send(h, req) // if the session ends meanwhile, finalizing fails the call
	return s.calls.Wait(ctx, id, pc, method, resp)
}

// Answer delivers a REPLY or PONG (h, its body next in rd) to its waiting
// call (see calls.Table.Answer).
func (s *Session) Answer(rd *frame.Reader, h *frame.Header) error {
	return s.calls.Answer(rd, h, s.Peer, s.closedErr)
}

// EndCalls fails every call still waiting for its answer with err (a
// ClosedErr); Finalize calls it.
func (s *Session) EndCalls(err error) { s.calls.End(err) }

// ProtocolErr is a protocol violation of the other side, seen in a frame.
func (s *Session) ProtocolErr(reason string) error {
	return &verbs.ProtocolError{Peer: s.Peer, Stage: "frame", Reason: reason}
}

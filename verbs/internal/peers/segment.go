package peers

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/calls"
	"github.com/scatterkit/scatterkit/verbs/internal/listener"
)

// member is a backend's session type: a pointer to a struct that embeds
// Session (only such a type has base).
type member interface{ base() *Session }

// Segment is the part of a backend's verbs.Segment that does not depend
// on how its bytes travel: the address and regions it reports, the
// handlers its calls run, its sessions with their accept loop, and the
// limits they share. S is the backend's session type, a pointer to a
// struct that embeds Session. A backend's segment embeds Segment, adds its
// listener, handshake and exported memory, reads the checked options as
// Opts, and implements Close with CloseSessions. Init it before use.
type Segment[S member] struct {
	shared
	sessions *listener.Sessions[S]
	addr     string
	infos    []verbs.RegionInfo
	evicted  error
}

// shared is what a segment's sessions reach of it.
type shared struct {
	// Opts are the segment's options, checked (listener.CheckOptions).
	Opts verbs.ListenOptions

	name      string
	handlers  listener.Handlers
	callBytes listener.CallBytes // call requests held over all sessions
	keep      calls.KeepBudget   // call buffers the sessions' idle pools keep
	peerEnded error              // what a Peer reports once its call is over (built once)
	remove    func(id uint64)
}

func (sg *shared) report(err error) {
	if sg.Opts.OnError != nil {
		sg.Opts.OnError(err)
	}
}

// Init readies sg, a segment of backend name ("shm", "tcp") with checked
// options opts, served at addr, whose peers see the regions infos.
func (sg *Segment[S]) Init(name string, opts verbs.ListenOptions, addr string, infos []verbs.RegionInfo) {
	sg.Opts, sg.name, sg.addr, sg.infos = opts, name, addr, infos
	sg.sessions = listener.NewSessions[S](opts.MaxSessions, opts.MaxHandshakes)
	sg.callBytes = listener.CallBytes{Limit: opts.MaxCallBytes}
	sg.keep = calls.KeepBudget{Limit: listener.KeepCallBuffers}
	sg.peerEnded = fmt.Errorf("%s: peer of an ended call: %w", name, verbs.ErrClosed)
	sg.evicted = fmt.Errorf("%s: connection evicted by the owner: %w", name, verbs.ErrClosed)
	sg.remove = sg.sessions.Remove
}

// Addr implements verbs.Segment.
func (sg *Segment[S]) Addr() string { return sg.addr }

// Regions implements verbs.Segment.
func (sg *Segment[S]) Regions() []verbs.RegionInfo { return sg.infos }

// Handle implements verbs.Segment.
func (sg *Segment[S]) Handle(method uint16, h verbs.Handler) { sg.handlers.Set(method, h) }

// Evict implements verbs.Segment: the session fails, and the channel is
// its Fenced (when that closes is the backend's: see its Finalize).
func (sg *Segment[S]) Evict(connID uint64) <-chan struct{} {
	return sg.sessions.Evict(connID, func(s S) <-chan struct{} {
		b := s.base()
		b.Fail(sg.evicted)
		return b.Fenced
	})
}

// Serve starts the accept loop on ln: every accepted connection runs
// handshake on a goroutine of its own (see listener.Sessions.Serve).
func (sg *Segment[S]) Serve(ln net.Listener, handshake func(net.Conn) error) {
	sg.sessions.Serve(sg.name, ln, handshake, sg.report)
}

// Add readies s, an owner's session whose handshake is done but for its
// answer, to serve this segment's calls, and adds it to the sessions
// under a fresh connection id (its Session's ID). If it is not added, its
// context is cancelled and the error says why: verbs.ErrClosed once the
// segment closes, an error wrapping verbs.ErrNotAdmitted (naming the
// peer) when it serves MaxSessions already.
func (sg *Segment[S]) Add(s S) error {
	b := s.base()
	b.serve(&sg.shared)
	if err := sg.sessions.Add(s, &b.ID); err != nil {
		b.cancel()
		if errors.Is(err, verbs.ErrNotAdmitted) {
			return fmt.Errorf("%s: %s: %w", sg.name, b.Peer, err)
		}
		return err
	}
	return nil
}

// Get returns the session of connection id.
func (sg *Segment[S]) Get(id uint64) (S, bool) { return sg.sessions.Get(id) }

// Drop forgets s, added but never started (its answer to the handshake
// failed): the segment removes it and its context is cancelled.
func (sg *Segment[S]) Drop(s S) {
	b := s.base()
	sg.sessions.Remove(b.ID)
	b.cancel()
	b.jobs.Drain()
}

// CloseSessions is the part of Close common to the backends: it stops
// accepting at ln and ends every session with end, concurrently (see
// listener.Sessions.Close). first is false, and nothing is done, if it
// ran before; err is ln's close error.
func (sg *Segment[S]) CloseSessions(ln io.Closer, end func(S)) (first bool, err error) {
	first, err = sg.sessions.Close(ln, end)
	if err != nil {
		err = fmt.Errorf("%s: segment close: %w", sg.name, err)
	}
	return first, err
}

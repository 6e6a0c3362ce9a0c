package listener

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
)

// Sessions is a segment's set of live sessions, keyed by the connection id
// each gets when it is added, together with the goroutines (accept loop,
// handshakes) that feed it. Create it with NewSessions.
type Sessions[S any] struct {
	mu         sync.Mutex
	closed     bool
	m          map[uint64]S
	max        int
	handshakes chan struct{} // one token per handshake in progress
	pending    map[net.Conn]struct{}
	done       chan struct{} // closed by Close
	nextID     uint64
	wg         sync.WaitGroup // accept loop and handshakes
}

// NewSessions returns an empty set of at most maxSessions sessions, with at most
// handshakes handshakes in progress at once, whose connection ids start
// at a random point, so ids of different segments (and restarts) rarely
// meet.
func NewSessions[S any](maxSessions, handshakes int) *Sessions[S] {
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	return &Sessions[S]{m: make(map[uint64]S), max: maxSessions, handshakes: make(chan struct{}, max(handshakes, 1)),
		pending: make(map[net.Conn]struct{}), done: make(chan struct{}), nextID: binary.LittleEndian.Uint64(seed[:]) >> 1}
}

// Add adds s under a fresh connection id, which it stores in *id while
// the set is locked (so Close, which ends the sessions it finds, sees the
// id). It fails with verbs.ErrClosed once Close has begun, and with an
// error wrapping verbs.ErrNotAdmitted when the set is full.
func (ss *Sessions[S]) Add(s S, id *uint64) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return verbs.ErrClosed
	}
	if len(ss.m) >= ss.max {
		return fmt.Errorf("%d connections served, at most %d: %w", len(ss.m), ss.max, verbs.ErrNotAdmitted)
	}
	ss.nextID++
	*id = ss.nextID
	ss.m[*id] = s
	return nil
}

// Get returns the session with connection id id.
func (ss *Sessions[S]) Get(id uint64) (S, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	return s, ok
}

// Evict ends the session with connection id id with evict, which fails it
// and returns its fence (see verbs.Segment.Evict); a connection that is
// not in the set (never was, or was fenced and forgotten) gets a closed
// channel.
func (ss *Sessions[S]) Evict(id uint64, evict func(S) <-chan struct{}) <-chan struct{} {
	s, ok := ss.Get(id)
	if !ok {
		return closedFence
	}
	return evict(s)
}

// closedFence is the fence of a connection that is not open.
var closedFence = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Remove forgets the session with connection id id (if any).
func (ss *Sessions[S]) Remove(id uint64) {
	ss.mu.Lock()
	delete(ss.m, id)
	ss.mu.Unlock()
}

// Len returns the number of live sessions.
func (ss *Sessions[S]) Len() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.m)
}

// Serve starts the accept loop on ln: every accepted connection gets a
// goroutine running handshake, and a connection whose handshake fails is
// closed, its error reported unless it is an orderly end (see Abnormal).
// Accept errors other than the listener's close are reported as
// "<name>: accept: ..." and retried after a pause. The loop ends when ln
// is closed (by Close).
func (ss *Sessions[S]) Serve(name string, ln net.Listener, handshake func(net.Conn) error, report func(error)) {
	ss.wg.Add(1)
	go ss.acceptLoop(name, ln, handshake, report)
}

func (ss *Sessions[S]) acceptLoop(name string, ln net.Listener, handshake func(net.Conn) error, report func(error)) {
	defer ss.wg.Done()
	for {
		// A handshake token first: with MaxHandshakes in progress the
		// loop waits (connections queue in the kernel's backlog) until
		// one ends, which each does within the handshake timeout.
		select {
		case ss.handshakes <- struct{}{}:
		case <-ss.done:
			return
		}
		nc, err := ln.Accept()
		if err != nil {
			<-ss.handshakes
			if errors.Is(err, net.ErrClosed) {
				return
			}
			report(fmt.Errorf("%s: accept: %w", name, err))
			time.Sleep(5 * time.Millisecond) // e.g. out of descriptors
			continue
		}
		ss.mu.Lock()
		if ss.closed {
			ss.mu.Unlock()
			<-ss.handshakes
			_ = nc.Close()
			return
		}
		ss.wg.Add(1)
		ss.pending[nc] = struct{}{}
		ss.mu.Unlock()
		go func() {
			defer ss.wg.Done()
			defer func() {
				ss.mu.Lock()
				delete(ss.pending, nc)
				ss.mu.Unlock()
				<-ss.handshakes
			}()
			if err := handshake(nc); err != nil {
				_ = nc.Close()
				if Abnormal(err) {
					report(err)
				}
			}
		}()
	}
}

// Close ends the set once: Add fails from now on, ln stops accepting, end
// runs on every live session, and Close returns when the accept loop and
// every handshake have returned. The sessions are ended concurrently. first is false (and nothing is done) if
// Close ran before. err is ln's close error, unless it was already
// closed.
func (ss *Sessions[S]) Close(ln io.Closer, end func(S)) (first bool, err error) {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return false, nil
	}
	ss.closed = true
	close(ss.done)
	live := make([]S, 0, len(ss.m))
	for _, s := range ss.m {
		live = append(live, s)
	}
	// Handshakes in progress end now, not at their timeout.
	for nc := range ss.pending {
		_ = nc.Close()
	}
	ss.mu.Unlock()
	err = ln.Close()
	var ends sync.WaitGroup
	for _, s := range live {
		ends.Go(func() { end(s) }) // at once: each end may wait on its peer
	}
	ends.Wait()
	ss.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return true, err
}

// Abnormal reports whether err, ending a connection or its handshake, is
// worth reporting to ListenOptions.OnError: anything but an orderly close
// (EOF, a closed socket, verbs.ErrClosed).
func Abnormal(err error) bool {
	return !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, verbs.ErrClosed)
}

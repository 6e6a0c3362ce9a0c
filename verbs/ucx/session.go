//go:build ucx

package ucx

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/peers"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
	"github.com/scatterkit/scatterkit/verbs/ucx/internal/ucp"
)

// maxAttachBytes bounds an attachment on the wire: a worker address and
// the most regions with the largest keys.
const maxAttachBytes = attachFixed + MaxWorkerAddress + MaxAttachRegions*(attachRegion+MaxPackedKey)

// session is one connection seen from either end: its control socket
// (a TCP connection carrying the handshake, then CALL/REPLY, PING/PONG
// and PARAMS frames, as shm's Unix socket does), and its UCX side, an
// endpoint from this side's worker to the other's with the other side's
// regions unpacked for it. Data never crosses the socket.
type session struct {
	peers.Session
	t  *Transport
	nc net.Conn
	rd *frame.Reader

	ep     *ucp.Endpoint // toward the other side's worker
	remote *remoteTable  // the other side's regions, for ep

	// The loop's thread only: set once this side stops posting toward the
	// other (its queues' posts then complete as closed).
	gone    bool
	goneErr error
	queues  []*queue // every queue of the session (its Peers' and the Conn's)

	wmu  sync.Mutex // serializes writes
	wbuf []byte

	pinned []*regtab.Entry // requester: exposures to unpin at the end (under Mu)
	main   *queue          // requester: the Conn's queue

	wg     sync.WaitGroup // the reader goroutine
	forced bool           // the socket was closed before the other side let go (under Mu)
}

var _ peers.Carrier = (*session)(nil)

func newSession(t *Transport, owner bool, nc net.Conn, rd *frame.Reader, peer string) *session {
	s := &session{t: t, nc: nc, rd: rd}
	s.Init("ucx", owner, peer, s)
	return s
}

// start starts the reader; false if the session has already ended.
func (s *session) start() bool {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.Closed() {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.Fail(s.ReadFrames(s.rd, s))
		s.drain()
	}()
	return true
}

// drain reads and drops what the other side still sends after this side
// ended, until the other side shuts its writing half (its sign that it
// has let go of this side's memory) or a forced close.
func (s *session) drain() {
	var buf [4096]byte
	for {
		if _, err := s.nc.Read(buf[:]); err != nil {
			return
		}
	}
}

// newQueue returns a queue of the session (registered for the teardown).
func (s *session) newQueue(depth int) *queue {
	q := newQueue(s.t, s, depth)
	_ = s.t.lp.do(func() { s.queues = append(s.queues, q) })
	return q
}

// Shut implements peers.Carrier: nothing to do at once; Finalize stops
// the posts and closes the endpoint.
func (s *session) Shut() {}

// NewPoster implements peers.Carrier: a queue over the requester's
// exposures, through the owner's endpoint.
func (s *session) NewPoster(depth int) peers.Poster { return s.newQueue(depth) }

// DropPoster implements peers.Carrier: the queue (idle: its call's
// requests are all answered) leaves the session's list and its batches
// are freed, so a long session whose calls come in bursts keeps no more
// queues than its idle Peers.
func (s *session) DropPoster(p peers.Poster) {
	q := p.(*queue)
	_ = s.t.lp.do(func() {
		s.queues = slices.DeleteFunc(s.queues, func(x *queue) bool { return x == q })
		if !q.inFlight() {
			q.freeBatches()
		}
	})
}

// Finalize implements peers.Carrier. It ends the session in the order
// that keeps both sides' memory safe, as shm's does:
//
//  1. this side stops touching the other's memory: pending calls fail,
//     the owner's handlers have returned, no queue posts any more, the
//     operations in flight complete (the peer answers them, within
//     CloseGrace; past it the endpoint is closed by force and they fail),
//     and the endpoint is closed after a flush: nothing of this side's
//     can reach the other's memory any more;
//  2. it shuts its writing half of the socket: the other side reads EOF,
//     which means "I have let go of your memory" (not sent when the
//     endpoint had to be forced, since a forced close does not say what
//     of the last operations reached the peer);
//  3. its reader reads the other side's EOF: the session is fenced;
//  4. the socket is closed, the exposures unpinned.
func (s *session) Finalize() {
	s.Mu.Lock()
	cause := s.Cause()
	s.Mu.Unlock()
	cerr := closedErr(cause)
	s.EndCalls(cerr)
	s.WaitHandlers()
	clean := s.release(cause)
	if s.main != nil {
		s.main.cq.Close(cerr)
	}
	if clean {
		if tc, ok := s.nc.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	s.wg.Wait()
	s.Mu.Lock()
	forced := s.forced
	pinned := s.pinned
	s.pinned = nil
	s.Mu.Unlock()
	if !forced && clean {
		close(s.Fenced)
	}
	_ = s.nc.Close()
	if pinned != nil {
		s.t.reg.Unpin(pinned)
	}
	if s.Owner {
		s.Leave()
	}
	close(s.Dead)
}

// release is step 1 of Finalize: no more posts, the flights done, the
// keys destroyed and the endpoint closed (flushed, or by force past
// CloseGrace). It reports whether it ended cleanly.
func (s *session) release(cause error) bool {
	lp := s.t.lp
	if err := lp.do(func() { s.gone, s.goneErr = true, cause }); err != nil {
		return false // the loop ended (Transport.Close): its worker is gone, and the endpoint with it
	}
	deadline := time.Now().Add(s.t.cfg.CloseGrace)
	busy := func() bool {
		inflight := false
		_ = lp.do(func() {
			for _, q := range s.queues {
				inflight = inflight || q.inFlight()
			}
		})
		return inflight
	}
	for busy() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
	}
	clean := !busy()
	dropKeys := func() {
		_ = lp.do(func() {
			if s.remote != nil {
				s.remote.destroy()
			}
		})
	}
	if clean {
		dropKeys() // nothing in flight uses them: they go before their endpoint
	}
	var req ucp.Request
	var err error
	if s.ep != nil {
		if derr := lp.do(func() { req, err = s.ep.Close(!clean && s.ep.PeerFailure) }); derr != nil {
			return false
		}
		for req.Pending() && err == nil {
			var done bool
			_ = lp.do(func() {
				lp.w.Progress()
				done, err = lp.w.Check(&req)
			})
			if done {
				break
			}
			if time.Now().After(deadline) && clean {
				// The flush of the close waits on a peer that does not
				// answer. (UCX frees the endpoint once its close request
				// completes; the request is left to the worker.)
				clean = false
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
		if err != nil {
			clean = false
		}
	}
	// The flights have finished (or failed with the forced close): the
	// keys and the queues' batches go.
	for busy() {
		time.Sleep(50 * time.Microsecond)
		if time.Now().After(deadline.Add(s.t.cfg.CloseGrace)) {
			return false // a request UCX never completes: leave its batch
		}
	}
	dropKeys()
	_ = lp.do(func() {
		for _, q := range s.queues {
			q.freeBatches()
		}
	})
	return clean
}

// closeWithin ends the session and waits until it is finalized; past
// grace the socket is closed regardless, unfenced. It reports whether the
// session ended fenced.
func (s *session) closeWithin(grace time.Duration) (fenced bool) {
	s.Fail(verbs.ErrClosed)
	t := time.NewTimer(2 * grace) // the endpoint's close takes one grace at most
	defer t.Stop()
	select {
	case <-s.Dead:
	case <-t.C:
		s.Mu.Lock()
		s.forced = true
		s.Mu.Unlock()
		_ = s.nc.Close()
		<-s.Dead
	}
	select {
	case <-s.Fenced:
		return true
	default:
		return false
	}
}

// write sends one frame.
func (s *session) write(h *frame.Header, payload []byte) error {
	if s.Ctx.Err() != nil {
		return closedErr(verbs.ErrClosed)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wbuf = frame.Append(s.wbuf[:0], h)
	s.wbuf = append(s.wbuf, payload...)
	_, err := s.nc.Write(s.wbuf)
	if cap(s.wbuf) > 1<<20 {
		s.wbuf = nil
	}
	if err != nil {
		s.Fail(err)
		return closedErr(err)
	}
	return nil
}

// Send implements peers.Carrier: a failed write ends the session.
func (s *session) Send(h frame.Header, payload []byte) { _ = s.write(&h, payload) }

// Reply implements peers.Replier.
func (s *session) Reply(h frame.Header, payload []byte) error { return s.write(&h, payload) }

// appendHandshake appends a HELLO or WELCOME frame of h and the
// attachment a after it (its length, then its bytes).
func appendHandshake(dst []byte, typ frame.Type, h *frame.Hello, a *Attachment) ([]byte, error) {
	dst = frame.Append(dst, &frame.Header{Type: typ, Len: uint32(frame.HelloSize(h))})
	dst = frame.AppendHello(dst, h)
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst, err := AppendAttachment(dst, a)
	if err != nil {
		return nil, err
	}
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst, nil
}

// readHandshake reads a HELLO or WELCOME (want) and the attachment after
// it, decoded against the regions the frame lists (and probe, when set).
func readHandshake(rd *frame.Reader, want frame.Type, h *frame.Hello, a *Attachment, probe func(*frame.Hello) verbs.RegionInfo) error {
	if err := readHello(rd, want, h); err != nil {
		return err
	}
	return readAttachment(rd, h, a, probe)
}

// readHello reads a HELLO or WELCOME frame (want), or a refusal.
func readHello(rd *frame.Reader, want frame.Type, h *frame.Hello) error {
	var hdr frame.Header
	if err := rd.Next(&hdr); err != nil {
		return err
	}
	if hdr.Type != want {
		return &verbs.ProtocolError{Stage: "handshake", Reason: fmt.Sprintf("%s instead of %s", hdr.Type, want)}
	}
	body := make([]byte, hdr.Len)
	if err := rd.ReadFull(body); err != nil {
		return err
	}
	if frame.Refused(&hdr) {
		return frame.RefusedErr(body)
	}
	return frame.DecodeHello(h, body)
}

// readAttachment reads the attachment that follows h (its length, at most
// maxAttachBytes, then its bytes) and decodes it against the regions h
// lists (and probe, when set).
func readAttachment(rd *frame.Reader, h *frame.Hello, a *Attachment, probe func(*frame.Hello) verbs.RegionInfo) error {
	var lb [4]byte
	if err := rd.ReadFull(lb[:]); err != nil {
		return err
	}
	n := binary.LittleEndian.Uint32(lb[:])
	if n > maxAttachBytes {
		return &AttachError{Field: "length", Reason: fmt.Sprintf("%d bytes, at most %d", n, maxAttachBytes)}
	}
	b := make([]byte, n)
	if err := rd.ReadFull(b); err != nil {
		return err
	}
	listed := h.Regions
	if probe != nil {
		if p := probe(h); p.Key != 0 {
			listed = append(listed[:len(listed):len(listed)], p)
		}
	}
	return DecodeAttachment(a, b, listed)
}

// connectPeer makes the endpoint toward the other side's worker and
// unpacks its keys (on the loop's thread). Only an admitted peer's
// strictly decoded attachment gets here: UCX parses both unvalidated.
func (s *session) connectPeer(a *Attachment, listed []verbs.RegionInfo, probe verbs.RegionInfo) error {
	var err error
	if derr := s.t.lp.do(func() {
		if s.ep, err = s.t.lp.w.Connect(a.Worker); err != nil {
			return
		}
		if s.remote, err = unpackRemote(s.ep, a, listed, probe); err != nil {
			if r, cerr := s.ep.Close(s.ep.PeerFailure); cerr == nil && r.Pending() {
				_ = s.t.lp.w.Wait(&r)
			}
			s.ep = nil
		}
	}); derr != nil {
		return derr
	}
	return err
}

// dropPeer undoes connectPeer for a session that never started.
func (s *session) dropPeer() {
	_ = s.t.lp.do(func() {
		if s.remote != nil {
			s.remote.destroy()
		}
		if s.ep != nil {
			if r, err := s.ep.Close(s.ep.PeerFailure); err == nil && r.Pending() {
				_ = s.t.lp.w.Wait(&r)
			}
			s.ep = nil
		}
	})
}

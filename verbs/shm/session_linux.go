//go:build linux

package shm

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/peers"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

// session is one connection's control socket, seen from either end, with
// the other side's regions mapped into this process. Data never crosses
// the socket: it carries CALL/REPLY, PING/PONG and PARAMS frames. The
// Session it embeds runs the calls, the owner's Peers (queues over maps)
// and the end; the socket and the mappings are this package's.
type session struct {
	peers.Session
	t    *Transport
	nc   *net.UnixConn
	rd   *frame.Reader
	maps *mapping // the other side's regions, mapped here

	wmu  sync.Mutex // serializes writes
	wbuf []byte

	pinned []*regtab.Entry // requester: exposures to unpin at the end (under Mu)
	main   *queue          // requester: the Conn's queue

	wg     sync.WaitGroup // the reader goroutine
	forced bool           // the socket was closed before the other side let go (under Mu)
}

var _ peers.Carrier = (*session)(nil)

func newSession(t *Transport, owner bool, nc *net.UnixConn, peer string, m *mapping) *session {
	s := &session{t: t, nc: nc, maps: m, rd: frame.NewReader(nc, 64<<10)}
	s.Init("shm", owner, peer, s)
	return s
}

// start starts the reader; false if the session has already ended (a
// segment closed while the handshake ran).
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
// of the session ended, until the other side shuts its writing half: its
// sign that it has let go of this side's memory (see Finalize). A forced
// close (closeWithin past its grace) ends the wait too, unfenced.
func (s *session) drain() {
	var buf [4096]byte
	for {
		if _, err := s.nc.Read(buf[:]); err != nil {
			return
		}
	}
}

// Shut implements peers.Carrier: nothing to do, the reader goes on,
// dropping what arrives, until the other side's EOF (see Finalize).
func (s *session) Shut() {}

// NewPoster implements peers.Carrier: a queue over the requester's
// exposures, mapped here.
func (s *session) NewPoster(depth int) peers.Poster { return newQueue(s.t, s.maps, depth) }

// DropPoster implements peers.Carrier: a queue holds nothing of the
// session's but its mappings, which Finalize unmaps.
func (s *session) DropPoster(peers.Poster) {}

func closedErr(cause error) error { return peers.ClosedErr("shm", cause) }

// Finalize implements peers.Carrier. It ends the session in the order
// that keeps both sides' memory safe, the same on either side:
//
//  1. this side stops touching the other's memory: pending calls fail,
//     the owner's handlers have returned (their Peers copy inside Post),
//     and the other side's regions are unmapped once the Posts and holds
//     in progress are done;
//  2. it shuts its writing half: the other side reads EOF, which means
//     "I have let go of your memory";
//  3. its reader reads the other side's EOF, sent at that side's step 2:
//     the other side has let go of this side's memory, and the session is
//     fenced (Segment.Evict's channel closes);
//  4. the socket is closed, the exposures unpinned.
//
// A side that never reaches step 2 (frozen, or hostile) keeps this one at
// step 3; closeWithin bounds that wait, unfenced.
func (s *session) Finalize() {
	s.Mu.Lock()
	cause := s.Cause()
	s.Mu.Unlock()
	cerr := closedErr(cause)
	s.EndCalls(cerr)
	s.WaitHandlers()
	if s.main != nil {
		s.main.cq.Close(cerr)
	}
	s.maps.unmap(cerr)
	_ = s.nc.CloseWrite()
	s.wg.Wait()
	s.Mu.Lock()
	forced := s.forced
	pinned := s.pinned
	s.pinned = nil
	s.Mu.Unlock()
	if !forced {
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

// closeWithin ends the session and waits until it is finalized; if the
// other side has not let go within grace (frozen, or never shutting its
// half), the socket is closed regardless, unfenced, so the wait is
// bounded.
// It reports whether the session ended fenced.
func (s *session) closeWithin(grace time.Duration) (fenced bool) {
	s.Fail(verbs.ErrClosed)
	t := time.NewTimer(grace)
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
		// The session ended: nothing more is sent (a handler's late reply
		// must not reach a caller whose call already failed).
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

// Reply implements peers.Replier: every frame goes through the one
// socket, from the reader or a handler alike.
func (s *session) Reply(h frame.Header, payload []byte) error { return s.write(&h, payload) }

// sendMsg writes b with the descriptors attached.
func sendMsg(nc *net.UnixConn, b []byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, oobn, err := nc.WriteMsgUnix(b, oob, nil)
	if err != nil {
		return err
	}
	if n != len(b) || oobn != len(oob) {
		return io.ErrShortWrite
	}
	return nil
}

// readMsg fills b from nc and returns the descriptors that came with it.
// On error every received descriptor is closed.
func readMsg(nc *net.UnixConn, b []byte) ([]int, error) {
	oob := make([]byte, unix.CmsgSpace(4*(frame.MaxRegions+1)))
	var fds []int
	for got := 0; got < len(b); {
		n, oobn, flags, _, err := nc.ReadMsgUnix(b[got:], oob)
		if oobn > 0 {
			msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
			for i := range msgs {
				if msgs[i].Header.Level == unix.SOL_SOCKET && msgs[i].Header.Type == unix.SCM_RIGHTS {
					if got, rerr := unix.ParseUnixRights(&msgs[i]); rerr == nil {
						fds = append(fds, got...)
					}
				}
			}
			if perr != nil && err == nil {
				err = perr
			}
		}
		if err == nil && flags&unix.MSG_CTRUNC != 0 {
			err = &verbs.ProtocolError{Stage: "handshake", Reason: "too many descriptors"}
		}
		if err == nil && n == 0 {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			closeFDs(fds)
			return nil, err
		}
		got += n
	}
	return fds, nil
}

// readHandshake reads a HELLO or WELCOME (want) with its descriptors.
func readHandshake(nc *net.UnixConn, want frame.Type, h *frame.Hello) ([]int, error) {
	var hb [frame.HeaderSize]byte
	fds, err := readMsg(nc, hb[:])
	if err != nil {
		return nil, err
	}
	var hdr frame.Header
	if err := frame.Decode(&hdr, hb[:]); err != nil {
		closeFDs(fds)
		return nil, err
	}
	if hdr.Type != want {
		closeFDs(fds)
		return nil, &verbs.ProtocolError{Stage: "handshake", Reason: fmt.Sprintf("%s instead of %s", hdr.Type, want)}
	}
	body := make([]byte, hdr.Len)
	if _, err := io.ReadFull(nc, body); err != nil {
		closeFDs(fds)
		return nil, err
	}
	if frame.Refused(&hdr) {
		closeFDs(fds)
		return nil, frame.RefusedErr(body)
	}
	if err := frame.DecodeHello(h, body); err != nil {
		closeFDs(fds)
		return nil, err
	}
	return fds, nil
}

// mapRegions maps the other side's regions from their descriptors
// (closing the descriptors) and builds the table that validates requests
// toward them.
func mapRegions(infos []verbs.RegionInfo, fds []int, probe verbs.RegionInfo) (*mapping, error) {
	defer closeFDs(fds)
	want := len(infos)
	if probe.Key != 0 {
		want++
	}
	if len(fds) != want {
		return nil, &verbs.ProtocolError{Stage: "handshake", Reason: fmt.Sprintf("%d descriptors for %d regions", len(fds), want)}
	}
	m := &mapping{visible: make(map[verbs.Key]mappedRegion, len(infos))}
	entries := make([]regtab.TableEntry, 0, want)
	for i, ri := range infos {
		mem, err := mapPeer(fds[i], ri.Len, ri.Access&verbs.AccessRemoteWrite != 0, false)
		if err != nil {
			unmapAll(m.maps)
			return nil, &verbs.ProtocolError{Stage: "handshake", Reason: fmt.Sprintf("region %q: %v", ri.Name, err)}
		}
		m.maps = append(m.maps, mem)
		m.visible[ri.Key] = mappedRegion{mem: mem, access: ri.Access}
		entries = append(entries, regtab.TableEntry{Info: ri, Mem: mem})
	}
	if probe.Key != 0 {
		mem, err := mapPeer(fds[len(infos)], probe.Len, false, true)
		if err != nil {
			unmapAll(m.maps)
			return nil, &verbs.ProtocolError{Stage: "handshake", Reason: fmt.Sprintf("probe region: %v", err)}
		}
		m.maps = append(m.maps, mem)
		entries = append(entries, regtab.TableEntry{Info: probe, Mem: mem, Hidden: true})
	}
	m.table = regtab.NewTable(entries)
	return m, nil
}

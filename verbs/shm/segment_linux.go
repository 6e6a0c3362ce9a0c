//go:build linux

package shm

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/calls"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/handshake"
	"github.com/scatterkit/scatterkit/verbs/internal/listener"
	"github.com/scatterkit/scatterkit/verbs/internal/probe"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

// segment is the owner side: a Unix socket that hands every connecting
// requester the memfds of the exported regions (and of a probe region).
type segment struct {
	t     *Transport
	ln    *net.UnixListener
	addr  string
	opts  verbs.ListenOptions
	pins  []*regtab.Entry
	fds   []int // descriptors to send: exports in order, then the probe
	infos []verbs.RegionInfo
	probe *memfd
	pinfo verbs.RegionInfo

	handlers  listener.Handlers
	sessions  *listener.Sessions[*session]
	callBytes listener.CallBytes // call requests held over all sessions
	keep      calls.KeepBudget   // call buffers the sessions' idle pools keep
}

var _ verbs.Segment = (*segment)(nil)

func (t *Transport) listen(addr string, exports []verbs.Export, opts verbs.ListenOptions) (_ *segment, err error) {
	opts, err = listener.CheckOptions(exports, opts)
	if err != nil {
		return nil, fmt.Errorf("shm: listen: %w", err)
	}
	pins, err := t.reg.Pin(exports)
	if err != nil {
		return nil, fmt.Errorf("shm: listen: %w", err)
	}
	defer func() {
		if err != nil {
			t.reg.Unpin(pins)
		}
	}()
	fds, err := shareable(pins, exports)
	if err != nil {
		return nil, fmt.Errorf("shm: listen: %w", err)
	}
	sg := &segment{t: t, addr: addr, opts: opts, pins: pins, sessions: listener.NewSessions[*session](opts.MaxSessions, opts.MaxHandshakes),
		callBytes: listener.CallBytes{Limit: opts.MaxCallBytes}, keep: calls.KeepBudget{Limit: listener.KeepCallBuffers}}
	for _, x := range exports {
		sg.infos = append(sg.infos, x.Region.Info(x.Name))
	}
	sg.probe, err = newMemfd(probe.Bulk, true, false)
	if err != nil {
		return nil, err
	}
	probe.Pattern(sg.probe.mem)
	pk, err := verbs.NewKey()
	if err != nil {
		_ = sg.probe.free()
		return nil, err
	}
	sg.pinfo = verbs.RegionInfo{Name: "probe", Key: pk, Len: probe.Bulk, Access: verbs.AccessRemoteRead}
	pfd, err := sg.probe.shareFD(verbs.AccessRemoteRead)
	if err != nil {
		_ = sg.probe.free()
		return nil, err
	}
	sg.fds = append(fds, pfd)
	sg.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		_ = sg.probe.free()
		return nil, fmt.Errorf("shm: listen %s: %w", addr, err)
	}
	if !strings.HasPrefix(addr, "@") {
		if err = os.Chmod(addr, t.cfg.SocketMode.Perm()); err != nil {
			_ = sg.ln.Close()
			_ = sg.probe.free()
			return nil, fmt.Errorf("shm: listen %s: %w", addr, err)
		}
	}
	if err = t.open.AddSegment(sg); err != nil {
		_ = sg.ln.Close()
		_ = sg.probe.free()
		return nil, fmt.Errorf("shm: transport: %w", err)
	}
	sg.sessions.Serve("shm", sg.ln, func(nc net.Conn) error { return sg.accept(nc.(*net.UnixConn)) }, sg.report)
	return sg, nil
}

// granted returns the exports a peer granted access sees and the
// descriptors to send it (the probe's last). A peer granted less than
// full access does not get the exports peers may write at all: a
// descriptor of a writable memfd cannot be kept read-only (it can be
// reopened read-write through /proc), so the kernel could not refuse
// that peer's writes.
func (sg *segment) granted(granted verbs.Access) ([]verbs.RegionInfo, []int) {
	if granted == verbs.AccessRemoteRead|verbs.AccessRemoteWrite {
		return sg.infos, sg.fds
	}
	infos := verbs.GrantedInfos(sg.infos, granted, func(verbs.RegionInfo) bool { return true })
	fds := make([]int, 0, len(infos)+1)
	for _, ri := range infos {
		for i, all := range sg.infos {
			if all.Key == ri.Key {
				fds = append(fds, sg.fds[i])
			}
		}
	}
	return infos, append(fds, sg.fds[len(sg.fds)-1])
}

// peerCred returns the credentials the kernel recorded for the peer of nc
// when it connected.
func peerCred(nc *net.UnixConn) (*verbs.PeerCred, error) {
	rc, err := nc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var uc *unix.Ucred
	var serr error
	if err := rc.Control(func(fd uintptr) { uc, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return &verbs.PeerCred{PID: uc.Pid, UID: uc.Uid, GID: uc.Gid}, nil
}

// Addr implements verbs.Segment.
func (sg *segment) Addr() string { return sg.addr }

// Regions implements verbs.Segment.
func (sg *segment) Regions() []verbs.RegionInfo { return sg.infos }

// Handle implements verbs.Segment.
func (sg *segment) Handle(method uint16, h verbs.Handler) { sg.handlers.Set(method, h) }

func (sg *segment) handler(method uint16) verbs.Handler { return sg.handlers.Get(method) }

// Evict implements verbs.Segment: the session fails, and its fence
// closes once the requester has closed its end of the socket.
func (sg *segment) Evict(connID uint64) <-chan struct{} {
	return sg.sessions.Evict(connID, func(s *session) <-chan struct{} {
		s.fail(errEvicted)
		return s.fenced
	})
}

// errEvicted ends an evicted session.
var errEvicted = fmt.Errorf("shm: connection evicted by the owner: %w", verbs.ErrClosed)

// Close implements verbs.Segment. Each requester gets Config.CloseGrace
// to let go of the exports; then its socket is closed regardless.
func (sg *segment) Close() error {
	first, err := sg.sessions.Close(sg.ln, func(s *session) { s.closeWithin(sg.t.cfg.CloseGrace) })
	if !first {
		return nil
	}
	sg.t.reg.Unpin(sg.pins)
	sg.t.open.Remove(sg)
	ferr := sg.probe.free()
	if err != nil {
		return fmt.Errorf("shm: segment close: %w", err)
	}
	return ferr
}

func (sg *segment) report(err error) {
	if sg.opts.OnError != nil {
		sg.opts.OnError(err)
	}
}

func (sg *segment) forget(s *session) { sg.sessions.Remove(s.id) }

// accept runs the owner's half of the handshake: HELLO with the
// requester's exposed memfds in, WELCOME with the exported ones out.
func (sg *segment) accept(nc *net.UnixConn) error {
	peer := "unix:" + sg.addr
	_ = nc.SetDeadline(time.Now().Add(sg.t.cfg.HandshakeTimeout))
	var hello frame.Hello
	fds, err := readHandshake(nc, frame.TypeHello, &hello)
	if err != nil {
		return handshake.Err("shm", peer, err)
	}
	if hello.ProbeKey != 0 || hello.ConnID != 0 || hello.Token != 0 {
		closeFDs(fds)
		return &verbs.ProtocolError{Peer: peer, Stage: "handshake", Reason: "HELLO with owner fields set"}
	}
	policy := sg.opts.Admit
	if policy == nil {
		policy = verbs.OwnUIDPolicy().Admit
	}
	id := verbs.PeerIdentity{Transport: "shm", Addr: peer}
	if cred, err := peerCred(nc); err == nil {
		id.Cred = cred
	}
	refuse := func(err error) error {
		_ = sendMsg(nc, frame.AppendRefusal(nil, err.Error(), false), nil)
		return err
	}
	granted, err := verbs.Admit(policy, id)
	if err != nil {
		closeFDs(fds)
		return refuse(err)
	}
	infos, sendFDs := sg.granted(granted)
	m, err := mapRegions(hello.Regions, fds, verbs.RegionInfo{})
	if err != nil {
		return handshake.Err("shm", peer, err)
	}
	s := newSession(sg.t, true, nc, peer, m)
	s.seg = sg
	s.peerDepth = sg.opts.QueueDepth
	s.sem = make(chan struct{}, sg.opts.MaxCalls)
	s.admit = make(chan struct{}, maxWaitingCalls*sg.opts.MaxCalls)
	s.startWorkers(sg.opts.MaxCalls)
	s.callBytes.Limit = sg.opts.MaxConnCallBytes
	s.jobs.Keep = &sg.keep
	if err := sg.sessions.Add(s, &s.id); err != nil {
		m.unmap(verbs.ErrClosed)
		s.cancel()
		if errors.Is(err, verbs.ErrNotAdmitted) {
			return refuse(fmt.Errorf("shm: %s: %w", peer, err))
		}
		return err
	}
	w := frame.Hello{Lanes: 1, QueueDepth: uint32(sg.opts.QueueDepth), ConnID: s.id, Token: 1,
		ProbeKey: sg.pinfo.Key, ProbeLen: sg.pinfo.Len, Regions: infos}
	out := frame.Append(nil, &frame.Header{Type: frame.TypeWelcome, Len: uint32(frame.HelloSize(&w))})
	out = frame.AppendHello(out, &w)
	if err := sendMsg(nc, out, sendFDs); err != nil {
		sg.forget(s)
		m.unmap(verbs.ErrClosed)
		s.cancel()
		return handshake.Err("shm", peer, err)
	}
	_ = nc.SetDeadline(time.Time{})
	if !s.start() {
		return verbs.ErrClosed
	}
	return nil
}

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
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/handshake"
	"github.com/scatterkit/scatterkit/verbs/internal/linkprobe"
	"github.com/scatterkit/scatterkit/verbs/internal/listener"
	"github.com/scatterkit/scatterkit/verbs/internal/peers"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

// segment is the owner side: a Unix socket that hands every connecting
// requester the memfds of the exported regions (and of a probe region).
// The Segment it embeds holds the sessions, handlers and limits.
type segment struct {
	peers.Segment[*session]
	t     *Transport
	ln    *net.UnixListener
	pins  []*regtab.Entry
	fds   []int // descriptors to send: exports in order, then the probe
	probe *memfd
	pinfo verbs.RegionInfo
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
	sg := &segment{t: t, pins: pins}
	var infos []verbs.RegionInfo
	for _, x := range exports {
		infos = append(infos, x.Region.Info(x.Name))
	}
	sg.Init("shm", opts, addr, infos)
	sg.probe, err = newMemfd(linkprobe.Bulk, true, false)
	if err != nil {
		return nil, err
	}
	linkprobe.Pattern(sg.probe.mem)
	pk, err := verbs.NewKey()
	if err != nil {
		_ = sg.probe.free()
		return nil, err
	}
	sg.pinfo = verbs.RegionInfo{Name: "probe", Key: pk, Len: linkprobe.Bulk, Access: verbs.AccessRemoteRead}
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
	sg.Serve(sg.ln, func(nc net.Conn) error { return sg.accept(nc.(*net.UnixConn)) })
	return sg, nil
}

// granted returns the exports a peer granted access sees and the
// descriptors to send it (the probe's last). A peer granted less than
// full access does not get the exports peers may write at all: a
// descriptor of a writable memfd cannot be kept read-only (it can be
// reopened read-write through /proc), so the kernel could not refuse
// that peer's writes.
func (sg *segment) granted(granted verbs.Access) ([]verbs.RegionInfo, []int) {
	exported := sg.Regions()
	if granted == verbs.AccessRemoteRead|verbs.AccessRemoteWrite {
		return exported, sg.fds
	}
	infos := verbs.GrantedInfos(exported, granted, func(verbs.RegionInfo) bool { return true })
	fds := make([]int, 0, len(infos)+1)
	for _, ri := range infos {
		for i, all := range exported {
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

// Close implements verbs.Segment. Each requester gets Config.CloseGrace
// to let go of the exports; then its socket is closed regardless.
func (sg *segment) Close() error {
	first, err := sg.CloseSessions(sg.ln, func(s *session) { s.closeWithin(sg.t.cfg.CloseGrace) })
	if !first {
		return nil
	}
	sg.t.reg.Unpin(sg.pins)
	sg.t.open.Remove(sg)
	ferr := sg.probe.free()
	if err != nil {
		return err
	}
	return ferr
}

// accept runs the owner's half of the handshake: HELLO with the
// requester's exposed memfds in, WELCOME with the exported ones out.
func (sg *segment) accept(nc *net.UnixConn) error {
	peer := "unix:" + sg.Addr()
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
	policy := sg.Opts.Admit
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
	if err := sg.Add(s); err != nil {
		m.unmap(verbs.ErrClosed)
		if errors.Is(err, verbs.ErrNotAdmitted) {
			return refuse(err)
		}
		return err
	}
	w := frame.Hello{Lanes: 1, QueueDepth: uint32(sg.Opts.QueueDepth), ConnID: s.ID, Token: 1,
		ProbeKey: sg.pinfo.Key, ProbeLen: sg.pinfo.Len, Regions: infos}
	out := frame.Append(nil, &frame.Header{Type: frame.TypeWelcome, Len: uint32(frame.HelloSize(&w))})
	out = frame.AppendHello(out, &w)
	if err := sendMsg(nc, out, sendFDs); err != nil {
		sg.Drop(s)
		m.unmap(verbs.ErrClosed)
		return handshake.Err("shm", peer, err)
	}
	_ = nc.SetDeadline(time.Time{})
	if !s.start() {
		return verbs.ErrClosed
	}
	return nil
}

//go:build ucx

package ucx

import (
	"errors"
	"fmt"
	"net"
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

// segment is the owner side: a TCP listener for handshakes and control
// calls, the exported regions registered with UCX (their keys go to
// admitted peers only), and a probe region for the requesters' link
// measurement.
type segment struct {
	peers.Segment[*session]
	t     *Transport
	ln    net.Listener
	pins  []*regtab.Entry
	probe *regMem
	pinfo verbs.RegionInfo
}

var _ verbs.Segment = (*segment)(nil)

func (t *Transport) listen(addr string, exports []verbs.Export, opts verbs.ListenOptions) (_ *segment, err error) {
	opts, err = listener.CheckOptions(exports, opts)
	if err != nil {
		return nil, fmt.Errorf("ucx: listen: %w", err)
	}
	pins, err := t.reg.Pin(exports)
	if err != nil {
		return nil, fmt.Errorf("ucx: listen: %w", err)
	}
	sg := &segment{t: t, pins: pins}
	defer func() {
		if err != nil {
			t.reg.Unpin(pins)
			if sg.probe != nil {
				_ = t.free(sg.probe)
			}
		}
	}()
	var infos []verbs.RegionInfo
	for _, x := range exports {
		infos = append(infos, x.Region.Info(x.Name))
	}
	buf, err := unix.Mmap(-1, 0, linkprobe.Bulk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("ucx: listen: probe region: %w", err)
	}
	linkprobe.Pattern(buf)
	if sg.probe, err = t.newMem(buf, verbs.AccessRemoteRead); err != nil {
		_ = unix.Munmap(buf)
		return nil, fmt.Errorf("ucx: listen: probe region: %w", err)
	}
	sg.probe.mapped = true
	pk, err := verbs.NewKey()
	if err != nil {
		return nil, err
	}
	sg.pinfo = verbs.RegionInfo{Name: "probe", Key: pk, Len: linkprobe.Bulk, Access: verbs.AccessRemoteRead}
	if sg.ln, err = net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("ucx: listen %s: %w", addr, err)
	}
	sg.Init("ucx", opts, sg.ln.Addr().String(), infos)
	if err = t.open.AddSegment(sg); err != nil {
		_ = sg.ln.Close()
		return nil, fmt.Errorf("ucx: transport: %w", err)
	}
	sg.Serve(sg.ln, sg.accept)
	return sg, nil
}

// Close implements verbs.Segment. Each requester gets Config.CloseGrace
// (twice: this side's operations, then its letting go) to let go of the
// exports; then its socket is closed regardless.
func (sg *segment) Close() error {
	first, err := sg.CloseSessions(sg.ln, func(s *session) { s.closeWithin(sg.t.cfg.CloseGrace) })
	if !first {
		return nil
	}
	sg.t.reg.Unpin(sg.pins)
	sg.t.open.Remove(sg)
	return errors.Join(err, sg.t.free(sg.probe))
}

// mems returns the registrations behind the listed regions (exports,
// possibly with reduced access), by key.
func (sg *segment) mems(listed []verbs.RegionInfo) []*regMem {
	out := make([]*regMem, len(listed))
	for i, ri := range listed {
		for _, e := range sg.pins {
			if e.Region.Key() == ri.Key {
				out[i] = e.Data.(*regMem)
			}
		}
	}
	return out
}

// accept runs the owner's half of the handshake: HELLO with the
// requester's attachment in, admission, the endpoint toward the
// requester's worker, WELCOME with this side's attachment (the granted
// exports' keys and the probe's) out.
func (sg *segment) accept(nc net.Conn) error {
	peer := "ucx:" + nc.RemoteAddr().String()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	_ = nc.SetDeadline(time.Now().Add(sg.t.cfg.HandshakeTimeout))
	rd := frame.NewReader(nc, 64<<10)
	// The HELLO first, then admission, and only then the attachment (up to
	// a megabyte) is read: a peer that is not admitted makes the segment
	// hold no more than its HELLO.
	var hello frame.Hello
	if err := readHello(rd, frame.TypeHello, &hello); err != nil {
		return handshake.Err("ucx", peer, err)
	}
	if hello.ProbeKey != 0 || hello.ConnID != 0 || hello.Token != 0 {
		return &verbs.ProtocolError{Peer: peer, Stage: "handshake", Reason: "HELLO with owner fields set"}
	}
	refuse := func(err error) error {
		_, _ = nc.Write(frame.AppendRefusal(nil, err.Error(), false))
		return err
	}
	policy := sg.Opts.Admit
	if policy == nil {
		// UCX parses a peer's worker address and keys unvalidated, and its
		// software one-sided paths check nothing: by default only peers of
		// this host are served (docs/ucx.md, "Trust").
		policy = verbs.LoopbackPolicy().Admit
	}
	granted, err := verbs.Admit(policy, verbs.PeerIdentity{Transport: "ucx", Addr: nc.RemoteAddr().String()})
	if err != nil {
		return refuse(err)
	}
	var their Attachment
	if err := readAttachment(rd, &hello, &their, nil); err != nil {
		return handshake.Err("ucx", peer, err)
	}
	infos := verbs.GrantedInfos(sg.Regions(), granted, nil)
	mine, err := sg.t.attachment(infos, sg.mems(infos), granted, sg.probe, sg.pinfo.Key)
	if err != nil {
		return refuse(err)
	}
	s := newSession(sg.t, true, nc, rd, peer)
	if err := s.connectPeer(&their, hello.Regions, verbs.RegionInfo{}); err != nil {
		return handshake.Err("ucx", peer, err)
	}
	if err := sg.Add(s); err != nil {
		s.dropPeer()
		if errors.Is(err, verbs.ErrNotAdmitted) {
			return refuse(err)
		}
		return err
	}
	w := frame.Hello{Lanes: 1, QueueDepth: uint32(sg.Opts.QueueDepth), ConnID: s.ID, Token: 1,
		ProbeKey: sg.pinfo.Key, ProbeLen: sg.pinfo.Len, Regions: infos}
	out, err := appendHandshake(nil, frame.TypeWelcome, &w, mine)
	if err == nil {
		_, err = nc.Write(out)
	}
	if err != nil {
		sg.Drop(s)
		s.dropPeer()
		return handshake.Err("ucx", peer, err)
	}
	_ = nc.SetDeadline(time.Time{})
	if !s.start() {
		return verbs.ErrClosed
	}
	return nil
}

package tcp

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/handshake"
	"github.com/scatterkit/scatterkit/verbs/internal/linkprobe"
	"github.com/scatterkit/scatterkit/verbs/internal/listener"
	"github.com/scatterkit/scatterkit/verbs/internal/peers"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

// segment is the owner side: a listener serving a fixed table of
// exported regions (plus a hidden probe region) to every connection. The
// Segment it embeds holds the sessions, handlers and limits.
type segment struct {
	peers.Segment[*session]
	t     *Transport
	ln    *net.TCPListener
	pins  []*regtab.Entry
	table *regtab.Table
	probe verbs.RegionInfo // hidden region for link probes
	lanes atomic.Int64     // lanes of all sessions (MaxSegmentLanes)
}

var _ verbs.Segment = (*segment)(nil)

func (t *Transport) listen(addr string, exports []verbs.Export, opts verbs.ListenOptions) (*segment, error) {
	opts, err := listener.CheckOptions(exports, opts)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen: %w", err)
	}
	pins, err := t.reg.Pin(exports)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen: %w", err)
	}
	probeKey, err := verbs.NewKey()
	if err != nil {
		t.reg.Unpin(pins)
		return nil, err
	}
	entries := make([]regtab.TableEntry, 0, len(exports)+1)
	for _, x := range exports {
		entries = append(entries, regtab.TableEntry{Info: x.Region.Info(x.Name), Mem: x.Region.Bytes()})
	}
	probeMem := make([]byte, linkprobe.Bulk)
	linkprobe.Pattern(probeMem)
	probeInfo := verbs.RegionInfo{Name: "probe", Key: probeKey, Len: linkprobe.Bulk, Access: verbs.AccessRemoteRead}
	entries = append(entries, regtab.TableEntry{Hidden: true, Mem: probeMem, Info: probeInfo})
	la, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.reg.Unpin(pins)
		return nil, fmt.Errorf("tcp: listen %s: %w", addr, err)
	}
	ln, err := net.ListenTCP("tcp", la)
	if err != nil {
		t.reg.Unpin(pins)
		return nil, fmt.Errorf("tcp: listen %s: %w", addr, err)
	}
	sg := &segment{t: t, ln: ln, pins: pins, probe: probeInfo, table: regtab.NewTable(entries)}
	sg.Init("tcp", opts, ln.Addr().String(), sg.table.Infos())
	if err := t.open.AddSegment(sg); err != nil {
		_ = ln.Close()
		t.reg.Unpin(pins)
		return nil, fmt.Errorf("tcp: transport: %w", err)
	}
	sg.Serve(ln, func(nc net.Conn) error { return sg.accept(nc.(*net.TCPConn)) })
	return sg, nil
}

// grantedTable builds the table of a peer granted less than full access:
// the exports as infos describe them (access reduced, some left out) and
// the probe region.
func (sg *segment) grantedTable(infos []verbs.RegionInfo) *regtab.Table {
	entries := make([]regtab.TableEntry, 0, len(infos)+1)
	for _, ri := range infos {
		mem, _ := sg.table.Mem(ri.Key)
		entries = append(entries, regtab.TableEntry{Info: ri, Mem: mem})
	}
	mem, _ := sg.table.Mem(sg.probe.Key)
	return regtab.NewTable(append(entries, regtab.TableEntry{Hidden: true, Mem: mem, Info: sg.probe}))
}

// Close implements verbs.Segment.
func (sg *segment) Close() error {
	first, err := sg.CloseSessions(sg.ln, (*session).close)
	if !first {
		return nil
	}
	sg.t.reg.Unpin(sg.pins)
	sg.t.open.Remove(sg)
	return err
}

// accept reads the first frame of an accepted connection: HELLO opens a
// session, JOIN adds a lane to one.
func (sg *segment) accept(nc *net.TCPConn) error {
	t := sg.t
	peer := nc.RemoteAddr().String()
	setSockopts(nc, t.cfg)
	_ = nc.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	rd := frame.NewReader(nc, t.cfg.ReadBuffer)
	rd.Checked = true
	var h frame.Header
	if err := rd.Next(&h); err != nil {
		return handshake.Err("tcp", peer, err)
	}
	switch h.Type {
	case frame.TypeHello:
		return sg.acceptHello(nc, rd, &h, peer)
	case frame.TypeJoin:
		return sg.acceptJoin(nc, rd, &h, peer)
	}
	return &verbs.ProtocolError{Peer: peer, Stage: "handshake", Reason: "first frame is " + h.Type.String()}
}

func (sg *segment) acceptHello(nc *net.TCPConn, rd *frame.Reader, h *frame.Header, peer string) error {
	body := make([]byte, h.Len)
	if err := rd.ReadFull(body); err != nil {
		return handshake.Err("tcp", peer, err)
	}
	if err := rd.Verify(); err != nil {
		return handshake.Err("tcp", peer, err)
	}
	var hello frame.Hello
	if err := frame.DecodeHello(&hello, body); err != nil {
		return handshake.Err("tcp", peer, err)
	}
	if hello.Lanes == 0 || hello.Lanes > verbs.MaxLanes || hello.ProbeKey != 0 || hello.ConnID != 0 || hello.Token != 0 {
		return &verbs.ProtocolError{Peer: peer, Stage: "handshake", Reason: fmt.Sprintf("HELLO with %d lanes or owner fields set", hello.Lanes)}
	}
	refuse := func(err error) error {
		_, _ = nc.Write(frame.AppendRefusal(nil, err.Error(), true))
		return err
	}
	if int(hello.Lanes) > sg.Opts.MaxLanes {
		return refuse(fmt.Errorf("tcp: %s asks %d lanes, at most %d: %w", peer, hello.Lanes, sg.Opts.MaxLanes, verbs.ErrNotAdmitted))
	}
	if n := sg.lanes.Add(int64(hello.Lanes)); n > int64(sg.Opts.MaxSegmentLanes) {
		sg.lanes.Add(-int64(hello.Lanes))
		return refuse(fmt.Errorf("tcp: %s asks %d lanes, the segment serves %d of at most %d: %w",
			peer, hello.Lanes, n-int64(hello.Lanes), sg.Opts.MaxSegmentLanes, verbs.ErrNotAdmitted))
	}
	lanesTaken := true // given back below unless the session takes them over
	defer func() {
		if lanesTaken {
			sg.lanes.Add(-int64(hello.Lanes))
		}
	}()
	granted, err := verbs.Admit(sg.Opts.Admit, verbs.PeerIdentity{Transport: "tcp", Addr: peer})
	if err != nil {
		return refuse(err)
	}
	table, infos := sg.table, sg.Regions()
	if granted != verbs.AccessRemoteRead|verbs.AccessRemoteWrite {
		// A reduced grant gets its own table: every request is checked
		// against the access this peer was granted.
		infos = verbs.GrantedInfos(infos, granted, nil)
		table = sg.grantedTable(infos)
	}
	s := newSession(sg.t, true, peer)
	s.seg = sg
	s.serve = table
	// Unchecked frames only when both sides trust the link.
	s.checked = !(sg.t.cfg.NoChecksums && hello.Flags&frame.FlagUnchecked != 0)
	s.remote = hello.Regions
	s.joined = make([]bool, hello.Lanes)
	s.joined[0] = true
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return err
	}
	s.token = binary.LittleEndian.Uint64(tok[:]) | 1
	if err := sg.Add(s); err != nil {
		if errors.Is(err, verbs.ErrNotAdmitted) {
			return refuse(err)
		}
		return err
	}
	s.laneShare.Store(int64(hello.Lanes)) // the session gives them back when it ends
	lanesTaken = false

	w := frame.Hello{Lanes: hello.Lanes, QueueDepth: uint32(sg.Opts.QueueDepth), ConnID: s.ID, Token: s.token,
		ProbeKey: sg.probe.Key, ProbeLen: sg.probe.Len, Regions: infos}
	if !s.checked {
		w.Flags |= frame.FlagUnchecked
	}
	out := frame.AppendCheckedFrame(nil, &frame.Header{Type: frame.TypeWelcome, Len: uint32(frame.HelloSize(&w))}, frame.AppendHello(nil, &w))
	if _, err := nc.Write(out); err != nil {
		sg.Drop(s)
		s.giveLanes()
		return handshake.Err("tcp", peer, err)
	}
	_ = nc.SetDeadline(time.Time{})
	if !s.attach(&lane{idx: 0, nc: nc, rd: rd}) {
		return verbs.ErrClosed
	}
	return nil
}

func (sg *segment) acceptJoin(nc *net.TCPConn, rd *frame.Reader, h *frame.Header, peer string) error {
	s, ok := sg.Get(h.ID)
	if !ok || s.token != h.Key {
		return &verbs.ProtocolError{Peer: peer, Stage: "handshake", Reason: "JOIN for an unknown connection or with a wrong token"}
	}
	idx := int(h.Off)
	s.Mu.Lock()
	if idx >= len(s.joined) || s.joined[idx] {
		s.Mu.Unlock()
		return &verbs.ProtocolError{Peer: peer, Stage: "handshake", Reason: fmt.Sprintf("JOIN of lane %d twice or out of range", idx)}
	}
	s.joined[idx] = true
	s.Mu.Unlock()
	out := frame.AppendChecked(nil, &frame.Header{Type: frame.TypeJoined}, 0)
	if _, err := nc.Write(out); err != nil {
		return handshake.Err("tcp", peer, err)
	}
	_ = nc.SetDeadline(time.Time{})
	if !s.attach(&lane{idx: idx, nc: nc, rd: rd}) {
		return verbs.ErrClosed
	}
	return nil
}

// setSockopts applies the transport's socket settings.
func setSockopts(nc *net.TCPConn, cfg Config) {
	_ = nc.SetNoDelay(true)
	if cfg.SocketBuffer > 0 {
		_ = nc.SetReadBuffer(cfg.SocketBuffer)
		_ = nc.SetWriteBuffer(cfg.SocketBuffer)
	}
}

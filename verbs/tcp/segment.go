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
	"github.com/scatterkit/scatterkit/verbs/internal/calls"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/handshake"
	"github.com/scatterkit/scatterkit/verbs/internal/listener"
	"github.com/scatterkit/scatterkit/verbs/internal/probe"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

// segment is the owner side: a listener serving a fixed table of
// exported regions (plus a hidden probe region) to every connection.
type segment struct {
	t     *Transport
	ln    *net.TCPListener
	addr  string
	opts  verbs.ListenOptions
	pins  []*regtab.Entry
	table *regtab.Table
	infos []verbs.RegionInfo
	probe verbs.RegionInfo // hidden region for link probes

	handlers  listener.Handlers
	sessions  *listener.Sessions[*session]
	callBytes listener.CallBytes // call requests held over all sessions
	keep      calls.KeepBudget   // call buffers the sessions' idle pools keep
	lanes     atomic.Int64       // lanes of all sessions (MaxSegmentLanes)
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
	probeMem := make([]byte, probe.Bulk)
	probe.Pattern(probeMem)
	probeInfo := verbs.RegionInfo{Name: "probe", Key: probeKey, Len: probe.Bulk, Access: verbs.AccessRemoteRead}
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
	sg := &segment{t: t, ln: ln, addr: ln.Addr().String(), opts: opts, pins: pins, probe: probeInfo,
		table: regtab.NewTable(entries), sessions: listener.NewSessions[*session](opts.MaxSessions, opts.MaxHandshakes),
		callBytes: listener.CallBytes{Limit: opts.MaxCallBytes}, keep: calls.KeepBudget{Limit: listener.KeepCallBuffers}}
	sg.infos = sg.table.Infos()
	if err := t.open.AddSegment(sg); err != nil {
		_ = ln.Close()
		t.reg.Unpin(pins)
		return nil, fmt.Errorf("tcp: transport: %w", err)
	}
	sg.sessions.Serve("tcp", ln, func(nc net.Conn) error { return sg.accept(nc.(*net.TCPConn)) }, sg.report)
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

// Addr implements verbs.Segment.
func (sg *segment) Addr() string { return sg.addr }

// Regions implements verbs.Segment.
func (sg *segment) Regions() []verbs.RegionInfo { return sg.infos }

// Handle implements verbs.Segment.
func (sg *segment) Handle(method uint16, h verbs.Handler) { sg.handlers.Set(method, h) }

func (sg *segment) handler(method uint16) verbs.Handler { return sg.handlers.Get(method) }

// Evict implements verbs.Segment: the session fails, and its fence
// closes once its lane goroutines have stopped and its handlers returned.
func (sg *segment) Evict(connID uint64) <-chan struct{} {
	return sg.sessions.Evict(connID, func(s *session) <-chan struct{} {
		s.fail(errEvicted)
		return s.fenced
	})
}

// errEvicted ends an evicted session.
var errEvicted = fmt.Errorf("tcp: connection evicted by the owner: %w", verbs.ErrClosed)

// Close implements verbs.Segment.
func (sg *segment) Close() error {
	first, err := sg.sessions.Close(sg.ln, (*session).close)
	if !first {
		return nil
	}
	sg.t.reg.Unpin(sg.pins)
	sg.t.open.Remove(sg)
	if err != nil {
		return fmt.Errorf("tcp: segment close: %w", err)
	}
	return nil
}

func (sg *segment) report(err error) {
	if sg.opts.OnError != nil {
		sg.opts.OnError(err)
	}
}

func (sg *segment) forget(s *session) { sg.sessions.Remove(s.id) }

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
	if int(hello.Lanes) > sg.opts.MaxLanes {
		return refuse(fmt.Errorf("tcp: %s asks %d lanes, at most %d: %w", peer, hello.Lanes, sg.opts.MaxLanes, verbs.ErrNotAdmitted))
	}
	if n := sg.lanes.Add(int64(hello.Lanes)); n > int64(sg.opts.MaxSegmentLanes) {
		sg.lanes.Add(-int64(hello.Lanes))
		return refuse(fmt.Errorf("tcp: %s asks %d lanes, the segment serves %d of at most %d: %w",
			peer, hello.Lanes, n-int64(hello.Lanes), sg.opts.MaxSegmentLanes, verbs.ErrNotAdmitted))
	}
	lanesTaken := true // given back below unless the session takes them over
	defer func() {
		if lanesTaken {
			sg.lanes.Add(-int64(hello.Lanes))
		}
	}()
	granted, err := verbs.Admit(sg.opts.Admit, verbs.PeerIdentity{Transport: "tcp", Addr: peer})
	if err != nil {
		return refuse(err)
	}
	table, infos := sg.table, sg.infos
	if granted != verbs.AccessRemoteRead|verbs.AccessRemoteWrite {
		// A reduced grant gets its own table: every request is checked
		// against the access this peer was granted.
		infos = verbs.GrantedInfos(sg.infos, granted, nil)
		table = sg.grantedTable(infos)
	}
	s := newSession(sg.t, true, peer)
	s.seg = sg
	s.serve = table
	// Unchecked frames only when both sides trust the link.
	s.checked = !(sg.t.cfg.NoChecksums && hello.Flags&frame.FlagUnchecked != 0)
	s.remote = hello.Regions
	s.peerDepth = sg.opts.QueueDepth
	s.sem = make(chan struct{}, sg.opts.MaxCalls)
	s.admit = make(chan struct{}, maxWaitingCalls*sg.opts.MaxCalls)
	s.startWorkers(sg.opts.MaxCalls)
	s.joined = make([]bool, hello.Lanes)
	s.joined[0] = true
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return err
	}
	s.token = binary.LittleEndian.Uint64(tok[:]) | 1
	s.callBytes.Limit = sg.opts.MaxConnCallBytes
	s.jobs.Keep = &sg.keep
	if err := sg.sessions.Add(s, &s.id); err != nil {
		s.cancel()
		if errors.Is(err, verbs.ErrNotAdmitted) {
			return refuse(fmt.Errorf("tcp: %s: %w", peer, err))
		}
		return err
	}
	s.laneShare.Store(int64(hello.Lanes)) // the session gives them back when it ends
	lanesTaken = false

	w := frame.Hello{Lanes: hello.Lanes, QueueDepth: uint32(sg.opts.QueueDepth), ConnID: s.id, Token: s.token,
		ProbeKey: sg.probe.Key, ProbeLen: sg.probe.Len, Regions: infos}
	if !s.checked {
		w.Flags |= frame.FlagUnchecked
	}
	out := frame.AppendCheckedFrame(nil, &frame.Header{Type: frame.TypeWelcome, Len: uint32(frame.HelloSize(&w))}, frame.AppendHello(nil, &w))
	if _, err := nc.Write(out); err != nil {
		sg.forget(s)
		s.cancel()
		s.giveBack()
		return handshake.Err("tcp", peer, err)
	}
	_ = nc.SetDeadline(time.Time{})
	if !s.attach(&lane{idx: 0, nc: nc, rd: rd}) {
		return verbs.ErrClosed
	}
	return nil
}

func (sg *segment) acceptJoin(nc *net.TCPConn, rd *frame.Reader, h *frame.Header, peer string) error {
	s, ok := sg.sessions.Get(h.ID)
	if !ok || s.token != h.Key {
		return &verbs.ProtocolError{Peer: peer, Stage: "handshake", Reason: "JOIN for an unknown connection or with a wrong token"}
	}
	idx := int(h.Off)
	s.mu.Lock()
	if idx >= len(s.joined) || s.joined[idx] {
		s.mu.Unlock()
		return &verbs.ProtocolError{Peer: peer, Stage: "handshake", Reason: fmt.Sprintf("JOIN of lane %d twice or out of range", idx)}
	}
	s.joined[idx] = true
	s.mu.Unlock()
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

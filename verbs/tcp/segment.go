package tcp

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
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

	hmu      sync.Mutex
	handlers atomic.Pointer[map[uint16]verbs.Handler]

	mu       sync.Mutex
	closed   bool
	sessions map[uint64]*session
	nextID   uint64
	wg       sync.WaitGroup // accept loop and handshakes
}

var _ verbs.Segment = (*segment)(nil)

func (t *Transport) listen(addr string, exports []verbs.Export, opts verbs.ListenOptions) (*segment, error) {
	if err := verbs.CheckExports(exports); err != nil {
		return nil, fmt.Errorf("tcp: listen: %w", err)
	}
	if len(exports) > frame.MaxRegions {
		return nil, fmt.Errorf("tcp: listen: %d exports, at most %d: %w", len(exports), frame.MaxRegions, verbs.ErrInvalid)
	}
	if opts.QueueDepth < 0 || opts.QueueDepth > verbs.MaxQueueDepth || opts.MaxCalls < 0 {
		return nil, fmt.Errorf("tcp: listen: queue depth %d, max calls %d: %w", opts.QueueDepth, opts.MaxCalls, verbs.ErrInvalid)
	}
	if opts.QueueDepth == 0 {
		opts.QueueDepth = verbs.DefaultPeerQueueDepth
	}
	if opts.MaxCalls == 0 {
		opts.MaxCalls = verbs.DefaultMaxCalls
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
	for i := range probeMem {
		probeMem[i] = byte(i*131 + 7)
	}
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
	var idSeed [8]byte
	_, _ = rand.Read(idSeed[:])
	sg := &segment{t: t, ln: ln, addr: ln.Addr().String(), opts: opts, pins: pins, probe: probeInfo,
		table: regtab.NewTable(entries), sessions: make(map[uint64]*session),
		nextID: binary.LittleEndian.Uint64(idSeed[:]) >> 1}
	sg.infos = sg.table.Infos()
	empty := map[uint16]verbs.Handler{}
	sg.handlers.Store(&empty)
	if err := t.track(sg, nil); err != nil {
		_ = ln.Close()
		t.reg.Unpin(pins)
		return nil, err
	}
	sg.wg.Add(1)
	go sg.acceptLoop()
	return sg, nil
}

// Addr implements verbs.Segment.
func (sg *segment) Addr() string { return sg.addr }

// Regions implements verbs.Segment.
func (sg *segment) Regions() []verbs.RegionInfo { return sg.infos }

// Handle implements verbs.Segment.
func (sg *segment) Handle(method uint16, h verbs.Handler) {
	sg.hmu.Lock()
	defer sg.hmu.Unlock()
	old := *sg.handlers.Load()
	m := make(map[uint16]verbs.Handler, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	if h == nil {
		delete(m, method)
	} else {
		m[method] = h
	}
	sg.handlers.Store(&m)
}

func (sg *segment) handler(method uint16) verbs.Handler { return (*sg.handlers.Load())[method] }

// Close implements verbs.Segment.
func (sg *segment) Close() error {
	sg.mu.Lock()
	if sg.closed {
		sg.mu.Unlock()
		return nil
	}
	sg.closed = true
	sessions := make([]*session, 0, len(sg.sessions))
	for _, s := range sg.sessions {
		sessions = append(sessions, s)
	}
	sg.mu.Unlock()
	err := sg.ln.Close()
	for _, s := range sessions {
		s.close()
	}
	sg.wg.Wait()
	sg.t.reg.Unpin(sg.pins)
	sg.t.untrack(sg, nil)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("tcp: segment close: %w", err)
	}
	return nil
}

func (sg *segment) report(err error) {
	if sg.opts.OnError != nil {
		sg.opts.OnError(err)
	}
}

func (sg *segment) forget(s *session) {
	sg.mu.Lock()
	delete(sg.sessions, s.id)
	sg.mu.Unlock()
}

func (sg *segment) acceptLoop() {
	defer sg.wg.Done()
	for {
		nc, err := sg.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			sg.report(fmt.Errorf("tcp: accept: %w", err))
			time.Sleep(5 * time.Millisecond) // e.g. out of descriptors
			continue
		}
		sg.mu.Lock()
		if sg.closed {
			sg.mu.Unlock()
			_ = nc.Close()
			return
		}
		sg.wg.Add(1)
		sg.mu.Unlock()
		go sg.handshake(nc)
	}
}

// handshake reads the first frame of an accepted connection: HELLO opens
// a session, JOIN adds a lane to one.
func (sg *segment) handshake(nc *net.TCPConn) {
	defer sg.wg.Done()
	if err := sg.accept(nc); err != nil {
		_ = nc.Close()
		if abnormal(err) {
			sg.report(err)
		}
	}
}

func (sg *segment) accept(nc *net.TCPConn) error {
	t := sg.t
	peer := nc.RemoteAddr().String()
	setSockopts(nc, t.cfg)
	_ = nc.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	rd := frame.NewReader(nc, t.cfg.ReadBuffer)
	var h frame.Header
	if err := rd.Next(&h); err != nil {
		return handshakeErr(peer, err)
	}
	switch h.Type {
	case frame.TypeHello:
		return sg.acceptHello(nc, rd, &h, peer)
	case frame.TypeJoin:
		return sg.acceptJoin(nc, rd, &h, peer)
	}
	return &verbs.ProtocolError{Peer: peer, Stage: "handshake", Reason: "first frame is " + h.Type.String()}
}

func handshakeErr(peer string, err error) error {
	var pe *verbs.ProtocolError
	if errors.As(err, &pe) {
		pe.Peer, pe.Stage = peer, "handshake"
		return pe
	}
	return fmt.Errorf("tcp: handshake with %s: %w", peer, err)
}

func (sg *segment) acceptHello(nc *net.TCPConn, rd *frame.Reader, h *frame.Header, peer string) error {
	body := make([]byte, h.Len)
	if err := rd.ReadFull(body); err != nil {
		return handshakeErr(peer, err)
	}
	var hello frame.Hello
	if err := frame.DecodeHello(&hello, body); err != nil {
		return handshakeErr(peer, err)
	}
	if hello.Lanes == 0 || hello.Lanes > verbs.MaxLanes || hello.ProbeKey != 0 || hello.ConnID != 0 || hello.Token != 0 {
		return &verbs.ProtocolError{Peer: peer, Stage: "handshake", Reason: fmt.Sprintf("HELLO with %d lanes or owner fields set", hello.Lanes)}
	}
	s := newSession(sg.t, true, peer)
	s.seg = sg
	s.serve = sg.table
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
	sg.mu.Lock()
	if sg.closed {
		sg.mu.Unlock()
		s.cancel()
		return verbs.ErrClosed
	}
	sg.nextID++
	s.id = sg.nextID
	sg.sessions[s.id] = s
	sg.mu.Unlock()

	w := frame.Hello{Lanes: hello.Lanes, QueueDepth: uint32(sg.opts.QueueDepth), ConnID: s.id, Token: s.token,
		ProbeKey: sg.probe.Key, ProbeLen: sg.probe.Len, Regions: sg.infos}
	out := frame.Append(nil, &frame.Header{Type: frame.TypeWelcome, Len: uint32(frame.HelloSize(&w))})
	out = frame.AppendHello(out, &w)
	if _, err := nc.Write(out); err != nil {
		sg.forget(s)
		s.cancel()
		return handshakeErr(peer, err)
	}
	_ = nc.SetDeadline(time.Time{})
	if !s.attach(&lane{idx: 0, nc: nc, rd: rd}) {
		return verbs.ErrClosed
	}
	return nil
}

func (sg *segment) acceptJoin(nc *net.TCPConn, rd *frame.Reader, h *frame.Header, peer string) error {
	sg.mu.Lock()
	s := sg.sessions[h.ID]
	sg.mu.Unlock()
	if s == nil || s.token != h.Key {
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
	out := frame.Append(nil, &frame.Header{Type: frame.TypeJoined})
	if _, err := nc.Write(out); err != nil {
		return handshakeErr(peer, err)
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

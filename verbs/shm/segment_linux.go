//go:build linux

package shm

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

	hmu      sync.Mutex
	handlers atomic.Pointer[map[uint16]verbs.Handler]

	mu       sync.Mutex
	closed   bool
	sessions map[*session]struct{}
	nextID   uint64
	wg       sync.WaitGroup // accept loop and handshakes
}

var _ verbs.Segment = (*segment)(nil)

func (t *Transport) listen(addr string, exports []verbs.Export, opts verbs.ListenOptions) (_ *segment, err error) {
	if err := verbs.CheckExports(exports); err != nil {
		return nil, fmt.Errorf("shm: listen: %w", err)
	}
	if len(exports) > frame.MaxRegions {
		return nil, fmt.Errorf("shm: listen: %d exports, at most %d: %w", len(exports), frame.MaxRegions, verbs.ErrInvalid)
	}
	if opts.QueueDepth < 0 || opts.QueueDepth > verbs.MaxQueueDepth || opts.MaxCalls < 0 {
		return nil, fmt.Errorf("shm: listen: queue depth %d, max calls %d: %w", opts.QueueDepth, opts.MaxCalls, verbs.ErrInvalid)
	}
	if opts.QueueDepth == 0 {
		opts.QueueDepth = verbs.DefaultPeerQueueDepth
	}
	if opts.MaxCalls == 0 {
		opts.MaxCalls = verbs.DefaultMaxCalls
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
	sg := &segment{t: t, addr: addr, opts: opts, pins: pins, sessions: make(map[*session]struct{})}
	for _, x := range exports {
		sg.infos = append(sg.infos, x.Region.Info(x.Name))
	}
	sg.probe, err = newMemfd(probe.Bulk, true)
	if err != nil {
		return nil, err
	}
	for i := range sg.probe.mem {
		sg.probe.mem[i] = byte(i*131 + 7)
	}
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
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	sg.nextID = binary.LittleEndian.Uint64(seed[:]) >> 1
	empty := map[uint16]verbs.Handler{}
	sg.handlers.Store(&empty)
	if err = t.track(sg, nil); err != nil {
		_ = sg.ln.Close()
		_ = sg.probe.free()
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
	for s := range sg.sessions {
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
	ferr := sg.probe.free()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("shm: segment close: %w", err)
	}
	return ferr
}

func (sg *segment) report(err error) {
	if sg.opts.OnError != nil {
		sg.opts.OnError(err)
	}
}

func (sg *segment) forget(s *session) {
	sg.mu.Lock()
	delete(sg.sessions, s)
	sg.mu.Unlock()
}

func (sg *segment) acceptLoop() {
	defer sg.wg.Done()
	for {
		nc, err := sg.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			sg.report(fmt.Errorf("shm: accept: %w", err))
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
		go func() {
			defer sg.wg.Done()
			if err := sg.accept(nc); err != nil {
				_ = nc.Close()
				if abnormal(err) {
					sg.report(err)
				}
			}
		}()
	}
}

// accept runs the owner's half of the handshake: HELLO with the
// requester's exposed memfds in, WELCOME with the exported ones out.
func (sg *segment) accept(nc *net.UnixConn) error {
	peer := "unix:" + sg.addr
	_ = nc.SetDeadline(time.Now().Add(sg.t.cfg.HandshakeTimeout))
	var hello frame.Hello
	fds, err := readHandshake(nc, frame.TypeHello, &hello)
	if err != nil {
		return handshakeErr(peer, err)
	}
	if hello.ProbeKey != 0 || hello.ConnID != 0 || hello.Token != 0 {
		closeFDs(fds)
		return &verbs.ProtocolError{Peer: peer, Stage: "handshake", Reason: "HELLO with owner fields set"}
	}
	m, err := mapRegions(hello.Regions, fds, verbs.RegionInfo{})
	if err != nil {
		return handshakeErr(peer, err)
	}
	s := newSession(sg.t, true, nc, peer, m)
	s.seg = sg
	s.peerDepth = sg.opts.QueueDepth
	s.sem = make(chan struct{}, sg.opts.MaxCalls)
	s.admit = make(chan struct{}, maxWaitingCalls*sg.opts.MaxCalls)
	s.startWorkers(sg.opts.MaxCalls)
	sg.mu.Lock()
	if sg.closed {
		sg.mu.Unlock()
		m.unmap(verbs.ErrClosed)
		s.cancel()
		return verbs.ErrClosed
	}
	sg.nextID++
	s.id = sg.nextID
	sg.sessions[s] = struct{}{}
	sg.mu.Unlock()
	w := frame.Hello{Lanes: 1, QueueDepth: uint32(sg.opts.QueueDepth), ConnID: s.id, Token: 1,
		ProbeKey: sg.pinfo.Key, ProbeLen: sg.pinfo.Len, Regions: sg.infos}
	out := frame.Append(nil, &frame.Header{Type: frame.TypeWelcome, Len: uint32(frame.HelloSize(&w))})
	out = frame.AppendHello(out, &w)
	if err := sendMsg(nc, out, sg.fds); err != nil {
		sg.forget(s)
		m.unmap(verbs.ErrClosed)
		s.cancel()
		return handshakeErr(peer, err)
	}
	_ = nc.SetDeadline(time.Time{})
	if !s.start() {
		return verbs.ErrClosed
	}
	return nil
}

func handshakeErr(peer string, err error) error {
	var pe *verbs.ProtocolError
	if errors.As(err, &pe) {
		pe.Peer, pe.Stage = peer, "handshake"
		return pe
	}
	return fmt.Errorf("shm: handshake with %s: %w", peer, err)
}

//go:build linux

package shm

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/handshake"
	"github.com/scatterkit/scatterkit/verbs/internal/probe"
)

// conn is the requester's verbs.Conn.
type conn struct {
	s    *session
	q    *queue
	link verbs.LinkParams
}

var _ verbs.Conn = (*conn)(nil)

func (t *Transport) connect(ctx context.Context, addr string, opts verbs.ConnectOptions) (_ *conn, err error) {
	if opts.QueueDepth == 0 {
		opts.QueueDepth = verbs.DefaultQueueDepth
	}
	if opts.Lanes < 0 || opts.Lanes > verbs.MaxLanes || opts.QueueDepth < 1 || opts.QueueDepth > verbs.MaxQueueDepth {
		return nil, fmt.Errorf("shm: connect: %d lanes, queue depth %d: %w", opts.Lanes, opts.QueueDepth, verbs.ErrInvalid)
	}
	if err := verbs.CheckExports(opts.Expose); err != nil {
		return nil, fmt.Errorf("shm: connect: %w", err)
	}
	if len(opts.Expose) > frame.MaxRegions {
		return nil, fmt.Errorf("shm: connect: %d exposures, at most %d: %w", len(opts.Expose), frame.MaxRegions, verbs.ErrInvalid)
	}
	pins, err := t.reg.Pin(opts.Expose)
	if err != nil {
		return nil, fmt.Errorf("shm: connect: %w", err)
	}
	defer func() {
		if err != nil {
			t.reg.Unpin(pins)
		}
	}()
	fds, err := shareable(pins, opts.Expose)
	if err != nil {
		return nil, fmt.Errorf("shm: connect: %w", err)
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, "unix", addr)
	if err != nil {
		return nil, fmt.Errorf("shm: connect %s: %w", addr, err)
	}
	nc := raw.(*net.UnixConn)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(t.cfg.HandshakeTimeout)
	}
	_ = nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	peer := "unix:" + addr

	hello := frame.Hello{Lanes: 1, QueueDepth: uint32(opts.QueueDepth)}
	for _, x := range opts.Expose {
		hello.Regions = append(hello.Regions, x.Region.Info(x.Name))
	}
	out := frame.Append(nil, &frame.Header{Type: frame.TypeHello, Len: uint32(frame.HelloSize(&hello))})
	out = frame.AppendHello(out, &hello)
	var welcome frame.Hello
	var m *mapping
	err = sendMsg(nc, out, fds)
	if err == nil {
		var got []int
		if got, err = readHandshake(nc, frame.TypeWelcome, &welcome); err == nil {
			if welcome.ConnID == 0 || welcome.ProbeKey == 0 {
				closeFDs(got)
				err = &verbs.ProtocolError{Stage: "handshake", Reason: "WELCOME without connection id or probe"}
			} else {
				m, err = mapRegions(welcome.Regions, got,
					verbs.RegionInfo{Name: "probe", Key: welcome.ProbeKey, Len: welcome.ProbeLen, Access: verbs.AccessRemoteRead})
			}
		}
	}
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("shm: connect %s: %w", addr, handshake.Err("shm", peer, handshake.CtxErr(ctx, err)))
	}
	_ = nc.SetDeadline(time.Time{})
	s := newSession(t, false, nc, peer, m)
	s.id = welcome.ConnID
	s.pinned = pins
	s.main = newQueue(t, m, opts.QueueDepth)
	c := &conn{s: s, q: s.main}
	s.start() // a new session has not ended
	if err = t.open.AddConn(c); err != nil {
		s.closeWithin(t.cfg.CloseGrace)
		return nil, fmt.Errorf("shm: transport: %w", err)
	}
	link, err := probe.Connect(ctx, opts, t, probe.Target{Queue: c.q, Ping: s.ping,
		RemoteKey: welcome.ProbeKey, RemoteLen: welcome.ProbeLen})
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("shm: connect %s: %w", addr, err)
	}
	c.link = link
	_ = s.write(&frame.Header{Type: frame.TypeParams, Len: frame.ParamsSize}, frame.AppendParams(nil, link))
	return c, nil
}

// Post implements verbs.Queue.
func (c *conn) Post(wrs []verbs.WorkRequest) (int, error) { return c.q.Post(wrs) }

// Poll implements verbs.Queue.
func (c *conn) Poll(out []verbs.Completion) (int, error) { return c.q.Poll(out) }

// Wait implements verbs.Queue.
func (c *conn) Wait(ctx context.Context, out []verbs.Completion, min int) (int, error) {
	return c.q.Wait(ctx, out, min)
}

// Remote implements verbs.Queue.
func (c *conn) Remote() []verbs.RegionInfo { return c.q.infos }

// LinkParams implements verbs.Queue.
func (c *conn) LinkParams() verbs.LinkParams { return c.link }

// Call implements verbs.Conn.
func (c *conn) Call(ctx context.Context, method uint16, req, resp []byte) ([]byte, error) {
	return c.s.roundTrip(ctx, false, method, req, resp)
}

// Close implements verbs.Conn: it waits (Config.CloseGrace at most) for
// the owner to let go of the exposures, so no handler of the owner
// copies into them after Close returns; an owner that does not answer in
// time has the socket closed regardless, and Close reports it.
func (c *conn) Close() error {
	fenced := c.s.closeWithin(c.s.t.cfg.CloseGrace)
	c.s.t.open.Remove(c)
	if !fenced {
		return fmt.Errorf("shm: close %s: the owner did not let go of the exposures within %v: %w",
			c.s.peer, c.s.t.cfg.CloseGrace, verbs.ErrClosed)
	}
	return nil
}

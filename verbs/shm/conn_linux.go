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
	"github.com/scatterkit/scatterkit/verbs/internal/peers"
)

// conn is the requester's verbs.Conn: its queue (Post, Poll, Wait and
// Remote are the queue's) on its session.
type conn struct {
	*queue
	s    *session
	link verbs.LinkParams
}

var _ verbs.Conn = (*conn)(nil)

func (t *Transport) connect(ctx context.Context, addr string, opts verbs.ConnectOptions) (_ *conn, err error) {
	if opts, err = peers.CheckConnect("shm", opts, false); err != nil {
		return nil, err
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
	s.ID = welcome.ConnID
	s.pinned = pins
	s.main = newQueue(t, m, opts.QueueDepth)
	c := &conn{queue: s.main, s: s}
	s.start() // a new session has not ended
	if err = t.open.AddConn(c); err != nil {
		s.closeWithin(t.cfg.CloseGrace)
		return nil, fmt.Errorf("shm: transport: %w", err)
	}
	if c.link, err = s.Measure(ctx, opts, t, c.queue, welcome.ProbeKey, welcome.ProbeLen); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("shm: connect %s: %w", addr, err)
	}
	return c, nil
}

// LinkParams implements verbs.Queue.
func (c *conn) LinkParams() verbs.LinkParams { return c.link }

// Call implements verbs.Conn.
func (c *conn) Call(ctx context.Context, method uint16, req, resp []byte) ([]byte, error) {
	return c.s.Call(ctx, method, req, resp)
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
			c.s.Peer, c.s.t.cfg.CloseGrace, verbs.ErrClosed)
	}
	return nil
}

//go:build ucx

package ucx

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
	if opts, err = peers.CheckConnect("ucx", opts, false); err != nil {
		return nil, err
	}
	pins, err := t.reg.Pin(opts.Expose)
	if err != nil {
		return nil, fmt.Errorf("ucx: connect: %w", err)
	}
	defer func() {
		if err != nil {
			t.reg.Unpin(pins)
		}
	}()
	hello := frame.Hello{Lanes: 1, QueueDepth: uint32(opts.QueueDepth)}
	mems := make([]*regMem, len(pins))
	for i, x := range opts.Expose {
		hello.Regions = append(hello.Regions, x.Region.Info(x.Name))
		mems[i] = pins[i].Data.(*regMem)
	}
	att, err := t.attachment(hello.Regions, mems, verbs.AccessRemoteRead|verbs.AccessRemoteWrite, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("ucx: connect: %w", err)
	}
	out, err := appendHandshake(nil, frame.TypeHello, &hello, att)
	if err != nil {
		return nil, fmt.Errorf("ucx: connect: %w", err)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ucx: connect %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(t.cfg.HandshakeTimeout)
	}
	_ = nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	peer := "ucx:" + addr
	rd := frame.NewReader(nc, 64<<10)
	var welcome frame.Hello
	var their Attachment
	probe := func(w *frame.Hello) verbs.RegionInfo {
		return verbs.RegionInfo{Name: "probe", Key: w.ProbeKey, Len: w.ProbeLen, Access: verbs.AccessRemoteRead}
	}
	if _, err = nc.Write(out); err == nil {
		err = readHandshake(rd, frame.TypeWelcome, &welcome, &their, probe)
	}
	if err == nil && (welcome.ConnID == 0 || welcome.ProbeKey == 0) {
		err = &verbs.ProtocolError{Stage: "handshake", Reason: "WELCOME without connection id or probe"}
	}
	var s *session
	if err == nil {
		s = newSession(t, false, nc, rd, peer)
		err = s.connectPeer(&their, welcome.Regions, probe(&welcome))
	}
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("ucx: connect %s: %w", addr, handshake.Err("ucx", peer, handshake.CtxErr(ctx, err)))
	}
	_ = nc.SetDeadline(time.Time{})
	s.ID = welcome.ConnID
	s.pinned = pins
	s.main = s.newQueue(opts.QueueDepth)
	c := &conn{queue: s.main, s: s}
	s.start() // a new session has not ended
	if err = t.open.AddConn(c); err != nil {
		s.closeWithin(t.cfg.CloseGrace)
		return nil, fmt.Errorf("ucx: transport: %w", err)
	}
	if c.link, err = s.Measure(ctx, opts, t, c.queue, welcome.ProbeKey, welcome.ProbeLen); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("ucx: connect %s: %w", addr, err)
	}
	return c, nil
}

// LinkParams implements verbs.Queue.
func (c *conn) LinkParams() verbs.LinkParams { return c.link }

// Call implements verbs.Conn.
func (c *conn) Call(ctx context.Context, method uint16, req, resp []byte) ([]byte, error) {
	return c.s.Call(ctx, method, req, resp)
}

// Close implements verbs.Conn: it waits (Config.CloseGrace for this
// side's operations, as much for the owner) for the owner to let go of
// the exposures, so no handler of the owner writes into them after Close
// returns; an owner that does not answer in time has the socket closed
// regardless, and Close reports it.
func (c *conn) Close() error {
	fenced := c.s.closeWithin(c.s.t.cfg.CloseGrace)
	c.s.t.open.Remove(c)
	if !fenced {
		return fmt.Errorf("ucx: close %s: the owner did not let go of the exposures within %v: %w",
			c.s.Peer, 2*c.s.t.cfg.CloseGrace, verbs.ErrClosed)
	}
	return nil
}

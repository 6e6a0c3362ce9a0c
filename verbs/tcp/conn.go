package tcp

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/handshake"
	"github.com/scatterkit/scatterkit/verbs/internal/peers"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

// conn is the requester's verbs.Conn: its initiator (Post, Poll, Wait and
// Remote are the initiator's) on its session.
type conn struct {
	*initiator
	s    *session
	link verbs.LinkParams
}

var _ verbs.Conn = (*conn)(nil)

func (t *Transport) connect(ctx context.Context, addr string, opts verbs.ConnectOptions) (*conn, error) {
	opts, err := peers.CheckConnect("tcp", opts, true)
	if err != nil {
		return nil, err
	}
	pins, err := t.reg.Pin(opts.Expose)
	if err != nil {
		return nil, fmt.Errorf("tcp: connect: %w", err)
	}
	s, welcome, err := t.dial(ctx, addr, opts)
	if err != nil {
		t.reg.Unpin(pins)
		return nil, err
	}
	s.pinned = pins
	c := &conn{initiator: s.main, s: s}
	if err := t.open.AddConn(c); err != nil {
		s.close()
		return nil, fmt.Errorf("tcp: transport: %w", err)
	}
	if c.link, err = s.Measure(ctx, opts, t, c.initiator, welcome.ProbeKey, welcome.ProbeLen); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("tcp: connect %s: %w", addr, err)
	}
	return c, nil
}

// dial runs the handshake: HELLO/WELCOME on lane 0, then JOIN/JOINED on
// the other lanes in parallel.
func (t *Transport) dial(ctx context.Context, addr string, opts verbs.ConnectOptions) (*session, *frame.Hello, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(t.cfg.HandshakeTimeout)
	}
	var d net.Dialer
	open := func() (*net.TCPConn, error) {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("tcp: connect %s: %w", addr, err)
		}
		tc := nc.(*net.TCPConn)
		setSockopts(tc, t.cfg)
		_ = tc.SetDeadline(deadline)
		return tc, nil
	}
	nc0, err := open()
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = nc0.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	peer := nc0.RemoteAddr().String()

	exposed := make([]regtab.TableEntry, len(opts.Expose))
	hello := frame.Hello{Lanes: uint16(opts.Lanes), QueueDepth: uint32(opts.QueueDepth)}
	if t.cfg.NoChecksums {
		hello.Flags |= frame.FlagUnchecked
	}
	for i, x := range opts.Expose {
		exposed[i] = regtab.TableEntry{Info: x.Region.Info(x.Name), Mem: x.Region.Bytes()}
		hello.Regions = append(hello.Regions, exposed[i].Info)
	}
	out := frame.AppendCheckedFrame(nil, &frame.Header{Type: frame.TypeHello, Len: uint32(frame.HelloSize(&hello))},
		frame.AppendHello(nil, &hello))
	rd0 := frame.NewReader(nc0, t.cfg.ReadBuffer)
	rd0.Checked = true
	welcome, err := func() (*frame.Hello, error) {
		if _, err := nc0.Write(out); err != nil {
			return nil, err
		}
		var h frame.Header
		if err := rd0.Next(&h); err != nil {
			return nil, err
		}
		if h.Type != frame.TypeWelcome {
			return nil, &verbs.ProtocolError{Stage: "handshake", Reason: "answer to HELLO is " + h.Type.String()}
		}
		body := make([]byte, h.Len)
		if err := rd0.ReadFull(body); err != nil {
			return nil, err
		}
		if err := rd0.Verify(); err != nil {
			return nil, err
		}
		if frame.Refused(&h) {
			return nil, frame.RefusedErr(body)
		}
		w := new(frame.Hello)
		if err := frame.DecodeHello(w, body); err != nil {
			return nil, err
		}
		if w.Flags&^hello.Flags != 0 {
			return nil, &verbs.ProtocolError{Stage: "handshake", Reason: "WELCOME settles flags HELLO did not propose"}
		}
		if w.ConnID == 0 || w.Token == 0 || w.ProbeKey == 0 || w.Lanes != hello.Lanes {
			return nil, &verbs.ProtocolError{Stage: "handshake", Reason: "WELCOME without connection id, token or probe, or with other lanes"}
		}
		return w, nil
	}()
	if err != nil {
		_ = nc0.Close()
		return nil, nil, handshake.Err("tcp", peer, handshake.CtxErr(ctx, err))
	}

	lanes := make([]*lane, opts.Lanes)
	lanes[0] = &lane{idx: 0, nc: nc0, rd: rd0}
	errs := make([]error, opts.Lanes)
	var wg sync.WaitGroup
	for i := 1; i < opts.Lanes; i++ {
		wg.Go(func() {
			nc, err := open()
			if err != nil {
				errs[i] = err
				return
			}
			stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
			defer stop()
			rd := frame.NewReader(nc, t.cfg.ReadBuffer)
			rd.Checked = true
			join := frame.AppendChecked(nil, &frame.Header{Type: frame.TypeJoin, ID: welcome.ConnID, Key: welcome.Token, Off: uint64(i)}, 0)
			var h frame.Header
			if _, err = nc.Write(join); err == nil {
				if err = rd.Next(&h); err == nil && h.Type != frame.TypeJoined {
					err = &verbs.ProtocolError{Stage: "handshake", Reason: "answer to JOIN is " + h.Type.String()}
				}
			}
			if err != nil {
				_ = nc.Close()
				errs[i] = handshake.Err("tcp", peer, handshake.CtxErr(ctx, err))
				return
			}
			lanes[i] = &lane{idx: i, nc: nc, rd: rd}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, l := range lanes {
				if l != nil {
					_ = l.nc.Close()
				}
			}
			return nil, nil, fmt.Errorf("tcp: connect %s: lane %d: %w", addr, i, err)
		}
	}
	s := newSession(t, false, peer)
	s.ID = welcome.ConnID
	s.checked = welcome.Flags&frame.FlagUnchecked == 0
	s.serve = regtab.NewTable(exposed)
	s.remote = welcome.Regions
	s.main = newInitiator(s, 0, opts.QueueDepth, welcome.Regions)
	for _, l := range lanes {
		_ = l.nc.SetDeadline(time.Time{})
		s.attach(l)
	}
	return s, welcome, nil
}

// LinkParams implements verbs.Queue.
func (c *conn) LinkParams() verbs.LinkParams { return c.link }

// Call implements verbs.Conn.
func (c *conn) Call(ctx context.Context, method uint16, req, resp []byte) ([]byte, error) {
	return c.s.Call(ctx, method, req, resp)
}

// Close implements verbs.Conn.
func (c *conn) Close() error {
	c.s.close()
	c.s.t.open.Remove(c)
	return nil
}

package tcp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// rawConn is a hand-driven protocol peer.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	rd *frame.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(10*time.Second)))
	return newRawConn(t, nc)
}

// newRawConn is a raw peer on nc speaking checked frames, as verbs/tcp does.
func newRawConn(t *testing.T, nc net.Conn) *rawConn {
	rd := frame.NewReader(nc, 64<<10)
	rd.Checked = true
	return &rawConn{t: t, nc: nc, rd: rd}
}

func (c *rawConn) send(h frame.Header, payload []byte) {
	c.t.Helper()
	_, err := c.nc.Write(frame.AppendCheckedFrame(nil, &h, payload))
	require.NoError(c.t, err)
}

func (c *rawConn) sendRaw(b []byte) {
	c.t.Helper()
	_, err := c.nc.Write(b)
	require.NoError(c.t, err)
}

func (c *rawConn) next() (frame.Header, []byte) {
	c.t.Helper()
	var h frame.Header
	require.NoError(c.t, c.rd.Next(&h))
	var payload []byte
	if h.Type != frame.TypeRead { // a READ's Len is what it asks for
		payload = make([]byte, h.Len)
		require.NoError(c.t, c.rd.ReadFull(payload))
	}
	require.NoError(c.t, c.rd.Verify())
	return h, payload
}

// requireClosed checks that the peer closed the connection without
// sending anything more.
func (c *rawConn) requireClosed() {
	c.t.Helper()
	var h frame.Header
	err := c.rd.Next(&h)
	require.Error(c.t, err, "got a %s frame instead of a close", h.Type)
	require.False(c.t, errors.Is(err, verbs.ErrProtocol), "got garbage instead of a close: %v", err)
}

// hello runs the requester's handshake on lane 0 with one lane.
func (c *rawConn) hello(exposed []verbs.RegionInfo) frame.Hello {
	c.t.Helper()
	h := frame.Hello{Lanes: 1, QueueDepth: 64, Regions: exposed}
	c.send(frame.Header{Type: frame.TypeHello, Len: uint32(frame.HelloSize(&h))}, frame.AppendHello(nil, &h))
	wh, body := c.next()
	require.Equal(c.t, frame.TypeWelcome, wh.Type)
	var w frame.Hello
	require.NoError(c.t, frame.DecodeHello(&w, body))
	return w
}

// ownerFixture is a segment with one region, an error log, and a healthy
// connection that must survive everything the raw peers do.
type ownerFixture struct {
	tr   *tcp.Transport
	req  *tcp.Transport // the healthy connection's transport
	seg  verbs.Segment
	reg  *verbs.Region
	errs chan error
	good verbs.Conn
}

func newOwnerFixture(t *testing.T) *ownerFixture {
	r := verbstest.NewRand(t)
	f := &ownerFixture{tr: tcp.New(tcp.Config{}), errs: make(chan error, 64)}
	t.Cleanup(func() { require.NoError(t, f.tr.Close()) })
	var err error
	f.reg, err = f.tr.Alloc(64<<10, verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	verbstest.Fill(r, f.reg.Bytes())
	f.seg, err = f.tr.Listen("127.0.0.1:0", []verbs.Export{{Name: "rw", Region: f.reg}}, verbs.ListenOptions{
		OnError: verbstest.ErrorLog(f.errs),
	})
	require.NoError(t, err)
	f.req = tcp.New(tcp.Config{})
	t.Cleanup(func() { require.NoError(t, f.req.Close()) })
	f.good, err = f.req.Connect(verbstest.Context(t), f.seg.Addr(), verbs.ConnectOptions{Lanes: 2})
	require.NoError(t, err)
	return f
}

// requireHealthy checks that the healthy connection still reads correct
// data.
func (f *ownerFixture) requireHealthy(t *testing.T) {
	t.Helper()
	verbstest.RequireReads(t, f.req, f.good, f.reg, 1000)
}

func (f *ownerFixture) requireReported(t *testing.T, stage string) {
	t.Helper()
	select {
	case err := <-f.errs:
		var pe *verbs.ProtocolError
		require.ErrorAs(t, err, &pe, "reported error: %v", err)
		require.ErrorIs(t, err, verbs.ErrProtocol)
		require.Equal(t, stage, pe.Stage)
		require.NotEmpty(t, pe.Peer)
	case <-time.After(10 * time.Second):
		t.Fatal("no error reported")
	}
}

// TestOwnerRejectsMalformed sends malformed handshakes and frames on raw
// sockets: the owner closes each such connection, reports a
// *ProtocolError, changes no memory and keeps serving the healthy
// connection.
func TestOwnerRejectsMalformed(t *testing.T) {
	f := newOwnerFixture(t)
	before := bytes.Clone(f.reg.Bytes())
	r := verbstest.NewRand(t)
	garbage := make([]byte, 300)
	verbstest.Fill(r, garbage)
	key := uint64(f.reg.Key())
	write := frame.Header{Type: frame.TypeWrite, ID: 1, Key: key, Off: 0, Len: 16}
	cases := []struct {
		name  string
		stage string
		run   func(c *rawConn)
	}{
		{"garbage-first-bytes", "handshake", func(c *rawConn) { c.sendRaw(garbage) }},
		{"data-first", "handshake", func(c *rawConn) { c.send(frame.Header{Type: frame.TypeData, ID: 1}, nil) }},
		{"bad-magic", "handshake", func(c *rawConn) {
			h := frame.Hello{Lanes: 1}
			body := frame.AppendHello(nil, &h)
			body[0] ^= 0xff
			c.send(frame.Header{Type: frame.TypeHello, Len: uint32(len(body))}, body)
		}},
		{"hello-zero-lanes", "handshake", func(c *rawConn) {
			h := frame.Hello{}
			c.send(frame.Header{Type: frame.TypeHello, Len: uint32(frame.HelloSize(&h))}, frame.AppendHello(nil, &h))
		}},
		{"join-unknown-connection", "handshake", func(c *rawConn) {
			c.send(frame.Header{Type: frame.TypeJoin, ID: 12345, Key: 99, Off: 1}, nil)
		}},
		{"unknown-type", "frame", func(c *rawConn) {
			c.hello(nil)
			bad := write
			bad.Type = 200 // a checked frame of an unknown type
			c.sendRaw(append(frame.AppendChecked(nil, &bad, frame.PayloadCRC(garbage[:16])), garbage[:16]...))
		}},
		{"garbage-after-handshake", "frame", func(c *rawConn) {
			c.hello(nil)
			c.sendRaw(garbage)
		}},
		{"read-with-status", "frame", func(c *rawConn) {
			c.hello(nil)
			c.send(frame.Header{Type: frame.TypeRead, Status: 1, ID: 1, Key: key, Len: 8}, nil)
		}},
		{"ack-for-nothing", "frame", func(c *rawConn) {
			c.hello(nil)
			c.send(frame.Header{Type: frame.TypeAck, ID: 5}, nil)
		}},
		{"data-for-nothing", "frame", func(c *rawConn) {
			c.hello(nil)
			c.send(frame.Header{Type: frame.TypeData, ID: 1<<40 | 7, Len: 4}, []byte("abcd"))
		}},
		{"oversized-call", "frame", func(c *rawConn) {
			c.hello(nil)
			c.send(frame.Header{Type: frame.TypeCall, ID: 1, Len: frame.MaxMessage + 1}, nil)
		}},
		{"reply-to-owner", "frame", func(c *rawConn) {
			c.hello(nil)
			c.send(frame.Header{Type: frame.TypeReply, ID: 1}, nil)
		}},
		{"second-hello", "frame", func(c *rawConn) {
			c.hello(nil)
			h := frame.Hello{Lanes: 1}
			c.send(frame.Header{Type: frame.TypeHello, Len: uint32(frame.HelloSize(&h))}, frame.AppendHello(nil, &h))
		}},
		{"bad-params", "params", func(c *rawConn) {
			c.hello(nil)
			c.send(frame.Header{Type: frame.TypeParams, Len: frame.ParamsSize}, bytes.Repeat([]byte{0xff}, frame.ParamsSize))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, f.seg.Addr())
			tc.run(c)
			c.requireClosed()
			f.requireReported(t, tc.stage)
			require.True(t, bytes.Equal(before, f.reg.Bytes()), "owner memory changed")
			f.requireHealthy(t)
		})
	}
}

// TestOwnerJoinWrongToken checks that a lane cannot join another
// requester's connection without its token.
func TestOwnerJoinWrongToken(t *testing.T) {
	f := newOwnerFixture(t)
	c := dialRaw(t, f.seg.Addr())
	w := c.hello(nil)
	j := dialRaw(t, f.seg.Addr())
	j.send(frame.Header{Type: frame.TypeJoin, ID: w.ConnID, Key: w.Token ^ 1, Off: 1}, nil)
	j.requireClosed()
	f.requireReported(t, "handshake")
	// With the token it joins, once.
	j2 := dialRaw(t, f.seg.Addr())
	j2.send(frame.Header{Type: frame.TypeJoin, ID: w.ConnID, Key: w.Token, Off: 0}, nil)
	j2.requireClosed() // lane 0 is the HELLO lane
	f.requireReported(t, "handshake")
	f.requireHealthy(t)
}

// TestOwnerServesRawRequests drives the owner by hand: an invalid WRITE's
// payload is drained and answered with an error, the connection goes on,
// and valid READ and WRITE frames work.
func TestOwnerServesRawRequests(t *testing.T) {
	f := newOwnerFixture(t)
	c := dialRaw(t, f.seg.Addr())
	c.hello(nil)
	key := uint64(f.reg.Key())
	payload := bytes.Repeat([]byte{0xab}, 100)
	before := bytes.Clone(f.reg.Bytes())
	c.send(frame.Header{Type: frame.TypeWrite, ID: 1, Key: key ^ 1, Len: 100}, payload)
	c.send(frame.Header{Type: frame.TypeWrite, ID: 2, Key: key, Off: 64<<10 - 50, Len: 100}, payload)
	c.send(frame.Header{Type: frame.TypeWrite, ID: 3, Key: key, Off: 200, Len: 100}, payload)
	c.send(frame.Header{Type: frame.TypeRead, ID: 4, Key: key, Off: 150, Len: 200}, nil)
	c.send(frame.Header{Type: frame.TypeRead, ID: 5, Key: key, Off: 1 << 62, Len: 1}, nil)
	c.send(frame.Header{Type: frame.TypePing, ID: 6}, nil)
	want := map[uint64]verbs.Status{1: verbs.StatusBadKey, 2: verbs.StatusBounds, 3: verbs.StatusOK, 4: verbs.StatusOK, 5: verbs.StatusBounds, 6: verbs.StatusOK}
	copy(before[200:300], payload)
	for range want {
		h, body := c.next()
		require.Equal(t, want[h.ID], h.Status, "frame %d (%s)", h.ID, h.Type)
		switch h.ID {
		case 1, 2, 3:
			require.Equal(t, frame.TypeAck, h.Type)
		case 4:
			require.Equal(t, frame.TypeData, h.Type)
			require.True(t, bytes.Equal(before[150:350], body))
		case 5:
			require.Equal(t, frame.TypeData, h.Type)
			require.Empty(t, body)
		case 6:
			require.Equal(t, frame.TypePong, h.Type)
		}
	}
	require.True(t, bytes.Equal(before, f.reg.Bytes()), "only the valid WRITE may change memory")
}

// fakeOwner accepts one requester and hands its raw connection to the
// test.
func fakeOwner(t *testing.T) (addr string, accepted <-chan *rawConn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	ch := make(chan *rawConn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			close(ch)
			return
		}
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		ch <- newRawConn(t, nc)
	}()
	return ln.Addr().String(), ch
}

// welcome runs the owner's handshake by hand.
func (c *rawConn) welcome(regions []verbs.RegionInfo) frame.Hello {
	c.t.Helper()
	h, body := c.next()
	require.Equal(c.t, frame.TypeHello, h.Type)
	var hello frame.Hello
	require.NoError(c.t, frame.DecodeHello(&hello, body))
	w := frame.Hello{Lanes: hello.Lanes, QueueDepth: 16, ConnID: 1, Token: 1, ProbeKey: 42, ProbeLen: 4 << 20, Regions: regions}
	c.send(frame.Header{Type: frame.TypeWelcome, Len: uint32(frame.HelloSize(&w))}, frame.AppendHello(nil, &w))
	return hello
}

// TestRequesterValidatesOwner drives a requester from a fake owner: the
// requester checks owner-initiated WRITEs and READs against its
// exposures exactly like an owner checks requests, and closes the
// connection on a malformed frame, completing what was outstanding.
func TestRequesterValidatesOwner(t *testing.T) {
	r := verbstest.NewRand(t)
	addr, accepted := fakeOwner(t)
	req := tcp.New(tcp.Config{})
	t.Cleanup(func() { require.NoError(t, req.Close()) })
	dst, err := req.Alloc(4096, verbs.AccessRemoteRead|verbs.AccessRemoteWrite|verbs.AccessLocal)
	require.NoError(t, err)
	ro, err := req.Alloc(4096, verbs.AccessRemoteRead)
	require.NoError(t, err)
	hidden, err := req.Alloc(4096, verbs.AccessRemoteRead|verbs.AccessLocal)
	require.NoError(t, err)
	verbstest.Fill(r, dst.Bytes())
	verbstest.Fill(r, ro.Bytes())
	dstBefore, roBefore := bytes.Clone(dst.Bytes()), bytes.Clone(ro.Bytes())

	type result struct {
		c   verbs.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := req.Connect(context.Background(), addr, verbs.ConnectOptions{Lanes: 1, QueueDepth: 8,
			Expose: []verbs.Export{{Name: "dst", Region: dst}, {Name: "ro", Region: ro}},
			Link:   verbs.LinkParams{Bandwidth: 1e9, PostRate: 1e6, RTT: time.Millisecond}})
		done <- result{c, err}
	}()
	o := <-accepted
	require.NotNil(t, o)
	hello := o.welcome([]verbs.RegionInfo{{Name: "tbl", Key: 77, Len: 4096, Access: verbs.AccessRemoteRead}})
	res := <-done
	require.NoError(t, res.err)
	conn := res.c
	t.Cleanup(func() { conn.Close() })
	require.Len(t, hello.Regions, 2)
	ph, _ := o.next()
	require.Equal(t, frame.TypeParams, ph.Type)

	dk, rk := uint64(dst.Key()), uint64(ro.Key())
	payload := bytes.Repeat([]byte{0x5a}, 64)
	o.send(frame.Header{Type: frame.TypeWrite, ID: 1, Key: 999, Len: 64}, payload)
	o.send(frame.Header{Type: frame.TypeWrite, ID: 2, Key: dk, Off: 4090, Len: 64}, payload)
	o.send(frame.Header{Type: frame.TypeWrite, ID: 3, Key: rk, Len: 64}, payload)
	o.send(frame.Header{Type: frame.TypeWrite, ID: 4, Key: dk, Off: ^uint64(0) - 10, Len: 64}, payload)
	o.send(frame.Header{Type: frame.TypeWrite, ID: 5, Key: dk, Off: 100, Len: 64}, payload)
	o.send(frame.Header{Type: frame.TypeRead, ID: 6, Key: rk, Off: 10, Len: 20}, nil)
	o.send(frame.Header{Type: frame.TypeRead, ID: 7, Key: uint64(hidden.Key()), Len: 1}, nil) // registered, not exposed
	want := map[uint64]verbs.Status{1: verbs.StatusBadKey, 2: verbs.StatusBounds, 3: verbs.StatusAccess, 4: verbs.StatusBounds, 5: verbs.StatusOK, 6: verbs.StatusOK, 7: verbs.StatusBadKey}
	for range want {
		h, body := o.next()
		require.Equal(t, want[h.ID], h.Status, "frame %d", h.ID)
		if h.ID == 6 {
			require.Equal(t, frame.TypeData, h.Type)
			require.Equal(t, roBefore[10:30], body)
		}
	}
	copy(dstBefore[100:164], payload)
	require.True(t, bytes.Equal(dstBefore, dst.Bytes()), "exposure changed beyond the valid WRITE")
	require.True(t, bytes.Equal(roBefore, ro.Bytes()), "read-only exposure changed")

	// A READ of the requester's own is outstanding when the fake owner
	// sends garbage: the requester closes and completes it with ErrClosed.
	n, err := conn.Post([]verbs.WorkRequest{{ID: 9, Op: verbs.OpRead, Len: 8, LocalKey: dst.Key(), RemoteKey: 77}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	rh, _ := o.next()
	require.Equal(t, frame.TypeRead, rh.Type)
	o.send(frame.Header{Type: frame.TypeCall, ID: 1}, nil) // owners do not call requesters
	cs := make([]verbs.Completion, 2)
	k, err := conn.Wait(verbstest.Context(t), cs, 1)
	require.NoError(t, err)
	require.Equal(t, 1, k)
	require.Equal(t, verbs.StatusClosed, cs[0].Status)
	require.ErrorIs(t, cs[0].Err, verbs.ErrClosed)
	require.ErrorIs(t, cs[0].Err, verbs.ErrProtocol, "the completion carries the cause")
	_, err = conn.Wait(verbstest.Context(t), cs, 1)
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = conn.Call(verbstest.Context(t), 1, nil, nil)
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = io.ReadAll(o.nc)
	require.NoError(t, err, "the requester closed the socket")
	require.True(t, bytes.Equal(dstBefore, dst.Bytes()))
}

// TestRequesterRejectsBadWelcome checks the requester's side of the
// handshake.
func TestRequesterRejectsBadWelcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(o *rawConn)
	}{
		{"garbage", func(o *rawConn) { o.sendRaw(bytes.Repeat([]byte{0x77}, 64)) }},
		{"no-probe", func(o *rawConn) {
			w := frame.Hello{Lanes: 1, ConnID: 1, Token: 1}
			o.send(frame.Header{Type: frame.TypeWelcome, Len: uint32(frame.HelloSize(&w))}, frame.AppendHello(nil, &w))
		}},
		{"duplicate-region", func(o *rawConn) {
			ri := verbs.RegionInfo{Name: "a", Key: 5, Len: 10, Access: verbs.AccessRemoteRead}
			w := frame.Hello{Lanes: 1, ConnID: 1, Token: 1, ProbeKey: 9, ProbeLen: 4 << 20, Regions: []verbs.RegionInfo{ri, ri}}
			o.send(frame.Header{Type: frame.TypeWelcome, Len: uint32(frame.HelloSize(&w))}, frame.AppendHello(nil, &w))
		}},
		{"closed", func(o *rawConn) { o.nc.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, accepted := fakeOwner(t)
			req := tcp.New(tcp.Config{})
			t.Cleanup(func() { require.NoError(t, req.Close()) })
			done := make(chan error, 1)
			go func() {
				_, err := req.Connect(verbstest.Context(t), addr, verbs.ConnectOptions{Lanes: 1})
				done <- err
			}()
			o := <-accepted
			o.next() // HELLO
			tc.send(o)
			err := <-done
			require.Error(t, err)
			if tc.name != "closed" {
				require.ErrorIs(t, err, verbs.ErrProtocol)
			}
		})
	}
}

// TestConnectTimeout checks that a silent owner cannot hang Connect.
func TestConnectTimeout(t *testing.T) {
	addr, accepted := fakeOwner(t)
	req := tcp.New(tcp.Config{})
	t.Cleanup(func() { require.NoError(t, req.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := req.Connect(ctx, addr, verbs.ConnectOptions{Lanes: 1})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	if o, ok := <-accepted; ok {
		o.nc.Close()
	}
}

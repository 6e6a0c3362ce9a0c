package listener

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
)

func exports(t *testing.T, n int) []verbs.Export {
	t.Helper()
	out := make([]verbs.Export, n)
	for i := range out {
		buf := make([]byte, 64)
		for k := range buf {
			buf[k] = byte(k+i) | 1
		}
		r, err := verbs.NewRegion(buf, verbs.AccessRemoteRead)
		require.NoError(t, err)
		out[i] = verbs.Export{Name: fmt.Sprintf("r%d", i), Region: r}
	}
	return out
}

func TestCheckOptions(t *testing.T) {
	one := exports(t, 1)
	for _, tc := range []struct {
		name    string
		exports []verbs.Export
		opts    verbs.ListenOptions
		want    verbs.ListenOptions
		err     error
	}{
		{"defaults", one, verbs.ListenOptions{}, withLimits(verbs.ListenOptions{QueueDepth: verbs.DefaultPeerQueueDepth, MaxCalls: verbs.DefaultMaxCalls}), nil},
		{"kept", one, verbs.ListenOptions{QueueDepth: 7, MaxCalls: 3, MaxSessions: 2, MaxLanes: 1, MaxSegmentLanes: 3, MaxHandshakes: 2, MaxCallBytes: 5, MaxConnCallBytes: 4},
			verbs.ListenOptions{QueueDepth: 7, MaxCalls: 3, MaxSessions: 2, MaxLanes: 1, MaxSegmentLanes: 3, MaxHandshakes: 2, MaxCallBytes: 5, MaxConnCallBytes: 4}, nil},
		{"negative-handshakes", one, verbs.ListenOptions{MaxHandshakes: -1}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"max-depth", nil, verbs.ListenOptions{QueueDepth: verbs.MaxQueueDepth, MaxCalls: 1},
			withLimits(verbs.ListenOptions{QueueDepth: verbs.MaxQueueDepth, MaxCalls: 1}), nil},
		{"negative-sessions", one, verbs.ListenOptions{MaxSessions: -1}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"too-many-lanes", one, verbs.ListenOptions{MaxLanes: verbs.MaxLanes + 1}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"negative-call-bytes", one, verbs.ListenOptions{MaxConnCallBytes: -1}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"negative-depth", one, verbs.ListenOptions{QueueDepth: -1}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"huge-depth", one, verbs.ListenOptions{QueueDepth: verbs.MaxQueueDepth + 1}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"negative-calls", one, verbs.ListenOptions{MaxCalls: -1}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"too-many-exports", exports(t, frame.MaxRegions+1), verbs.ListenOptions{}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"duplicate-names", []verbs.Export{one[0], one[0]}, verbs.ListenOptions{}, verbs.ListenOptions{}, verbs.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckOptions(tc.exports, tc.opts)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// withLimits sets the default session and call limits.
func withLimits(o verbs.ListenOptions) verbs.ListenOptions {
	o.MaxSessions, o.MaxLanes = verbs.DefaultMaxSessions, verbs.MaxLanes
	o.MaxSegmentLanes, o.MaxHandshakes = verbs.DefaultMaxSegLanes, verbs.DefaultMaxHandshakes
	o.MaxCallBytes, o.MaxConnCallBytes = verbs.DefaultMaxCallBytes, verbs.DefaultMaxConnCall
	return o
}

type method uint16

func (m method) ServeCall(_ context.Context, _ verbs.Peer, _, resp []byte) ([]byte, error) {
	return append(resp, byte(m)), nil
}

func TestHandlers(t *testing.T) {
	var hs Handlers
	require.Nil(t, hs.Get(1), "the zero value is empty")
	hs.Set(1, method(1))
	hs.Set(2, method(2))
	require.Equal(t, method(1), hs.Get(1))
	require.Equal(t, method(2), hs.Get(2))
	hs.Set(1, method(9))
	require.Equal(t, method(9), hs.Get(1), "replaced")
	hs.Set(2, nil)
	require.Nil(t, hs.Get(2), "removed")
	require.Equal(t, method(9), hs.Get(1), "others kept")
	require.Nil(t, hs.Get(3))
}

func TestHandlersConcurrent(t *testing.T) {
	var hs Handlers
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for k := range 100 {
				hs.Set(uint16(i*1000+k), method(i))
				_ = hs.Get(uint16(k))
			}
		})
	}
	wg.Wait()
	for i := range 4 {
		for k := range 100 {
			require.Equal(t, method(i), hs.Get(uint16(i*1000+k)))
		}
	}
}

func TestHandlersGetAllocs(t *testing.T) {
	var hs Handlers
	hs.Set(5, method(5))
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if hs.Get(5) == nil {
			t.Fatal("lost handler")
		}
	}))
}

type sess struct {
	id    uint64
	ended atomic.Bool
}

func TestSessions(t *testing.T) {
	ss := NewSessions[*sess](1024, 64)
	a, b := &sess{}, &sess{}
	require.NoError(t, ss.Add(a, &a.id))
	require.NoError(t, ss.Add(b, &b.id))
	require.NotZero(t, a.id)
	require.Equal(t, a.id+1, b.id, "ids are consecutive")
	got, ok := ss.Get(b.id)
	require.True(t, ok)
	require.Same(t, b, got)
	ss.Remove(b.id)
	_, ok = ss.Get(b.id)
	require.False(t, ok)
	ss.Remove(b.id) // twice is harmless
	require.Equal(t, 1, ss.Len())

	ln := &closer{}
	first, err := ss.Close(ln, func(s *sess) { s.ended.Store(true) })
	require.True(t, first)
	require.NoError(t, err)
	require.True(t, ln.closed.Load())
	require.True(t, a.ended.Load(), "live sessions are ended")
	require.False(t, b.ended.Load(), "removed sessions are not")

	c := &sess{}
	require.ErrorIs(t, ss.Add(c, &c.id), verbs.ErrClosed)
	require.Zero(t, c.id)
	first, err = ss.Close(ln, func(*sess) { t.Fatal("second close ended a session") })
	require.False(t, first)
	require.NoError(t, err)
}

func TestSessionsIDsDiffer(t *testing.T) {
	x, y := NewSessions[*sess](1024, 64), NewSessions[*sess](1024, 64)
	a, b := &sess{}, &sess{}
	require.NoError(t, x.Add(a, &a.id))
	require.NoError(t, y.Add(b, &b.id))
	require.NotEqual(t, a.id, b.id, "first ids are random (2^-63 chance of a false failure)")
}

type closer struct {
	closed atomic.Bool
	err    error
}

func (c *closer) Close() error { c.closed.Store(true); return c.err }

func TestSessionsCloseError(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"ok", nil, nil},
		{"already-closed", fmt.Errorf("close: %w", net.ErrClosed), nil},
		{"failed", boom, boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := NewSessions[*sess](1024, 64)
			first, err := ss.Close(&closer{err: tc.err}, func(*sess) {})
			require.True(t, first)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
			}
		})
	}
}

// TestServe runs the accept loop on a loopback listener: handshakes run
// concurrently, their abnormal failures are reported and their
// connections closed, and Close waits for a handshake in progress.
func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ss := NewSessions[*sess](1024, 64)
	reports := make(chan error, 8)
	release := make(chan struct{})
	var held atomic.Bool
	bad := errors.New("bad hello")
	ss.Serve("test", ln, func(nc net.Conn) error {
		var b [1]byte
		if _, err := io.ReadFull(nc, b[:]); err != nil {
			return err
		}
		switch b[0] {
		case 'a': // accepted: the session keeps the connection
			s := &sess{}
			if err := ss.Add(s, &s.id); err != nil {
				return err
			}
			_, err := nc.Write([]byte{'A'})
			_ = nc.Close()
			return err
		case 'h': // held until Close has begun
			held.Store(true)
			<-release
			return verbs.ErrClosed
		}
		return bad
	}, func(err error) { reports <- err })

	dial := func(b byte) net.Conn {
		t.Helper()
		nc, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		_, err = nc.Write([]byte{b})
		require.NoError(t, err)
		return nc
	}
	nc := dial('a')
	var ack [1]byte
	_, err = io.ReadFull(nc, ack[:])
	require.NoError(t, err)
	require.Equal(t, byte('A'), ack[0])
	_ = nc.Close()
	require.Eventually(t, func() bool { return ss.Len() == 1 }, 5*time.Second, time.Millisecond)

	nc = dial('x')
	select {
	case err := <-reports:
		require.ErrorIs(t, err, bad)
	case <-time.After(5 * time.Second):
		t.Fatal("a failed handshake was not reported")
	}
	_, err = nc.Read(ack[:])
	require.Error(t, err, "the failed handshake's connection is closed")
	_ = nc.Close()

	nc = dial('h')
	defer nc.Close()
	require.Eventually(t, held.Load, 5*time.Second, time.Millisecond)
	done := make(chan struct{})
	ended := 0
	var first bool
	go func() {
		defer close(done)
		first, err = ss.Close(ln, func(*sess) { ended++ })
	}()
	select {
	case <-done:
		t.Fatal("Close returned while a handshake ran")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-done
	require.True(t, first)
	require.NoError(t, err)
	require.Equal(t, 1, ended)
	select {
	case err := <-reports:
		t.Fatalf("an orderly end was reported: %v", err)
	default:
	}
}

func TestAbnormal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{io.EOF, false},
		{fmt.Errorf("read: %w", io.EOF), false},
		{net.ErrClosed, false},
		{verbs.ErrClosed, false},
		{fmt.Errorf("x: %w", verbs.ErrClosed), false},
		{io.ErrUnexpectedEOF, true},
		{&verbs.ProtocolError{Stage: "frame", Reason: "junk"}, true},
		{errors.New("reset"), true},
	} {
		t.Run(fmt.Sprint(tc.err), func(t *testing.T) {
			require.Equal(t, tc.want, Abnormal(tc.err))
		})
	}
}

package faultproxy_test

import (
	"errors"
	"flag"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/faultproxy"
)

var seedFlag = flag.Uint64("seed", 0, "seed for random inputs and the proxies (0 picks one from the clock)")

// newRand returns a generator from a logged seed, and the seed.
func newRand(t testing.TB) (*rand.Rand, uint64) {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) | 1
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed
}

// randomBytes returns n random non-zero bytes.
func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(1 + r.IntN(255))
	}
	return b
}

// echoServer echoes every connection until the test ends.
type echoServer struct {
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			_ = c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

// newProxy starts a proxy in front of target, closed at cleanup.
func newProxy(t *testing.T, target string, seed uint64) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target, faultproxy.Options{Seed: seed})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes b and reads len(b) bytes back, within a bound.
func roundTrip(t *testing.T, c net.Conn, b []byte) []byte {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(b)
		errc <- err
	}()
	got := make([]byte, len(b))
	_, err := io.ReadFull(c, got)
	require.NoError(t, err)
	require.NoError(t, <-errc)
	require.NoError(t, c.SetDeadline(time.Time{}))
	return got
}

// requireNothing checks that nothing arrives on c within d.
func requireNothing(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	var one [1]byte
	n, err := c.Read(one[:])
	require.Zero(t, n, "a byte went through a stalled proxy")
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, c.SetReadDeadline(time.Time{}))
}

// eventually polls cond every millisecond for at most 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, what)
}

func TestPass(t *testing.T) {
	r, seed := newRand(t)
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String(), seed)
	c := dial(t, p.Addr())
	b := randomBytes(r, 1<<20+r.IntN(4096))
	require.Equal(t, b, roundTrip(t, c, b))
	st := p.Stats()
	require.Equal(t, int64(len(b)), st.Up)
	require.Equal(t, int64(len(b)), st.Down)
	require.Equal(t, 1, st.Conns)
	require.Equal(t, 1, st.Open)
	require.Zero(t, st.Flipped)
}

func TestDelay(t *testing.T) {
	r, seed := newRand(t)
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String(), seed)
	c := dial(t, p.Addr())
	const d = 5 * time.Millisecond
	require.NoError(t, p.Set(faultproxy.Fault{Kind: faultproxy.Delay, Delay: d}))
	b := randomBytes(r, 100)
	start := time.Now()
	require.Equal(t, b, roundTrip(t, c, b))
	// One chunk each way, each held d: a lower bound, not a speed goal.
	require.GreaterOrEqual(t, time.Since(start), 2*d)
}

func TestStall(t *testing.T) {
	for _, dir := range []faultproxy.Dir{faultproxy.Up, faultproxy.Down, faultproxy.Both} {
		t.Run(dir.String(), func(t *testing.T) {
			r, seed := newRand(t)
			e := newEchoServer(t)
			p := newProxy(t, e.ln.Addr().String(), seed)
			c := dial(t, p.Addr())
			require.NoError(t, p.Set(faultproxy.Fault{Kind: faultproxy.Stall, Dir: dir}))
			b := randomBytes(r, 4096)
			_, err := c.Write(b)
			require.NoError(t, err)
			if dir == faultproxy.Down {
				// Up still flows: the echo server got everything.
				eventually(t, "up bytes forwarded", func() bool { return p.Stats().Up == int64(len(b)) })
			}
			requireNothing(t, c, 50*time.Millisecond)
			require.Equal(t, 1, p.Stats().Open, "a stall keeps the connection open")
			p.Heal()
			got := make([]byte, len(b))
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
			_, err = io.ReadFull(c, got)
			require.NoError(t, err)
			require.Equal(t, b, got, "held data resumes after the stall")
		})
	}
}

func TestStallFor(t *testing.T) {
	r, seed := newRand(t)
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String(), seed)
	c := dial(t, p.Addr())
	const d = 30 * time.Millisecond
	require.NoError(t, p.Set(faultproxy.Fault{Kind: faultproxy.Stall, Dir: faultproxy.Up, For: d}))
	b := randomBytes(r, 1000)
	start := time.Now()
	require.Equal(t, b, roundTrip(t, c, b))
	require.GreaterOrEqual(t, time.Since(start), d, "the stall ends by itself, not before its time")
}

func TestPartition(t *testing.T) {
	r, seed := newRand(t)
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String(), seed)
	c1 := dial(t, p.Addr())
	b := randomBytes(r, 2000)
	require.Equal(t, b, roundTrip(t, c1, b))
	require.NoError(t, p.Set(faultproxy.Fault{Kind: faultproxy.Partition}))
	_, err := c1.Write(b)
	require.NoError(t, err)
	c2 := dial(t, p.Addr()) // accepted, but the target is not dialed yet
	eventually(t, "second connection accepted", func() bool { return p.Stats().Conns == 2 })
	requireNothing(t, c1, 50*time.Millisecond)
	require.Equal(t, int64(1), e.accepted.Load(), "a partition holds new connections")
	require.Equal(t, int64(len(b)), p.Stats().Up, "nothing crosses a partition")
	p.Heal()
	got := make([]byte, len(b))
	require.NoError(t, c1.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = io.ReadFull(c1, got)
	require.NoError(t, err)
	require.Equal(t, b, got)
	b2 := randomBytes(r, 3000)
	require.Equal(t, b2, roundTrip(t, c2, b2))
	require.Equal(t, int64(2), e.accepted.Load())
}

func TestPartitionFor(t *testing.T) {
	r, seed := newRand(t)
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String(), seed)
	c := dial(t, p.Addr())
	const d = 30 * time.Millisecond
	require.NoError(t, p.Set(faultproxy.Fault{Kind: faultproxy.Partition, For: d}))
	b := randomBytes(r, 500)
	start := time.Now()
	require.Equal(t, b, roundTrip(t, c, b))
	require.GreaterOrEqual(t, time.Since(start), d)
}

// requireReset reads c until it fails and checks the failure is a reset;
// it returns the bytes read first.
func requireReset(t *testing.T, c net.Conn) int {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	n, err := io.Copy(io.Discard, c)
	require.Error(t, err, "the connection ended cleanly, not with a reset")
	require.True(t, errors.Is(err, syscall.ECONNRESET), "want a reset, got %v", err)
	return int(n)
}

func TestResetAfter(t *testing.T) {
	r, seed := newRand(t)
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String(), seed)
	c := dial(t, p.Addr())
	other := dial(t, p.Addr())
	require.Equal(t, []byte("hi"), roundTrip(t, other, []byte("hi")))
	after := int64(1000 + r.IntN(5000))
	require.NoError(t, p.Set(faultproxy.Fault{Kind: faultproxy.Reset, Dir: faultproxy.Up, After: after}))
	go func() { _, _ = c.Write(randomBytes(r, 4*int(after))) }()
	got := requireReset(t, c)
	require.LessOrEqual(t, int64(got), after, "more than After bytes went through")
	requireReset(t, other) // every connection of the session
	st := p.Stats()
	require.Equal(t, 2+after, st.Up, "the stream is cut at exactly After bytes after the Set")
	require.Equal(t, 2, st.Resets)
	// A reset strikes once: a new connection passes.
	c3 := dial(t, p.Addr())
	b := randomBytes(r, 100)
	require.Equal(t, b, roundTrip(t, c3, b))
}

func TestResetAt(t *testing.T) {
	_, seed := newRand(t)
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String(), seed)
	c := dial(t, p.Addr())
	require.Equal(t, []byte("x"), roundTrip(t, c, []byte("x")))
	require.NoError(t, p.Set(faultproxy.Fault{Kind: faultproxy.Reset, At: 20 * time.Millisecond}))
	requireReset(t, c)
	require.Equal(t, 1, p.Stats().Resets)
}

func TestResetNow(t *testing.T) {
	_, seed := newRand(t)
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String(), seed)
	c := dial(t, p.Addr())
	require.Equal(t, []byte("x"), roundTrip(t, c, []byte("x")))
	require.NoError(t, p.Set(faultproxy.Fault{Kind: faultproxy.Reset}))
	requireReset(t, c)
	eventually(t, "link closed", func() bool { return p.Stats().Open == 0 })
}

// diffs lists the offsets where a and b differ.
func diffs(a, b []byte) []int64 {
	var out []int64
	for i := range a {
		if a[i] != b[i] {
			out = append(out, int64(i))
		}
	}
	return out
}

func TestCorrupt(t *testing.T) {
	cases := []struct {
		name  string
		fault faultproxy.Fault
		// in reports whether an offset is one the fault may hit.
		in    func(int64) bool
		flips int
	}{
		{"down-random", faultproxy.Fault{Kind: faultproxy.Corrupt, Dir: faultproxy.Down, After: 100, Flips: 3, Span: 1000},
			func(o int64) bool { return o >= 100 && o < 1100 }, 3},
		{"up-offsets", faultproxy.Fault{Kind: faultproxy.Corrupt, Dir: faultproxy.Up, Offsets: []int64{0, 7, 4095}},
			func(o int64) bool { return o == 0 || o == 7 || o == 4095 }, 3},
		{"up-one", faultproxy.Fault{Kind: faultproxy.Corrupt, Dir: faultproxy.Up, After: 2048},
			func(o int64) bool { return o == 2048 }, 1},
		{"past-the-end", faultproxy.Fault{Kind: faultproxy.Corrupt, Dir: faultproxy.Down, After: 1 << 20},
			func(int64) bool { return false }, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, seed := newRand(t)
			e := newEchoServer(t)
			p := newProxy(t, e.ln.Addr().String(), seed)
			c := dial(t, p.Addr())
			require.NoError(t, p.Set(tc.fault))
			b := randomBytes(r, 4096)
			got := roundTrip(t, c, b)
			d := diffs(b, got)
			require.Len(t, d, tc.flips)
			for _, o := range d {
				require.True(t, tc.in(o), "offset %d corrupted", o)
			}
			require.Equal(t, tc.flips, p.Stats().Flipped)
		})
	}
}

// The stream of a direction spans every connection, in forwarding order.
func TestCorruptAcrossConnections(t *testing.T) {
	r, seed := newRand(t)
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String(), seed)
	a, b := dial(t, p.Addr()), dial(t, p.Addr())
	require.NoError(t, p.Set(faultproxy.Fault{Kind: faultproxy.Corrupt, Dir: faultproxy.Down, Offsets: []int64{150}}))
	x, y := randomBytes(r, 100), randomBytes(r, 100)
	require.Equal(t, x, roundTrip(t, a, x))
	got := roundTrip(t, b, y)
	require.Equal(t, []int64{50}, diffs(y, got))
}

// The same seed and faults corrupt the same bytes the same way.
func TestSeedReproduces(t *testing.T) {
	r, seed := newRand(t)
	e := newEchoServer(t)
	b := randomBytes(r, 8192)
	var runs [2][]byte
	for i := range runs {
		p := newProxy(t, e.ln.Addr().String(), seed)
		require.Equal(t, seed, p.Seed())
		c := dial(t, p.Addr())
		require.NoError(t, p.Set(faultproxy.Fault{Kind: faultproxy.Corrupt, Dir: faultproxy.Down, Flips: 5, Span: 8192}))
		runs[i] = roundTrip(t, c, b)
	}
	require.Len(t, diffs(b, runs[0]), 5)
	require.Equal(t, runs[0], runs[1])
}

func TestSetInvalid(t *testing.T) {
	_, seed := newRand(t)
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String(), seed)
	bad := []faultproxy.Fault{
		{Kind: 99},
		{Kind: faultproxy.Pass, Delay: time.Millisecond},
		{Kind: faultproxy.Pass, Dir: faultproxy.Up},
		{Kind: faultproxy.Delay},
		{Kind: faultproxy.Delay, Delay: time.Millisecond, After: 3},
		{Kind: faultproxy.Stall, For: -1},
		{Kind: faultproxy.Stall, Dir: 4},
		{Kind: faultproxy.Partition, Dir: faultproxy.Up},
		{Kind: faultproxy.Reset, After: -1},
		{Kind: faultproxy.Reset, At: -1},
		{Kind: faultproxy.Reset, Flips: 1},
		{Kind: faultproxy.Corrupt, Flips: 3, Span: 2},
		{Kind: faultproxy.Corrupt, Offsets: []int64{}},
		{Kind: faultproxy.Corrupt, Offsets: []int64{-1}},
		{Kind: faultproxy.Corrupt, Offsets: []int64{1}, After: 1},
		{Kind: faultproxy.Corrupt, For: time.Second},
	}
	for _, f := range bad {
		err := p.Set(f)
		var fe *faultproxy.FaultError
		require.ErrorAs(t, err, &fe, "%+v", f)
		require.ErrorIs(t, err, faultproxy.ErrFault)
	}
	require.Equal(t, faultproxy.Fault{}, p.Fault(), "a refused fault changes nothing")
	_, err := faultproxy.New("", faultproxy.Options{})
	require.ErrorIs(t, err, faultproxy.ErrOptions)
}

// Close ends stalled pumps, held connections and open links, and waits for
// them (TestMain's goleak check sees the rest).
func TestClose(t *testing.T) {
	r, seed := newRand(t)
	e := newEchoServer(t)
	p, err := faultproxy.New(e.ln.Addr().String(), faultproxy.Options{Seed: seed})
	require.NoError(t, err)
	c := dial(t, p.Addr())
	require.NoError(t, p.Set(faultproxy.Fault{Kind: faultproxy.Stall}))
	_, err = c.Write(randomBytes(r, 1000))
	require.NoError(t, err)
	require.NoError(t, p.Set(faultproxy.Fault{Kind: faultproxy.Partition}))
	held := dial(t, p.Addr())
	eventually(t, "held connection accepted", func() bool { return p.Stats().Conns == 2 })
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "Close is idempotent")
	require.ErrorIs(t, p.Set(faultproxy.Fault{}), faultproxy.ErrClosed)
	for _, x := range []net.Conn{c, held} {
		require.NoError(t, x.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err := io.Copy(io.Discard, x)
		require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "a connection outlived Close")
	}
	require.Zero(t, p.Stats().Open)
}

package structobj

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

// holdProxy stands between a client and an owner over TCP: it forwards
// every connection it accepts to target, both ways, until it is held.
// Held, it forwards nothing, keeping what it has read (and the ends of
// stream it has seen) until released, while whatever else was sent
// waits in the kernel's socket buffers: a frozen process (SIGSTOP, a GC
// pause, a VM stall) or a partition, seen from the owner.
type holdProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex
	cond    sync.Cond
	held    bool
	done    bool
	conns   []net.Conn
	stalled [2]int // bytes read and waiting to be forwarded, by direction (toTarget, fromTarget)
}

const (
	toTarget   = 0
	fromTarget = 1
)

// newHoldProxy starts a proxy to target; it is closed at cleanup (make it
// after the clients that use it, so it closes first and frees their
// calls).
func newHoldProxy(t *testing.T, target string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &holdProxy{ln: ln, target: target}
	p.cond.L = &p.mu
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is where clients connect.
func (p *holdProxy) Addr() string { return p.ln.Addr().String() }

func (p *holdProxy) accept() {
	defer p.wg.Done()
	for {
		a, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = a.Close()
			continue
		}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			_, _ = a.Close(), b.Close()
			return
		}
		p.conns = append(p.conns, a, b)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pump(a, b, toTarget)
		go p.pump(b, a, fromTarget)
	}
}

// pump copies src to dst, waiting while the proxy is held. An error or
// the end of src, once let through, closes both.
func (p *holdProxy) pump(src, dst net.Conn, dir int) {
	defer p.wg.Done()
	defer func() { _, _ = src.Close(), dst.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, rerr := src.Read(buf)
		if !p.pass(dir, n) {
			return
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if rerr != nil {
			return
		}
	}
}

// pass waits while the proxy is held, counting n bytes as stalled; it
// returns false once the proxy is closed.
func (p *holdProxy) pass(dir, n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled[dir] += n
	for p.held && !p.done {
		p.cond.Wait()
	}
	p.stalled[dir] -= n
	return !p.done
}

// hold stops forwarding.
func (p *holdProxy) hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// release forwards again, what was kept first.
func (p *holdProxy) release() {
	p.mu.Lock()
	p.held = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// stalledBytes is how many bytes of direction dir the proxy keeps.
func (p *holdProxy) stalledBytes(dir int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalled[dir]
}

func (p *holdProxy) close() {
	p.mu.Lock()
	p.done = true
	p.cond.Broadcast()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}

// requireSameBytes fails with where and how much got differs from want
// (not with both dumped).
func requireSameBytes(t testing.TB, want, got []byte, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	if bytes.Equal(want, got) {
		return
	}
	first, n := -1, 0
	for i := range want {
		if want[i] != got[i] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	require.Failf(t, what+" torn", "%d of %d bytes differ, the first at offset %d", n, len(want), first)
}

// TestOwnerFenceFrozenWriter is issue 14's second defect over tcp: a
// PUT's WRITEs reach the owner only after its reservation expired and the
// space went to another client's committed object (the frozen client's
// traffic is held in a proxy, as SIGSTOP, a VM stall or a healed
// partition would hold it). Nothing the frozen client sent may land in
// the victim, and its PUT must fail.
func TestOwnerFenceFrozenWriter(t *testing.T) {
	for _, buffers := range []bool{true, false} {
		name := "staged"
		if buffers {
			name = "buffers"
		}
		t.Run(name, func(t *testing.T) {
			checkLeaks(t)
			b := backendNamed("tcp")
			r := newRand(t)
			ctx := testContext(t)
			const n = 256 << 10
			const ttl = time.Minute
			clock := newFakeClock()
			// The arena holds one such object: the victim can only have
			// the frozen reservation's space.
			o := newTestOwner(t, b, OwnerConfig{ArenaBytes: n, ReserveTTL: ttl, HoldTTL: ttl, Now: clock.Now})
			frozen := newObjClient(t, b, ClientConfig{PoolBytes: 4 * n, ChunkBytes: 16 << 10, InFlight: 4})
			other := newObjClient(t, b, ClientConfig{PoolBytes: 4 * n})
			p := newHoldProxy(t, o.Addr())

			late := randBytes(r, n)
			data := late
			if buffers {
				buf, err := frozen.NewBuffer(n)
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, buf.Release()) })
				data = buf.Bytes()
				copy(data, late)
			}
			obj, err := new(Builder).Bytes("late", data).Build()
			require.NoError(t, err)

			// The frozen client stops the moment its Reserve is answered:
			// all its WRITEs stay in the proxy and the kernel.
			reserved := make(chan uint64, 1)
			frozen.hookReserved = func(_, off uint64) {
				p.hold()
				reserved <- off
			}
			putErr := make(chan error, 1)
			go func() {
				_, err := frozen.Put(ctx, p.Addr(), "frozen", obj)
				putErr <- err
			}()
			var off uint64
			select {
			case off = <-reserved:
				frozen.hookReserved = nil // the PUT called it already
			case err := <-putErr:
				t.Fatalf("the PUT ended before its Reserve was answered: %v", err)
			}
			require.Eventually(t, func() bool { return p.stalledBytes(toTarget) > 0 }, 10*time.Second, time.Millisecond,
				"the frozen client's WRITEs are held")
			s := o.Stats()
			require.Equal(t, 1, s.Reservations)
			require.Zero(t, s.LargestFree, "the frozen PUT holds the whole arena")

			clock.Advance(ttl + time.Second)
			require.Eventually(t, func() bool { return o.Stats().LargestFree == n }, 10*time.Second, time.Millisecond,
				"the expired reservation's space comes back")
			victim, err := new(Builder).Bytes("victim", randBytes(r, n)).Build()
			require.NoError(t, err)
			_, err = other.Put(ctx, o.Addr(), "victim", victim)
			require.NoError(t, err)
			o.mu.Lock()
			victimOff := o.objects["victim"].ext.off
			o.mu.Unlock()
			require.Equal(t, off, victimOff, "the victim reuses the frozen reservation's space")

			// The frozen client resumes: what it had queued is delivered.
			p.release()
			var frozenErr error
			select {
			case frozenErr = <-putErr:
			case <-time.After(20 * time.Second):
				t.Fatal("the frozen PUT did not return once released")
			}
			t.Logf("the frozen PUT: %v", frozenErr)
			_, got, _ := getWhole(t, other, o.Addr(), "victim")
			requireSameBytes(t, objectPayload(victim), got, "the victim")
			require.ErrorIs(t, frozenErr, verbs.ErrClosed, "the frozen PUT fails: its connection was evicted")
			require.ErrorContains(t, frozenErr, "ended before its commit: nothing was committed")
			_, err = other.Stat(ctx, o.Addr(), "frozen")
			require.ErrorIs(t, err, ErrNotFound)
			s = o.Stats()
			require.Equal(t, uint64(1), s.Evictions)
			require.Equal(t, uint64(1), s.ExpiredReservations)
			require.Zero(t, s.QuarantinedBytes)
			requireAccounted(t, s)

			// The frozen client's next operation connects again (in the
			// space of the victim, deleted: the arena holds one object).
			_, err = other.Delete(ctx, o.Addr(), "victim")
			require.NoError(t, err)
			again, err := new(Builder).Bytes("again", randBytes(r, n)).Build()
			require.NoError(t, err)
			_, err = frozen.Put(ctx, p.Addr(), "again", again)
			require.NoError(t, err)
			_, got, _ = getWhole(t, frozen, p.Addr(), "again")
			requireSameBytes(t, objectPayload(again), got, "the PUT after the eviction")
			require.Equal(t, 1, frozen.Stats().Conns)
			require.Equal(t, uint64(1), frozen.Stats().PutsFailed)
		})
	}
}

// TestOwnerFenceHeldMapping is the shm side: a client goroutine stopped
// in the middle of its copy into the owner's mapping (it holds the
// mapping) while its reservation expires. The space must stay out of
// the allocator until the client has let go of the mapping, and the
// object that reuses it afterwards reads back whole.
func TestOwnerFenceHeldMapping(t *testing.T) {
	checkLeaks(t)
	b := backendNamed("shm")
	r := newRand(t)
	const n = 64 << 10
	const ttl = time.Minute
	clock := newFakeClock()
	o := newTestOwner(t, b, OwnerConfig{ArenaBytes: n, ReserveTTL: ttl, Now: clock.Now})
	frozen := newTestClient(t, b, o.Addr())
	other := newTestClient(t, b, o.Addr())

	res, err := frozen.reserve(n)
	require.NoError(t, err)
	mapper, ok := frozen.conn.(verbs.Mapper)
	require.True(t, ok, "an shm Conn is a verbs.Mapper")
	_, remote, err := mapper.HoldMapped(frozen.local, frozen.objs.Key, verbs.AccessRemoteWrite)
	require.NoError(t, err)
	held := true
	t.Cleanup(func() {
		if held {
			mapper.ReleaseMapped()
		}
	})
	late := randBytes(r, n)
	copy(remote[res.Off:], late[:n/2]) // copied half, then stopped

	clock.Advance(ttl + time.Second)
	s := o.Stats()
	require.Zero(t, s.Reservations, "the reservation expired")
	require.Zero(t, s.LargestFree, "the space stays out of the allocator while its writer holds the mapping")
	_, err = other.reserve(n)
	require.ErrorIs(t, err, ErrNoSpace)

	copy(remote[res.Off+n/2:], late[n/2:]) // resumes, and lets go
	mapper.ReleaseMapped()
	held = false
	require.Eventually(t, func() bool { return o.Stats().LargestFree == n }, 10*time.Second, time.Millisecond,
		"the space comes back once the writer let go")
	want := randBytes(r, n)
	other.put("victim", want)
	o.mu.Lock()
	victimOff := o.objects["victim"].ext.off
	o.mu.Unlock()
	require.Equal(t, res.Off, victimOff, "the victim reuses the expired reservation's space")
	_, _, got := other.get("victim")
	requireSameBytes(t, want, got, "the victim")
	s = o.Stats()
	require.Equal(t, uint64(1), s.Evictions)
	require.Zero(t, s.QuarantinedBytes)
	requireAccounted(t, s)
	_, err = frozen.reserve(1)
	require.ErrorIs(t, err, verbs.ErrClosed, "the frozen client's connection was evicted")
}

// TestOwnerFenceStats: while an evicted connection is not fenced, its
// reservations' space is reported as quarantined, and Close gives up on
// the fence (an shm client frozen for good) without leaking its waiter.
func TestOwnerFenceStats(t *testing.T) {
	checkLeaks(t)
	b := backendNamed("shm")
	clock := newFakeClock()
	o := newTestOwner(t, b, OwnerConfig{ArenaBytes: 1 << 20, ReserveTTL: time.Minute, Now: clock.Now})
	frozen := newTestClient(t, b, o.Addr())
	var sizes []uint64
	for _, n := range []uint64{1000, 64 << 10, 4096} {
		res, err := frozen.reserve(n)
		require.NoError(t, err)
		sizes = append(sizes, res.Length)
	}
	mapper := frozen.conn.(verbs.Mapper)
	_, _, err := mapper.HoldMapped(frozen.local, frozen.objs.Key, verbs.AccessRemoteWrite)
	require.NoError(t, err)
	t.Cleanup(mapper.ReleaseMapped) // at the end, after the owner's Close
	// Only the first reservation has expired; the others end with their
	// connection.
	o.mu.Lock()
	for _, r := range o.res {
		if r.size != 1000 {
			r.expires = r.expires.Add(time.Hour)
		}
	}
	o.mu.Unlock()
	clock.Advance(time.Minute)
	s := o.Stats()
	require.Zero(t, s.Reservations)
	require.Equal(t, 3, s.Quarantined)
	require.Equal(t, sizes[0]+sizes[1]+sizes[2], s.QuarantinedBytes)
	require.Equal(t, uint64(3), s.ExpiredReservations)
	require.Equal(t, uint64(1), s.Evictions)
	requireAccounted(t, s)

	other := newTestClient(t, b, o.Addr())
	other.put("k", fillPattern(make([]byte, 5000), 3))
	clock.Advance(time.Hour)
	s = o.Stats()
	require.Equal(t, 3, s.Quarantined, "a fence that does not close keeps its space out")
	require.Equal(t, uint64(1), s.Evictions, "one eviction per connection")
	requireAccounted(t, s)

	require.NoError(t, o.Close())
	s = o.Stats()
	require.Zero(t, s.Quarantined)
	require.Zero(t, s.QuarantinedBytes)
	require.Equal(t, s.ArenaBytes, s.FreeBytes)
}

// TestOwnerFenceDroppedConn: a connection that ends while it holds a
// reservation (the owner does not learn of it) has its reservation
// expire as usual, and the space comes back with the connection's fence,
// which closed when its session ended.
func TestOwnerFenceDroppedConn(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		clock := newFakeClock()
		o := newTestOwner(t, b, OwnerConfig{ArenaBytes: 64 << 10, ReserveTTL: time.Minute, Now: clock.Now})
		gone := newTestClient(t, b, o.Addr())
		res, err := gone.reserve(64 << 10)
		require.NoError(t, err)
		gone.write(res.Off, fillPattern(make([]byte, 4096), 5))
		require.NoError(t, gone.conn.Close())
		clock.Advance(time.Minute)
		s := o.Stats()
		require.Zero(t, s.Reservations)
		require.Equal(t, uint64(1), s.Evictions)
		requireFreeSoon(t, o)
		c := newTestClient(t, b, o.Addr())
		r2, err := c.reserve(64 << 10)
		require.NoError(t, err)
		require.Equal(t, res.Off, r2.Off)
		require.NoError(t, c.abort(r2.ID))
		requireAccounted(t, o.Stats())
	})
}

// TestOwnerFenceWaitsForCalls: a handler call of the evicted connection
// still running (as a gather service's WRITE command scattering a chunk
// it read into the region) keeps the connection's fence, and so the
// space, until it returns.
func TestOwnerFenceWaitsForCalls(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		const n = 64 << 10
		const method = 0x53ff
		clock := newFakeClock()
		o := newTestOwner(t, b, OwnerConfig{ArenaBytes: n, ReserveTTL: time.Minute, Now: clock.Now})
		c := newTestClient(t, b, o.Addr())
		res, err := c.reserve(n)
		require.NoError(t, err)
		conn := reservationConn(t, o, res.ID)

		entered, finish := make(chan struct{}), make(chan struct{})
		var once sync.Once
		done := func() { once.Do(func() { close(finish) }) }
		t.Cleanup(done)
		o.seg.Handle(method, verbs.HandlerFunc(func(_ context.Context, _ verbs.Peer, _, resp []byte) ([]byte, error) {
			close(entered)
			<-finish // deaf to its context, as a scatter in progress is
			return resp, nil
		}))
		called := make(chan error, 1)
		go func() {
			_, err := c.conn.Call(c.ctx, method, nil, nil)
			called <- err
		}()
		<-entered

		clock.Advance(time.Minute)
		s := o.Stats()
		require.Zero(t, s.Reservations)
		require.Equal(t, uint64(1), s.Evictions)
		// The transport's fence waits for the connection's handlers.
		select {
		case <-o.seg.Evict(conn):
			t.Fatal("the fence closed while a handler call of the connection still ran")
		case <-time.After(100 * time.Millisecond):
		}
		s = o.Stats()
		require.Equal(t, 1, s.Quarantined, "a call of the connection is still running")
		require.Equal(t, uint64(n), s.QuarantinedBytes)
		require.Zero(t, s.LargestFree)

		done()
		requireFreeSoon(t, o)
		t.Logf("the running call: %v", <-called)
	})
}

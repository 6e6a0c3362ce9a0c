package bufferpool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

var page = os.Getpagesize()

// smallConfig is a pool of units pages, one page per slot.
func smallConfig(units int) Config {
	return Config{Budget: units * page, MinSlot: page, NoHugePages: true}
}

func TestAcquireSizes(t *testing.T) {
	p := newTestPool(t, Config{Budget: 16 * page, MinSlot: page, MaxSlot: 8 * page, NoHugePages: true})
	cases := []struct {
		name  string
		size  int
		class int
	}{
		{"one byte", 1, page},
		{"one slot", page, page},
		{"slot plus one", page + 1, 2 * page},
		{"three slots", 3 * page, 4 * page},
		{"largest class", 8 * page, 8 * page},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := p.TryAcquire(tc.size)
			require.NoError(t, err)
			b := l.Bytes()
			require.Len(t, b, tc.size)
			require.Equal(t, tc.size, cap(b), "capacity must be clipped to the size")
			require.Equal(t, tc.size, l.Size())
			require.Equal(t, tc.class, l.Class())
			require.Zero(t, l.Offset()%tc.class, "offset %d not aligned to its class", l.Offset())
			require.Same(t, &p.Arena()[l.Offset()], &b[0], "Bytes must be the arena at Offset")
			st := p.Stats()
			require.Equal(t, tc.class, st.InUse)
			require.Equal(t, tc.size, st.Requested)
			require.Equal(t, 1, st.Leases)
			require.NoError(t, l.Release())
			require.Nil(t, l.Bytes(), "Bytes after Release")
			require.Zero(t, p.Stats().InUse)
		})
	}
}

func TestAcquireRejected(t *testing.T) {
	p := newTestPool(t, Config{Budget: 16 * page, MinSlot: page, MaxSlot: 8 * page, NoHugePages: true})
	acquires := map[string]func(int) (Lease, error){
		"TryAcquire":        p.TryAcquire,
		"TryAcquireLabeled": func(n int) (Lease, error) { return p.TryAcquireLabeled(n, "x") },
		"Acquire":           func(n int) (Lease, error) { return p.Acquire(context.Background(), n) },
		"AcquireLabeled":    func(n int) (Lease, error) { return p.AcquireLabeled(context.Background(), n, "x") },
		"AcquireTimeout":    func(n int) (Lease, error) { return p.AcquireTimeout(n, time.Hour) },
	}
	cases := []struct {
		name string
		size int
		want error
	}{
		{"zero", 0, ErrInvalidSize},
		{"negative", -5, ErrInvalidSize},
		{"above largest class", 8*page + 1, ErrTooLarge},
		{"above budget", 17 * page, ErrTooLarge},
		{"huge", 1 << 62, ErrTooLarge},
	}
	before := p.Stats()
	for _, tc := range cases {
		for name, acquire := range acquires {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				l, err := acquire(tc.size)
				require.ErrorIs(t, err, tc.want)
				var ae *AcquireError
				require.True(t, errors.As(err, &ae), "want *AcquireError, got %T", err)
				require.Equal(t, tc.size, ae.Size)
				if tc.want == ErrTooLarge {
					require.Equal(t, 8*page, ae.Limit)
				}
				require.Equal(t, Lease{}, l)
			})
		}
	}
	if diff := cmp.Diff(before, p.Stats()); diff != "" {
		t.Fatalf("rejected requests changed the pool (-before +after):\n%s", diff)
	}
}

func TestTryAcquireExhausted(t *testing.T) {
	p := newTestPool(t, smallConfig(4))
	var held []Lease
	for range 4 {
		l, err := p.TryAcquire(page)
		require.NoError(t, err)
		held = append(held, l)
	}
	l, err := p.TryAcquire(1)
	require.Same(t, ErrExhausted, err, "TryAcquire returns the bare sentinel")
	require.Equal(t, Lease{}, l)
	l, err = p.AcquireTimeout(1, 0)
	require.Same(t, ErrExhausted, err, "AcquireTimeout(0) is TryAcquire")
	require.Equal(t, Lease{}, l)
	st := p.Stats()
	require.EqualValues(t, 2, st.Exhausted)
	require.Equal(t, 4*page, st.InUse)
	require.Equal(t, 4*page, st.Peak)
	require.Zero(t, st.LargestFree)

	// Free two non-buddies: one page fits, two pages do not.
	require.NoError(t, held[0].Release())
	require.NoError(t, held[2].Release())
	_, err = p.TryAcquire(2 * page)
	require.ErrorIs(t, err, ErrExhausted)
	l, err = p.TryAcquire(page)
	require.NoError(t, err)
	held[0] = l
	require.NoError(t, held[1].Release())
	require.NoError(t, held[3].Release())
	require.NoError(t, held[0].Release())
	st = p.Stats()
	require.Zero(t, st.InUse)
	require.Equal(t, 4*page, st.Peak)
	require.Equal(t, 4*page, st.LargestFree)
	require.EqualValues(t, 5, st.Acquires)
	require.EqualValues(t, 5, st.Releases)
}

func TestDoubleRelease(t *testing.T) {
	p := newTestPool(t, smallConfig(2))
	l, err := p.TryAcquire(100)
	require.NoError(t, err)
	cp := l
	require.NoError(t, l.Release())

	for name, h := range map[string]Lease{"same value": l, "copy": cp} {
		err := h.Release()
		require.ErrorIs(t, err, ErrDoubleRelease, name)
		var le *LeaseError
		require.True(t, errors.As(err, &le))
		require.Equal(t, l.Offset(), le.Offset)
		require.Equal(t, 100, le.Size)
	}
	st := p.Stats()
	require.Zero(t, st.Leases)
	require.EqualValues(t, 1, st.Releases)
	require.Equal(t, 2*page, st.LargestFree, "allocator intact after double release")
}

func TestStaleHandle(t *testing.T) {
	p := newTestPool(t, smallConfig(2))
	stale, err := p.TryAcquire(page)
	require.NoError(t, err)
	fill(stale.Bytes(), 1)
	require.NoError(t, stale.Release())

	// The block is reused (LIFO) by a new holder.
	fresh, err := p.TryAcquire(page)
	require.NoError(t, err)
	require.Equal(t, stale.Offset(), fresh.Offset(), "expected the block to be reused")
	fill(fresh.Bytes(), 2)

	require.Nil(t, stale.Bytes(), "a stale handle must not see the new holder's memory")
	require.ErrorIs(t, stale.Release(), ErrDoubleRelease)
	require.Equal(t, 1, p.Stats().Leases, "the stale release must not free the new lease")
	require.True(t, filled(fresh.Bytes(), 2))
	_, err = p.TryAcquire(2 * page)
	require.ErrorIs(t, err, ErrExhausted, "the new lease must still hold its block")
	require.NoError(t, fresh.Release())
}

func TestZeroLease(t *testing.T) {
	var l Lease
	require.Nil(t, l.Bytes())
	require.Zero(t, l.Class())
	require.Zero(t, l.Size())
	require.ErrorIs(t, l.Release(), ErrInvalidLease)
}

func TestLeasesIsolated(t *testing.T) {
	rng := newRand(t)
	p := newTestPool(t, Config{Budget: 64 * page, MinSlot: page, MaxSlot: 8 * page, NoHugePages: true})
	type held struct {
		l   Lease
		key uint64
	}
	var leases []held
	for {
		l, err := p.TryAcquire(1 + rng.IntN(8*page))
		if errors.Is(err, ErrExhausted) {
			// Nothing of that class is left: fill the holes with small leases.
			l, err = p.TryAcquire(1 + rng.IntN(page))
			if errors.Is(err, ErrExhausted) {
				break
			}
		}
		require.NoError(t, err)
		key := rng.Uint64()
		fill(l.Bytes(), key)
		leases = append(leases, held{l, key})
	}
	require.Equal(t, p.Stats().Budget, p.Stats().InUse, "no page left free")
	for _, h := range leases {
		require.True(t, filled(h.l.Bytes(), h.key), "lease at %d was overwritten", h.l.Offset())
	}
	// Appending to a full lease must reallocate, never write past its end.
	grown := append(leases[0].l.Bytes(), 0xAB)
	require.NotSame(t, &grown[0], &leases[0].l.Bytes()[0])
	for _, h := range leases {
		require.True(t, filled(h.l.Bytes(), h.key), "lease at %d was overwritten by an append", h.l.Offset())
	}
	for _, h := range leases {
		require.NoError(t, h.l.Release())
	}
	st := p.Stats()
	require.Zero(t, st.InUse)
	require.Zero(t, st.Requested)
	require.Equal(t, len(leases), int(st.Releases))
}

// result is what a goroutine's acquire returned.
type result struct {
	l   Lease
	err error
}

// testCtx bounds blocking acquires in tests, so a broken wakeup fails the
// test instead of hanging it.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// acquireAsync starts a blocking acquire and returns its result channel.
func acquireAsync(ctx context.Context, p *Pool, size int) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := p.Acquire(ctx, size)
		ch <- result{l, err}
	}()
	return ch
}

func waiting(p *Pool, n int) func() bool {
	return func() bool { return p.Stats().Waiting == n }
}

func TestAcquireWokenByRelease(t *testing.T) {
	p := newTestPool(t, smallConfig(2))
	a, err := p.TryAcquire(page)
	require.NoError(t, err)
	b, err := p.TryAcquire(page)
	require.NoError(t, err)

	ch := acquireAsync(testCtx(t), p, page)
	waitFor(t, "the acquire to queue", waiting(p, 1))
	select {
	case r := <-ch:
		t.Fatalf("acquire returned while the pool was full: %+v", r)
	default:
	}
	require.NoError(t, b.Release())
	r := <-ch
	require.NoError(t, r.err)
	require.Equal(t, b.Offset(), r.l.Offset(), "the waiter gets the released block")
	st := p.Stats()
	require.EqualValues(t, 1, st.Waits)
	require.Zero(t, st.Waiting)
	require.Positive(t, st.WaitTime)
	require.NoError(t, r.l.Release())
	require.NoError(t, a.Release())
}

func TestAcquireDeadline(t *testing.T) {
	p := newTestPool(t, smallConfig(1))
	held, err := p.TryAcquire(page)
	require.NoError(t, err)
	defer func() { require.NoError(t, held.Release()) }()

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name    string
		acquire func() (Lease, error)
		cause   error
	}{
		{"context deadline", func() (Lease, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			defer cancel()
			return p.Acquire(ctx, 1)
		}, context.DeadlineExceeded},
		{"labeled deadline", func() (Lease, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			defer cancel()
			return p.AcquireLabeled(ctx, 1, "chunk")
		}, context.DeadlineExceeded},
		{"timeout", func() (Lease, error) { return p.AcquireTimeout(1, 5*time.Millisecond) }, context.DeadlineExceeded},
		{"already canceled", func() (Lease, error) { return p.Acquire(canceled, 1) }, context.Canceled},
		{"canceled while queued", func() (Lease, error) {
			ctx, cancel := context.WithCancel(testCtx(t))
			go func() {
				for p.Stats().Waiting == 0 && ctx.Err() == nil {
					time.Sleep(100 * time.Microsecond)
				}
				cancel()
			}()
			return p.Acquire(ctx, 1)
		}, context.Canceled},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.acquire()
			require.Equal(t, Lease{}, l)
			require.ErrorIs(t, err, ErrExhausted)
			require.ErrorIs(t, err, tc.cause)
			var ae *AcquireError
			require.True(t, errors.As(err, &ae))
			require.Equal(t, 1, ae.Size)
			st := p.Stats()
			require.Zero(t, st.Waiting)
			require.EqualValues(t, i+1, st.TimedOut)
			require.Equal(t, 1, st.Leases)
		})
	}
}

// TestFIFOFairness checks that a large waiter is not overtaken by smaller
// acquires that would fit, and that the queue moves once the head is served
// or gives up.
func TestFIFOFairness(t *testing.T) {
	p := newTestPool(t, smallConfig(4))
	var held []Lease
	for range 4 {
		l, err := p.TryAcquire(page)
		require.NoError(t, err)
		held = append(held, l)
	}
	big := acquireAsync(testCtx(t), p, 4*page)
	waitFor(t, "the large acquire to queue", waiting(p, 1))
	small := acquireAsync(testCtx(t), p, page)
	waitFor(t, "the small acquire to queue", waiting(p, 2))

	require.NoError(t, held[3].Release())
	_, err := p.TryAcquire(page)
	require.ErrorIs(t, err, ErrExhausted, "TryAcquire must not overtake queued acquires")
	require.Equal(t, page, p.Stats().LargestFree, "a page is free but reserved for the queue")
	select {
	case r := <-small:
		t.Fatalf("small acquire overtook the large one: %+v", r)
	default:
	}
	for _, l := range held[:3] {
		require.NoError(t, l.Release())
	}
	rb := <-big
	require.NoError(t, rb.err)
	require.Equal(t, 4*page, rb.l.Class())
	require.Equal(t, 1, p.Stats().Waiting, "the small acquire still waits for the large lease")
	require.NoError(t, rb.l.Release())
	rs := <-small
	require.NoError(t, rs.err)
	require.NoError(t, rs.l.Release())
}

func TestHeadGivesUpUnblocksQueue(t *testing.T) {
	p := newTestPool(t, smallConfig(4))
	held, err := p.TryAcquire(page)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(testCtx(t))
	big := acquireAsync(ctx, p, 4*page)
	waitFor(t, "the large acquire to queue", waiting(p, 1))
	small := acquireAsync(testCtx(t), p, page)
	waitFor(t, "the small acquire to queue", waiting(p, 2))

	cancel()
	rb := <-big
	require.ErrorIs(t, rb.err, context.Canceled)
	rs := <-small
	require.NoError(t, rs.err, "the small acquire fits once the head left")
	require.NoError(t, rs.l.Release())
	require.NoError(t, held.Release())
}

func TestCloseWithLeases(t *testing.T) {
	p := newTestPool(t, Config{Budget: 8 * page, MinSlot: page, NoHugePages: true, TrackCallers: true})
	a, err := p.AcquireLabeled(context.Background(), 3*page, "engram rows")
	require.NoError(t, err)
	b, err := p.TryAcquire(10)
	require.NoError(t, err)
	fill(a.Bytes(), 7)

	err = p.Close()
	require.ErrorIs(t, err, ErrLeak)
	var le *LeakError
	require.True(t, errors.As(err, &le))
	got := slices.Clone(le.Leases)
	for i := range got {
		require.Contains(t, got[i].Caller, "TestCloseWithLeases", "caller of lease %d", i)
		require.Contains(t, got[i].Caller, "pool_test.go:")
		got[i].Caller = ""
	}
	want := []LeakedLease{
		{Offset: a.Offset(), Size: 3 * page, Class: 4 * page, Label: "engram rows"},
		{Offset: b.Offset(), Size: 10, Class: page},
	}
	slices.SortFunc(want, func(x, y LeakedLease) int { return x.Offset - y.Offset })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("leak report (-want +got):\n%s", diff)
	}
	require.Contains(t, err.Error(), `label="engram rows"`)
	require.Contains(t, err.Error(), "2 leases outstanding")

	// The memory stays mapped and valid; new acquires are refused.
	require.True(t, filled(a.Bytes(), 7))
	fill(b.Bytes(), 8)
	require.NotNil(t, p.Arena())
	st := p.Stats()
	require.True(t, st.Closed)
	require.True(t, st.Arena.Mapped)
	_, err = p.TryAcquire(1)
	require.Same(t, ErrClosed, err)
	_, err = p.Acquire(context.Background(), 1)
	require.Same(t, ErrClosed, err)

	// Give them back, then Close succeeds; a third Close reports ErrClosed.
	require.NoError(t, a.Release())
	require.ErrorIs(t, p.Close(), ErrLeak)
	require.NoError(t, b.Release())
	require.NoError(t, p.Close())
	require.Nil(t, p.Arena())
	require.False(t, p.Stats().Arena.Mapped)
	require.Same(t, ErrClosed, p.Close())
	require.Nil(t, a.Bytes())
}

func TestLeakErrorListIsBounded(t *testing.T) {
	e := &LeakError{}
	for i := range 20 {
		e.Leases = append(e.Leases, LeakedLease{Offset: i * page, Size: 1, Class: page})
	}
	msg := e.Error()
	require.Contains(t, msg, "20 leases outstanding")
	require.Contains(t, msg, "and 12 more")
	require.Equal(t, leakListMax, strings.Count(msg, "offset="))
}

func TestCloseWakesWaiters(t *testing.T) {
	p := newTestPool(t, smallConfig(1))
	held, err := p.TryAcquire(page)
	require.NoError(t, err)
	chs := []<-chan result{
		acquireAsync(testCtx(t), p, page),
		acquireAsync(testCtx(t), p, 1),
	}
	waitFor(t, "both acquires to queue", waiting(p, 2))
	require.ErrorIs(t, p.Close(), ErrLeak)
	for _, ch := range chs {
		r := <-ch
		require.Same(t, ErrClosed, r.err)
		require.Equal(t, Lease{}, r.l)
	}
	require.Zero(t, p.Stats().Waiting)
	require.NoError(t, held.Release())
	require.NoError(t, p.Close())
}

func TestRegisterHook(t *testing.T) {
	var registered, deregistered int
	var arena []byte
	p := newTestPool(t, Config{
		Budget: 4 * page, MinSlot: page, NoHugePages: true,
		Register: func(a []byte) (func() error, error) {
			registered++
			arena = a
			return func() error { deregistered++; return nil }, nil
		},
	})
	require.Equal(t, 1, registered)
	require.Len(t, arena, 4*page)
	require.Same(t, &p.Arena()[0], &arena[0])

	l, err := p.TryAcquire(page)
	require.NoError(t, err)
	require.ErrorIs(t, p.Close(), ErrLeak)
	require.Zero(t, deregistered, "no deregistration while a lease is live")
	require.NoError(t, l.Release())
	require.NoError(t, p.Close())
	require.Equal(t, 1, deregistered)
	require.Same(t, ErrClosed, p.Close())
	require.Equal(t, 1, registered)
	require.Equal(t, 1, deregistered)
}

func TestRegisterFails(t *testing.T) {
	boom := errors.New("no memory keys left")
	calls := 0
	p, err := New(Config{
		Budget: 4 * page, MinSlot: page, NoHugePages: true,
		Register: func([]byte) (func() error, error) { calls++; return nil, boom },
	})
	if errors.Is(err, ErrNotSupported) {
		t.Skip(err)
	}
	require.Nil(t, p)
	require.ErrorIs(t, err, ErrRegister)
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, calls)
}

func TestDeregisterFails(t *testing.T) {
	boom := errors.New("transport busy")
	fail := true
	calls := 0
	p := newTestPool(t, Config{
		Budget: 4 * page, MinSlot: page, NoHugePages: true,
		Register: func([]byte) (func() error, error) {
			return func() error {
				calls++
				if fail {
					return boom
				}
				return nil
			}, nil
		},
	})
	err := p.Close()
	require.ErrorIs(t, err, ErrDeregister)
	require.ErrorIs(t, err, boom)
	require.NotNil(t, p.Arena(), "the arena stays mapped while registered")
	require.True(t, p.Stats().Arena.Mapped)
	_, err = p.TryAcquire(1)
	require.Same(t, ErrClosed, err)
	fail = false
	require.NoError(t, p.Close())
	require.Equal(t, 2, calls)
	require.Nil(t, p.Arena())
}

func TestNoAllocs(t *testing.T) {
	ctx := context.Background()
	for _, track := range []bool{false, true} {
		p := newTestPool(t, Config{Budget: 16 * page, MinSlot: page, NoHugePages: true, TrackCallers: track})
		cases := map[string]func() (Lease, error){
			"TryAcquire":        func() (Lease, error) { return p.TryAcquire(3 * page) },
			"TryAcquireLabeled": func() (Lease, error) { return p.TryAcquireLabeled(3*page, "row chunk") },
			"Acquire":           func() (Lease, error) { return p.Acquire(ctx, 3*page) },
			"AcquireLabeled":    func() (Lease, error) { return p.AcquireLabeled(ctx, 3*page, "row chunk") },
			"AcquireTimeout":    func() (Lease, error) { return p.AcquireTimeout(3*page, time.Second) },
		}
		for name, acquire := range cases {
			t.Run(name, func(t *testing.T) {
				var failed error
				allocs := testing.AllocsPerRun(100, func() {
					l, err := acquire()
					if err != nil {
						failed = err
						return
					}
					l.Bytes()[0] = 1
					if err := l.Release(); err != nil {
						failed = err
					}
				})
				require.NoError(t, failed)
				require.Zero(t, allocs, "allocations per acquire+release (TrackCallers=%v)", track)
			})
		}
		t.Run("TryAcquire exhausted", func(t *testing.T) {
			l, err := p.TryAcquire(16 * page)
			require.NoError(t, err)
			var failed error
			allocs := testing.AllocsPerRun(100, func() {
				if _, err := p.TryAcquire(1); err != ErrExhausted {
					failed = fmt.Errorf("TryAcquire on a full pool: %v", err)
				}
			})
			require.NoError(t, failed)
			require.Zero(t, allocs)
			require.NoError(t, l.Release())
		})
	}
}

// TestConcurrentStress runs goroutines that lease, write, check and release
// with every acquire flavour for a bounded time, then checks the accounting.
func TestConcurrentStress(t *testing.T) {
	rng := newRand(t)
	p := newTestPool(t, Config{Budget: 24 * page, MinSlot: page, MaxSlot: 8 * page, NoHugePages: true})
	const workers = 8
	stop := time.Now().Add(500 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		seed := rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- stressWorker(p, w, seed, stop)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := p.Stats()
	t.Logf("acquires %d waits %d timed out %d exhausted %d peak %d", st.Acquires, st.Waits, st.TimedOut, st.Exhausted, st.Peak)
	require.Zero(t, st.InUse)
	require.Zero(t, st.Requested)
	require.Zero(t, st.Leases)
	require.Zero(t, st.Waiting)
	require.Equal(t, st.Acquires, st.Releases)
	require.LessOrEqual(t, st.Peak, st.Budget)
	require.Positive(t, st.Waits, "the stress must have made acquires wait")
	require.Equal(t, 8*page, st.LargestFree)
}

func stressWorker(p *Pool, id int, seed uint64, stop time.Time) error {
	rng := newRandSeed(seed)
	type held struct {
		l   Lease
		key uint64
	}
	var leases []held
	release := func(i int) error {
		h := leases[i]
		if !filled(h.l.Bytes(), h.key) {
			return errors.New("lease content changed while held")
		}
		leases = slices.Delete(leases, i, i+1)
		return h.l.Release()
	}
	for n := uint64(0); time.Now().Before(stop); n++ {
		if len(leases) >= 3 || (len(leases) > 0 && rng.IntN(2) == 0) {
			if err := release(rng.IntN(len(leases))); err != nil {
				return err
			}
			continue
		}
		size := 1 + rng.IntN(8*page)
		var l Lease
		var err error
		switch rng.IntN(3) {
		case 0:
			l, err = p.TryAcquire(size)
		case 1:
			l, err = p.AcquireTimeout(size, time.Millisecond)
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
			l, err = p.AcquireLabeled(ctx, size, "stress")
			cancel()
		}
		if errors.Is(err, ErrExhausted) {
			continue
		}
		if err != nil {
			return err
		}
		key := uint64(id)<<48 | n
		fill(l.Bytes(), key)
		leases = append(leases, held{l, key})
	}
	for len(leases) > 0 {
		if err := release(0); err != nil {
			return err
		}
	}
	return nil
}

package verbstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

// methodEcho is the call fixture's method: the handler WRITEs a few rows
// of its staging into the requester's exposure "dst" through its Peer,
// waits for them, and echoes the request.
const methodEcho = 7

// callRow is the size of the rows the call fixture's handler WRITEs.
const callRow = 264

// CallFixture is a warm pair for control-call round trips: one method
// whose handler posts Writes WRITEs of 264 B through its Peer (none when
// zero) and echoes the request. Its handler allocates nothing, so what a
// round trip allocates is the transport's.
type CallFixture struct {
	Pair    *Pair
	Writes  int
	staging *verbs.Region // owner: the WRITE sources
	dst     *verbs.Region // requester: the exposure WRITEd into

	mu  sync.Mutex // the handler's scratch (calls may overlap)
	wrs []verbs.WorkRequest
	cs  []verbs.Completion

	req, resp []byte
	round     byte
}

// NewCallFixture builds a CallFixture on b with writes WRITEs per call.
func NewCallFixture(tb testing.TB, b Backend, r *rand.Rand, writes int) *CallFixture {
	tb.Helper()
	f := &CallFixture{Writes: writes, wrs: make([]verbs.WorkRequest, writes), cs: make([]verbs.Completion, max(writes, 1))}
	p, exposed := b.NewPair(tb, r, PairConfig{
		Exports: []RegionSpec{{"tbl", 4096, ro}},
		Expose:  []RegionSpec{{"dst", callRow * 64, wo | verbs.AccessLocal}},
		Connect: verbs.ConnectOptions{Lanes: 2, Link: verbs.LinkParams{Bandwidth: 1e9, PostRate: 1e6, RTT: 1}},
	})
	f.Pair, f.dst = p, exposed["dst"]
	var err error
	f.staging, err = p.Owner.Alloc(callRow*64, verbs.AccessLocal)
	require.NoError(tb, err)
	Fill(r, f.staging.Bytes())
	p.Seg.Handle(methodEcho, verbs.HandlerFunc(f.serve))
	f.req = make([]byte, 64)
	for i := range f.req {
		f.req[i] = byte(r.Uint64()) | 1
	}
	f.resp = make([]byte, 0, len(f.req))
	return f
}

// serve is the fixture's handler.
func (f *CallFixture) serve(ctx context.Context, p verbs.Peer, req, resp []byte) ([]byte, error) {
	if f.Writes > 0 {
		f.mu.Lock()
		defer f.mu.Unlock()
		var key verbs.Key
		for _, ri := range p.Remote() {
			if ri.Name == "dst" {
				key = ri.Key
			}
		}
		if key == 0 {
			return nil, errors.New("no dst exposure")
		}
		row := uint64(req[0]) % (64 - uint64(f.Writes) + 1)
		for i := range f.wrs {
			off := (row + uint64(i)) * callRow
			f.wrs[i] = verbs.WorkRequest{ID: uint64(i), Op: verbs.OpWrite, Len: callRow,
				LocalKey: f.staging.Key(), LocalOff: off, RemoteKey: key, RemoteOff: off}
		}
		n, err := Drive(ctx, p, f.wrs, f.cs)
		if err != nil {
			return nil, err
		}
		for _, c := range f.cs[:n] {
			if c.Err != nil {
				return nil, c.Err
			}
		}
	}
	return append(resp, req...), nil
}

// Call runs one round trip with a fresh first request byte and checks
// the echo and, with WRITEs, that the rows are in place. It allocates
// nothing of its own.
func (f *CallFixture) Call(ctx context.Context) error {
	f.round++
	f.req[0] = f.round
	resp, err := f.Pair.Conn.Call(ctx, methodEcho, f.req, f.resp[:0])
	if err != nil {
		return err
	}
	if !bytes.Equal(resp, f.req) {
		return errors.New("verbstest: echo differs from the request")
	}
	if &resp[0] != &f.resp[:1][0] {
		return errors.New("verbstest: response not appended to the caller's buffer")
	}
	if f.Writes > 0 {
		row := int(f.req[0]) % (64 - f.Writes + 1)
		lo, hi := row*callRow, (row+f.Writes)*callRow
		if !bytes.Equal(f.dst.Bytes()[lo:hi], f.staging.Bytes()[lo:hi]) {
			return errors.New("verbstest: handler's WRITEs not in place when Call returned")
		}
	}
	return nil
}

// callCases are the round trips measured: a handler that does nothing
// and one that WRITEs a few rows through its Peer.
var callCases = []struct {
	name   string
	writes int
}{{"noop", 0}, {"writes=4", 4}}

// testCallAllocs checks that a warm Call round trip allocates nothing,
// on either side: no Peer queue, request buffer, goroutine or error is
// built per call.
func testCallAllocs(t *testing.T, b Backend) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, tc := range callCases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRand(t)
			f := NewCallFixture(t, b, r, tc.writes)
			ctx := context.Background()
			run := func() {
				if err := f.Call(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for range 50 { // warm: handler workers, Peer queues, buffers
				run()
			}
			allocs := steadyAllocs(200, run)
			t.Logf("%s %s: %.2f allocations per Call", b.Name, tc.name, allocs)
			require.Zero(t, allocs)
		})
	}
}

// BenchCall measures warm Call round trips (see CallFixture) per case.
func BenchCall(b *testing.B, be Backend) {
	for _, tc := range callCases {
		b.Run(tc.name, func(b *testing.B) {
			r := NewRand(b)
			f := NewCallFixture(b, be, r, tc.writes)
			ctx := context.Background()
			for range 20 {
				require.NoError(b, f.Call(ctx))
			}
			b.SetBytes(int64(len(f.req) + tc.writes*callRow))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := f.Call(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}

// methodKeep is testStalePeer's method.
const methodKeep = 8

// testStalePeer checks the Peer lifetime rule with pooled transport
// state: a Peer kept past its call fails with ErrClosed, and neither
// posts into nor takes completions from the later calls that reuse its
// queue, even while a goroutine hammers it during those calls.
func testStalePeer(t *testing.T, b Backend) {
	r := NewRand(t)
	p, exposed := b.NewPair(t, r, PairConfig{
		Exports: []RegionSpec{{"tbl", 4096, ro}},
		Expose:  []RegionSpec{{"dst", 64 << 10, wo | verbs.AccessLocal}},
		Listen:  verbs.ListenOptions{QueueDepth: 8},
	})
	staging, err := p.Owner.Alloc(64<<10, verbs.AccessLocal)
	require.NoError(t, err)
	Fill(r, staging.Bytes())
	dst := exposed["dst"].Bytes()
	var (
		mu   sync.Mutex
		kept []verbs.Peer
	)
	dstKey := func(q verbs.Peer) verbs.Key {
		ri, _ := verbs.FindRegion(q.Remote(), "dst")
		return ri.Key
	}
	requireEnded := func(q verbs.Peer) error {
		n, err := q.Post([]verbs.WorkRequest{{ID: 99, Op: verbs.OpWrite, Len: 4096, LocalKey: staging.Key(),
			RemoteKey: dstKey(q)}})
		if n != 0 || !errors.Is(err, verbs.ErrClosed) {
			return fmt.Errorf("stale Post: %d, %v", n, err)
		}
		cs := make([]verbs.Completion, 4)
		if n, err = q.Poll(cs); n != 0 || !errors.Is(err, verbs.ErrClosed) {
			return fmt.Errorf("stale Poll: %d, %v", n, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if n, err = q.Wait(ctx, cs, 1); n != 0 || !errors.Is(err, verbs.ErrClosed) {
			return fmt.Errorf("stale Wait: %d, %v", n, err)
		}
		return nil
	}
	p.Seg.Handle(methodKeep, verbs.HandlerFunc(func(ctx context.Context, q verbs.Peer, req, resp []byte) ([]byte, error) {
		mu.Lock()
		stale := kept
		kept = append(kept, q)
		mu.Unlock()
		off := uint64(req[0]) * 4096
		key := dstKey(q)
		// Post without waiting, then let every stale Peer try to take the
		// completion or post into this call's queue.
		wr := []verbs.WorkRequest{{ID: off, Op: verbs.OpWrite, Len: 4096, LocalKey: staging.Key(), LocalOff: off, RemoteKey: key, RemoteOff: off}}
		if n, err := q.Post(wr); n != 1 {
			return nil, fmt.Errorf("post: %d, %w", n, err)
		}
		for _, s := range stale {
			if err := requireEnded(s); err != nil {
				return nil, err
			}
		}
		cs := make([]verbs.Completion, 2)
		n, err := q.Wait(ctx, cs, 1)
		if err != nil || n != 1 || cs[0].ID != off || cs[0].Err != nil {
			return nil, fmt.Errorf("own completion: %d %v %+v", n, err, cs[:n])
		}
		if n, err := q.Poll(cs); n != 0 || err != nil {
			return nil, fmt.Errorf("poll after the last completion: %d, %v", n, err)
		}
		return append(resp, "ok"...), nil
	}))

	stop := make(chan struct{})
	hammered := make(chan error, 1)
	for i := range 16 {
		if i == 2 {
			// From now on a goroutine keeps using the first call's Peer
			// while later calls run.
			mu.Lock()
			first := kept[0]
			mu.Unlock()
			go func() {
				var err error
				for err == nil {
					select {
					case <-stop:
						hammered <- nil
						return
					default:
					}
					err = requireEnded(first)
				}
				hammered <- err
			}()
		}
		resp, err := p.Conn.Call(Context(t), methodKeep, []byte{byte(i)}, nil)
		require.NoError(t, err, "call %d", i)
		require.Equal(t, "ok", string(resp))
		lo := i * 4096
		require.True(t, bytes.Equal(staging.Bytes()[lo:lo+4096], dst[lo:lo+4096]), "call %d: WRITE not in place", i)
	}
	close(stop)
	require.NoError(t, <-hammered)
	mu.Lock()
	defer mu.Unlock()
	for i, q := range kept {
		require.NoError(t, requireEnded(q), "Peer of call %d", i)
	}
}

package gather

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
)

// The fakes below let the gather service run without a transport: a
// Peer whose work requests complete at once (or, stalled, never), and a
// segment that records evictions and ends the evicted connection's
// Peers.

// fakeTransport registers memory and nothing else (for staging.New).
type fakeTransport struct{ verbs.Transport }

func (fakeTransport) Register(buf []byte, a verbs.Access) (*verbs.Region, error) {
	return verbs.NewRegion(buf, a)
}
func (fakeTransport) Deregister(*verbs.Region) error { return nil }

type fakeSegment struct {
	regions []verbs.RegionInfo
	mu      sync.Mutex
	h       map[uint16]verbs.Handler
	evicted map[uint64]chan struct{}
}

func (s *fakeSegment) Addr() string                { return "fake" }
func (s *fakeSegment) Regions() []verbs.RegionInfo { return s.regions }
func (s *fakeSegment) Close() error                { return nil }
func (s *fakeSegment) Handle(m uint16, h verbs.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h == nil {
		s.h = map[uint16]verbs.Handler{}
	}
	s.h[m] = h
}

// conn returns the channel closed when connID is evicted.
func (s *fakeSegment) conn(connID uint64) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.evicted == nil {
		s.evicted = map[uint64]chan struct{}{}
	}
	if s.evicted[connID] == nil {
		s.evicted[connID] = make(chan struct{})
	}
	return s.evicted[connID]
}

func (s *fakeSegment) Evict(connID uint64) <-chan struct{} {
	ch := s.conn(connID)
	s.mu.Lock()
	select {
	case <-ch:
	default:
		close(ch)
	}
	s.mu.Unlock()
	return ch
}

func (s *fakeSegment) call(ctx context.Context, p *fakePeer, method uint16, req []byte) ([]byte, error) {
	s.mu.Lock()
	h := s.h[method]
	s.mu.Unlock()
	return h.ServeCall(ctx, p, req, nil)
}

// fakePeer completes every work request at once unless stalled; an
// evicted connection's Wait and Poll fail with ErrClosed after returning
// what is queued.
type fakePeer struct {
	id      uint64
	seg     *fakeSegment
	remote  []verbs.RegionInfo
	stalled bool
	mu      sync.Mutex
	done    []verbs.Completion
	posted  int
}

func (p *fakePeer) ConnID() uint64               { return p.id }
func (p *fakePeer) Remote() []verbs.RegionInfo   { return p.remote }
func (p *fakePeer) LinkParams() verbs.LinkParams { return verbs.LinkParams{} }
func (p *fakePeer) Post(wrs []verbs.WorkRequest) (int, error) {
	select {
	case <-p.seg.conn(p.id):
		return 0, verbs.ErrClosed
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posted += len(wrs)
	if !p.stalled {
		for _, wr := range wrs {
			p.done = append(p.done, verbs.Completion{ID: wr.ID})
		}
	}
	return len(wrs), nil
}

func (p *fakePeer) Poll(out []verbs.Completion) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := copy(out, p.done)
	p.done = p.done[n:]
	if n == 0 {
		select {
		case <-p.seg.conn(p.id):
			return 0, verbs.ErrClosed
		default:
		}
	}
	return n, nil
}

func (p *fakePeer) Wait(ctx context.Context, out []verbs.Completion, min int) (int, error) {
	for {
		if n, err := p.Poll(out); n > 0 || err != nil {
			return n, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-p.seg.conn(p.id):
		case <-time.After(time.Millisecond):
		}
	}
}

// fakeService runs a gather service over a fake segment exporting a
// table of tableBytes; the peer exposes a destination of dstBytes.
type fakeService struct {
	svc   *Service
	seg   *fakeSegment
	table *verbs.Region
	dst   *verbs.Region
	stg   *staging.Staging
}

func newFakeService(t *testing.T, tableBytes, dstBytes int, cfg Config) *fakeService {
	t.Helper()
	table, err := verbs.NewRegion(make([]byte, tableBytes), verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	dst, err := verbs.NewRegion(make([]byte, dstBytes), verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	stg, err := staging.New(fakeTransport{}, bufferpool.Config{Budget: 4 << 20, MinSlot: 64 << 10, NoHugePages: true}, verbs.AccessLocal)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, stg.Close()) })
	seg := &fakeSegment{regions: []verbs.RegionInfo{table.Info("table")}}
	cfg.Segment, cfg.Exports, cfg.Staging = seg, []verbs.Export{{Name: "table", Region: table}}, stg
	cfg.Calibration = &costmodel.Calibration{BMem: 5e9, RCopy: 8e6}
	cfg.PackWorkers = 1
	svc, err := NewService(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, svc.Close()) })
	return &fakeService{svc: svc, seg: seg, table: table, dst: dst, stg: stg}
}

func (f *fakeService) peer(id uint64) *fakePeer {
	return &fakePeer{id: id, seg: f.seg, remote: []verbs.RegionInfo{f.dst.Info("dst")}}
}

// rowsCmd is a READ of n rows of size bytes at random ids into dst,
// token-major or (strided) with a gap after each row.
func (f *fakeService) rowsCmd(r *rand.Rand, n int, size, gap uint64) planfmt.Command {
	rows := uint64(f.table.Len()) / size
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(r.Uint64N(rows))
	}
	dstLen := uint64(n) * (size + gap)
	p := planfmt.Plan{Form: planfmt.FormRows, SrcExtent: rows * size, DstExtent: dstLen,
		Rows: planfmt.Rows{RowSize: size, TableRows: rows, IDs64: ids}}
	if gap > 0 {
		p.Rows.Layout = planfmt.Layout{Kind: planfmt.LayoutStrided, Cols: 1, RowStride: size + gap, ColStride: size}
	}
	return planfmt.Command{Dir: planfmt.Read, Src: planfmt.Window{Key: uint64(f.table.Key()), Len: rows * size},
		Dst: planfmt.Window{Key: uint64(f.dst.Key()), Len: dstLen}, Chunk: 64 << 10, Pipeline: 4, Plan: p}
}

// rangesCmd is a READ of n ranges of at most maxLen bytes (some empty) at
// random sources into shuffled, disjoint destinations.
func (f *fakeService) rangesCmd(r *rand.Rand, n int, maxLen uint64) planfmt.Command {
	slot := maxLen + 8
	order := r.Perm(n)
	rs := make([]planfmt.Range, n)
	for i := range rs {
		l := r.Uint64N(maxLen + 1)
		rs[i] = planfmt.Range{Src: r.Uint64N(uint64(f.table.Len()) - l), Dst: uint64(order[i]) * slot, Len: l}
	}
	dstLen := uint64(n) * slot
	return planfmt.Command{Dir: planfmt.Read, Src: planfmt.Window{Key: uint64(f.table.Key()), Len: uint64(f.table.Len())},
		Dst: planfmt.Window{Key: uint64(f.dst.Key()), Len: dstLen}, Chunk: 64 << 10, Pipeline: 4,
		Plan: planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: uint64(f.table.Len()), DstExtent: dstLen, Ranges: rs}}
}

func encodeCmd(t *testing.T, c planfmt.Command) []byte {
	t.Helper()
	b, err := planfmt.AppendCommand(nil, &c)
	require.NoError(t, err)
	return b
}

// TestCommandCostBound: what a command's state really keeps after it ran
// (decoded plan, normalization, runs, requests, completions) stays within
// the cost it was charged before it was decoded, for rows and ranges of
// many shapes.
func TestCommandCostBound(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	f := newFakeService(t, 8<<20, 32<<20, Config{})
	for _, tc := range []struct {
		name string
		cmd  planfmt.Command
	}{
		{"rows-264", f.rowsCmd(r, 20000, 264, 0)},
		{"rows-strided", f.rowsCmd(r, 20000, 64, 40)},
		{"rows-8", f.rowsCmd(r, 50000, 8, 0)},
		{"ranges-small", f.rangesCmd(r, 20000, 300)},
		{"ranges-tiny", f.rangesCmd(r, 50000, 3)},
		{"ranges-large", f.rangesCmd(r, 200, 60000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.svc.mu.Lock()
			f.svc.free, f.svc.freeBytes = nil, 0 // a fresh state: its storage is this command's
			f.svc.mu.Unlock()
			msg := encodeCmd(t, tc.cmd)
			_, err := f.seg.call(context.Background(), f.peer(1), MethodGather, msg)
			require.NoError(t, err)
			shape, err := planfmt.Limits{}.PeekCommand(msg)
			require.NoError(t, err)
			cost := commandCost(shape, len(msg))
			f.svc.mu.Lock()
			require.NotEmpty(t, f.svc.free)
			st := f.svc.free[len(f.svc.free)-1]
			f.svc.mu.Unlock()
			used := st.footprint() + int64(len(msg))
			t.Logf("%d fragments, %d-byte message: footprint %d, charged %d", shape.Fragments, len(msg), used, cost)
			require.LessOrEqual(t, used, cost)
		})
	}
}

// degenerateCmd is the attack of a huge command of empty ranges: n
// ranges of zero bytes, the cheapest message that decodes into n range
// structs.
func (f *fakeService) degenerateCmd(n int) planfmt.Command {
	rs := make([]planfmt.Range, n)
	return planfmt.Command{Dir: planfmt.Read, Src: planfmt.Window{Key: uint64(f.table.Key()), Len: uint64(f.table.Len())},
		Dst: planfmt.Window{Key: uint64(f.dst.Key()), Len: uint64(f.dst.Len())}, Chunk: 64 << 10, Pipeline: 4,
		Plan: planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: uint64(f.table.Len()), DstExtent: uint64(f.dst.Len()), Ranges: rs}}
}

// allocated returns the bytes f allocates (in this process, while it runs).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestBudgetRefusesAmplification sends the owner, with default settings,
// commands of millions of empty ranges (a few MiB each on the wire, a few
// hundred MiB decoded), several at once: each is refused before it is
// decoded, the owner allocates about nothing for them, a well-behaved
// command at the same time succeeds, and nothing stays charged.
func TestBudgetRefusesAmplification(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	f := newFakeService(t, 8<<20, 32<<20, Config{})
	msg := encodeCmd(t, f.degenerateCmd(4<<20))
	t.Logf("attack command: %d ranges in %d bytes", 4<<20, len(msg))
	var err error
	got := allocated(func() { _, err = f.seg.call(context.Background(), f.peer(1), MethodGather, msg) })
	var ge *gatherwire.GatherError
	require.ErrorAs(t, err, &ge)
	require.Equal(t, gatherwire.GatherRefused, ge.Code)
	require.Equal(t, "budget", ge.Stage)
	require.Less(t, got, uint64(1<<20), "the owner allocated %d bytes for a refused command", got)

	good := f.rowsCmd(r, 5000, 264, 0)
	want := make([]byte, f.dst.Len())
	for i, id := range good.Plan.Rows.IDs64 {
		copy(want[i*264:(i+1)*264], f.table.Bytes()[id*264:(id+1)*264])
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, err := f.seg.call(context.Background(), f.peer(uint64(10+i)), MethodGather, msg)
			errs <- err
		})
	}
	_, err = f.seg.call(context.Background(), f.peer(2), MethodGather, encodeCmd(t, good))
	require.NoError(t, err, "a well-behaved command during the attack")
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorAs(t, err, &ge)
		require.Equal(t, "budget", ge.Stage)
	}
	st := f.svc.Stats()
	require.Zero(t, st.Running)
	require.Zero(t, st.Charged)
	require.Equal(t, uint64(9), st.Refused)
}

// TestBudgetWaitsThenExhausts: commands beyond MaxCommands, or beyond
// MemoryBudget with the others running, wait AcquireTimeout and then fail
// with engine.GatherExhausted; once the running ones end, commands run again.
func TestBudgetWaitsThenExhausts(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	f := newFakeService(t, 8<<20, 32<<20, Config{MaxCommands: 1, AcquireTimeout: 20 * time.Millisecond, ProgressTimeout: time.Minute})
	stalled := f.peer(1)
	stalled.stalled = true
	cmd := encodeCmd(t, f.rowsCmd(r, 5000, 264, 0))
	done := make(chan error, 1)
	go func() { _, err := f.seg.call(context.Background(), stalled, MethodGather, cmd); done <- err }()
	require.Eventually(t, func() bool { return f.svc.Stats().Running == 1 }, 10*time.Second, time.Millisecond)
	_, err := f.seg.call(context.Background(), f.peer(2), MethodGather, cmd)
	var ge *gatherwire.GatherError
	require.ErrorAs(t, err, &ge)
	require.Equal(t, gatherwire.GatherExhausted, ge.Code)
	require.Equal(t, "budget", ge.Stage)
	f.seg.Evict(1)
	require.Error(t, <-done)
	_, err = f.seg.call(context.Background(), f.peer(3), MethodGather, cmd)
	require.NoError(t, err)
}

// TestStalledCommandIsEvicted: a requester that never completes the
// owner's WRITEs has its connection evicted once the command made no
// progress for ProgressTimeout; the command fails, its staging is
// released, and Close does not wait on it longer than that.
func TestStalledCommandIsEvicted(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	f := newFakeService(t, 8<<20, 32<<20, Config{ProgressTimeout: 50 * time.Millisecond})
	stalled := f.peer(7)
	stalled.stalled = true
	cmd := encodeCmd(t, f.rowsCmd(r, 20000, 264, 0))
	start := time.Now()
	_, err := f.seg.call(context.Background(), stalled, MethodGather, cmd)
	var ge *gatherwire.GatherError
	require.ErrorAs(t, err, &ge)
	require.Equal(t, gatherwire.GatherAborted, ge.Code)
	require.Less(t, time.Since(start), 5*time.Second)
	select {
	case <-f.seg.conn(7):
	default:
		t.Fatal("the stalled connection was not evicted")
	}
	st := f.svc.Stats()
	require.Equal(t, uint64(1), st.Stalled)
	require.Zero(t, f.stg.Pool().Stats().Leases, "staging still leased")

	// Close with a stalled command running returns within about the
	// progress timeout.
	other := f.peer(8)
	other.stalled = true
	done := make(chan error, 1)
	go func() { _, err := f.seg.call(context.Background(), other, MethodGather, cmd); done <- err }()
	require.Eventually(t, func() bool { return f.svc.Stats().Running == 1 }, 10*time.Second, time.Millisecond)
	start = time.Now()
	require.NoError(t, f.svc.Close())
	require.Less(t, time.Since(start), 5*time.Second)
	require.Error(t, <-done)
	require.Zero(t, f.stg.Pool().Stats().Leases)
}

// TestPooledStatesTrimmed: after a command whose state grew past
// keepStateBytes, the service keeps none of that storage, and what all
// kept states hold stays within keepPoolBytes.
func TestPooledStatesTrimmed(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	f := newFakeService(t, 8<<20, 64<<20, Config{})
	big := encodeCmd(t, f.rangesCmd(r, 200000, 200))
	_, err := f.seg.call(context.Background(), f.peer(1), MethodGather, big)
	require.NoError(t, err)
	small := encodeCmd(t, f.rowsCmd(r, 2000, 264, 0))
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			_, err := f.seg.call(context.Background(), f.peer(uint64(2+i)), MethodGather, small)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	f.svc.mu.Lock()
	defer f.svc.mu.Unlock()
	var kept int64
	for _, st := range f.svc.free {
		require.LessOrEqual(t, st.footprint(), int64(keepStateBytes))
		kept += st.footprint()
	}
	require.Equal(t, kept, f.svc.freeBytes)
	require.LessOrEqual(t, kept, int64(keepPoolBytes))
}

package lookup

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/stretchr/testify/require"
)

func TestNewEngineWorkers(t *testing.T) {
	e := NewEngine(0)
	defer e.Close()
	require.Equal(t, min(runtime.GOMAXPROCS(0), maxDefaultWorkers), e.Workers())
	e3 := NewEngine(3)
	defer e3.Close()
	require.Equal(t, 3, e3.Workers())
	require.Equal(t, 1, (*Engine)(nil).Workers())
	(*Engine)(nil).Close()
}

// TestSplitModel pins the split threshold: two goroutines from two
// fork/joins' worth of rows.
func TestSplitModel(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("GOMAXPROCS is 1: nothing splits")
	}
	e := NewEngine(2)
	defer e.Close()
	// The threshold is pack's: the first row count it splits.
	threshold := 1
	for e.pw.Split(threshold, 264) < 2 {
		threshold *= 2
	}
	lo, hi := threshold/2, threshold
	for lo+1 < hi {
		if mid := (lo + hi) / 2; e.pw.Split(mid, 264) < 2 {
			lo = mid
		} else {
			hi = mid
		}
	}
	require.Equal(t, 1, e.splits(hi-1, 264))
	require.Equal(t, 2, e.splits(hi, 264))
	require.InDelta(t, 1050, hi, 100, "two goroutines from two fork/joins' worth of 264-byte rows each (about 1,050 rows)")
	require.Equal(t, 2, e.splits(1<<30, 264))
	one := NewEngine(1)
	defer one.Close()
	require.Equal(t, 1, one.splits(1<<30, 264))
}

// TestSplitRuns checks that the engine's own split really runs (helpers
// started) on a multi-layout lookup and that the rows are right, on the
// default cost model.
func TestSplitRuns(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("GOMAXPROCS is 1: nothing splits")
	}
	r := newRand(t)
	e := NewEngine(2)
	defer e.Close()
	const tt, k, rowBytes = 400, 24, 264
	for _, mode := range []string{shareDistinct, shareSlices} {
		t.Run(mode, func(t *testing.T) {
			cols := randomColumns(r, mode, k, rowBytes, false)
			require.GreaterOrEqual(t, e.splits(tt*k, rowBytes), 2)
			ids := randomIDs[int32](r, cols, tt, 9)
			runCase(t, []struct {
				name string
				e    *Engine
			}{{"default", e}}, cols, ids, tt, k, newOutput(r, layoutHead, tt, k, rowBytes))
			require.True(t, e.pw.Started(), "the helpers did not start")
		})
	}
}

// TestConcurrentLookups runs lookups of every kind from several
// goroutines on one engine (run it with -race): single-layout splits
// through pack, multi-layout splits through the engine's helpers, serial
// small lookups on the callers, and lookups of more than inlineCols
// columns.
func TestConcurrentLookups(t *testing.T) {
	r := newRand(t)
	e := NewEngine(2)
	e.minRows = 16
	defer e.Close()
	type request struct {
		cols []Column
		ids  []int64
		t, k int
		out  Output
		want []byte
	}
	var reqs []request
	for i, shape := range [][2]int{{300, 24}, {300, 24}, {2, 24}, {3, 70}, {40, 5}, {1, 1}} {
		mode := []string{shareSame, shareDistinct, shareRepeated, shareSlices, shareAlternating, shareSame}[i]
		layout := layouts[i%len(layouts)]
		cols := randomColumns(r, mode, shape[1], 128, true)
		ids := randomIDs[int64](r, cols, shape[0], 7)
		out := newOutput(r, layout, shape[0], shape[1], 128)
		want := append([]byte(nil), out.Buf...)
		refLookup(cols, ids, shape[0], shape[1], Output{Buf: want, Off: out.Off, TStride: out.TStride, KStride: out.KStride})
		reqs = append(reqs, request{cols, ids, shape[0], shape[1], out, want})
	}
	const goroutines, rounds = 6, 30
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				q := reqs[(g+i)%len(reqs)]
				got := q.out
				got.Buf = append([]byte(nil), q.out.Buf...)
				if err := Lookup(e, q.cols, q.ids, q.t, q.k, got); err != nil {
					errs <- err
					return
				}
				for b := range q.want {
					if q.want[b] != got.Buf[b] {
						errs <- fmt.Errorf("goroutine %d round %d: byte %d differs", g, i, b)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestClose(t *testing.T) {
	r := newRand(t)
	e := NewEngine(2)
	e.minRows = 8
	cols := randomColumns(r, shareDistinct, 4, 64, false)
	ids := randomIDs[int32](r, cols, 50, 0)
	out := newOutput(r, layoutToken, 50, 4, 64)
	require.NoError(t, Lookup(e, cols, ids, 50, 4, out)) // starts the helpers
	e.Close()
	e.Close()
	fillRandom(r, out.Buf)
	poison := append([]byte(nil), out.Buf...)
	for _, tt := range []int{1, 50} {
		require.ErrorIs(t, Lookup(e, cols, ids[:tt*4], tt, 4, out), ErrClosed)
	}
	requireSameBytes(t, poison, out.Buf, "output after Close")
	// Check does not need the engine.
	require.NoError(t, Check(cols, ids, 50, 4, out))
}

// TestCloseWhileLookingUp closes an engine under running lookups: each
// lookup either completes or returns ErrClosed, and Close stops every
// helper (goleak checks at exit).
func TestCloseWhileLookingUp(t *testing.T) {
	r := newRand(t)
	e := NewEngine(2)
	e.minRows = 8
	cols := randomColumns(r, shareDistinct, 8, 64, false)
	ids := randomIDs[int32](r, cols, 200, 0)
	var wg sync.WaitGroup
	for range 4 {
		out := newOutput(r, layoutHead, 200, 8, 64)
		wg.Go(func() {
			for {
				if err := Lookup(e, cols, ids, 200, 8, out); err != nil {
					if err != ErrClosed {
						t.Errorf("lookup: %v", err)
					}
					return
				}
			}
		})
	}
	e.Close()
	wg.Wait()
}

// TestAllocs asserts zero allocations per lookup in steady state: int32
// and int64 ids, both layouts, one table and distinct tables, small and
// large (splitting) lookups, and more than inlineCols columns.
func TestAllocs(t *testing.T) {
	r := newRand(t)
	e := NewEngine(2)
	defer e.Close()
	split := NewEngine(2)
	split.minRows = 16
	defer split.Close()
	type shape struct{ t, k int }
	for _, s := range []shape{{1, 24}, {16, 24}, {600, 24}, {3, 70}} {
		for _, layout := range []string{layoutToken, layoutHead} {
			for _, mode := range []string{shareSame, shareDistinct} {
				cols := randomColumns(r, mode, s.k, 264, false)
				out := newOutput(r, layout, s.t, s.k, 264)
				ids32 := randomIDs[int32](r, cols, s.t, 9)
				ids64 := randomIDs[int64](r, cols, s.t, 9)
				for _, x := range []struct {
					name string
					e    *Engine
				}{{"default", e}, {"split", split}, {"nil", nil}} {
					if x.e == nil && s.k > inlineCols {
						continue // documented: a nil engine allocates its scratch for many columns
					}
					name := fmt.Sprintf("T=%d/K=%d/%s/%s/%s", s.t, s.k, layout, mode, x.name)
					t.Run(name+"/int32", func(t *testing.T) {
						f := func() { requireNoErr(t, Lookup(x.e, cols, ids32, s.t, s.k, out)) }
						f()
						require.Zero(t, testing.AllocsPerRun(20, f))
					})
					t.Run(name+"/int64", func(t *testing.T) {
						f := func() { requireNoErr(t, Lookup(x.e, cols, ids64, s.t, s.k, out)) }
						f()
						require.Zero(t, testing.AllocsPerRun(20, f))
					})
				}
			}
		}
	}
	t.Run("Check", func(t *testing.T) {
		cols := randomColumns(r, shareRepeated, 24, 264, false)
		ids := randomIDs[int32](r, cols, 16, 9)
		out := newOutput(r, layoutHead, 16, 24, 264)
		require.Zero(t, testing.AllocsPerRun(50, func() { requireNoErr(t, Check(cols, ids, 16, 24, out)) }))
	})
}

// requireNoErr is require.NoError without its variadic allocation on the
// success path.
func requireNoErr(t *testing.T, err error) {
	if err != nil {
		t.Helper()
		t.Fatal(err)
	}
}

// TestPackCeilingPath checks that a single-layout lookup is one pack
// gather: the same bytes as pack.ParallelGather of the T*K ids into a
// dense output.
func TestPackCeilingPath(t *testing.T) {
	r := newRand(t)
	e := NewEngine(2)
	defer e.Close()
	w := pack.NewWorkers(2)
	defer w.Close()
	const tt, k, rowBytes = 256, 24, 264
	cols := randomColumns(r, shareSame, k, rowBytes, false)
	ids := randomIDs[int32](r, cols, tt, 11)
	got := randomBytes(r, tt*k*rowBytes)
	want := append([]byte(nil), got...)
	require.NoError(t, pack.ParallelGather(w, want, cols[0].Rows, ids, pack.Layout{Rows: tt * k, RowBytes: rowBytes, Bias: cols[0].Offset}))
	require.NoError(t, Lookup(e, cols, ids, tt, k, TokenMajor(got, tt, k, rowBytes)))
	requireSameBytes(t, want, got, "lookup vs pack")
}

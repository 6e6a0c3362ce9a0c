package pack

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParallelMatchesSerial(t *testing.T) {
	r := newRand(t)
	const rows, tableRows = 101, 300
	for _, workers := range []int{1, 2, 3, 4} {
		for _, rowBytes := range []int{264, 7, 4096} {
			for _, c := range []linearCase{{name: "dense", pad: -1}, {name: "strided", pad: 3, idStride: 2, off: 9, bias: 40, skipEvery: 6}} {
				t.Run(fmt.Sprintf("workers=%d/R=%d/%s", workers, rowBytes, c.name), func(t *testing.T) {
					w := NewWorkers(workers)
					defer w.Close()
					w.minRows = 9 // split these small requests
					l := c.layout(rows, rowBytes)
					table := randomBytes(r, tableRows*rowBytes)
					ids := randomIDs[int32](r, rows, l.dense().IDStride, tableRows, l.Bias, c.skipEvery, true)
					poison := randomBytes(r, packedLen(l))

					serial, parallel := bytes.Clone(poison), bytes.Clone(poison)
					require.NoError(t, Gather(serial, table, ids, l))
					require.NoError(t, ParallelGather(w, parallel, table, ids, l))
					requireSameBytes(t, serial, parallel, "ParallelGather")
					parallel = bytes.Clone(poison)
					require.NoError(t, ParallelGatherUnchecked(w, parallel, table, ids, l))
					requireSameBytes(t, serial, parallel, "ParallelGatherUnchecked")

					src := randomBytes(r, packedLen(l))
					serialTable, parallelTable := bytes.Clone(table), bytes.Clone(table)
					require.NoError(t, Scatter(serialTable, src, ids, l))
					require.NoError(t, ParallelScatter(w, parallelTable, src, ids, l))
					requireSameBytes(t, serialTable, parallelTable, "ParallelScatter")
					parallelTable = bytes.Clone(table)
					require.NoError(t, ParallelScatterUnchecked(w, parallelTable, src, ids, l))
					requireSameBytes(t, serialTable, parallelTable, "ParallelScatterUnchecked")
				})
			}
		}
	}
}

func TestParallelNilWorkers(t *testing.T) {
	r := newRand(t)
	table := randomBytes(r, 64*128)
	ids := randomIDs[int64](r, 20, 1, 64, 0, 4, false)
	l := Layout{Rows: 20, RowBytes: 128}
	poison := randomBytes(r, 20*128)
	want, got := bytes.Clone(poison), bytes.Clone(poison)
	refGather(want, table, ids, l)
	var w *Workers
	require.Equal(t, 1, w.Len())
	require.NoError(t, ParallelGather(w, got, table, ids, l))
	requireSameBytes(t, want, got, "nil Workers")
	w.Close()
}

func TestParallelConcurrentCallers(t *testing.T) {
	r := newRand(t)
	const rows, tableRows, rowBytes, callers = 500, 2000, 264, 4
	w := NewWorkers(3)
	defer w.Close()
	w.minRows = 50
	table := randomBytes(r, tableRows*rowBytes)
	idsets := make([][]int64, callers)
	wants := make([][]byte, callers)
	for i := range idsets {
		idsets[i] = randomIDs[int64](r, rows, 1, tableRows, 0, 9, false)
		wants[i] = randomBytes(r, rows*rowBytes)
	}
	gots := make([][]byte, callers)
	for i := range gots {
		gots[i] = bytes.Clone(wants[i])
		refGather(wants[i], table, idsets[i], Layout{Rows: rows, RowBytes: rowBytes})
	}
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			for range 20 {
				if errs[i] = ParallelGather(w, gots[i], table, idsets[i], Layout{Rows: rows, RowBytes: rowBytes}); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range callers {
		require.NoError(t, errs[i])
		requireSameBytes(t, wants[i], gots[i], fmt.Sprintf("caller %d", i))
	}
}

func TestWorkersClose(t *testing.T) {
	r := newRand(t)
	table := randomBytes(r, 64*64)
	ids := randomIDs[int32](r, 40, 1, 64, 0, 0, true)
	dst := randomBytes(r, 40*64)
	l := Layout{Rows: 40, RowBytes: 64}

	w := NewWorkers(2)
	w.minRows = 4
	require.NoError(t, ParallelGather(w, dst, table, ids, l)) // starts the helpers
	w.Close()
	w.Close()
	fill := randomBytes(r, len(dst))
	fillBefore, tableBefore := bytes.Clone(fill), bytes.Clone(table)
	require.ErrorIs(t, ParallelGather(w, fill, table, ids, l), ErrClosed)
	require.ErrorIs(t, ParallelGatherUnchecked(w, fill, table, ids, l), ErrClosed)
	require.ErrorIs(t, ParallelScatter(w, table, fill, ids, l), ErrClosed)
	require.ErrorIs(t, ParallelScatterUnchecked(w, table, fill, ids, l), ErrClosed)
	// A request too small to split is refused too.
	require.ErrorIs(t, ParallelGather(w, fill, table, ids, Layout{Rows: 1, RowBytes: 64}), ErrClosed)
	requireSameBytes(t, tableBefore, table, "table after closed calls")
	requireSameBytes(t, fillBefore, fill, "packed buffer after closed calls")

	// Workers that never split close without having started anything.
	NewWorkers(4).Close()
}

func TestSplitThreshold(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("GOMAXPROCS is 1: every call runs serially")
	}
	w := NewWorkers(2)
	defer w.Close()
	for _, rowBytes := range []uintptr{1, 64, 264, 4096, 1 << 20} {
		per := minBlockRows(rowBytes)
		cost := func(rows int) uintptr { return uintptr(rows) * (rowNs + rowBytes/rowBytesPerNs) }
		// per is the smallest block worth blockCostFactor fork/joins.
		require.GreaterOrEqual(t, cost(per), uintptr(blockCostFactor*forkJoinNs), "R=%d", rowBytes)
		if per > 1 {
			require.Less(t, cost(per-1), uintptr(blockCostFactor*forkJoinNs), "R=%d", rowBytes)
		}
		require.Equal(t, 1, w.blocks(2*per-1, rowBytes), "R=%d: below two blocks", rowBytes)
		require.Equal(t, 2, w.blocks(2*per, rowBytes), "R=%d: two blocks", rowBytes)
		require.Equal(t, 2, w.blocks(100*per, rowBytes), "R=%d: capped by Len", rowBytes)
	}
	// Bigger rows split sooner.
	require.Greater(t, minBlockRows(64), minBlockRows(264))
	require.Greater(t, minBlockRows(264), minBlockRows(4096))
	// The Engram workload splits; a handful of rows does not.
	require.Equal(t, 2, w.blocks(98304, 264))
	require.Equal(t, 1, w.blocks(128, 264))
	require.Equal(t, runtime.GOMAXPROCS(0), NewWorkers(0).Len())
}

func TestChunking(t *testing.T) {
	cases := []struct{ n, k, rows, chunks int }{
		{n: 98304, k: 2, rows: 3072, chunks: 32},
		{n: 98304, k: 4, rows: 1536, chunks: 64},
		{n: 100, k: 2, rows: minChunkRows, chunks: 2},
		{n: 10, k: 3, rows: minChunkRows, chunks: 1},
		{n: 5000, k: 3, rows: 105, chunks: 48},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("n=%d/k=%d", c.n, c.k), func(t *testing.T) {
			rows, chunks := chunking(c.n, c.k)
			require.Equal(t, c.rows, rows)
			require.Equal(t, c.chunks, chunks)
			require.GreaterOrEqual(t, rows*chunks, c.n, "chunks cover every row")
			require.Less(t, rows*(chunks-1), c.n, "no empty chunk")
		})
	}
}

// TestParallelManyCalls runs many short splitting calls back to back, so
// that helpers often read their job after the call ended (the caller did
// all chunks) and must claim nothing of the next call's.
func TestParallelManyCalls(t *testing.T) {
	r := newRand(t)
	const tableRows, rowBytes = 512, 64
	w := NewWorkers(4)
	defer w.Close()
	w.minRows = 1
	table := randomBytes(r, tableRows*rowBytes)
	for call := range 300 {
		rows := 1 + r.IntN(3*minChunkRows)
		ids := randomIDs[int32](r, rows, 1, tableRows, 0, 5, false)
		poison := randomBytes(r, rows*rowBytes)
		want, got := bytes.Clone(poison), bytes.Clone(poison)
		l := Layout{Rows: rows, RowBytes: rowBytes}
		refGather(want, table, ids, l)
		require.NoError(t, ParallelGatherUnchecked(w, got, table, ids, l))
		requireSameBytes(t, want, got, fmt.Sprintf("call %d, %d rows", call, rows))
	}
}

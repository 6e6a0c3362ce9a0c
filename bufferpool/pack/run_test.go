package pack

import (
	"errors"
	"sync/atomic"
	"testing"
)

// countChunks records how often each chunk ran.
type countChunks struct{ runs []atomic.Int32 }

func (c *countChunks) RunChunk(i int) { c.runs[i].Add(1) }

func TestWorkersRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		k, n    int
	}{
		{"nil", 0, 4, 100},
		{"one", 2, 1, 50},
		{"split", 2, 2, 1000},
		{"more asked than there are", 2, 16, 333},
		{"single chunk", 2, 2, 1},
		{"no chunks", 2, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w *Workers
			if tc.workers > 0 {
				w = NewWorkers(tc.workers)
				defer w.Close()
			}
			for range 3 { // reuse: helpers park between calls
				c := &countChunks{runs: make([]atomic.Int32, tc.n)}
				if err := w.Run(tc.k, tc.n, c); err != nil {
					t.Fatal(err)
				}
				for i := range c.runs {
					if got := c.runs[i].Load(); got != 1 {
						t.Fatalf("chunk %d ran %d times", i, got)
					}
				}
			}
		})
	}
	w := NewWorkers(2)
	w.Close()
	c := &countChunks{runs: make([]atomic.Int32, 10)}
	if err := w.Run(2, 10, c); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed Workers: %v", err)
	}
	if c.runs[0].Load() != 0 {
		t.Fatal("closed Workers ran a chunk")
	}
}

func TestWorkersRunAllocs(t *testing.T) {
	w := NewWorkers(2)
	defer w.Close()
	c := &countChunks{runs: make([]atomic.Int32, 64)}
	_ = w.Run(2, 64, c)
	if n := testing.AllocsPerRun(50, func() { _ = w.Run(2, 64, c) }); n != 0 {
		t.Fatalf("%v allocations per Run", n)
	}
}

func TestSplitAndChunkRows(t *testing.T) {
	w := NewWorkers(2)
	defer w.Close()
	if w.Split(10, 264) != 1 {
		t.Error("10 rows split")
	}
	if (*Workers)(nil).Split(1<<20, 264) != 1 {
		t.Error("nil Workers split")
	}
	if r := ChunkRows(1000, 2); r < minChunkRows {
		t.Errorf("ChunkRows(1000, 2) = %d", r)
	}
	if r := ChunkRows(1<<20, 2); r*2*chunksPerWorker < 1<<20 {
		t.Errorf("ChunkRows(1M, 2) = %d: too few chunks", r)
	}
}

package lookup

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
)

// maxDefaultWorkers caps the default worker count: beyond it a random-row
// gather is bound by memory, not by goroutines.
const maxDefaultWorkers = 8

// Engine runs lookups: small ones on the caller's goroutine, large ones
// split over up to [Engine.Workers] goroutines, the caller included. It is
// safe for concurrent use: small lookups run concurrently (each plans in
// the engine's scratch when no other call holds it, else on its own
// stack), while large lookups, and lookups of more than 64 columns that
// find the scratch taken, run one at a time. The helper goroutines start
// on the first lookup that splits and park between calls, so steady-state
// lookups create no goroutines and allocate nothing; [Engine.Close] stops
// them.
//
// # How a lookup splits
//
// A lookup whose columns form a single strided layout (all columns read
// one table with one offset into a dense token-major output, the common
// case) is one [pack.ParallelGatherUnchecked] call on the engine's
// [pack.Workers]: exactly the pack-only gather of its T*K ids. Any other
// lookup is cut into several layouts (one per column, per group of
// columns, or per token; see [Lookup]); a large one is then split into
// chunks of rows of those layouts run by [pack.Workers.Run] on the same
// workers: the caller and the helpers claim chunks from a shared counter
// until none is left, so the whole lookup pays one fork/join however many
// layouts it has, and the goroutines share the rows by how fast each
// really runs. The chunk loop is a [pack.GatherUnchecked] call.
//
// A lookup splits over n goroutines only when each one's share of the T*K
// rows is worth two fork/joins, by the cost model of [pack.Workers] (a
// fork/join costs about 20 us on the development machine, a random row of
// R bytes about 10 + R/4 ns): with R = 264, from about 1,050 rows on two
// goroutines.
type Engine struct {
	n      int
	pw     *pack.Workers // the helpers of every lookup that splits
	closed atomic.Bool

	// mu is held by a lookup that plans in scratch or splits a
	// multi-layout lookup.
	mu      sync.Mutex
	scratch scratch

	// cur is the multi-layout lookup being split (under mu): a field, so
	// that handing it to pw.Run as its Chunks allocates nothing.
	cur split

	// minRows, when positive, replaces the cost model's rows per
	// goroutine (tests use it to split small lookups); noTouch turns off
	// touchRows (BenchmarkTouch compares).
	minRows int
	noTouch bool
}

// scratch is the engine's per-call state for the calls that hold mu; it
// grows to the largest call's K and chunk count and is kept.
type scratch struct {
	plan   plan
	chunks []chunk
}

// split is a multi-layout lookup as the helpers see it: the output, the
// tables and ids (one of ids32 and ids64 is set) and the chunks of its
// tasks.
type split struct {
	buf      []byte
	cols     []Column
	ids32    []int32
	ids64    []int64
	rowBytes int
	tasks    []task
	chunks   []chunk
}

// chunk is rows [lo, lo+n) of task task.
type chunk struct {
	task, lo, n int
}

// NewEngine returns an engine whose large lookups use workers goroutines,
// the caller included; workers below 1 means GOMAXPROCS, at most 8.
// No goroutine starts before the first lookup that splits.
func NewEngine(workers int) *Engine {
	if workers < 1 {
		workers = min(runtime.GOMAXPROCS(0), maxDefaultWorkers)
	}
	return &Engine{n: workers, pw: pack.NewWorkers(workers)}
}

// Workers returns how many goroutines, the caller included, share a large
// lookup. A nil engine has 1.
func (e *Engine) Workers() int {
	if e == nil {
		return 1
	}
	return e.n
}

// Close stops the engine's helpers after the lookups that are splitting
// have finished. Later lookups return [ErrClosed]. Close is idempotent.
func (e *Engine) Close() {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.closed.Store(true)
	e.mu.Unlock()
	e.pw.Close()
}

// splits returns how many goroutines a lookup of rows rows of rowBytes
// bytes runs on: the split model of [pack.Workers] (minRows, when set,
// replaces its rows per goroutine).
func (e *Engine) splits(rows, rowBytes int) int {
	if e == nil {
		return 1
	}
	if e.minRows > 0 {
		k := min(e.n, runtime.GOMAXPROCS(0))
		if k < 2 {
			return 1
		}
		return max(1, min(k, rows/e.minRows))
	}
	return e.pw.Split(rows, rowBytes)
}

// grow makes the scratch hold k columns.
func (s *scratch) grow(k int) {
	if cap(s.plan.colGroup) < k {
		s.plan = plan{colGroup: make([]int32, k), groups: make([]group, k), tasks: make([]task, k),
			slots: make([]int32, slotsFor(k))}
	}
	s.plan.colGroup = s.plan.colGroup[:k]
	s.plan.groups = s.plan.groups[:k]
	s.plan.tasks = s.plan.tasks[:k]
}

// run splits the tasks of a validated lookup over n >= 2 goroutines of
// the engine's pack.Workers, one fork/join for all its layouts; mu is
// held.
func (e *Engine) run(s *split, n int) error {
	total := 0
	for i := range s.tasks {
		total += s.tasks[i].rows
	}
	per := pack.ChunkRows(total, n)
	chunks := e.scratch.chunks[:0]
	for i := range s.tasks {
		for lo := 0; lo < s.tasks[i].rows; lo += per {
			chunks = append(chunks, chunk{task: i, lo: lo, n: min(per, s.tasks[i].rows-lo)})
		}
	}
	e.scratch.chunks = chunks
	s.chunks = chunks
	e.cur = *s
	err := e.pw.Run(n, len(chunks), &e.cur)
	e.cur = split{}
	return err
}

// RunChunk runs chunk i of the split (pack.Chunks).
func (s *split) RunChunk(i int) {
	ch := s.chunks[i]
	s.gather(&s.tasks[ch.task], ch.lo, ch.n)
}

// gather runs rows [lo, lo+n) of t.
func (s *split) gather(t *task, lo, n int) {
	col := &s.cols[t.col]
	l := pack.Layout{Rows: n, RowBytes: s.rowBytes, Off: t.outOff + lo*t.stride, Stride: t.stride,
		IDStride: t.idStride, Bias: col.Offset}
	if first := t.idOff + lo*t.idStride; s.ids32 != nil {
		pack.GatherUnchecked(s.buf, col.Rows, s.ids32[first:], l)
	} else {
		pack.GatherUnchecked(s.buf, col.Rows, s.ids64[first:], l)
	}
}

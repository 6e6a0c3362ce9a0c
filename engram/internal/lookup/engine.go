package lookup

import (
	"math"
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
// chunks of rows of those layouts, and the caller and the helpers claim
// chunks from a shared counter until none is left, so the whole lookup
// pays one fork/join however many layouts it has, and the goroutines share
// the rows by how fast each really runs. The chunk loop is a
// [pack.GatherUnchecked] call.
//
// A lookup splits over n goroutines only when each one's share of the T*K
// rows is worth two fork/joins, by the cost model of [pack.Workers] (a
// fork/join costs about 20 us on the development machine, a random row of
// R bytes about 10 + R/4 ns): with R = 264, from about 1,050 rows on two
// goroutines.
type Engine struct {
	n      int
	pw     *pack.Workers // single-layout lookups
	closed atomic.Bool

	// mu is held by a lookup that plans in scratch or splits over the
	// helpers below.
	mu      sync.Mutex
	scratch scratch

	// The helpers of multi-layout lookups (started on first use).
	jobs    []chan job
	running sync.WaitGroup
	claim   atomic.Uint64 // gen<<32 | next chunk to claim
	left    atomic.Int64  // chunks not yet done
	done    chan struct{} // one send per call, by whoever ends the last chunk
	gen     uint64        // generation of the current call (under mu)
	cur     split         // the current call (written under mu before claim)

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
	bounds []bound
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

// job tells a helper that call gen has chunks chunks to claim. A helper that
// reads its job after that call ended finds the generation changed and
// claims nothing.
type job struct {
	gen    uint64
	chunks int
}

// The split model: see [Engine]. The constants are [pack.Workers]' (its
// BenchmarkForkJoin and BenchmarkGather re-derive them on another machine).
const (
	forkJoinNs      = 20_000
	rowNs           = 10
	rowBytesPerNs   = 4
	blockCostFactor = 2
	chunksPerWorker = 16
	minChunkRows    = 64
)

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
	if !e.closed.Swap(true) {
		for _, c := range e.jobs {
			close(c)
		}
		e.running.Wait()
		e.jobs = nil
	}
	e.mu.Unlock()
	e.pw.Close()
}

// splits returns how many goroutines a lookup of rows rows of rowBytes
// bytes runs on.
func (e *Engine) splits(rows, rowBytes int) int {
	if e == nil {
		return 1
	}
	k := min(e.n, runtime.GOMAXPROCS(0))
	if k < 2 {
		return 1
	}
	per := e.minRows
	if per <= 0 {
		perRow := rowNs + rowBytes/rowBytesPerNs
		per = (blockCostFactor*forkJoinNs + perRow - 1) / perRow
	}
	return max(1, min(k, rows/per))
}

// grow makes the scratch hold k columns.
func (s *scratch) grow(k int) {
	if cap(s.bounds) < k {
		s.bounds = make([]bound, k)
		s.plan = plan{colGroup: make([]int32, k), groups: make([]group, k), tasks: make([]task, k),
			slots: make([]int32, slotsFor(k))}
	}
	s.bounds = s.bounds[:k]
	s.plan.colGroup = s.plan.colGroup[:k]
	s.plan.groups = s.plan.groups[:k]
	s.plan.tasks = s.plan.tasks[:k]
}

// run splits the tasks of a validated lookup over n >= 2 goroutines; mu is
// held.
func (e *Engine) run(s *split, n int) {
	total := 0
	for i := range s.tasks {
		total += s.tasks[i].rows
	}
	per := max(minChunkRows, (total+n*chunksPerWorker-1)/(n*chunksPerWorker))
	chunks := e.scratch.chunks[:0]
	for i := range s.tasks {
		for lo := 0; lo < s.tasks[i].rows; lo += per {
			chunks = append(chunks, chunk{task: i, lo: lo, n: min(per, s.tasks[i].rows-lo)})
		}
	}
	e.scratch.chunks = chunks
	s.chunks = chunks
	if e.jobs == nil {
		e.start()
	}
	e.cur = *s
	e.gen = (e.gen + 1) & math.MaxUint32
	j := job{gen: e.gen, chunks: len(chunks)}
	e.left.Store(int64(len(chunks)))
	e.claim.Store(j.gen << 32)
	for _, c := range e.jobs[:n-1] {
		offer(c, j)
	}
	e.work(j)
	<-e.done
	e.cur = split{}
}

// offer puts j in c, replacing a job the helper has not read yet (which
// belongs to an ended call); only the caller holding mu sends.
func offer(c chan job, j job) {
	select {
	case c <- j:
		return
	default:
	}
	select {
	case <-c:
	default:
	}
	c <- j
}

// work claims and runs chunks of call j until none is left or the call
// ended. The call's split is read only after a claim succeeds, when the
// caller is still waiting for the claimed chunk.
func (e *Engine) work(j job) {
	for {
		c := e.claim.Load()
		if c>>32 != j.gen || int(uint32(c)) >= j.chunks {
			return
		}
		if !e.claim.CompareAndSwap(c, c+1) {
			continue
		}
		s := &e.cur
		ch := s.chunks[uint32(c)]
		s.gather(&s.tasks[ch.task], ch.lo, ch.n)
		if e.left.Add(-1) == 0 {
			e.done <- struct{}{}
		}
	}
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

// start launches the helpers; mu is held.
func (e *Engine) start() {
	e.jobs = make([]chan job, e.n-1)
	e.done = make(chan struct{}, 1)
	e.running.Add(len(e.jobs))
	for i := range e.jobs {
		c := make(chan job, 1)
		e.jobs[i] = c
		go e.help(c)
	}
}

// help runs jobs until its channel closes.
func (e *Engine) help(jobs <-chan job) {
	defer e.running.Done()
	for j := range jobs {
		e.work(j)
	}
}

package pack

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// Workers runs [ParallelGather] and [ParallelScatter] on up to Len
// goroutines: the caller and Len-1 helpers. The helpers start on the first
// call that splits and then wait, parked, for the next one, so steady-state
// calls create no goroutines and allocate nothing; [Workers.Close] stops
// them. Calls on one Workers run one at a time; a call that splits holds it
// until all its rows are done. A nil *Workers runs every call serially.
//
// # How a call splits
//
// A call that splits cuts its rows into contiguous chunks, about
// chunksPerWorker per goroutine, and the caller and the helpers it wakes
// claim chunks one at a time from a shared counter until none is left; the
// caller starts at once and the call returns when every chunk is done. So
// the goroutines share the work by how fast each really runs: on a shared
// machine, a helper whose CPU is taken by another process for a while costs
// the call that while's share, not half the call (measured on the 2-vCPU
// development machine: equal halves fell to 0.8x of serial under load).
//
// # When a call splits
//
// A call splits over k goroutines only when every goroutine's share is
// worth at least blockCostFactor fork/joins. One fork/join (forkJoinNs) is
// the cost of waking parked helpers and collecting their completion, mostly
// waking an idle OS thread. One row of R bytes is modelled as costing rowNs
// + R/rowBytesPerNs, a lower bound of a random row gathered from a table
// that misses the caches. So a request of n rows of R bytes runs on k =
// min(Len, GOMAXPROCS, n / rows(R)) goroutines, rows(R) =
// ceil(blockCostFactor*forkJoinNs / (rowNs + R/rowBytesPerNs)), and serially
// when k < 2. With shares of at least 2 fork/joins, two goroutines finish in
// at most 3/4 of the serial time even at the threshold; cache-hot rows cost
// less than the model, which then errs towards splitting a little early.
// BenchmarkForkJoin and BenchmarkGather re-derive the constants on another
// machine.
type Workers struct {
	n       int
	closed  atomic.Bool
	mu      sync.Mutex // held by a splitting call and by Close
	jobs    []chan job // one per helper, buffered 1
	running sync.WaitGroup

	// State of the splitting call, shared with the helpers.
	claim atomic.Uint64 // gen<<32 | index of the next chunk to claim
	left  atomic.Int64  // chunks not yet done
	done  chan struct{} // one send per call, by whoever finishes the last chunk
	gen   uint64        // generation of the current call (under mu)

	// minRows, when positive, replaces the cost model's rows per goroutine
	// (tests use it to split small requests).
	minRows int
}

// job is a splitting call as a helper sees it: a copy of the request and
// its chunking, tagged with the call's generation. A helper that reads its
// job late, after the call ended, finds the generation changed and claims
// nothing.
type job struct {
	t      task
	c      Chunks // set for Run: chunks are c's, not t's
	gen    uint64
	rows   int // rows per chunk (the last one may be shorter)
	chunks int
}

// Chunks is work cut into numbered chunks that the goroutines of a
// [Workers] may run in any order, each exactly once ([Workers.Run]): a
// caller's own split of several gathers under one fork/join, say.
type Chunks interface {
	RunChunk(i int)
}

// Run runs chunks 0 to n-1 of c on k of w's goroutines, the caller
// included (k is clamped to [1, Len]), which claim them from a shared
// counter as a split gather does; it returns when all have run. A nil
// *Workers, or k below 2, runs them on the caller. On closed Workers it
// returns [ErrClosed] and runs nothing. c must stay valid until Run
// returns; passing a pointer that outlives the call (a field of a
// long-lived struct) keeps Run free of allocations.
func (w *Workers) Run(k, n int, c Chunks) error {
	if w != nil && w.closed.Load() {
		return ErrClosed
	}
	if w == nil || k < 2 || n < 2 {
		for i := range n {
			c.RunChunk(i)
		}
		return nil
	}
	k = min(k, w.n)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() {
		return ErrClosed
	}
	if w.jobs == nil {
		w.start()
	}
	w.gen = (w.gen + 1) & math.MaxUint32
	j := job{c: c, gen: w.gen, chunks: n}
	w.left.Store(int64(n))
	w.claim.Store(j.gen << 32)
	for _, ch := range w.jobs[:k-1] {
		offer(ch, j)
	}
	w.work(&j)
	<-w.done
	return nil
}

// Started reports whether w's helper goroutines are running: they start
// on the first call that splits and stop at Close.
func (w *Workers) Started() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.jobs != nil
}

// Split returns how many of w's goroutines a job of rows rows of rowBytes
// bytes each is worth, by the model of [Workers] (each goroutine's share
// must be worth blockCostFactor fork/joins); 1 means run it on the caller.
func (w *Workers) Split(rows, rowBytes int) int {
	if w == nil {
		return 1
	}
	return w.blocks(rows, uintptr(max(rowBytes, 1)))
}

// ChunkRows returns the rows per chunk when rows rows are shared by k
// goroutines: about chunksPerWorker chunks each, at least minChunkRows
// rows per chunk.
func ChunkRows(rows, k int) int {
	r, _ := chunking(rows, max(k, 1))
	return r
}

// Cost model of the split threshold and the chunking; see [Workers].
const (
	// forkJoinNs is one fork/join with parked helpers on the development
	// machine (2 vCPUs, shared): BenchmarkForkJoin/parked measures 14-25 us
	// (BenchmarkForkJoin/hot, helpers still spinning, about 1 us).
	forkJoinNs = 20_000
	// rowNs and rowBytesPerNs fit BenchmarkGather's generated loops on a
	// 256 MiB table: 64 B rows about 20-30 ns, 264 B about 65-110 ns,
	// 4096 B about 0.5-0.6 us.
	rowNs         = 10
	rowBytesPerNs = 4
	// blockCostFactor is how many fork/joins a goroutine's share must be
	// worth.
	blockCostFactor = 2
	// chunksPerWorker is how many chunks each goroutine's share is cut
	// into, for balance; minChunkRows keeps a chunk's claim (one atomic
	// compare-and-swap) negligible next to its rows.
	chunksPerWorker = 16
	minChunkRows    = 64
)

// NewWorkers returns Workers for n goroutines, the caller included; n below
// 1 means GOMAXPROCS. No goroutine starts before the first call that splits.
func NewWorkers(n int) *Workers {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	return &Workers{n: n}
}

// Len returns how many goroutines, the caller included, share a call.
func (w *Workers) Len() int {
	if w == nil {
		return 1
	}
	return w.n
}

// Close stops the helpers and waits for them to exit. Later calls return
// [ErrClosed]. Close is idempotent; it waits for a running call to finish.
func (w *Workers) Close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Swap(true) {
		return
	}
	for _, c := range w.jobs {
		close(c)
	}
	w.running.Wait()
	w.jobs = nil
}

// minBlockRows returns the smallest share of rowBytes-byte rows worth
// handing to another goroutine.
func minBlockRows(rowBytes uintptr) int {
	perRow := rowNs + rowBytes/rowBytesPerNs
	const budget = blockCostFactor * forkJoinNs
	return int((budget + perRow - 1) / perRow)
}

// blocks returns how many goroutines a task of rows rows runs on.
func (w *Workers) blocks(rows int, rowBytes uintptr) int {
	k := min(w.n, runtime.GOMAXPROCS(0))
	if k < 2 {
		return 1
	}
	per := w.minRows
	if per <= 0 {
		per = minBlockRows(rowBytes)
	}
	return max(1, min(k, rows/per))
}

// chunking returns the rows per chunk and the number of chunks of n rows
// shared by k goroutines.
func chunking(n, k int) (rows, chunks int) {
	rows = max(minChunkRows, (n+k*chunksPerWorker-1)/(k*chunksPerWorker), n>>31+1)
	return rows, (n + rows - 1) / rows
}

// run executes a validated task, split over the helpers when it is worth
// it.
func (w *Workers) run(t *task) error {
	if w == nil {
		t.run()
		return nil
	}
	if w.closed.Load() {
		return ErrClosed
	}
	k := w.blocks(t.n, t.rowBytes)
	if k < 2 {
		t.run()
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() {
		return ErrClosed
	}
	if w.jobs == nil {
		w.start()
	}
	rows, chunks := chunking(t.n, k)
	w.gen = (w.gen + 1) & math.MaxUint32
	j := job{t: *t, gen: w.gen, rows: rows, chunks: chunks}
	w.left.Store(int64(chunks))
	w.claim.Store(j.gen << 32)
	for _, c := range w.jobs[:k-1] {
		offer(c, j)
	}
	w.work(&j)
	<-w.done
	return nil
}

// offer puts j in c, replacing a job the helper has not read yet (which
// belongs to an ended call); only the caller holding w.mu sends.
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

// work claims and runs chunks of j until none is left or j's call ended.
func (w *Workers) work(j *job) {
	for {
		c := w.claim.Load()
		if c>>32 != j.gen || int(uint32(c)) >= j.chunks {
			return
		}
		if !w.claim.CompareAndSwap(c, c+1) {
			continue
		}
		if j.c != nil {
			j.c.RunChunk(int(uint32(c)))
		} else {
			lo := int(uint32(c)) * j.rows
			b := j.t.block(lo, min(j.rows, j.t.n-lo))
			b.run()
		}
		if w.left.Add(-1) == 0 {
			w.done <- struct{}{}
		}
	}
}

// start launches the helpers; w.mu is held.
func (w *Workers) start() {
	w.jobs = make([]chan job, w.n-1)
	w.done = make(chan struct{}, 1)
	w.running.Add(len(w.jobs))
	for i := range w.jobs {
		c := make(chan job, 1)
		w.jobs[i] = c
		go w.help(c)
	}
}

// help runs jobs until its channel closes.
func (w *Workers) help(jobs <-chan job) {
	defer w.running.Done()
	for j := range jobs {
		w.work(&j)
	}
}

// ParallelGather is [Gather] split over w (see [Workers] for when it
// splits). It validates the whole request before writing any byte; on
// closed Workers it returns [ErrClosed] and writes nothing.
func ParallelGather[I ID](w *Workers, dst, table []byte, ids []I, l Layout) error {
	l, err := checkLinear(dst, table, ids, l, false)
	if err != nil || l.Rows == 0 {
		return err
	}
	t := linearTask(dst, table, ids, l, false)
	return w.run(&t)
}

// ParallelGatherUnchecked is [ParallelGather] without validation, for a
// request that passed [CheckGather]. It returns only [ErrClosed].
func ParallelGatherUnchecked[I ID](w *Workers, dst, table []byte, ids []I, l Layout) error {
	l = l.dense()
	if l.Rows <= 0 {
		return nil
	}
	t := linearTask(dst, table, ids, l, false)
	return w.run(&t)
}

// ParallelScatter is [Scatter] split over w (see [Workers] for when it
// splits). Ids naming one table row twice are rejected, so blocks never
// write the same row. It validates the whole request before writing any
// byte; on closed Workers it returns [ErrClosed] and writes nothing.
func ParallelScatter[I ID](w *Workers, table, src []byte, ids []I, l Layout) error {
	l, err := checkLinear(src, table, ids, l, true)
	if err != nil || l.Rows == 0 {
		return err
	}
	t := linearTask(src, table, ids, l, true)
	return w.run(&t)
}

// ParallelScatterUnchecked is [ParallelScatter] without validation, for a
// request that passed [CheckScatter]. Ids naming one table row twice, which
// the check rejects, would have blocks race on that row. It returns only
// [ErrClosed].
func ParallelScatterUnchecked[I ID](w *Workers, table, src []byte, ids []I, l Layout) error {
	l = l.dense()
	if l.Rows <= 0 {
		return nil
	}
	t := linearTask(src, table, ids, l, true)
	return w.run(&t)
}

package engine

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/scatterkit/scatterkit/planfmt"
)

// spanCrew splits the span copies of one mapped direct operation over up
// to n goroutines: the caller and n-1 helpers, which start on the first
// copy that splits and then wait, parked, for the next (so steady-state
// copies create no goroutines and allocate nothing). It follows
// bufferpool/pack's Workers for rows: the packed stream (the spans'
// payload in plan order) is cut into chunks of equal bytes, and the caller
// and the helpers it wakes claim chunks from a shared counter, so a helper
// whose CPU is taken elsewhere costs only its share of the time. One copy
// splits at a time; a copy that finds the crew busy runs on its caller
// (the cores are busy anyway).
type spanCrew struct {
	n int

	mu     sync.Mutex // held by a splitting copy and by close
	closed bool
	jobs   []chan spanJob // one per helper, buffered 1
	done   chan struct{}  // one send per split, by whoever finishes the last chunk
	gen    uint64         // generation of the current split (under mu)
	claim  atomic.Uint64  // gen<<32 | next chunk to claim
	left   atomic.Int64   // chunks not yet done
	wg     sync.WaitGroup
}

// spanJob is one split copy as a helper sees it, tagged with its
// generation: a helper that reads it after the split ended finds the
// generation changed and claims nothing, so it never touches memory the
// caller has released.
type spanJob struct {
	dst, src []byte
	spans    []planfmt.Range
	stream   []uint64 // stream offset of each span
	total    uint64
	size     uint64 // bytes per chunk (the last one may be shorter)
	chunks   int
	gen      uint64
}

// Cost model of the split, in the units of bufferpool/pack's: a copy
// splits over k goroutines only when each one's share is worth at least
// crewBlockFactor fork/joins of crewForkJoinNs (waking a parked helper,
// measured 14-25 us on the 2-vCPU development machine). A span costs
// crewSpanNs plus its bytes at crewBytesPerNs (memmove of one goroutine
// there is about 9 GB/s).
const (
	crewForkJoinNs      = 20_000
	crewBlockFactor     = 2
	crewSpanNs          = 10
	crewBytesPerNs      = 8
	crewChunksPerWorker = 8
	crewMinChunk        = 64 << 10
)

func newSpanCrew(n int) *spanCrew { return &spanCrew{n: n} }

// ways returns how many goroutines a copy of m spans and b bytes runs on.
func (c *spanCrew) ways(m int, b uint64) int {
	if c == nil {
		return 1
	}
	k := min(c.n, runtime.GOMAXPROCS(0))
	if k < 2 {
		return 1
	}
	cost := float64(m)*crewSpanNs + float64(b)/crewBytesPerNs
	return max(1, min(k, int(cost/(crewBlockFactor*crewForkJoinNs))))
}

// copySpans copies spans (offsets into src and dst; stream[i] is the
// stream offset of spans[i], total the payload) split over the crew when
// it is worth it. The spans must lie inside src and dst.
func (e *Engine) copySpans(dst, src []byte, spans []planfmt.Range, stream []uint64, total uint64) {
	c := e.spanCrew
	c.copy(c.ways(len(spans), total), dst, src, spans, stream, total)
}

// copy copies spans over k goroutines (k <= c.n), or on the caller alone
// when k < 2 or the crew is busy or closed.
func (c *spanCrew) copy(k int, dst, src []byte, spans []planfmt.Range, stream []uint64, total uint64) {
	if k < 2 || !c.mu.TryLock() {
		copySerial(dst, src, spans)
		return
	}
	defer c.mu.Unlock()
	if c.closed {
		copySerial(dst, src, spans)
		return
	}
	if c.jobs == nil {
		c.start()
	}
	size := max(crewMinChunk, (total+uint64(k*crewChunksPerWorker)-1)/uint64(k*crewChunksPerWorker))
	chunks := (total + size - 1) / size
	if chunks > math.MaxUint32 {
		copySerial(dst, src, spans)
		return
	}
	c.gen = (c.gen + 1) & math.MaxUint32
	j := spanJob{dst: dst, src: src, spans: spans, stream: stream, total: total, size: size, chunks: int(chunks), gen: c.gen}
	c.left.Store(int64(chunks))
	c.claim.Store(j.gen << 32)
	for _, ch := range c.jobs[:k-1] {
		offerSpans(ch, j)
	}
	c.work(&j)
	<-c.done
}

// copySerial copies every span on the calling goroutine.
func copySerial(dst, src []byte, spans []planfmt.Range) {
	for _, s := range spans {
		copy(dst[s.Dst:s.Dst+s.Len], src[s.Src:s.Src+s.Len])
	}
}

// offerSpans puts j in ch, replacing a job the helper has not read yet
// (one of an ended split); only the holder of c.mu sends.
func offerSpans(ch chan spanJob, j spanJob) {
	select {
	case ch <- j:
		return
	default:
	}
	select {
	case <-ch:
	default:
	}
	ch <- j
}

// start launches the helpers; c.mu is held.
func (c *spanCrew) start() {
	c.jobs = make([]chan spanJob, c.n-1)
	c.done = make(chan struct{}, 1)
	c.wg.Add(len(c.jobs))
	for i := range c.jobs {
		ch := make(chan spanJob, 1)
		c.jobs[i] = ch
		go func() {
			defer c.wg.Done()
			for j := range ch {
				c.work(&j)
			}
		}()
	}
}

// work claims and copies chunks of j until none is left or j's split
// ended.
func (c *spanCrew) work(j *spanJob) {
	for {
		cl := c.claim.Load()
		if cl>>32 != j.gen || int(uint32(cl)) >= j.chunks {
			return
		}
		if !c.claim.CompareAndSwap(cl, cl+1) {
			continue
		}
		j.copyChunk(uint64(uint32(cl)))
		if c.left.Add(-1) == 0 {
			c.done <- struct{}{}
		}
	}
}

// copyChunk copies the stream bytes [i*size, (i+1)*size) of j, cutting
// the spans at the chunk's edges.
func (j *spanJob) copyChunk(i uint64) {
	lo := i * j.size
	hi := min(lo+j.size, j.total)
	// The last span starting at or before lo.
	a, b := 0, len(j.stream)
	for b-a > 1 {
		m := int(uint(a+b) >> 1)
		if j.stream[m] <= lo {
			a = m
		} else {
			b = m
		}
	}
	for s := a; lo < hi; s++ {
		sp := &j.spans[s]
		off := lo - j.stream[s]
		n := min(sp.Len-off, hi-lo)
		copy(j.dst[sp.Dst+off:sp.Dst+off+n], j.src[sp.Src+off:sp.Src+off+n])
		lo += n
	}
}

// close stops the helpers and waits for them; later copies run serially.
// It is idempotent.
func (c *spanCrew) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for _, ch := range c.jobs {
		close(ch)
	}
	c.wg.Wait()
	c.jobs = nil
}

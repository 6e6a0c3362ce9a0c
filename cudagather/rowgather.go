package cudagather

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/scatterkit/scatterkit/cudagather/internal/prefetch"
)

// rowAhead is how many rows ahead of its copy the CPU gather of staged
// lookups prefetches (BenchmarkRowGatherCPU measures it; the tests'
// $CUDAGATHER_ROW_AHEAD sets it, for the benchmarks of whole lookups): a random row of
// a large table is a cache miss (and, past the TLB's reach, a page walk)
// that the copy would otherwise wait for row after row.
var rowAhead int64 = 16

// stagedBlock is the most rows a staged lookup's worker claims at a time.
var stagedBlock int64 = 256

// rowSource is where a staged lookup's CPU gather reads: K columns, each
// a host table (its bytes, rows and id offset), rows of rowBytes.
type rowSource struct {
	k        int64
	rowBytes int64
	host     [MaxColumns][]byte
	rows     [MaxColumns]int64
	offs     [MaxColumns]int64
}

// gather reads the ids of flat rows [lo, hi) (ids32, or ids64 when set;
// flat row i is column i mod K) and checks each against its column's
// table. With dst set it copies each good row into dst at (i-base)*R and
// sets sids[i] to i, or to -1 for a -1 or bad id. It returns the first
// bad id's flat index, or -1. ahead rows ahead of its copy it prefetches
// the row it will copy then (0: none).
func (s *rowSource) gather(dst []byte, ids32 []int32, ids64 []int64, sids []int32, lo, hi, base int64, ahead int64) int64 {
	R := s.rowBytes
	first := int64(-1)
	id := func(i int64) int64 {
		if ids64 != nil {
			return ids64[i]
		}
		return int64(ids32[i])
	}
	k := lo % s.k
	// The prefetch cursor: flat row pi, its column pk.
	pi, pk := lo, k
	fetchNext := func() {
		if pi >= hi {
			return
		}
		if v := id(pi); v != -1 {
			if row := v - s.offs[pk]; row >= 0 && row < s.rows[pk] {
				prefetch.Lines(unsafe.Pointer(unsafe.SliceData(s.host[pk][row*R:])), uintptr(R))
			}
		}
		pi++
		if pk++; pk == s.k {
			pk = 0
		}
	}
	if dst != nil && prefetch.Available {
		for range ahead {
			fetchNext()
		}
	} else {
		ahead = 0
	}
	for i := lo; i < hi; i++ {
		if ahead > 0 {
			fetchNext()
		}
		v := id(i)
		sid := int32(-1)
		if v != -1 {
			row := v - s.offs[k]
			if row < 0 || row >= s.rows[k] {
				if first < 0 {
					first = i
				}
			} else if dst != nil {
				o := (i - base) * R
				copy(dst[o:o+R], s.host[k][row*R:row*R+R])
				sid = int32(i)
			}
		}
		if dst != nil {
			sids[i] = sid
		}
		if k++; k == s.k {
			k = 0
		}
	}
	return first
}

// gateSpin is how long woken workers spin at the gate (yielding their P
// between looks) before they park until it opens, about the longest a
// lookup's ids take to come back when its stream holds only earlier
// lookups; and how long a worker stays awake after a lookup (await).
const gateSpin = time.Millisecond

// gate holds woken workers until the lookup they were woken for is set
// up (startWorkers) or dismissed.
type gate struct {
	open atomic.Bool
	mu   sync.Mutex
	cond sync.Cond
}

// pass returns once the gate is open: it spins for gateSpin, then parks.
func (g *gate) pass() {
	t0 := time.Now()
	for i := 0; !g.open.Load(); i++ {
		if i%64 != 63 || time.Since(t0) < gateSpin {
			runtime.Gosched()
			continue
		}
		g.mu.Lock()
		for !g.open.Load() {
			g.cond.Wait()
		}
		g.mu.Unlock()
		return
	}
}

// release opens the gate.
func (g *gate) release() {
	g.open.Store(true)
	g.mu.Lock()
	g.cond.Broadcast()
	g.mu.Unlock()
}

// await receives a token from ch, first spinning for spin (polling it and
// yielding the P between polls), then blocking: a worker that just
// finished a lookup keeps its thread awake for the next one, which then
// starts it at once instead of through the runtime's chain of wake-ups.
// It reports false once ch is closed.
func await(ch <-chan struct{}, spin time.Duration) bool {
	var t0 time.Time
	for i := 0; ; i++ {
		select {
		case _, ok := <-ch:
			return ok
		default:
		}
		if i%64 == 0 {
			if i == 0 {
				t0 = time.Now()
			} else if time.Since(t0) >= spin {
				_, ok := <-ch
				return ok
			}
		}
		runtime.Gosched()
	}
}

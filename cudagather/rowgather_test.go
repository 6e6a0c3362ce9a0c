//go:build linux

package cudagather

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	// The staged lookups' prefetch distance, for benchmarks of whole
	// lookups at other distances than the default.
	if v := os.Getenv("CUDAGATHER_ROW_AHEAD"); v != "" {
		if _, err := fmt.Sscan(v, &rowAhead); err != nil || rowAhead < 0 {
			panic("CUDAGATHER_ROW_AHEAD: want a count of rows, not " + v)
		}
	}
}

// TestRowGather: the staged lookups' CPU gather against a plain loop,
// over K columns of two tables with offsets, ids32 and ids64, -1 and bad
// ids (below the offset, past the end), any block bounds, with and
// without prefetching: the same rows copied, the same staged ids, the
// same first bad id, and nothing written outside the rows.
func TestRowGather(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	seed := r.Uint64()
	t.Logf("seed %d", seed)
	r = rand.New(rand.NewPCG(seed, 7))
	for iter := range 200 {
		R := int64(1 + r.IntN(300))
		if iter%3 == 0 {
			R = []int64{64, 136, 200, 264}[r.IntN(4)]
		}
		var s rowSource
		s.k, s.rowBytes = int64(1+r.IntN(8)), R
		tabs := [2][]byte{make([]byte, R*int64(1+r.IntN(50))), make([]byte, R*int64(1+r.IntN(50)))}
		for _, tb := range tabs {
			for i := range tb {
				tb[i] = byte(r.Uint32())
			}
		}
		for k := range s.k {
			tb := tabs[k%2]
			s.host[k], s.rows[k], s.offs[k] = tb, int64(len(tb))/R, int64(r.IntN(5))
		}
		n := int64(1 + r.IntN(400))
		id64 := r.IntN(2) == 0
		ids := make([]int64, n)
		for i := range ids {
			k := int64(i) % s.k
			switch x := r.IntN(40); {
			case x == 0:
				ids[i] = -1
			case x == 1:
				ids[i] = s.offs[k] + s.rows[k] + int64(r.IntN(3)) // past the end
			case x == 2 && s.offs[k] > 0:
				ids[i] = s.offs[k] - 1 // below the offset
			default:
				ids[i] = s.offs[k] + r.Int64N(s.rows[k])
			}
		}
		var ids32 []int32
		var ids64 []int64
		if id64 {
			ids64 = ids
		} else {
			ids32 = make([]int32, n)
			for i, v := range ids {
				ids32[i] = int32(v)
			}
		}
		lo := r.Int64N(n)
		hi := lo + r.Int64N(n-lo+1)
		base := lo - r.Int64N(lo+1)
		validate := r.IntN(5) == 0
		ahead := []int64{0, 1, 4, 16, 1000}[r.IntN(5)]
		// The expected result, by a plain loop.
		size := (hi - base) * R
		want, got := make([]byte, size+64), make([]byte, size+64)
		for i := range want {
			want[i] = byte(i * 7)
		}
		copy(got, want)
		wsids, gsids := make([]int32, n), make([]int32, n)
		for i := range wsids {
			wsids[i], gsids[i] = -7, -7
		}
		wfirst := int64(-1)
		for i := lo; i < hi; i++ {
			k := i % s.k
			sid := int32(-1)
			if v := ids[i]; v != -1 {
				row := v - s.offs[k]
				if row < 0 || row >= s.rows[k] {
					if wfirst < 0 {
						wfirst = i
					}
				} else if !validate {
					copy(want[(i-base)*R:(i-base+1)*R], s.host[k][row*R:(row+1)*R])
					sid = int32(i)
				}
			}
			if !validate {
				wsids[i] = sid
			}
		}
		dst := got[:size]
		if validate {
			dst = nil
		}
		first := s.gather(dst, ids32, ids64, gsids, lo, hi, base, ahead)
		if first != wfirst {
			t.Fatalf("iter %d: first bad %d, want %d", iter, first, wfirst)
		}
		if string(got) != string(want) {
			t.Fatalf("iter %d (R=%d K=%d [%d,%d) base %d ahead %d validate %v): rows differ", iter, R, s.k, lo, hi, base, ahead, validate)
		}
		for i := range wsids {
			if wsids[i] != gsids[i] {
				t.Fatalf("iter %d: staged id %d = %d, want %d", iter, i, gsids[i], wsids[i])
			}
		}
	}
}

// BenchmarkRowGatherCPU: the staged lookups' CPU gather alone (no GPU):
// N=98,304 random rows of R bytes in {64, 136, 264, 1024} from a table of
// hostTableGiB (huge pages asked for), over GOMAXPROCS-1 goroutines
// claiming blocks of stagedBlock rows as the staged workers do, into one
// destination, for each prefetch distance. Lines "rowgather ...": GB/s
// of rows copied, and nanoseconds a row takes one worker.
func BenchmarkRowGatherCPU(b *testing.B) {
	gib := hostTableGiB()
	if testing.Short() {
		gib = 1
	}
	size := gib << 30
	buf := hugeTable(b, size, 0x5eed)
	b.Logf("rowgather table: %d GiB (%s)", gib, anonHuge())
	workers := max(runtime.GOMAXPROCS(0)-1, 1)
	r := rand.New(rand.NewPCG(1, 2))
	const n = 98304
	for _, R := range []int64{64, 136, 264, 1024} {
		var s rowSource
		s.k, s.rowBytes = 1, R
		s.host[0], s.rows[0] = buf, size/R
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = r.Int64N(s.rows[0])
		}
		dst := make([]byte, n*R)
		sids := make([]int32, n)
		for _, ahead := range []int64{0, 8, 16, 32, 64} {
			d := timeRowGather(&s, dst, ids, sids, workers, ahead)
			b.Logf("rowgather R=%-5d N=%d ahead=%-3d workers=%d %7.1f us %6.1f GB/s %6.1f ns/row/worker",
				R, n, ahead, workers, float64(d.Nanoseconds())/1e3, float64(n*R)/d.Seconds()/1e9,
				d.Seconds()*1e9*float64(workers)/n)
		}
	}
}

// timeRowGather is the median time of s.gather over all of ids into dst
// by workers goroutines claiming blocks of stagedBlock rows, as the
// staged workers do, prefetching ahead rows ahead (one warm-up run, 15
// timed), each run over new random ids (ids is overwritten).
func timeRowGather(s *rowSource, dst []byte, ids []int64, sids []int32, workers int, ahead int64) time.Duration {
	n := int64(len(ids))
	fresh := rand.New(rand.NewPCG(uint64(n), uint64(ahead)))
	run := func() time.Duration {
		// New random rows each run (not timed): the same ids again would
		// find their rows, and their pages' translations, in the caches
		// the run before left, which no lookup of new ids does.
		for i := range ids {
			ids[i] = fresh.Int64N(s.rows[0])
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		t0 := time.Now()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					blk := next.Add(1) - 1
					lo := blk * stagedBlock
					if lo >= n {
						return
					}
					s.gather(dst, nil, ids, sids, lo, min(lo+stagedBlock, n), 0, ahead)
				}
			}()
		}
		wg.Wait()
		return time.Since(t0)
	}
	run()
	var ts []time.Duration
	for range 15 {
		ts = append(ts, run())
	}
	return median(ts)
}

// median is the middle of ts (which it leaves as it is).
func median(ts []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ts))
	return s[len(s)/2]
}

// hugeTable returns size bytes of anonymous memory, huge pages asked for,
// filled from seed (fillSeeded), unmapped when tb ends: a production-size
// host table built where the benchmark runs.
func hugeTable(tb testing.TB, size int64, seed uint64) []byte {
	buf, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = unix.Munmap(buf) })
	_ = unix.Madvise(buf, unix.MADV_HUGEPAGE)
	fillSeeded(buf, seed)
	return buf
}

// hostTableGiB is the size of BenchmarkHostTables' host memory:
// $CUDAGATHER_HOST_GIB, else 32 GiB on a machine with at least 96 GiB of
// memory and 4 GiB elsewhere.
func hostTableGiB() int64 {
	if v := os.Getenv("CUDAGATHER_HOST_GIB"); v != "" {
		var g int64
		if _, err := fmt.Sscan(v, &g); err == nil && g > 0 {
			return g
		}
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil && uint64(si.Totalram)*uint64(si.Unit) >= 96<<30 {
		return 32
	}
	return 4
}

// fillSeeded fills b with bytes from seed (splitmix64 over 8-byte words),
// on every core: a table of tens of GiB built where it is used, not
// carried.
func fillSeeded(b []byte, seed uint64) {
	w := runtime.GOMAXPROCS(0)
	per := (len(b)/8 + w - 1) / w * 8
	var wg sync.WaitGroup
	for lo := 0; lo < len(b); lo += per {
		hi := min(lo+per, len(b))
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := seed + uint64(lo)*0x9e3779b97f4a7c15
			for i := lo; i+8 <= hi; i += 8 {
				x += 0x9e3779b97f4a7c15
				z := x
				z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
				z = (z ^ z>>27) * 0x94d049bb133111eb
				binary.LittleEndian.PutUint64(b[i:], z^z>>31)
			}
		}()
	}
	wg.Wait()
}

// anonHuge is /proc/meminfo's AnonHugePages line: how much anonymous
// memory transparent huge pages back.
func anonHuge() string {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "AnonHugePages:") {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	return "AnonHugePages: unknown"
}

// TestGate: workers at a closed gate pass once it is released, whether
// they were still spinning or had parked (after gateSpin), and a gate
// released before they arrive lets them through at once.
func TestGate(t *testing.T) {
	for _, wait := range []time.Duration{0, gateSpin / 10, 3 * gateSpin} {
		var g gate
		g.cond.L = &g.mu
		var passed atomic.Int32
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g.pass()
				passed.Add(1)
			}()
		}
		time.Sleep(wait)
		if n := passed.Load(); n != 0 {
			t.Fatalf("wait %v: %d passed a closed gate", wait, n)
		}
		g.release()
		wg.Wait()
		g.pass() // open: at once
	}
}

// TestAwait: a token sent while the receiver spins, or after it has
// parked, is received; a closed channel ends it.
func TestAwait(t *testing.T) {
	for _, after := range []time.Duration{0, gateSpin / 4, 3 * gateSpin} {
		ch := make(chan struct{})
		got := make(chan bool)
		go func() { got <- await(ch, gateSpin) }()
		time.Sleep(after)
		ch <- struct{}{}
		if !<-got {
			t.Fatalf("after %v: the token was not received", after)
		}
		go func() { got <- await(ch, gateSpin) }()
		close(ch)
		if <-got {
			t.Fatalf("after %v: a closed channel gave a token", after)
		}
	}
}

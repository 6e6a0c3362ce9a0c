package lookup

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
)

var tableFlag = flag.Int64("lookup.table", 4<<30+256<<20,
	"bytes of the benchmark table (default 4.25 GiB: larger than 4 GiB, so row addresses pass 32 bits)")

// The benchmark table is mapped and filled once per process and shared by
// every benchmark; it stays mapped until the process exits.
var benchTable struct {
	once  sync.Once
	table []byte
	err   error
}

// loadTable returns the benchmark table, or skips the benchmark when it
// cannot be mapped.
func loadTable(b *testing.B) []byte {
	b.Helper()
	benchTable.once.Do(func() {
		size := *tableFlag
		if size < 1<<20 || size > 1<<40 || size > math.MaxInt-(4<<20) {
			benchTable.err = fmt.Errorf("-lookup.table=%d outside [1 MiB, 1 TiB]", size)
			return
		}
		start := time.Now()
		table, huge, err := mapTable(int(size))
		if err != nil {
			benchTable.err = fmt.Errorf("mapping a %d MiB table: %w (try a smaller -lookup.table)", size>>20, err)
			return
		}
		fillTable(table, uint64(start.UnixNano()))
		benchTable.table = table
		b.Logf("table: %d MiB, huge-page advice %v, mapped and filled in %v",
			size>>20, huge, time.Since(start).Round(time.Millisecond))
	})
	if benchTable.err != nil {
		b.Skip(benchTable.err)
	}
	return benchTable.table
}

// fillTable fills t with xorshift words, split over GOMAXPROCS goroutines;
// no word is zero.
func fillTable(t []byte, seed uint64) {
	words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(t))), len(t)/8)
	parts := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for p := range parts {
		part := words[p*len(words)/parts : (p+1)*len(words)/parts]
		wg.Go(func() {
			x := seed ^ uint64(p+1)*0x9e3779b97f4a7c15 | 1
			for i := range part {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				part[i] = x
			}
		})
	}
	wg.Wait()
	for i := len(words) * 8; i < len(t); i++ {
		t[i] = 0xa5
	}
}

// benchColumns returns k columns over table: all the whole table with
// offset 0 (same), or k consecutive slices of it with global ids (slices:
// column j holds global rows [j*span, (j+1)*span)). ids are uniform random
// valid global ids, which are also the rows of the whole table, so that the
// pack-only gather reads the same rows.
func benchColumns(r *rand.Rand, table []byte, mode string, t, k, rowBytes int) ([]Column, []int32) {
	rows := int64(len(table) / rowBytes)
	cols := make([]Column, k)
	ids := make([]int32, t*k)
	span := rows / int64(k)
	for j := range cols {
		switch mode {
		case shareSame:
			cols[j] = Column{Rows: table, NumRows: rows, RowBytes: rowBytes}
		case shareSlices:
			lo := int64(j) * span
			cols[j] = Column{Rows: table[lo*int64(rowBytes) : (lo+span)*int64(rowBytes)], NumRows: span, RowBytes: rowBytes, Offset: lo}
		default:
			panic("benchmark mode " + mode)
		}
	}
	for i := range ids {
		c := cols[i%k]
		ids[i] = int32(c.Offset + r.Int64N(c.NumRows))
	}
	return cols, ids
}

// BenchmarkLookupVsPackOnly is the CPU lookup goal: T=4096, K=24, R=264
// from the benchmark table (larger than 4 GiB by default), against the
// pack-only ceiling: pack.ParallelGather of the same T*K ids into a dense
// output on as many goroutines. They run alternately inside one timed
// loop, with pack.ParallelGatherUnchecked (the same gather without its
// validation) as a third, in an order that rotates every round, so all see
// the same machine. Metrics: ratio is lookup goodput over pack-only
// goodput (the goal asks for >= 0.9), ratio-unchecked the same over the
// unchecked gather (lookup validates, so this is the stricter one),
// lookup-GB/s and pack-GB/s the output bytes per second. Variants: one table for all columns (token-major, the
// case that is exactly one pack gather, in int32 and int64, and
// head-major), and 24 columns that are 24 slices of the table with their
// own offsets (token-major and head-major).
func BenchmarkLookupVsPackOnly(b *testing.B) {
	const tt, k, rowBytes = 4096, 24, 264
	variants := []struct {
		name, mode, layout string
		wide               bool
	}{
		{"token-major/same", shareSame, layoutToken, false},
		{"token-major/same/int64", shareSame, layoutToken, true},
		{"head-major/same", shareSame, layoutHead, false},
		{"token-major/offsets", shareSlices, layoutToken, false},
		{"head-major/offsets", shareSlices, layoutHead, false},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			table := loadTable(b)
			r := newRand(b)
			cols, ids32 := benchColumns(r, table, v.mode, tt, k, rowBytes)
			ids64 := make([]int64, len(ids32))
			for i, id := range ids32 {
				ids64[i] = int64(id)
			}
			e := NewEngine(0)
			defer e.Close()
			w := pack.NewWorkers(e.Workers())
			defer w.Close()
			out := newOutput(r, v.layout, tt, k, rowBytes)
			dense := randomBytes(r, tt*k*rowBytes)
			l := pack.Layout{Rows: tt * k, RowBytes: rowBytes}
			lookup := func() time.Duration {
				t0 := time.Now()
				var err error
				if v.wide {
					err = Lookup(e, cols, ids64, tt, k, out)
				} else {
					err = Lookup(e, cols, ids32, tt, k, out)
				}
				d := time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				return d
			}
			packOnly := func(check bool) time.Duration {
				t0 := time.Now()
				var err error
				switch {
				case v.wide && check:
					err = pack.ParallelGather(w, dense, table, ids64, l)
				case check:
					err = pack.ParallelGather(w, dense, table, ids32, l)
				case v.wide:
					err = pack.ParallelGatherUnchecked(w, dense, table, ids64, l)
				default:
					err = pack.ParallelGatherUnchecked(w, dense, table, ids32, l)
				}
				d := time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				return d
			}
			lookup() // start the helpers outside the timed loop
			packOnly(true)
			// Each round runs the three in a rotating order.
			var times [3]time.Duration
			runs := [3]func() time.Duration{lookup, func() time.Duration { return packOnly(true) }, func() time.Duration { return packOnly(false) }}
			b.ReportAllocs()
			b.SetBytes(3 * tt * k * rowBytes)
			i := 0
			for b.Loop() {
				for j := range runs {
					x := (i + j) % len(runs)
					times[x] += runs[x]()
				}
				i++
			}
			gbps := func(d time.Duration) float64 { return float64(i) * tt * k * rowBytes / d.Seconds() / 1e9 }
			b.ReportMetric(float64(times[1])/float64(times[0]), "ratio")
			b.ReportMetric(float64(times[2])/float64(times[0]), "ratio-unchecked")
			b.ReportMetric(gbps(times[0]), "lookup-GB/s")
			b.ReportMetric(gbps(times[1]), "pack-GB/s")
			b.ReportMetric(float64(e.Workers()), "workers")
		})
	}
}

// BenchmarkLookupSmall measures small lookups (T = 1, 4, 16; K = 24;
// R = 264), where latency matters: lookup-ns is the time of one lookup,
// pack-ns of one serial pack.Gather of the same number of ids into a dense
// buffer (no planning, one table), overhead-ns their difference. Each call
// reads fresh random ids from a pool of 512 sets, so that rows come from
// memory as they would in service; on the hot table (256 KiB, in cache) the
// difference is all fixed cost. Calls run in batches of 16, alternating
// between lookup and pack batches.
func BenchmarkLookupSmall(b *testing.B) {
	const k, rowBytes, sets, batch = 24, 264, 512, 16
	for _, tableKind := range []string{"cold", "hot"} {
		for _, tt := range []int{1, 4, 16} {
			for _, v := range []struct{ name, mode, layout string }{
				{"token-major/same", shareSame, layoutToken},
				{"head-major/same", shareSame, layoutHead},
				{"token-major/offsets", shareSlices, layoutToken},
			} {
				b.Run(fmt.Sprintf("%s/T=%d/%s", tableKind, tt, v.name), func(b *testing.B) {
					table := loadTable(b)
					if tableKind == "hot" {
						table = table[:256<<10]
					}
					r := newRand(b)
					e := NewEngine(0)
					defer e.Close()
					var cols []Column
					idSets := make([][]int32, sets)
					for i := range idSets {
						cols, idSets[i] = benchColumns(r, table, v.mode, tt, k, rowBytes)
					}
					out := newOutput(r, v.layout, tt, k, rowBytes)
					dense := randomBytes(r, tt*k*rowBytes)
					l := pack.Layout{Rows: tt * k, RowBytes: rowBytes}
					var tLookup, tPack time.Duration
					next := 0
					runBatch := func(lookup bool) {
						t0 := time.Now()
						for range batch {
							ids := idSets[next%sets]
							next++
							var err error
							if lookup {
								err = Lookup(e, cols, ids, tt, k, out)
							} else {
								err = pack.Gather(dense, table, ids, l)
							}
							if err != nil {
								b.Fatal(err)
							}
						}
						if lookup {
							tLookup += time.Since(t0)
						} else {
							tPack += time.Since(t0)
						}
					}
					b.ReportAllocs()
					b.SetBytes(2 * batch * int64(tt*k*rowBytes))
					i := 0
					for b.Loop() {
						runBatch(i%2 == 0)
						runBatch(i%2 != 0)
						i++
					}
					calls := float64(i * batch)
					b.ReportMetric(float64(tLookup.Nanoseconds())/calls, "lookup-ns")
					b.ReportMetric(float64(tPack.Nanoseconds())/calls, "pack-ns")
					b.ReportMetric(float64((tLookup-tPack).Nanoseconds())/calls, "overhead-ns")
				})
			}
		}
	}
}

// BenchmarkTouch measures the read-ahead pass of small lookups cut into
// many gathers of a few rows (see touchRows): K=24 columns that are 24
// slices of the benchmark table (distinct tables), T = 1 and 4, with the
// pass and without it, alternately in batches of 16 calls on fresh ids.
// Metric speedup is the time without the pass over the time with it; cold
// reads the whole table (rows out of cache), hot its first 256 KiB.
func BenchmarkTouch(b *testing.B) {
	const k, rowBytes, sets, batch = 24, 264, 512, 16
	for _, tableKind := range []string{"cold", "hot"} {
		for _, tt := range []int{1, 4} {
			for _, layout := range []string{layoutToken, layoutHead} {
				b.Run(fmt.Sprintf("%s/T=%d/%s", tableKind, tt, layout), func(b *testing.B) {
					table := loadTable(b)
					if tableKind == "hot" {
						table = table[:256<<10]
					}
					r := newRand(b)
					on, off := NewEngine(0), NewEngine(0)
					defer on.Close()
					defer off.Close()
					off.noTouch = true
					var cols []Column
					idSets := make([][]int32, sets)
					for i := range idSets {
						cols, idSets[i] = benchColumns(r, table, shareSlices, tt, k, rowBytes)
					}
					out := newOutput(r, layout, tt, k, rowBytes)
					var tOn, tOff time.Duration
					next := 0
					runBatch := func(e *Engine) time.Duration {
						t0 := time.Now()
						for range batch {
							if err := Lookup(e, cols, idSets[next%sets], tt, k, out); err != nil {
								b.Fatal(err)
							}
							next++
						}
						return time.Since(t0)
					}
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						if i%2 == 0 {
							tOn += runBatch(on)
							tOff += runBatch(off)
						} else {
							tOff += runBatch(off)
							tOn += runBatch(on)
						}
						i++
					}
					calls := float64(i * batch)
					b.ReportMetric(float64(tOn.Nanoseconds())/calls, "touch-ns")
					b.ReportMetric(float64(tOff.Nanoseconds())/calls, "plain-ns")
					b.ReportMetric(float64(tOff)/float64(tOn), "speedup")
				})
			}
		}
	}
}

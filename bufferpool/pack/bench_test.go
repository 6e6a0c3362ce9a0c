package pack

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
)

var tableFlag = flag.Int64("pack.table", 256<<20, "bytes of the benchmark table, e.g. 4294967296 for 4 GiB")

// The benchmark table is mapped and filled once per process and shared by
// every benchmark; it stays mapped until the process exits.
var benchTable struct {
	once  sync.Once
	table []byte
	huge  bool
	err   error
}

func loadTable(b *testing.B) []byte {
	b.Helper()
	benchTable.once.Do(func() {
		size := *tableFlag
		if size < 1<<20 || size > 1<<40 || size > math.MaxInt-(4<<20) {
			benchTable.err = fmt.Errorf("-pack.table=%d outside [1 MiB, 1 TiB] or not addressable", size)
			return
		}
		start := time.Now()
		benchTable.table, benchTable.huge, benchTable.err = mapTable(int(size))
		if benchTable.err == nil {
			fillTable(benchTable.table, uint64(start.UnixNano()))
		}
		b.Logf("table: %d MiB, huge-page advice %v, mapped and filled in %v",
			size>>20, benchTable.huge, time.Since(start).Round(time.Millisecond))
	})
	if benchTable.err != nil {
		b.Fatal(benchTable.err)
	}
	return benchTable.table
}

// fillTable fills t with xorshift words, split over GOMAXPROCS goroutines;
// no word is zero.
func fillTable(t []byte, seed uint64) {
	words := unsafe.Slice((*uint64)(bytesPointer(t)), len(t)/8)
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

// benchRows is how many rows one benchmark op moves: the Engram workload's
// 98,304 rows, capped at 32 MiB so that large rows stay comparable.
func benchRows(rowBytes int) int { return min(98304, (32<<20)/rowBytes) }

func benchIDs(r *rand.Rand, n, tableRows int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(tableRows))
	}
	return ids
}

func reportRows(b *testing.B, rows int) float64 {
	nsPerRow := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(rows)
	b.ReportMetric(nsPerRow, "ns/row")
	return nsPerRow
}

// BenchmarkGather gathers random rows of a table that misses the caches
// into a contiguous buffer. gen is the generated loop, generic the any-size
// loop on the same request, copy the plain bounds-checked copy() loop, and
// checked the public Gather (validation plus generated loop).
func BenchmarkGather(b *testing.B) {
	for _, rowBytes := range specializedRowBytes {
		b.Run(fmt.Sprintf("R=%d", rowBytes), func(b *testing.B) {
			table := loadTable(b)
			r := newRand(b)
			rows := benchRows(rowBytes)
			ids := benchIDs(r, rows, tableRows(table, rowBytes))
			dst := randomBytes(r, rows*rowBytes)
			l := Layout{Rows: rows, RowBytes: rowBytes}.dense()
			variants := []struct {
				name string
				run  func()
			}{
				{"gen", func() { t := linearTask(dst, table, ids, l, false); t.run() }},
				{"generic", func() { t := linearTask(dst, table, ids, l, false); t.anyRow = true; t.run() }},
				{"copy", func() { refGather(dst, table, ids, l) }},
				{"checked", func() {
					if err := Gather(dst, table, ids, l); err != nil {
						b.Fatal(err)
					}
				}},
			}
			for _, v := range variants {
				b.Run(v.name, func(b *testing.B) {
					b.ReportAllocs()
					b.SetBytes(int64(rows * rowBytes))
					for b.Loop() {
						v.run()
					}
					reportRows(b, rows)
				})
			}
		})
	}
}

// BenchmarkScatter writes contiguous packed rows to random rows of the
// table, gen against generic as in BenchmarkGather.
func BenchmarkScatter(b *testing.B) {
	for _, rowBytes := range specializedRowBytes {
		b.Run(fmt.Sprintf("R=%d", rowBytes), func(b *testing.B) {
			table := loadTable(b)
			r := newRand(b)
			rows := benchRows(rowBytes)
			ids := benchIDs(r, rows, tableRows(table, rowBytes))
			src := randomBytes(r, rows*rowBytes)
			l := Layout{Rows: rows, RowBytes: rowBytes}.dense()
			for _, anyRow := range []bool{false, true} {
				name := "gen"
				if anyRow {
					name = "generic"
				}
				b.Run(name, func(b *testing.B) {
					b.ReportAllocs()
					b.SetBytes(int64(rows * rowBytes))
					for b.Loop() {
						t := linearTask(src, table, ids, l, true)
						t.anyRow = anyRow
						t.run()
					}
					reportRows(b, rows)
				})
			}
		})
	}
}

// serialNsPerRow is BenchmarkGatherParallel/workers=1's result, the base
// of the speedup that workers=2 reports.
var serialNsPerRow float64

// BenchmarkGatherParallel is the owner's pack of the Engram workload:
// 98,304 random 264-byte rows through the checked ParallelGather.
func BenchmarkGatherParallel(b *testing.B) {
	const rows, rowBytes = 98304, 264
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			table := loadTable(b)
			r := newRand(b)
			ids := benchIDs(r, rows, tableRows(table, rowBytes))
			dst := randomBytes(r, rows*rowBytes)
			w := NewWorkers(workers)
			defer w.Close()
			l := Layout{Rows: rows, RowBytes: rowBytes}
			b.ReportAllocs()
			b.SetBytes(rows * rowBytes)
			for b.Loop() {
				if err := ParallelGather(w, dst, table, ids, l); err != nil {
					b.Fatal(err)
				}
			}
			ns := reportRows(b, rows)
			switch {
			case workers == 1:
				serialNsPerRow = ns
				b.ReportMetric(1, "speedup")
			case serialNsPerRow > 0:
				b.ReportMetric(serialNsPerRow/ns, "speedup")
			}
		})
	}
}

// BenchmarkForkJoin measures what a split costs beyond its rows (the
// forkJoinNs of the split threshold): a 2-way split of 2 cache-hot 64-byte
// rows. hot calls back to back, so the helper is often still spinning;
// parked waits 1 ms between calls (untimed), so the helper's thread sleeps
// and must be woken, the case the threshold is for.
func BenchmarkForkJoin(b *testing.B) {
	r := newRand(b)
	table := randomBytes(r, 64*64)
	ids := []int32{3, 9}
	dst := randomBytes(r, 2*64)
	l := Layout{Rows: 2, RowBytes: 64}
	for _, parked := range []bool{false, true} {
		name := "hot"
		if parked {
			name = "parked"
		}
		b.Run(name, func(b *testing.B) {
			if runtime.GOMAXPROCS(0) < 2 {
				b.Skip("GOMAXPROCS is 1: nothing splits")
			}
			w := NewWorkers(2)
			defer w.Close()
			w.minRows = 1
			for b.Loop() {
				if parked {
					b.StopTimer()
					time.Sleep(time.Millisecond)
					b.StartTimer()
				}
				if err := ParallelGather(w, dst, table, ids, l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

//go:build linux

package snapshot

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
)

// benchSpec is a 64 MiB table of 264-byte rows.
var benchSpec = Spec{Name: "bench", NumRows: (64 << 20) / 264, RowBytes: 264}

func reportRows(b *testing.B, rows int64) {
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkCreate publishes a 64 MiB table per iteration (the fsyncs
// included, so it measures the disk as much as the code).
func BenchmarkCreate(b *testing.B) {
	rows := makeRows(benchSpec, 1)
	for _, from := range []string{"bytes", "reader"} {
		b.Run(from, func(b *testing.B) {
			dir := b.TempDir()
			b.ReportAllocs()
			b.SetBytes(benchSpec.Size())
			i := 0
			for b.Loop() {
				spec := benchSpec
				spec.Name = "bench-" + strconv.Itoa(i)
				var err error
				if from == "bytes" {
					err = Create(dir, spec, rows, nil)
				} else {
					err = CreateFrom(dir, spec, bytes.NewReader(rows), nil)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := Remove(dir, spec.Name, nil); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				i++
			}
			reportRows(b, benchSpec.NumRows)
		})
	}
}

// BenchmarkOpen opens and closes a 64 MiB table (hot in the page cache):
// the checksum pass over every row, pinning, both and neither.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	if err := Create(dir, benchSpec, makeRows(benchSpec, 2), nil); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts OpenOptions
	}{
		{"verify+pin", OpenOptions{Pin: PinBestEffort}},
		{"verify", OpenOptions{}},
		{"pin", OpenOptions{Pin: PinBestEffort, SkipRowChecksums: true}},
		{"map-only", OpenOptions{SkipRowChecksums: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(benchSpec.Size())
			for b.Loop() {
				t, err := Open(dir, benchSpec.Name, &benchSpec, &tc.opts)
				if err != nil {
					b.Fatal(err)
				}
				if err := t.Close(); err != nil {
					b.Fatal(err)
				}
			}
			reportRows(b, benchSpec.NumRows)
		})
	}
}

// BenchmarkCheckRows is the checksum pass alone over 64 MiB in memory,
// on one goroutine and on GOMAXPROCS.
func BenchmarkCheckRows(b *testing.B) {
	rows := makeRows(benchSpec, 3)
	h := newHeader(benchSpec, blockRowsFor(benchSpec, DefaultBlockBytes))
	w := &rowWriter{blockBytes: h.BlockBytes()}
	w.sum(rows)
	w.finish()
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(benchSpec.Size())
			for b.Loop() {
				if checkRows(rows, w.sums, &h, workers) != -1 {
					b.Fatal("bad block")
				}
			}
			reportRows(b, benchSpec.NumRows)
		})
	}
}

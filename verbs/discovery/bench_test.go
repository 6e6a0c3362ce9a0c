package discovery_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// Discovery moves no payload, so these benchmarks report operations per
// second instead of bytes (no b.SetBytes).

func benchDirs(b *testing.B) map[string]func(b *testing.B) discovery.Directory {
	dirs := map[string]func(b *testing.B) discovery.Directory{
		"memory": func(b *testing.B) discovery.Directory { return discovery.NewMemory() },
	}
	if runtime.GOOS == "linux" {
		dirs["file"] = func(b *testing.B) discovery.Directory {
			f, err := discovery.NewFile(filepath.Join(benchFolder(b), "segments.json"))
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
	}
	return dirs
}

func benchRecord(i int) discovery.Record {
	return discovery.Record{
		Name:      fmt.Sprintf("engram/layer%d/shard%d", i/8, i%8),
		Transport: "tcp",
		Addr:      fmt.Sprintf("10.0.%d.%d:7000", i/250, 1+i%250),
		Attrs:     map[string]string{"rkey": fmt.Sprintf("%#x", 0x9e3779b9*(i+1))},
	}
}

func publishN(b *testing.B, d discovery.Directory, n int) {
	b.Helper()
	for i := range n {
		if _, err := d.Publish(context.Background(), benchRecord(i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	for name, open := range benchDirs(b) {
		b.Run(name, func(b *testing.B) {
			d := open(b)
			defer d.Close()
			publishN(b, d, 64)
			ctx := context.Background()
			names := make([]string, 64)
			for i := range names {
				names[i] = benchRecord(i).Name
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := d.Lookup(ctx, names[i%64]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
		})
	}
}

func BenchmarkList(b *testing.B) {
	for name, open := range benchDirs(b) {
		b.Run(name, func(b *testing.B) {
			d := open(b)
			defer d.Close()
			publishN(b, d, 64)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				recs, err := d.List(ctx, "engram/")
				if err != nil || len(recs) != 64 {
					b.Fatal(len(recs), err)
				}
			}
			b.ReportMetric(64*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

func BenchmarkPublishClose(b *testing.B) {
	for name, open := range benchDirs(b) {
		b.Run(name, func(b *testing.B) {
			d := open(b)
			defer d.Close()
			publishN(b, d, 16) // others in the directory
			ctx := context.Background()
			r := benchRecord(1000)
			b.ReportAllocs()
			for b.Loop() {
				reg, err := d.Publish(ctx, r)
				if err != nil {
					b.Fatal(err)
				}
				if err := reg.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "publications/s")
		})
	}
}

// benchFolder is where the file benchmarks keep their directory file:
// DISCOVERY_BENCH_DIR when set (for example a tmpfs such as /dev/shm, where
// such files belong), else a temporary folder.
func benchFolder(b *testing.B) string {
	if dir := os.Getenv("DISCOVERY_BENCH_DIR"); dir != "" {
		sub, err := os.MkdirTemp(dir, "discovery-bench-*")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(sub) })
		return sub
	}
	return b.TempDir()
}

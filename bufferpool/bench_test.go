package bufferpool

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkAcquireRelease measures one lease and its release: uncontended on
// one goroutine, and from all Ps at once with plenty of room ("parallel") or
// with fewer slots than goroutines so acquires queue ("parallel-scarce").
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{64 << 10, 1 << 20} {
		for _, mode := range []string{"try", "acquire", "labeled", "track-callers"} {
			b.Run(fmt.Sprintf("%s/%dKiB", mode, size>>10), func(b *testing.B) {
				p := newTestPool(b, Config{Budget: 64 << 20, TrackCallers: mode == "track-callers"})
				// A few leases held keep the allocator off its emptiest state.
				held := make([]Lease, 0, 8)
				for range cap(held) {
					l, err := p.TryAcquire(size)
					if err != nil {
						b.Fatal(err)
					}
					held = append(held, l)
				}
				b.ReportAllocs()
				for b.Loop() {
					var l Lease
					var err error
					switch mode {
					case "try":
						l, err = p.TryAcquire(size)
					case "labeled":
						l, err = p.AcquireLabeled(ctx, size, "chunk")
					default:
						l, err = p.Acquire(ctx, size)
					}
					if err != nil {
						b.Fatal(err)
					}
					if err := l.Release(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leases/s")
				for _, l := range held {
					if err := l.Release(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	for _, tc := range []struct {
		name   string
		budget int
	}{{"parallel", 64 << 20}, {"parallel-scarce", 2 << 16}} {
		b.Run(tc.name, func(b *testing.B) {
			p := newTestPool(b, Config{Budget: tc.budget})
			b.ReportAllocs()
			b.SetParallelism(2)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l, err := p.Acquire(ctx, 64<<10)
					if err != nil {
						b.Error(err)
						return
					}
					l.Bytes()[0] = 1
					if err := l.Release(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			st := p.Stats()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leases/s")
			b.ReportMetric(float64(st.Waits)/float64(b.N), "waits/op")
		})
	}
}

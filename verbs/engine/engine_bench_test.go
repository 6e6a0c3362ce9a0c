package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

// The RFC's workloads, read from a 1 GiB owner region.
const (
	benchTable    = 1 << 30
	benchRows     = 98304
	benchRowBytes = 264
	benchLarge    = 64
	benchLargeLen = 512 << 10
	benchMixSmall = 32768
)

// benchFill fills b with non-zero pseudo-random bytes, fast enough for a
// gigabyte.
func benchFill(r *rand.Rand, b []byte) {
	x := r.Uint64() | 1
	for i := 0; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v := x | 0x0101010101010101
		b[i], b[i+1], b[i+2], b[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		b[i+4], b[i+5], b[i+6], b[i+7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
	}
}

// benchVariants is how many plans of each workload a benchmark rotates
// through, so the rows an operation reads (and the destination it writes)
// are not still in the last-level cache from the previous operation.
const benchVariants = 4

type benchWorkload struct {
	name  string
	plans []*planfmt.Plan
}

// benchWorkloads builds benchVariants plans of each workload (sources
// within the 1 GiB table, destinations from 0).
func benchWorkloads(r *rand.Rand) []benchWorkload {
	wl := []benchWorkload{{name: "many-small"}, {name: "few-large"}, {name: "mixed"}}
	for range benchVariants {
		many := rowsPlan(r, benchTable, benchRows, benchRowBytes, 0, 0)
		// Few large: 64 x 512 KiB from random aligned places, packed
		// contiguously at the destination.
		few := &planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: benchTable, DstExtent: benchLarge * benchLargeLen}
		for i := range benchLarge {
			few.Ranges = append(few.Ranges, planfmt.Range{Src: uint64(r.IntN(benchTable/benchLargeLen)) * benchLargeLen,
				Dst: uint64(i) * benchLargeLen, Len: benchLargeLen})
		}
		// Mixed: 32,768 random rows and 64 large ranges, interleaved,
		// with contiguous destinations.
		mixed := &planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: benchTable}
		var dst uint64
		every := benchMixSmall / benchLarge
		for i := range benchMixSmall {
			mixed.Ranges = append(mixed.Ranges, planfmt.Range{Src: uint64(r.IntN(benchTable/benchRowBytes)) * benchRowBytes, Dst: dst, Len: benchRowBytes})
			dst += benchRowBytes
			if i%every == every-1 {
				mixed.Ranges = append(mixed.Ranges, planfmt.Range{Src: uint64(r.IntN(benchTable/benchLargeLen)) * benchLargeLen, Dst: dst, Len: benchLargeLen})
				dst += benchLargeLen
			}
		}
		mixed.DstExtent = dst
		wl[0].plans = append(wl[0].plans, many)
		wl[1].plans = append(wl[1].plans, few)
		wl[2].plans = append(wl[2].plans, mixed)
	}
	return wl
}

// BenchmarkScatter runs the RFC's three workloads over each backend (owner
// in this process) in each mode. ns/op and MB/s are the full API time
// (end-to-end goodput); window-GB/s is the payload over the bulk window;
// mode is what ran (1 direct, 2 gather, 3 hybrid).
func BenchmarkScatter(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			r := verbstest.NewRand(b)
			f := newBenchFixture(b, r, be)
			for _, wl := range benchWorkloads(r) {
				b.Run(wl.name, func(b *testing.B) {
					for _, m := range []struct {
						name string
						mode engine.Mode
					}{{"direct", engine.ModeDirect}, {"gather", engine.ModeGather}, {"adaptive", engine.ModeAuto}} {
						b.Run(m.name, func(b *testing.B) {
							benchOp(b, f, wl.plans, m.mode)
						})
					}
				})
			}
		})
	}
}

func newBenchFixture(b *testing.B, r *rand.Rand, be backend) *fixture {
	f := &fixture{owner: be.new(), req: be.new()}
	b.Cleanup(func() {
		_ = f.owner.Close()
		_ = f.req.Close()
	})
	var err error
	f.table, err = f.owner.Alloc(benchTable, verbs.AccessRemoteRead)
	require.NoError(b, err)
	benchFill(r, f.table.Bytes())
	exports := []verbs.Export{{Name: "table", Region: f.table}}
	f.seg, err = f.owner.Listen(be.addr(), exports, verbs.ListenOptions{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = f.seg.Close() })
	f.ownerStaging, err = staging.New(f.owner, bufferpool.Config{Budget: 64 << 20, Prefault: true}, verbs.AccessLocal)
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, f.ownerStaging.Close()) })
	f.svc, err = gather.NewService(gather.Config{Segment: f.seg, Exports: exports, Staging: f.ownerStaging})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, f.svc.Close()) })
	f.local, err = f.req.Alloc(48<<20, verbs.AccessLocal|verbs.AccessRemoteWrite)
	require.NoError(b, err)
	benchFill(r, f.local.Bytes())
	f.conn, err = f.req.Connect(verbstest.Context(b), f.seg.Addr(), verbs.ConnectOptions{
		Expose: []verbs.Export{{Name: "dst", Region: f.local}}})
	require.NoError(b, err)
	b.Cleanup(func() { _ = f.conn.Close() })
	f.tableInfo, _ = verbs.FindRegion(f.conn.Remote(), "table")
	f.eng, err = engine.New(engine.Config{})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, f.eng.Close()) })
	lp := f.conn.LinkParams()
	info, err := f.eng.Prepare(verbstest.Context(b), f.conn)
	require.NoError(b, err)
	b.Logf("%s link: %.2f GB/s, %.2f M req/s, RTT %v, Q %d; owner B_mem %.2f GB/s, R_copy %.2f M/s, %d pack workers",
		be.name, lp.Bandwidth/1e9, lp.PostRate/1e6, lp.RTT, lp.QueueDepth, info.BMem/1e9, info.RCopy/1e6, info.PackWorkers)
	return f
}

func benchOp(b *testing.B, f *fixture, plans []*planfmt.Plan, mode engine.Mode) {
	ctx := context.Background()
	ops := make([]*engine.ScatterOp, len(plans))
	for i, p := range plans {
		ops[i] = f.op(verbs.OpRead, p, mode)
		ops[i].SpanBytes = make([]uint64, 0, 1)
		if _, err := f.eng.Do(ctx, ops[i]); err != nil { // warm: states, pages, socket buffers
			b.Fatal(err)
		}
	}
	runtime.GC() // garbage of earlier benchmarks is not this one's cost
	b.ReportAllocs()
	var window time.Duration
	var payload uint64
	var last engine.Result
	var modes [4]int
	i := 0
	b.ResetTimer()
	for b.Loop() {
		res, err := f.eng.Do(ctx, ops[i%len(ops)])
		if err != nil {
			b.Fatal(err)
		}
		i++
		window += res.Trace.Window
		payload += res.Bytes
		modes[res.Mode]++
		last = res
	}
	b.SetBytes(int64(payload) / int64(b.N))
	if window > 0 {
		b.ReportMetric(float64(payload)/window.Seconds()/1e9, "window-GB/s")
	}
	// mode: the mode most operations ran in (1 direct, 2 gather, 3 hybrid).
	most := engine.ModeDirect
	for m := range modes {
		if modes[m] > modes[most] {
			most = engine.Mode(m)
		}
	}
	b.ReportMetric(float64(most), "mode")
	b.ReportMetric(float64(payload)/b.Elapsed().Seconds()/1e9, "e2e-GB/s")
	if testing.Verbose() {
		b.Logf("%v (chosen %v, fallback %v): %s", last.Mode, last.Chosen, last.Fallback, last.Trace.String())
	}
}

// BenchmarkPackOnly is the pack-only ceiling: the owner's random-row
// gather of the many-small workload from the 1 GiB table into staging,
// with no transfer, serial and split over the pack workers.
func BenchmarkPackOnly(b *testing.B) {
	r := verbstest.NewRand(b)
	table := make([]byte, benchTable)
	benchFill(r, table)
	var ids [benchVariants][]int32
	for v := range ids {
		ids[v] = rowsPlan(r, benchTable, benchRows, benchRowBytes, 0, 0).Rows.IDs32
	}
	pool, err := bufferpool.New(bufferpool.Config{Budget: 32 << 20, Prefault: true})
	require.NoError(b, err)
	defer func() { require.NoError(b, pool.Close()) }()
	l, err := pool.TryAcquire(benchRows * benchRowBytes)
	require.NoError(b, err)
	defer func() { require.NoError(b, l.Release()) }()
	dst := l.Bytes()
	layout := pack.Layout{Rows: benchRows, RowBytes: benchRowBytes}
	for _, v := range ids {
		require.NoError(b, pack.CheckGather(dst, table, v, layout))
	}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			w := pack.NewWorkers(workers)
			defer w.Close()
			b.SetBytes(benchRows * benchRowBytes)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := pack.ParallelGatherUnchecked(w, dst, table, ids[i%benchVariants], layout); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(benchRows*benchRowBytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

package costmodel

import (
	"context"
	"testing"
	"time"
)

func BenchmarkDecide(b *testing.B) {
	for _, bc := range []struct {
		name string
		p    Params
		g    Geometry
	}{
		{"many-small/MaxP=8", rdmaLike(), Geometry{S: 98_304 * 264, N: 98_304, M: 98_304}},
		{"few-large/MaxP=4", tcpLike(), Geometry{S: 64 * 512 << 10, N: 64, M: 64}},
		{"many-small/MaxP=64", func() Params { p := rdmaLike(); p.MaxP = 64; return p }(), Geometry{S: 98_304 * 264, N: 98_304, M: 98_304}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var d Decision
			for b.Loop() {
				d = Decide(bc.p, bc.g)
			}
			b.ReportMetric(float64(d.Evaluated), "candidates/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(d.Evaluated), "ns/candidate")
		})
	}
}

func BenchmarkSplit(b *testing.B) {
	p := rdmaLike()
	runs := mixedRuns()
	modes := make([]Mode, len(runs))
	b.ReportAllocs()
	for b.Loop() {
		Split(p, runs, modes)
	}
	b.ReportMetric(float64(len(runs)), "runs/op")
}

func BenchmarkMovingObserve(b *testing.B) {
	m, err := NewMoving(rdmaLike(), DefaultAlpha)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = m.ObservePack(1<<20, 4096, time.Millisecond)
		}
	})
}

// BenchmarkCalibrate runs the whole startup probe; each iteration takes
// the default 50 ms budget, so run it with a small -benchtime.
func BenchmarkCalibrate(b *testing.B) {
	b.ReportAllocs()
	var c Calibration
	for b.Loop() {
		var err error
		c, err = Calibrate(context.Background(), CalibrateOptions{})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(c.Copied)
	b.ReportMetric(c.BMem/1e9, "GB/s-BMem")
	b.ReportMetric(c.RCopy/1e6, "Mspans/s-RCopy")
	b.ReportMetric(float64(c.BufferBytes>>20), "MiB-buffer")
}

package planfmt

import (
	"runtime"
	"testing"
)

// The reference workload: 98,304 random ids (0.1% of them -1) over a
// 384,000,000-row table of 264-byte rows, token-major into a packed output of
// 32 heads per token.
const (
	benchRows = 98_304
	benchCols = 32
)

func reportPerRow(b *testing.B, msgBytes int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
	if msgBytes > 0 {
		b.ReportMetric(float64(msgBytes)/benchRows, "B/row")
	}
}

func benchCommand(b *testing.B) *Command {
	rng := newRand(b)
	p := engramPlan(rng, benchRows, benchCols)
	return &Command{OpID: 1, Dir: Read, Chunk: 256 << 10, Pipeline: 4,
		Src: Window{Key: 1, Len: p.SrcExtent}, Dst: Window{Key: 2, Len: p.DstExtent}, Plan: *p}
}

func BenchmarkNormalizeRows(b *testing.B) {
	c := benchCommand(b)
	var n Normalized
	if err := Normalize(&n, &c.Plan); err != nil { // warm n's storage
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(benchRows * c.Plan.Rows.RowSize))
	for b.Loop() {
		if err := Normalize(&n, &c.Plan); err != nil {
			b.Fatal(err)
		}
	}
	reportPerRow(b, 0)
}

func BenchmarkNormalizeRanges(b *testing.B) {
	rng := newRand(b)
	for _, order := range []string{"sorted", "unsorted"} {
		b.Run(order, func(b *testing.B) {
			rs := make([]Range, benchRows)
			for i := range rs {
				rs[i] = Range{Src: rng.Uint64N(384_000_000) * 264, Dst: uint64(i) * 264, Len: 264}
			}
			if order == "unsorted" {
				rng.Shuffle(len(rs), func(i, j int) { rs[i].Dst, rs[j].Dst = rs[j].Dst, rs[i].Dst })
			}
			p := rangesPlan(384_000_000*264, benchRows*264, rs...)
			var n Normalized
			if err := Normalize(&n, p); err != nil { // warm n's storage
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(benchRows * 264)
			for b.Loop() {
				if err := Normalize(&n, p); err != nil {
					b.Fatal(err)
				}
			}
			reportPerRow(b, 0)
		})
	}
}

func BenchmarkAppendPlan(b *testing.B) {
	c := benchCommand(b)
	buf, err := AppendPlan(nil, &c.Plan)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if buf, err = AppendPlan(buf[:0], &c.Plan); err != nil {
			b.Fatal(err)
		}
	}
	reportPerRow(b, len(buf))
}

func BenchmarkDecodePlan(b *testing.B) {
	c := benchCommand(b)
	msg, err := AppendPlan(nil, &c.Plan)
	if err != nil {
		b.Fatal(err)
	}
	var p Plan
	if err := DecodePlan(&p, msg); err != nil { // warm p's storage
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if err := DecodePlan(&p, msg); err != nil {
			b.Fatal(err)
		}
	}
	reportPerRow(b, len(msg))
}

func BenchmarkDecodeCommand(b *testing.B) {
	c := benchCommand(b)
	msg, err := AppendCommand(nil, c)
	if err != nil {
		b.Fatal(err)
	}
	var got Command
	if err := DecodeCommand(&got, msg); err != nil { // warm got's storage
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if err := DecodeCommand(&got, msg); err != nil {
			b.Fatal(err)
		}
	}
	reportPerRow(b, len(msg))
}

// BenchmarkPlanRoundTrip is the planning cost of one gather: the requester
// normalizes and encodes the command, the owner decodes it.
func BenchmarkPlanRoundTrip(b *testing.B) {
	c := benchCommand(b)
	var (
		n   Normalized
		got Command
		buf []byte
		err error
	)
	// One untimed round warms every buffer: the loop measures steady state.
	if err = Normalize(&n, &c.Plan); err != nil {
		b.Fatal(err)
	}
	if buf, err = AppendCommand(buf, c); err != nil {
		b.Fatal(err)
	}
	if err = DecodeCommand(&got, buf); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(benchRows * c.Plan.Rows.RowSize))
	for b.Loop() {
		if err = Normalize(&n, &c.Plan); err != nil {
			b.Fatal(err)
		}
		if buf, err = AppendCommand(buf[:0], c); err != nil {
			b.Fatal(err)
		}
		if err = DecodeCommand(&got, buf); err != nil {
			b.Fatal(err)
		}
	}
	reportPerRow(b, len(buf))
}

// benchRangesPlan is the same workload lowered to general ranges: 98,304
// random 264-byte source ranges packed back to back in the destination.
func benchRangesPlan(b *testing.B) *Plan {
	rng := newRand(b)
	rs := make([]Range, benchRows)
	for i := range rs {
		rs[i] = Range{Src: rng.Uint64N(384_000_000) * 264, Dst: uint64(i) * 264, Len: 264}
	}
	return rangesPlan(384_000_000*264, benchRows*264, rs...)
}

func BenchmarkAppendPlanRanges(b *testing.B) {
	p := benchRangesPlan(b)
	buf, err := AppendPlan(nil, p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if buf, err = AppendPlan(buf[:0], p); err != nil {
			b.Fatal(err)
		}
	}
	reportPerRow(b, len(buf))
}

func BenchmarkDecodePlanRanges(b *testing.B) {
	msg, err := AppendPlan(nil, benchRangesPlan(b))
	if err != nil {
		b.Fatal(err)
	}
	var p Plan
	if err := DecodePlan(&p, msg); err != nil { // warm p's storage
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if err := DecodePlan(&p, msg); err != nil {
			b.Fatal(err)
		}
	}
	reportPerRow(b, len(msg))
}

func BenchmarkNormalizeRowsParallel(b *testing.B) {
	c := benchCommand(b)
	var n Normalized
	workers := goPar(runtime.GOMAXPROCS(0))
	if err := NormalizeParallel(&n, &c.Plan, workers); err != nil { // warm n's storage
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(benchRows * c.Plan.Rows.RowSize))
	for b.Loop() {
		if err := NormalizeParallel(&n, &c.Plan, workers); err != nil {
			b.Fatal(err)
		}
	}
	reportPerRow(b, 0)
}

// BenchmarkSplitRows cuts the reference workload's plan over 3 owners by
// equal row ranges (what a sharded read does once per operation).
func BenchmarkSplitRows(b *testing.B) {
	p := &benchCommand(b).Plan
	r := &p.Rows
	third := r.TableRows / 3 * r.RowSize
	cuts := []uint64{0, r.SrcBase + third, r.SrcBase + 2*third, p.SrcExtent}
	var sp Splitter
	if _, err := sp.Split(p, cuts); err != nil { // warm the shards' storage
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sp.Split(p, cuts); err != nil {
			b.Fatal(err)
		}
	}
	reportPerRow(b, 0)
}

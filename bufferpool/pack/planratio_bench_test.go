package pack

import (
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/planfmt"
)

// BenchmarkPlanVsGather measures, in one run, the two costs the foundation's
// goal compares: planning the reference Engram read (98,304 random row ids
// from a 384,000,000-row table of 264-byte rows: normalize the fixed-row
// plan, encode the gather command, decode and validate it as the owner
// would) and gathering that many random 264-byte rows from the benchmark
// table (-pack.table; the ids are the same random draws reduced to the
// physical table's row count) with the single-goroutine loop the owner runs.
//
// Metrics: plan-ns/row, gather-ns/row, B/row (encoded command size per
// row) and gather/plan, the ratio the goal asks to be at least 20.
func BenchmarkPlanVsGather(b *testing.B) {
	const (
		rows      = 98_304
		rowBytes  = 264
		planTable = 384_000_000
	)
	table := loadTable(b)
	r := newRand(b)
	ids := make([]int32, rows)
	for i := range ids {
		ids[i] = int32(r.Uint64N(planTable))
	}
	cmd := &planfmt.Command{
		OpID: 1, Dir: planfmt.Read, Chunk: 1 << 20, Pipeline: 4,
		Src: planfmt.Window{Key: 1, Len: planTable * rowBytes},
		Dst: planfmt.Window{Key: 2, Len: rows * rowBytes},
		Plan: planfmt.Plan{
			Form: planfmt.FormRows, SrcExtent: planTable * rowBytes, DstExtent: rows * rowBytes,
			Rows: planfmt.Rows{RowSize: rowBytes, TableRows: planTable, IDs32: ids},
		},
	}
	physRows := int32(tableRows(table, rowBytes))
	gatherIDs := make([]int32, rows)
	for i, id := range ids {
		gatherIDs[i] = id % physRows
	}
	dst := randomBytes(r, rows*rowBytes)
	l := Layout{Rows: rows, RowBytes: rowBytes}

	var (
		norm    planfmt.Normalized
		decoded planfmt.Command
		wire    []byte
		err     error
	)
	roundTrip := func() {
		if err = planfmt.Normalize(&norm, &cmd.Plan); err != nil {
			b.Fatal(err)
		}
		if wire, err = planfmt.AppendCommand(wire[:0], cmd); err != nil {
			b.Fatal(err)
		}
		if err = planfmt.DecodeCommand(&decoded, wire); err != nil {
			b.Fatal(err)
		}
	}
	roundTrip() // warm the reused storage
	if len(decoded.Plan.Rows.IDs32) != rows {
		b.Fatalf("decoded %d ids, want %d", len(decoded.Plan.Rows.IDs32), rows)
	}

	var planTime, gatherTime time.Duration
	b.ReportAllocs()
	b.SetBytes(rows * rowBytes)
	for b.Loop() {
		t0 := time.Now()
		roundTrip()
		t1 := time.Now()
		GatherUnchecked(dst, table, gatherIDs, l)
		t2 := time.Now()
		planTime += t1.Sub(t0)
		gatherTime += t2.Sub(t1)
	}
	perRow := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / rows }
	b.ReportMetric(perRow(planTime), "plan-ns/row")
	b.ReportMetric(perRow(gatherTime), "gather-ns/row")
	b.ReportMetric(float64(len(wire))/rows, "B/row")
	b.ReportMetric(float64(gatherTime)/float64(planTime), "gather/plan")
}

package planfmt_test

import (
	"fmt"

	"github.com/scatterkit/scatterkit/planfmt"
)

// An Engram-style lookup: 2 tokens x 4 heads of int32 ids into a table of
// 264-byte rows, landing token-major in a [2, 4, 264] output. The requester
// lowers it to the fixed-row form (the ids are referenced, not copied),
// normalizes it, and sends it as a READ command; the owner decodes and
// validates the command before packing anything.
func Example_engramRead() {
	const rowSize, tableRows = 264, 1_000_000
	ids := []int32{
		17, 18, 19, -1, // token 0: head 3 keeps its output untouched
		500, 42, 43, 999_999, // token 1
	}
	plan := planfmt.Plan{
		Form:      planfmt.FormRows,
		SrcExtent: tableRows * rowSize,
		DstExtent: uint64(len(ids)) * rowSize,
		Rows: planfmt.Rows{
			RowSize:   rowSize,
			TableRows: tableRows,
			IDs32:     ids,
			Layout:    planfmt.Layout{Kind: planfmt.LayoutStrided, Cols: 4, RowStride: 4 * rowSize, ColStride: rowSize},
		},
		CompletionEnds: []uint32{4, 8}, // one completion per token
	}

	var norm planfmt.Normalized
	if err := planfmt.Normalize(&norm, &plan); err != nil {
		fmt.Println(err)
		return
	}
	g := norm.Summary()
	fmt.Printf("payload %d B in %d rows (%d skipped): %d spans, %d destination runs\n",
		g.Bytes, g.Fragments, g.Skipped, g.Spans, g.Runs)
	norm.ForEachSpan(func(src, dst, n uint64) bool {
		fmt.Printf("  span src=%d dst=%d len=%d\n", src, dst, n)
		return true
	})

	cmd := planfmt.Command{
		OpID: 1, Dir: planfmt.Read, Chunk: 64 << 10, Pipeline: 2,
		Src:  planfmt.Window{Key: 7, Len: plan.SrcExtent},
		Dst:  planfmt.Window{Key: 9, Len: plan.DstExtent},
		Plan: plan,
	}
	msg, err := planfmt.AppendCommand(nil, &cmd)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("command: %d bytes\n", len(msg))

	// Owner side: decode into a reusable command, then normalize.
	var got planfmt.Command
	if err := planfmt.DecodeCommand(&got, msg); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("owner ids:", got.Plan.Rows.IDs32)
	var owner planfmt.Normalized
	if err := planfmt.Normalize(&owner, &got.Plan); err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range owner.Completions() {
		fmt.Printf("  completion rows [%d,%d): %d B at stream offset %d\n", c.FragStart, c.FragEnd, c.Bytes, c.Stream)
	}
	owner.ForEachRun(func(dst, stream, n uint64) bool {
		fmt.Printf("  run dst=%d len=%d from stream offset %d\n", dst, n, stream)
		return true
	})
	// Output:
	// payload 1848 B in 7 rows (1 skipped): 4 spans, 2 destination runs
	//   span src=4488 dst=0 len=792
	//   span src=132000 dst=1056 len=264
	//   span src=11088 dst=1320 len=528
	//   span src=263999736 dst=1848 len=264
	// command: 216 bytes
	// owner ids: [17 18 19 -1 500 42 43 999999]
	//   completion rows [0,4): 792 B at stream offset 0
	//   completion rows [4,8): 1056 B at stream offset 792
	//   run dst=0 len=792 from stream offset 0
	//   run dst=1056 len=1056 from stream offset 792
}

// RadixSort orders elements by a uint64 field, stably, in O(N) and
// without allocating: the caller supplies the second buffer and reads
// the result from whichever buffer the sort returns.
func ExampleRadixSort() {
	rs := []planfmt.Range{{Src: 0, Dst: 300, Len: 10}, {Src: 10, Dst: 0, Len: 10}, {Src: 20, Dst: 100, Len: 10}}
	tmp := make([]planfmt.Range, len(rs))
	sorted := planfmt.RadixSort(rs, tmp, func(r *planfmt.Range) *uint64 { return &r.Dst })
	for _, r := range sorted {
		fmt.Println(r.Src, r.Dst, r.Len)
	}
	// Output:
	// 10 0 10
	// 20 100 10
	// 0 300 10
}

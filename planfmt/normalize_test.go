package planfmt

import (
	stdcmp "cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
)

// collect gathers spans and runs through the public iterators.
func collect(n *Normalized) (spans []Span, runs []Run) {
	n.ForEachSpan(func(src, dst, l uint64) bool {
		spans = append(spans, Span{src, dst, l})
		return true
	})
	n.ForEachRun(func(dst, stream, l uint64) bool {
		runs = append(runs, Run{Dst: dst, Len: l, Stream: stream})
		return true
	})
	return spans, runs
}

func rowsPlan(rowSize, tableRows uint64, ids []int64, l Layout, srcExt, dstExt uint64) *Plan {
	return &Plan{Form: FormRows, SrcExtent: srcExt, DstExtent: dstExt,
		Rows: Rows{RowSize: rowSize, TableRows: tableRows, IDs64: ids, Layout: l}}
}

func rangesPlan(srcExt, dstExt uint64, rs ...Range) *Plan {
	return &Plan{Form: FormRanges, SrcExtent: srcExt, DstExtent: dstExt, Ranges: rs}
}

func hist(pairs ...uint64) (h [64]uint64) {
	for i := 0; i < len(pairs); i += 2 {
		h[pairs[i]] = pairs[i+1]
	}
	return h
}

func TestNormalizeCases(t *testing.T) {
	strided := func(cols, a, b uint64) Layout {
		return Layout{Kind: LayoutStrided, Cols: cols, RowStride: a, ColStride: b}
	}
	tests := []struct {
		name  string
		plan  *Plan
		spans []Span
		runs  []Run
		geom  Summary // checked when Bytes != 0 or spans is empty
		comps []Completion
	}{
		{
			name:  "ranges coalesce in both",
			plan:  rangesPlan(100, 200, Range{0, 100, 10}, Range{10, 110, 10}, Range{20, 120, 5}),
			spans: []Span{{0, 100, 25}},
			runs:  []Run{{Dst: 100, Len: 25}},
			geom:  Summary{Bytes: 25, Fragments: 3, Spans: 1, Runs: 1, SpanLog2: hist(4, 1), SrcLo: 0, SrcHi: 25, DstLo: 100, DstHi: 125, Completions: 1},
		},
		{
			name:  "dst contiguous src not: one run two spans",
			plan:  rangesPlan(200, 16, Range{0, 0, 8}, Range{100, 8, 8}),
			spans: []Span{{0, 0, 8}, {100, 8, 8}},
			runs:  []Run{{Dst: 0, Len: 16}},
		},
		{
			name:  "src contiguous dst gap: two runs",
			plan:  rangesPlan(16, 100, Range{0, 0, 8}, Range{8, 50, 8}),
			spans: []Span{{0, 0, 8}, {8, 50, 8}},
			runs:  []Run{{Dst: 0, Len: 8}, {Dst: 50, Len: 8, Stream: 8}},
		},
		{
			name:  "zero-length range is transparent",
			plan:  rangesPlan(100, 100, Range{0, 0, 8}, Range{50, 50, 0}, Range{8, 8, 8}),
			spans: []Span{{0, 0, 16}},
			runs:  []Run{{Dst: 0, Len: 16}},
			geom:  Summary{Bytes: 16, Fragments: 2, Skipped: 1, Spans: 1, Runs: 1, SpanLog2: hist(4, 1), SrcHi: 16, DstHi: 16, Completions: 1},
		},
		{
			name:  "unsorted without overlap",
			plan:  rangesPlan(100, 200, Range{0, 100, 10}, Range{10, 0, 10}),
			spans: []Span{{0, 100, 10}, {10, 0, 10}},
			runs:  []Run{{Dst: 100, Len: 10}, {Dst: 0, Len: 10, Stream: 10}},
		},
		{
			name:  "zero-length at an occupied destination",
			plan:  rangesPlan(100, 100, Range{0, 5, 0}, Range{0, 0, 10}, Range{0, 5, 0}),
			spans: []Span{{0, 0, 10}},
			runs:  []Run{{Dst: 0, Len: 10}},
		},
		{
			name: "completion spans cut coalescing",
			plan: func() *Plan {
				p := rangesPlan(12, 12, Range{0, 0, 4}, Range{4, 4, 4}, Range{8, 8, 4})
				p.CompletionEnds = []uint32{1, 3}
				return p
			}(),
			spans: []Span{{0, 0, 4}, {4, 4, 8}},
			runs:  []Run{{Dst: 0, Len: 4}, {Dst: 4, Len: 8, Stream: 4}},
			comps: []Completion{
				{FragStart: 0, FragEnd: 1, SpanStart: 0, SpanEnd: 1, RunStart: 0, RunEnd: 1, Stream: 0, Bytes: 4},
				{FragStart: 1, FragEnd: 3, SpanStart: 1, SpanEnd: 2, RunStart: 1, RunEnd: 2, Stream: 4, Bytes: 8},
			},
		},
		{
			name:  "histogram buckets",
			plan:  rangesPlan(5000, 5000, Range{0, 0, 1}, Range{10, 10, 2}, Range{20, 20, 3}, Range{30, 30, 1024}),
			spans: []Span{{0, 0, 1}, {10, 10, 2}, {20, 20, 3}, {30, 30, 1024}},
			runs:  []Run{{Dst: 0, Len: 1}, {Dst: 10, Len: 2, Stream: 1}, {Dst: 20, Len: 3, Stream: 3}, {Dst: 30, Len: 1024, Stream: 6}},
			geom:  Summary{Bytes: 1030, Fragments: 4, Spans: 4, Runs: 4, SpanLog2: hist(0, 1, 1, 2, 10, 1), SrcHi: 1054, DstHi: 1054, Completions: 1},
		},
		{
			name:  "rows: consecutive ids coalesce, -1 is transparent",
			plan:  rowsPlan(10, 100, []int64{5, 6, 7, -1, 9, 3}, Layout{}, 1000, 60),
			spans: []Span{{50, 0, 30}, {90, 40, 10}, {30, 50, 10}},
			runs:  []Run{{Dst: 0, Len: 30}, {Dst: 40, Len: 20, Stream: 30}},
			geom:  Summary{Bytes: 50, Fragments: 5, Skipped: 1, Spans: 3, Runs: 2, SpanLog2: hist(3, 2, 4, 1), SrcLo: 30, SrcHi: 100, DstLo: 0, DstHi: 60, Completions: 1},
		},
		{
			name:  "rows: token-major with packed heads is one span",
			plan:  rowsPlan(4, 10, []int64{0, 1, 2, 3, 4, 5}, strided(3, 12, 4), 40, 24),
			spans: []Span{{0, 0, 24}},
			runs:  []Run{{Dst: 0, Len: 24}},
		},
		{
			name:  "rows: head-major runs follow plan order",
			plan:  rowsPlan(4, 10, []int64{0, 1, 2, 3, 4, 5}, strided(3, 4, 8), 40, 24),
			spans: []Span{{0, 0, 4}, {4, 8, 4}, {8, 16, 4}, {12, 4, 4}, {16, 12, 4}, {20, 20, 4}},
			runs:  []Run{{Dst: 0, Len: 4}, {Dst: 8, Len: 4, Stream: 4}, {Dst: 16, Len: 4, Stream: 8}, {Dst: 4, Len: 4, Stream: 12}, {Dst: 12, Len: 4, Stream: 16}, {Dst: 20, Len: 4, Stream: 20}},
		},
		{
			name:  "rows: head-major neighbours meet across a skipped row",
			plan:  rowsPlan(4, 10, []int64{0, -1, 1, -1}, strided(2, 4, 8), 40, 16),
			spans: []Span{{0, 0, 8}},
			runs:  []Run{{Dst: 0, Len: 8}},
		},
		{
			name: "rows: completion ends cut a span",
			plan: func() *Plan {
				p := rowsPlan(2, 4, []int64{0, 1, 2, 3}, Layout{}, 8, 8)
				p.CompletionEnds = []uint32{2, 4}
				return p
			}(),
			spans: []Span{{0, 0, 4}, {4, 4, 4}},
			runs:  []Run{{Dst: 0, Len: 4}, {Dst: 4, Len: 4, Stream: 4}},
			comps: []Completion{
				{FragStart: 0, FragEnd: 2, SpanStart: 0, SpanEnd: 1, RunStart: 0, RunEnd: 1, Stream: 0, Bytes: 4},
				{FragStart: 2, FragEnd: 4, SpanStart: 1, SpanEnd: 2, RunStart: 1, RunEnd: 2, Stream: 4, Bytes: 4},
			},
		},
		{
			name:  "rows: interleaved lattice without overlap",
			plan:  rowsPlan(1, 10, []int64{0, 1, 2, 3, 4, 5}, strided(2, 2, 3), 10, 8),
			spans: []Span{{0, 0, 1}, {1, 3, 1}, {2, 2, 1}, {3, 5, 1}, {4, 4, 1}, {5, 7, 1}},
			runs:  []Run{{Dst: 0, Len: 1}, {Dst: 3, Len: 1, Stream: 1}, {Dst: 2, Len: 1, Stream: 2}, {Dst: 5, Len: 1, Stream: 3}, {Dst: 4, Len: 1, Stream: 4}, {Dst: 7, Len: 1, Stream: 5}},
		},
		{
			name: "rows: all skipped",
			plan: rowsPlan(8, 10, []int64{-1, -1}, Layout{}, 80, 16),
			geom: Summary{Skipped: 2, Completions: 1},
		},
		{
			name: "empty ranges",
			plan: rangesPlan(0, 0),
			geom: Summary{},
		},
		{
			name: "empty rows",
			plan: rowsPlan(8, 0, nil, Layout{}, 0, 0),
			geom: Summary{},
		},
	}
	var n Normalized
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, Normalize(&n, tc.plan))
			spans, runs := collect(&n)
			if diff := cmp.Diff(tc.spans, spans); diff != "" {
				t.Errorf("spans (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.runs, runs); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			if tc.geom.Bytes != 0 || len(tc.spans) == 0 {
				if diff := cmp.Diff(tc.geom, n.Summary()); diff != "" {
					t.Errorf("geometry (-want +got):\n%s", diff)
				}
			}
			if tc.comps != nil {
				if diff := cmp.Diff(tc.comps, n.Completions()); diff != "" {
					t.Errorf("completions (-want +got):\n%s", diff)
				}
			}
			ref := refNormalize(tc.plan)
			require.Equal(t, ref.geom, n.Summary(), "reference geometry")
		})
	}
}

func TestNormalizeRejects(t *testing.T) {
	strided := func(cols, a, b uint64) Layout {
		return Layout{Kind: LayoutStrided, Cols: cols, RowStride: a, ColStride: b}
	}
	withEnds := func(p *Plan, ends ...uint32) *Plan { p.CompletionEnds = ends; return p }
	tests := []struct {
		name string
		plan *Plan
		want error // the typed error, compared field by field
		is   error // the sentinel
	}{
		{"overlap unsorted", rangesPlan(100, 200, Range{0, 100, 10}, Range{0, 0, 10}, Range{0, 105, 3}),
			&OverlapError{First: 0, Second: 2, FirstDst: 100, FirstLen: 10, SecondDst: 105, SecondLen: 3}, ErrOverlap},
		{"overlap adjacent in plan order", rangesPlan(100, 200, Range{0, 0, 10}, Range{0, 5, 10}),
			&OverlapError{First: 0, Second: 1, FirstDst: 0, FirstLen: 10, SecondDst: 5, SecondLen: 10}, ErrOverlap},
		{"overlap same start", rangesPlan(100, 200, Range{0, 50, 1}, Range{0, 0, 10}, Range{0, 50, 4}),
			&OverlapError{First: 0, Second: 2, FirstDst: 50, FirstLen: 1, SecondDst: 50, SecondLen: 4}, ErrOverlap},
		{"overlap nested far apart", rangesPlan(100, 200, Range{0, 0, 100}, Range{0, 150, 1}, Range{0, 99, 1}),
			&OverlapError{First: 0, Second: 2, FirstDst: 0, FirstLen: 100, SecondDst: 99, SecondLen: 1}, ErrOverlap},
		{"src past extent", rangesPlan(100, 200, Range{0, 0, 10}, Range{95, 10, 6}),
			&BoundsError{Index: 1, Field: "src", Off: 95, Len: 6, Limit: 100}, ErrBounds},
		{"dst wraps", rangesPlan(100, math.MaxUint64, Range{0, math.MaxUint64 - 1, 5}),
			&BoundsError{Index: 0, Field: "dst", Off: math.MaxUint64 - 1, Len: 5, Limit: math.MaxUint64}, ErrBounds},
		{"zero-length range past extent", rangesPlan(100, 200, Range{101, 0, 0}),
			&BoundsError{Index: 0, Field: "src", Off: 101, Len: 0, Limit: 100}, ErrBounds},
		{"id at table size", rowsPlan(8, 1000, []int64{1, 2, 1000}, Layout{}, 8000, 24),
			&BoundsError{Index: 2, Field: "id", Off: 1000, Limit: 1000}, ErrBounds},
		{"id below -1", rowsPlan(8, 1000, []int64{-2}, Layout{}, 8000, 8),
			&BoundsError{Index: 0, Field: "id", Off: uint64(1<<64 - 2), Limit: 1000}, ErrBounds},
		{"table past src extent", rowsPlan(8, 1000, []int64{1}, Layout{}, 7999, 8),
			&BoundsError{Index: -1, Field: "src", Off: 0, Len: 8000, Limit: 7999}, ErrBounds},
		{"table size overflows", rowsPlan(1<<40, 1<<40, []int64{1}, Layout{}, math.MaxUint64, 1<<40),
			&BoundsError{Index: -1, Field: "src", Off: 0, Len: math.MaxUint64, Limit: math.MaxUint64}, ErrBounds},
		{"layout past dst extent", rowsPlan(8, 10, []int64{1, 2, 3, 4}, strided(2, 16, 8), 80, 31),
			&BoundsError{Index: -1, Field: "dst", Off: 0, Len: 32, Limit: 31}, ErrBounds},
		{"contiguous past dst extent", rowsPlan(8, 10, []int64{1, 2, 3}, Layout{}, 80, 23),
			&BoundsError{Index: -1, Field: "dst", Off: 0, Len: 24, Limit: 23}, ErrBounds},
		{"column stride below row size", rowsPlan(10, 10, []int64{1, 2, 3, 4}, strided(2, 20, 8), 100, 100),
			&OverlapError{First: 0, Second: 1, FirstDst: 0, FirstLen: 10, SecondDst: 8, SecondLen: 10}, ErrOverlap},
		{"row stride below row size", rowsPlan(10, 10, []int64{1, 2, 3, 4}, strided(2, 5, 50), 100, 100),
			&OverlapError{First: 0, Second: 2, FirstDst: 0, FirstLen: 10, SecondDst: 5, SecondLen: 10}, ErrOverlap},
		{"interleaved lattice collides", rowsPlan(1, 10, []int64{0, 1, 2, 3, 4, 5}, strided(2, 2, 4), 10, 9),
			&OverlapError{First: 1, Second: 4, FirstDst: 4, FirstLen: 1, SecondDst: 4, SecondLen: 1}, ErrOverlap},
		{"one column, stride below row size", rowsPlan(10, 10, []int64{1, 2}, strided(1, 9, 0), 100, 100),
			&OverlapError{First: 0, Second: 1, FirstDst: 0, FirstLen: 10, SecondDst: 9, SecondLen: 10}, ErrOverlap},
		{"zero row size", rowsPlan(0, 10, []int64{1}, Layout{}, 100, 100), nil, ErrInvalid},
		{"table over MaxInt64", rowsPlan(1, math.MaxInt64+1, nil, Layout{}, math.MaxUint64, 100), nil, ErrInvalid},
		{"both id slices", func() *Plan {
			p := rowsPlan(1, 10, []int64{1}, Layout{}, 100, 100)
			p.Rows.IDs32 = []int32{1}
			return p
		}(), nil, ErrInvalid},
		{"zero cols", rowsPlan(1, 10, []int64{1}, strided(0, 1, 1), 100, 100), nil, ErrInvalid},
		{"ids not a multiple of cols", rowsPlan(1, 10, []int64{1, 2, 3}, strided(2, 2, 1), 100, 100), nil, ErrInvalid},
		{"contiguous with strides", rowsPlan(1, 10, []int64{1}, Layout{RowStride: 4}, 100, 100), nil, ErrInvalid},
		{"unknown layout", rowsPlan(1, 10, []int64{1}, Layout{Kind: 7}, 100, 100), nil, ErrInvalid},
		{"unknown form", &Plan{Form: 9}, nil, ErrInvalid},
		{"zero form", &Plan{}, nil, ErrInvalid},
		{"ends not increasing", withEnds(rangesPlan(10, 10, Range{0, 0, 1}, Range{1, 1, 1}), 1, 1, 2), nil, ErrInvalid},
		{"ends short of n", withEnds(rangesPlan(10, 10, Range{0, 0, 1}, Range{1, 1, 1}), 1), nil, ErrInvalid},
		{"ends past n", withEnds(rangesPlan(10, 10, Range{0, 0, 1}, Range{1, 1, 1}), 1, 3), nil, ErrInvalid},
		{"zero end", withEnds(rowsPlan(1, 10, []int64{1}, Layout{}, 100, 100), 0, 1), nil, ErrInvalid},
		{"ends on empty plan", withEnds(rangesPlan(10, 10), 1), nil, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var n Normalized
			require.NoError(t, Normalize(&n, rangesPlan(4, 4, Range{0, 0, 4})))
			before := viewOf(tc.plan)
			err := Normalize(&n, tc.plan)
			require.ErrorIs(t, err, tc.is)
			if tc.want != nil {
				if diff := cmp.Diff(tc.want, err); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
			}
			require.NotEmpty(t, err.Error())
			require.Equal(t, Summary{}, n.Summary(), "result must be empty after an error")
			require.Empty(t, n.Completions())
			require.Equal(t, before, viewOf(tc.plan), "plan must be unchanged")
			if tc.is != ErrOverlap || tc.plan.Form == FormRows {
				_, encErr := AppendPlan(nil, tc.plan)
				require.ErrorIs(t, encErr, tc.is, "the encoder must refuse what Normalize refuses")
			}
		})
	}
}

// TestNormalizeMatchesReference checks Normalize against the brute-force
// reference on random plans, valid and broken.
func TestNormalizeMatchesReference(t *testing.T) {
	rng := newRand(t)
	var n Normalized
	for i := range 600 {
		p := randPlan(rng)
		if i%3 == 0 {
			breakPlan(rng, p)
		}
		want := refCheck(p)
		err := Normalize(&n, p)
		if want != nil {
			require.ErrorIs(t, err, want, "plan %d: %+v", i, viewOf(p))
			continue
		}
		require.NoError(t, err, "plan %d", i)
		ref := refNormalize(p)
		spans, runs := collect(&n)
		require.Equal(t, ref.geom, n.Summary(), "plan %d geometry", i)
		if diff := cmp.Diff(ref.spans, spans); diff != "" {
			t.Fatalf("plan %d spans (-ref +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(ref.runs, runs); diff != "" {
			t.Fatalf("plan %d runs (-ref +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(ref.comps, n.Completions(), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("plan %d completions (-ref +got):\n%s", i, diff)
		}
		// Per-completion iteration covers the same spans in order.
		var again []Span
		for j := range n.Completions() {
			require.True(t, n.ForEachSpanIn(j, func(s, d, l uint64) bool {
				again = append(again, Span{s, d, l})
				return true
			}))
		}
		require.Equal(t, spans, again)
	}
}

// breakPlan injects one fault into a valid plan.
func breakPlan(rng *rand.Rand, p *Plan) {
	if p.Form == FormRows {
		r := &p.Rows
		n := r.Len()
		switch {
		case n > 0 && rng.IntN(2) == 0:
			i := rng.IntN(n)
			bad := []int64{int64(r.TableRows), -2, int64(r.TableRows) + 7}[rng.IntN(3)]
			if r.IDs32 != nil {
				r.IDs32[i] = int32(max(bad, math.MinInt32))
				if bad > math.MaxInt32 {
					r.IDs32[i] = -5
				}
			} else {
				r.IDs64[i] = bad
			}
		case n > 0 && rng.IntN(2) == 0:
			p.DstExtent = refDst(r, n-1) + r.RowSize - 1 - min(refDst(r, n-1)+r.RowSize-1, rng.Uint64N(3))
		default:
			p.SrcExtent = r.SrcBase + r.TableRows*r.RowSize - 1
		}
		return
	}
	if len(p.Ranges) == 0 {
		p.Ranges = append(p.Ranges, Range{Src: p.SrcExtent, Dst: 0, Len: 1})
		return
	}
	i := rng.IntN(len(p.Ranges))
	switch rng.IntN(3) {
	case 0:
		p.Ranges[i].Src = p.SrcExtent - p.Ranges[i].Len + 1 + rng.Uint64N(3)
	case 1:
		p.Ranges[i].Len = p.DstExtent - p.Ranges[i].Dst + 1
	default:
		j := rng.IntN(len(p.Ranges))
		p.Ranges[i].Dst = p.Ranges[j].Dst
		p.Ranges[i].Len = max(p.Ranges[i].Len, 1)
		p.Ranges[j].Len = max(p.Ranges[j].Len, 1)
		if p.Ranges[i].Dst+p.Ranges[i].Len > p.DstExtent || p.Ranges[j].Dst+p.Ranges[j].Len > p.DstExtent {
			p.DstExtent += 2
		}
	}
}

func TestNormalizeIterationStops(t *testing.T) {
	for _, p := range []*Plan{
		rangesPlan(100, 100, Range{0, 0, 1}, Range{10, 10, 1}, Range{20, 20, 1}),
		rowsPlan(1, 100, []int64{0, 10, 20}, Layout{Kind: LayoutStrided, Cols: 1, RowStride: 10}, 100, 100),
	} {
		var n Normalized
		require.NoError(t, Normalize(&n, p))
		calls := 0
		n.ForEachSpan(func(_, _, _ uint64) bool { calls++; return calls < 2 })
		require.Equal(t, 2, calls, p.Form.String())
		calls = 0
		n.ForEachRun(func(_, _, _ uint64) bool { calls++; return false })
		require.Equal(t, 1, calls, p.Form.String())
		require.False(t, n.ForEachSpanIn(0, func(_, _, _ uint64) bool { return false }))
	}
}

func TestNormalizeAllocs(t *testing.T) {
	rng := newRand(t)
	rows := randRowsPlan(rng)
	for rows.Rows.Len() == 0 {
		rows = randRowsPlan(rng)
	}
	sorted := randRangesPlan(rng)
	unsorted := rangesPlan(1000, 1000)
	for i := range 50 {
		unsorted.Ranges = append(unsorted.Ranges, Range{Src: uint64(i), Dst: uint64(49-i) * 3, Len: 2})
	}
	for _, p := range []*Plan{rows, sorted, unsorted} {
		var n Normalized
		require.NoError(t, Normalize(&n, p))
		allocs := testing.AllocsPerRun(50, func() {
			if err := Normalize(&n, p); err != nil {
				t.Fatal(err)
			}
			n.ForEachSpan(func(_, _, _ uint64) bool { return true })
			n.ForEachRun(func(_, _, _ uint64) bool { return true })
		})
		require.Zero(t, allocs, p.Form.String())
	}
}

func TestRadixSortSpans(t *testing.T) {
	rng := newRand(t)
	for round := range 200 {
		n := rng.IntN(300)
		a := make([]dstSpan, n)
		// Vary which bits vary: narrow windows, wide ones, duplicates.
		base := rng.Uint64() &^ (1<<uint(rng.IntN(64)) - 1)
		spread := rng.Uint64N(64)
		for i := range a {
			d := base + rng.Uint64()>>spread
			if i > 0 && rng.IntN(5) == 0 {
				d = a[rng.IntN(i)].dst
			}
			a[i] = dstSpan{dst: d, end: uint64(i)} // end records input order
		}
		want := slices.Clone(a)
		slices.SortStableFunc(want, func(x, y dstSpan) int { return stdcmp.Compare(x.dst, y.dst) })
		got := RadixSort(slices.Clone(a), make([]dstSpan, n), spanDst)
		require.Equal(t, want, got, "round %d", round)
	}
}

// TestGeometryAliases: the deprecated names still say the same as
// Summary for one release.
func TestGeometryAliases(t *testing.T) {
	var n Normalized
	require.NoError(t, Normalize(&n, rangesPlan(100, 100, Range{Src: 0, Dst: 10, Len: 20})))
	var g Geometry = n.Geometry()
	require.Equal(t, n.Summary(), g)
	require.Equal(t, uint64(20), g.Bytes)
}

// TestNormalizeDenseBlocks covers walkRowSpans' block walk: packed plans
// long enough for many denseBlock blocks, with runs of consecutive ids that
// cross block edges and -1s in a few blocks (at their first and last ids
// too), against the reference.
func TestNormalizeDenseBlocks(t *testing.T) {
	rng := newRand(t)
	var n Normalized
	for i := range 200 {
		count := 1 + rng.IntN(5*denseBlock)
		strided := i%2 == 1
		if strided {
			count = 7 * (1 + count/7)
		}
		ids := make([]int64, count)
		id := int64(rng.IntN(1000))
		for j := range ids {
			if rng.IntN(3) == 0 {
				id = int64(rng.IntN(1000)) // a break; otherwise the run goes on
			} else {
				id++
			}
			ids[j] = id
		}
		for range rng.IntN(4) {
			switch at := rng.IntN(count); rng.IntN(3) {
			case 0:
				ids[at] = -1
			case 1:
				ids[at-at%denseBlock] = -1
			default:
				ids[min(at-at%denseBlock+denseBlock-1, count-1)] = -1
			}
		}
		p := rowsPlan(8, 2000, ids, Layout{}, 2000*8, uint64(count)*8)
		if strided {
			// Token rows of 7 packed heads, back to back or with a gap.
			a := uint64(7 * 8)
			if i%4 == 3 {
				a += 8
			}
			p.Rows.Layout = Layout{Kind: LayoutStrided, Cols: 7, RowStride: a, ColStride: 8}
			p.DstExtent = uint64(count/7) * a
		}
		require.NoError(t, refCheck(p), "plan %d", i)
		require.NoError(t, Normalize(&n, p), "plan %d", i)
		ref := refNormalize(p)
		spans, runs := collect(&n)
		require.Equal(t, ref.geom, n.Summary(), "plan %d geometry", i)
		require.Equal(t, ref.spans, spans, "plan %d spans", i)
		require.Equal(t, ref.runs, runs, "plan %d runs", i)
	}
}

// TestNormalizeParallelMatchesSerial: the blocked normalization gives
// Normalize's result (summary, spans, runs, completions) and Normalize's
// error, whatever the split, on random and broken plans and on long packed
// plans with runs across block edges.
func TestNormalizeParallelMatchesSerial(t *testing.T) {
	rng := newRand(t)
	var ser, par Normalized
	for i := range 1500 {
		var p *Plan
		if i%2 == 0 {
			p = randPlan(rng)
		} else {
			ids := make([]int64, 1+rng.IntN(600))
			id := int64(rng.IntN(1000))
			for j := range ids {
				if id++; rng.IntN(4) == 0 {
					id = int64(rng.IntN(1000))
				}
				ids[j] = id
				if rng.IntN(50) == 0 {
					ids[j] = -1
				}
			}
			p = rowsPlan(8, 2000, ids, Layout{}, 2000*8, uint64(len(ids))*8)
		}
		if i%5 == 0 {
			breakPlan(rng, p)
		}
		errS := Normalize(&ser, p)
		var run Parallel = inOrder(8)
		if i%3 == 0 {
			run = goPar(8)
		}
		errP := normalize(&par, p, run, 2+rng.IntN(7), 1+rng.IntN(40))
		if errS != nil {
			require.Error(t, errP, "plan %d", i)
			require.Equal(t, errS.Error(), errP.Error(), "plan %d", i)
			continue
		}
		require.NoError(t, errP, "plan %d", i)
		require.Equal(t, ser.Summary(), par.Summary(), "plan %d summary", i)
		require.Equal(t, ser.Completions(), par.Completions(), "plan %d completions", i)
		sS, rS := collect(&ser)
		sP, rP := collect(&par)
		require.Equal(t, sS, sP, "plan %d spans", i)
		require.Equal(t, rS, rP, "plan %d runs", i)
	}
}

// inOrder is a Parallel that runs the pieces on the caller, in order.
type inOrder int

func (w inOrder) Len() int { return int(w) }
func (inOrder) Run(_, n int, c Chunks) error {
	for i := range n {
		c.RunChunk(i)
	}
	return nil
}

// goPar is a Parallel that runs the pieces on goroutines of their own.
type goPar int

func (w goPar) Len() int { return int(w) }
func (goPar) Run(_, n int, c Chunks) error {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { c.RunChunk(i) })
	}
	wg.Wait()
	return nil
}

// refuses is a closed Parallel.
type refuses int

func (w refuses) Len() int                   { return int(w) }
func (refuses) Run(_, _ int, _ Chunks) error { return errors.New("closed") }

// TestNormalizeParallelAllocsAndRefusal: NormalizeParallel allocates nothing
// once warm (the split's job lives in the Normalized), and a Parallel that
// refuses the split leaves the result Normalize's.
func TestNormalizeParallelAllocsAndRefusal(t *testing.T) {
	rng := newRand(t)
	ids := make([]int64, 4*ParallelMinBlock)
	for i := range ids {
		ids[i] = int64(rng.IntN(1 << 20))
		if rng.IntN(100) == 0 {
			ids[i] = -1
		}
	}
	p := rowsPlan(8, 1<<20, ids, Layout{}, 8<<20, uint64(len(ids))*8)
	var ser, par Normalized
	require.NoError(t, Normalize(&ser, p))
	require.NoError(t, NormalizeParallel(&par, p, inOrder(4)))
	require.Equal(t, ser.Summary(), par.Summary())
	allocs := testing.AllocsPerRun(20, func() {
		if err := NormalizeParallel(&par, p, inOrder(4)); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
	require.NoError(t, NormalizeParallel(&par, p, refuses(4)))
	require.Equal(t, ser.Summary(), par.Summary())
	_, rS := collect(&ser)
	_, rP := collect(&par)
	require.Equal(t, rS, rP)
}

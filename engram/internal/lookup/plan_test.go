package lookup

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// buildPlan plans a call of t tokens over cols into out.
func buildPlan(cols []Column, t int, out Output) []task {
	var s scratch
	s.grow(len(cols))
	return s.plan.build(cols, t, len(cols), cols[0].RowBytes, out)
}

// TestPlanTasks pins the planner's choice for the cases it is for: the
// tasks it makes, as (rows, idOff, idStride, outOff, stride) with the
// column whose table they read.
func TestPlanTasks(t *testing.T) {
	const rowBytes = 100
	a := make([]byte, 10*rowBytes)
	b := make([]byte, 10*rowBytes)
	colA := Column{Rows: a, NumRows: 10, RowBytes: rowBytes}
	colA5 := colA
	colA5.Offset = 5
	colB := Column{Rows: b, NumRows: 10, RowBytes: rowBytes}
	repeat := func(pattern ...Column) []Column {
		var cols []Column
		for len(cols) < 6 {
			cols = append(cols, pattern...)
		}
		return cols[:6]
	}
	cases := []struct {
		name string
		cols []Column
		t    int
		out  Output
		want []task
	}{
		{
			name: "same table, token-major: one gather of T*K rows",
			cols: repeat(colA), t: 4, out: TokenMajor(nil, 4, 6, rowBytes),
			want: []task{{col: 0, rows: 24, idOff: 0, idStride: 1, outOff: 0, stride: 100}},
		},
		{
			name: "same table, padded token-major: one gather per column",
			cols: repeat(colA), t: 8, out: Output{Off: 3, TStride: 700, KStride: 100},
			want: []task{
				{0, 8, 0, 6, 3, 700}, {1, 8, 1, 6, 103, 700}, {2, 8, 2, 6, 203, 700},
				{3, 8, 3, 6, 303, 700}, {4, 8, 4, 6, 403, 700}, {5, 8, 5, 6, 503, 700},
			},
		},
		{
			name: "same table, head-major, T >= K: one gather per column",
			cols: repeat(colA), t: 6, out: HeadMajor(nil, 6, 6, rowBytes),
			want: []task{
				{0, 6, 0, 6, 0, 100}, {1, 6, 1, 6, 600, 100}, {2, 6, 2, 6, 1200, 100},
				{3, 6, 3, 6, 1800, 100}, {4, 6, 4, 6, 2400, 100}, {5, 6, 5, 6, 3000, 100},
			},
		},
		{
			name: "same table, head-major, T < K: one gather per token",
			cols: repeat(colA), t: 2, out: HeadMajor(nil, 2, 6, rowBytes),
			want: []task{{0, 6, 0, 1, 0, 200}, {0, 6, 6, 1, 100, 200}},
		},
		{
			name: "T = 1, head-major: one gather",
			cols: repeat(colA), t: 1, out: HeadMajor(nil, 1, 6, rowBytes),
			want: []task{{0, 6, 0, 1, 0, 100}},
		},
		{
			name: "alternating tables, token-major: one gather per table",
			cols: repeat(colA, colB), t: 5, out: TokenMajor(nil, 5, 6, rowBytes),
			want: []task{{0, 15, 0, 2, 0, 200}, {1, 15, 1, 2, 100, 200}},
		},
		{
			name: "same table, two offsets alternating, T = 1",
			cols: repeat(colA, colA5), t: 1, out: TokenMajor(nil, 1, 6, rowBytes),
			want: []task{{0, 3, 0, 2, 0, 200}, {1, 3, 1, 2, 100, 200}},
		},
		{
			name: "halves, token-major, T = 2: one gather per token and half",
			cols: []Column{colA, colA, colA, colB, colB, colB}, t: 2, out: TokenMajor(nil, 2, 6, rowBytes),
			want: []task{{0, 3, 0, 1, 0, 100}, {0, 3, 6, 1, 600, 100}, {3, 3, 3, 1, 300, 100}, {3, 3, 9, 1, 900, 100}},
		},
		{
			name: "runs broken, T = 1: one gather per run",
			cols: []Column{colA, colA, colB, colA, colB, colA}, t: 1, out: TokenMajor(nil, 1, 6, rowBytes),
			want: []task{{2, 2, 2, 2, 200, 200}, {0, 2, 0, 1, 0, 100}, {0, 2, 3, 2, 300, 200}},
		},
		{
			name: "single column of a table: a strided gather",
			cols: []Column{colA, colB, colA5}, t: 3, out: TokenMajor(nil, 3, 3, rowBytes),
			want: []task{{0, 3, 0, 3, 0, 300}, {1, 3, 1, 3, 100, 300}, {2, 3, 2, 3, 200, 300}},
		},
		{
			name: "one row: strides made valid",
			cols: []Column{colA}, t: 1, out: Output{Off: 9},
			want: []task{{0, 1, 0, 1, 9, 100}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := buildPlan(c.cols, c.t, c.out)
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(task{})); diff != "" {
				t.Fatalf("tasks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanCoversEveryRowOnce checks, on random column sharings and
// layouts, that the tasks name every (t, k) exactly once with the right
// table, and never more tasks than columns (the scratch holds K).
func TestPlanCoversEveryRowOnce(t *testing.T) {
	r := newRand(t)
	for i := range 300 {
		k := 1 + r.IntN(30)
		tt := 1 + r.IntN(12)
		mode := shareModes[r.IntN(len(shareModes))]
		layout := layouts[r.IntN(len(layouts))]
		t.Run(fmt.Sprintf("%d/T=%d/K=%d/%s/%s", i, tt, k, mode, layout), func(t *testing.T) {
			cols := randomColumns(r, mode, k, 8, false)
			out := newOutput(r, layout, tt, k, 8)
			tasks := buildPlan(cols, tt, out)
			require.LessOrEqual(t, len(tasks), k)
			seen := make(map[int]bool)
			for _, tk := range tasks {
				for i := range tk.rows {
					id := tk.idOff + i*tk.idStride
					pos, kk := id/k, id%k
					require.Less(t, pos, tt)
					require.False(t, seen[id], "id %d twice", id)
					seen[id] = true
					require.True(t, sameTable(&cols[tk.col], &cols[kk]), "id %d read from column %d's table", id, tk.col)
					require.Equal(t, out.Off+pos*out.TStride+kk*out.KStride, tk.outOff+i*tk.stride, "output of id %d", id)
				}
			}
			require.Len(t, seen, tt*k)
		})
	}
}

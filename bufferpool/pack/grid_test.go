package pack

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// gridCase builds a grid for [t,k] ids of rowBytes-byte rows.
type gridCase struct {
	name string
	grid func(t, k, rowBytes int) Grid
}

var gridCases = []gridCase{
	{"token-major", TokenMajor},
	{"head-major", HeadMajor},
	{"token-major-padded", func(t, k, r int) Grid {
		return Grid{T: t, K: k, RowBytes: r, Off: 3, KStride: r + 5, TStride: k*(r+5) + 9}
	}},
	{"head-major-padded", func(t, k, r int) Grid {
		return Grid{T: t, K: k, RowBytes: r, Off: 1, TStride: r + 2, KStride: t*(r+2) + 7}
	}},
	{"transposed-ids", func(t, k, r int) Grid {
		// ids stored [K,T]; output token-major.
		return Grid{T: t, K: k, RowBytes: r, IDTStride: 1, IDKStride: t}
	}},
	{"biased", func(t, k, r int) Grid {
		g := TokenMajor(t, k, r)
		g.Bias = 500
		return g
	}},
}

// gridIDs returns ids for g naming rows of a tableRows-row table, with about
// one in five -1 and out-of-range values between the used positions.
func gridIDs[I ID](r *rand.Rand, g Grid, tableRows int) []I {
	d := g.dense()
	n := (d.T-1)*d.IDTStride + (d.K-1)*d.IDKStride + 1
	ids := make([]I, n)
	for i := range ids {
		ids[i] = I(int64(tableRows) + g.Bias + 99)
	}
	for t := range d.T {
		for k := range d.K {
			id := I(int64(r.IntN(tableRows)) + g.Bias)
			if r.IntN(5) == 0 {
				id = -1
			}
			ids[t*d.IDTStride+k*d.IDKStride] = id
		}
	}
	return ids
}

func gridLen(g Grid) int {
	d := g.dense()
	return d.Off + (d.T-1)*d.TStride + (d.K-1)*d.KStride + d.RowBytes + 13
}

func TestGatherGrid(t *testing.T) {
	r := newRand(t)
	shapes := [][2]int{{9, 3}, {3, 9}, {1, 5}, {6, 1}, {4, 4}}
	for _, rowBytes := range []int{264, 64, 4096, 7} {
		for _, c := range gridCases {
			for _, shape := range shapes {
				g := c.grid(shape[0], shape[1], rowBytes)
				name := fmt.Sprintf("R=%d/%s/%dx%d", rowBytes, c.name, shape[0], shape[1])
				t.Run(name+"/int32", func(t *testing.T) { testGrid[int32](t, r, g) })
				t.Run(name+"/int64", func(t *testing.T) { testGrid[int64](t, r, g) })
			}
		}
	}
}

func testGrid[I ID](t *testing.T, r *rand.Rand, g Grid) {
	const tableRows = 23
	table := randomBytes(r, tableRows*g.RowBytes)
	ids := gridIDs[I](r, g, tableRows)
	poison := randomBytes(r, gridLen(g))
	want := bytes.Clone(poison)
	refGrid(want, table, ids, g)

	dst := bytes.Clone(poison)
	require.NoError(t, GatherGrid(dst, table, ids, g))
	requireSameBytes(t, want, dst, "GatherGrid")

	dst = bytes.Clone(poison)
	require.NoError(t, CheckGatherGrid(dst, table, ids, g))
	GatherGridUnchecked(dst, table, ids, g)
	requireSameBytes(t, want, dst, "GatherGridUnchecked")
}

// TestGridMatchesColumns checks the 1-D form gathering one column per call,
// as the package documentation describes, against the grid form.
func TestGridMatchesColumns(t *testing.T) {
	r := newRand(t)
	const tt, k, rowBytes, tableRows = 11, 4, 264, 50
	table := randomBytes(r, tableRows*rowBytes)
	ids := gridIDs[int64](r, TokenMajor(tt, k, rowBytes), tableRows)
	for _, headMajor := range []bool{false, true} {
		g := TokenMajor(tt, k, rowBytes)
		if headMajor {
			g = HeadMajor(tt, k, rowBytes)
		}
		poison := randomBytes(r, tt*k*rowBytes)
		byGrid, byColumn := bytes.Clone(poison), bytes.Clone(poison)
		require.NoError(t, GatherGrid(byGrid, table, ids, g))
		for col := range k {
			l := Layout{Rows: tt, RowBytes: rowBytes, IDStride: k, Off: col * rowBytes, Stride: k * rowBytes}
			if headMajor {
				l.Off, l.Stride = col*tt*rowBytes, rowBytes
			}
			require.NoError(t, Gather(byColumn, table, ids[col:], l))
		}
		requireSameBytes(t, byGrid, byColumn, fmt.Sprintf("head-major %v", headMajor))
	}
}

func TestGatherGridReject(t *testing.T) {
	r := newRand(t)
	const tt, k, rowBytes, tableRows = 5, 3, 64, 20
	cases := []struct {
		name   string
		mutate func(g *Grid, dst, table *[]byte, ids []int32)
		err    error
		index  int // -1: no IDError
	}{
		{"row-size-0", func(g *Grid, _, _ *[]byte, _ []int32) { g.RowBytes = 0 }, ErrLayout, -1},
		{"negative-t", func(g *Grid, _, _ *[]byte, _ []int32) { g.T = -1 }, ErrLayout, -1},
		{"negative-offset", func(g *Grid, _, _ *[]byte, _ []int32) { g.Off = -2 }, ErrLayout, -1},
		{"negative-stride", func(g *Grid, _, _ *[]byte, _ []int32) { g.KStride = -64 }, ErrLayout, -1},
		{"negative-id-stride", func(g *Grid, _, _ *[]byte, _ []int32) { g.IDTStride = -1 }, ErrLayout, -1},
		{"k-stride-below-row", func(g *Grid, _, _ *[]byte, _ []int32) { g.KStride = rowBytes - 1 }, ErrLayout, -1},
		{"equal-strides", func(g *Grid, _, _ *[]byte, _ []int32) { g.KStride, g.TStride = rowBytes, rowBytes }, ErrLayout, -1},
		{"interleaved-strides", func(g *Grid, _, _ *[]byte, _ []int32) { g.KStride, g.TStride = 2*rowBytes, 3*rowBytes }, ErrLayout, -1},
		{"t-stride-inside-k-span", func(g *Grid, _, _ *[]byte, _ []int32) { g.TStride = k*rowBytes - 1 }, ErrLayout, -1},
		{"default-stride-overflow", func(g *Grid, _, _ *[]byte, _ []int32) { g.K, g.KStride, g.TStride = math.MaxInt/8, 64, 0 }, ErrLayout, -1},
		{"dst-short", func(_ *Grid, dst, _ *[]byte, _ []int32) { *dst = (*dst)[:tt*k*rowBytes-1] }, ErrBounds, -1},
		{"offset-past-end", func(g *Grid, _, _ *[]byte, _ []int32) { g.Off = 1 }, ErrBounds, -1},
		{"stride-overflow", func(g *Grid, _, _ *[]byte, _ []int32) { g.TStride = math.MaxInt / 2 }, ErrBounds, -1},
		{"ids-short", func(g *Grid, _, _ *[]byte, _ []int32) { g.IDTStride = k + 1 }, ErrBounds, -1},
		{"id-past-table", func(_ *Grid, _, _ *[]byte, ids []int32) { ids[2*k+1] = tableRows }, ErrBounds, 2*k + 1},
		{"id-minus-3", func(_ *Grid, _, _ *[]byte, ids []int32) { ids[k*tt-1] = -3 }, ErrBounds, k*tt - 1},
		{"bias", func(g *Grid, _, _ *[]byte, ids []int32) { g.Bias = 1; ids[4] = 0 }, ErrBounds, 4},
		{"dst-is-table", func(_ *Grid, dst, table *[]byte, _ []int32) { *dst = (*table)[:tt*k*rowBytes] }, ErrLayout, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := TokenMajor(tt, k, rowBytes)
			dst := randomBytes(r, tt*k*rowBytes)
			table := randomBytes(r, tableRows*rowBytes)
			ids := make([]int32, tt*k)
			for i := range ids {
				ids[i] = int32(r.IntN(tableRows-1)) + 1 // valid with Bias 0 and 1
			}
			ids[0] = 1
			c.mutate(&g, &dst, &table, ids)
			dstBefore, tableBefore := bytes.Clone(dst), bytes.Clone(table)
			for _, err := range []error{GatherGrid(dst, table, ids, g), CheckGatherGrid(dst, table, ids, g)} {
				require.ErrorIs(t, err, c.err)
				var idErr *IDError
				if c.index < 0 {
					require.NotErrorAs(t, err, &idErr)
				} else {
					require.ErrorAs(t, err, &idErr)
					require.Equal(t, c.index, idErr.Index)
					require.Equal(t, int64(ids[c.index]), idErr.ID)
				}
			}
			requireSameBytes(t, dstBefore, dst, "output")
			requireSameBytes(t, tableBefore, table, "table")
		})
	}
}

func TestDisjoint(t *testing.T) {
	cases := []struct {
		a, na, b, nb, size int
		ok                 bool
	}{
		{a: 0, na: 1, b: 0, nb: 1, size: 8, ok: true},   // one row
		{a: 8, na: 4, b: 0, nb: 1, size: 8, ok: true},   // one dimension, dense
		{a: 0, na: 1, b: 7, nb: 4, size: 8, ok: false},  // one dimension, overlapping
		{a: 8, na: 4, b: 32, nb: 3, size: 8, ok: true},  // token-major
		{a: 32, na: 3, b: 8, nb: 4, size: 8, ok: true},  // head-major, dims swapped
		{a: 8, na: 4, b: 31, nb: 3, size: 8, ok: false}, // tile one byte too long
		{a: 10, na: 4, b: 38, nb: 3, size: 8, ok: true}, // padded, exactly fits
		{a: 16, na: 2, b: 16, nb: 2, size: 8, ok: false},
		{a: 16, na: 3, b: 24, nb: 2, size: 8, ok: false}, // interleaved: provably disjoint only row by row, rejected
		{a: 0, na: 5, b: 8, nb: 1, size: 8, ok: false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d*%d+%d*%d/%d", c.a, c.na, c.b, c.nb, c.size), func(t *testing.T) {
			err := disjoint(c.a, c.na, c.b, c.nb, c.size)
			if c.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrLayout)
			}
		})
	}
}

package planfmt

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDstCutAgainstPlan cuts random valid plans into destination pieces of
// random sizes and checks them against the plan: every piece is a valid
// plan within its window (at most size bytes, more only for a single
// token or row), the pieces do not overlap and come in destination order,
// their carrying fragments (destinations moved by the piece's Off) are
// exactly the plan's, and their byte and fragment counts are right.
// Invalid plans are refused as Normalize refuses them; layouts whose
// tokens and columns interleave are refused with an *InvalidError.
func TestDstCutAgainstPlan(t *testing.T) {
	rng := newRand(t)
	var c DstCutter
	var norm, pn Normalized
	checked, interleaved := 0, 0
	for range 3000 {
		p := randPlan(rng)
		// Windows from a few hundred per plan to one for the whole
		// destination (a tiny size would cut huge ranges into more pieces
		// than Cut makes).
		floor := max(p.DstExtent/512, 1)
		size := floor + rng.Uint64N(max(p.DstExtent, 1)+64)
		if rng.IntN(3) == 0 {
			size = floor + rng.Uint64N(512)
		}
		pieces, err := c.Cut(p, size)
		if nerr := Normalize(&norm, p); nerr != nil {
			require.Error(t, err, "Normalize: %v", nerr)
			require.Equal(t, sentinelOf(nerr), sentinelOf(err), "Normalize: %v; Cut: %v", nerr, err)
			continue
		}
		if err != nil {
			var ie *InvalidError
			require.True(t, errors.As(err, &ie) && ie.Field == "Rows.Layout", "%v", err)
			require.Equal(t, LayoutStrided, p.Rows.Layout.Kind)
			interleaved++
			continue
		}
		type key struct{ src, dst, n uint64 }
		var want, got []key
		for _, f := range refFrags(p) {
			if f.carry && f.n > 0 {
				want = append(want, key{f.src, f.dst, f.n})
			}
		}
		var bytes uint64
		end := uint64(0)
		for i, pc := range pieces {
			require.NoError(t, Normalize(&pn, &pc.Plan), "piece %d", i)
			require.Empty(t, pc.Plan.CompletionEnds)
			require.Equal(t, p.SrcExtent, pc.Plan.SrcExtent)
			if pc.Plan.Form == FormRanges {
				require.LessOrEqual(t, pc.Plan.DstExtent, size, "piece %d", i)
			} else {
				// Larger than the window only when one row is.
				require.LessOrEqual(t, pc.Plan.DstExtent, max(size, p.Rows.RowSize), "piece %d", i)
			}
			require.GreaterOrEqual(t, pc.Off, end, "piece %d overlaps the one before or comes out of order", i)
			end = pc.Off + pc.Plan.DstExtent
			require.LessOrEqual(t, end, p.DstExtent)
			n, b := 0, uint64(0)
			for _, f := range refFrags(&pc.Plan) {
				if f.carry && f.n > 0 {
					got = append(got, key{f.src, f.dst + pc.Off, f.n})
					n++
					b += f.n
				}
			}
			require.Equal(t, b, pc.Bytes, "piece %d", i)
			require.Equal(t, n, pc.Fragments, "piece %d", i)
			require.Positive(t, n, "piece %d carries nothing", i)
			bytes += b
		}
		if p.Form == FormRanges {
			// A range crossing windows comes back as its pieces: every
			// piece lies inside one of the plan's ranges at the same
			// source offset, the pieces do not overlap, and they add up
			// to the plan's bytes: so they cover the plan exactly.
			slices.SortFunc(want, func(a, b key) int { return cmpU64(a.dst, b.dst) })
			slices.SortFunc(got, func(a, b key) int { return cmpU64(a.dst, b.dst) })
			for i, g := range got {
				j, _ := slices.BinarySearchFunc(want, g.dst, func(w key, d uint64) int { return cmpU64(w.dst, d) })
				if j == len(want) || want[j].dst > g.dst {
					j--
				}
				require.True(t, j >= 0 && g.dst+g.n <= want[j].dst+want[j].n && g.src-g.dst == want[j].src-want[j].dst,
					"piece %+v is not inside a range of the plan", g)
				if i > 0 {
					require.LessOrEqual(t, got[i-1].dst+got[i-1].n, g.dst, "pieces overlap")
				}
			}
		} else {
			cmp := func(a, b key) int { return cmpU64(a.dst, b.dst) }
			slices.SortFunc(want, cmp)
			slices.SortFunc(got, cmp)
			require.Equal(t, want, got)
		}
		require.Equal(t, norm.Summary().Bytes, bytes)
		checked++
	}
	require.Greater(t, checked, 1000)
	t.Logf("%d plans cut, %d interleaved layouts refused", checked, interleaved)
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestDstCutErrors(t *testing.T) {
	var c DstCutter
	// One token whose RowStride is 0 (valid: there is no second token),
	// and an empty plan.
	one := &Plan{Form: FormRows, SrcExtent: 64, DstExtent: 4 * 16 * 3, Rows: Rows{RowSize: 16, TableRows: 4, IDs32: []int32{0, 1, 2},
		Layout: Layout{Kind: LayoutStrided, Cols: 3, ColStride: 64}}}
	pieces, err := c.Cut(one, 100)
	require.NoError(t, err)
	require.Len(t, pieces, 3)
	empty := &Plan{Form: FormRows, SrcExtent: 64, DstExtent: 64, Rows: Rows{RowSize: 16, TableRows: 4,
		Layout: Layout{Kind: LayoutStrided, Cols: 3, RowStride: 16, ColStride: 16}}}
	pieces, err = c.Cut(empty, 100)
	require.NoError(t, err)
	require.Empty(t, pieces)
	_, err = c.Cut(nil, 1)
	require.ErrorIs(t, err, ErrInvalid)
	p := &Plan{Form: FormRanges, SrcExtent: 10, DstExtent: 10, Ranges: []Range{{Src: 0, Dst: 0, Len: 10}}}
	_, err = c.Cut(p, 0)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = c.Cut(&Plan{Form: FormRanges, SrcExtent: 1 << 40, DstExtent: 1 << 40, Ranges: []Range{{Len: 1 << 40}}}, 1)
	require.ErrorIs(t, err, ErrInvalid, "2^40 pieces are refused, not allocated")
	p.Ranges[0].Len = 11
	_, err = c.Cut(p, 4)
	require.ErrorIs(t, err, ErrBounds)
}

package planfmt

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// randCuts cuts [0, extent) into 1..6 shards; in the rows form most cuts
// fall on row boundaries (a cut inside a row is refused only when an id
// names that row).
func randCuts(rng *rand.Rand, p *Plan) []uint64 {
	ext := p.SrcExtent
	if ext == 0 {
		return nil
	}
	n := 1 + rng.IntN(6)
	set := map[uint64]bool{}
	for range n - 1 {
		var c uint64
		if p.Form == FormRows && p.Rows.TableRows > 0 && rng.IntN(5) != 0 {
			c = p.Rows.SrcBase + rng.Uint64N(p.Rows.TableRows+1)*p.Rows.RowSize
		} else {
			c = rng.Uint64N(ext + 1)
		}
		if c > 0 && c < ext {
			set[c] = true
		}
	}
	cuts := []uint64{0, ext}
	for c := range set {
		cuts = append(cuts, c)
	}
	slices.Sort(cuts)
	return cuts
}

// TestSplitAgainstPlan cuts random valid plans at random cuts and checks
// every shard against the plan: each shard is a valid plan of the same
// fragment count; fragment j's pieces over the shards are exactly
// fragment j of the plan (same destination, the source rebased by the
// shard's cut), and the shards' completion spans add up to the plan's.
func TestSplitAgainstPlan(t *testing.T) {
	rng := newRand(t)
	var sp Splitter
	var norm, sn Normalized
	checked := 0
	for range 3000 {
		p := randPlan(rng)
		if err := Normalize(&norm, p); err != nil {
			// The generators make some invalid plans: Split refuses them
			// as the engine's Normalize does.
			cut := p.SrcExtent
			if cut == 0 {
				continue
			}
			_, serr := sp.Split(p, []uint64{0, cut})
			require.Error(t, serr, "Normalize: %v", err)
			require.Equal(t, sentinelOf(err), sentinelOf(serr), "Normalize: %v; Split: %v", err, serr)
			continue
		}
		byDst := p.Form == FormRanges && rng.IntN(2) == 0
		var cuts []uint64
		var shards []Shard
		var err error
		if byDst {
			cuts = randCuts(rng, &Plan{Form: FormRanges, SrcExtent: p.DstExtent})
			if cuts == nil {
				continue
			}
			shards, err = sp.SplitDst(p, cuts)
		} else {
			cuts = randCuts(rng, p)
			if cuts == nil {
				continue
			}
			shards, err = sp.Split(p, cuts)
		}
		if err != nil {
			require.Equal(t, FormRows, p.Form, "only a row across a cut is refused: %v", err)
			require.ErrorIs(t, err, ErrInvalid)
			require.Contains(t, err.Error(), "across a cut")
			continue
		}
		checked++
		require.Len(t, shards, len(cuts)-1)
		// Compare on the cut side: with byDst, each fragment's source and
		// destination swap roles.
		frags := func(q *Plan) []frag {
			fs := refFrags(q)
			if byDst {
				for i := range fs {
					fs[i].src, fs[i].dst = fs[i].dst, fs[i].src
				}
			}
			return fs
		}
		want := frags(p)
		spans := make([]uint64, len(norm.Completions()))
		var bytes uint64
		covered := make([]uint64, len(want))
		for i, sh := range shards {
			if byDst {
				require.Equal(t, cuts[i+1]-cuts[i], sh.Plan.DstExtent)
				require.Equal(t, p.SrcExtent, sh.Plan.SrcExtent)
			} else {
				require.Equal(t, cuts[i+1]-cuts[i], sh.Plan.SrcExtent)
				require.Equal(t, p.DstExtent, sh.Plan.DstExtent)
			}
			require.NoError(t, Normalize(&sn, &sh.Plan), "shard %d", i)
			require.Equal(t, sh.Bytes, sn.Summary().Bytes, "shard %d", i)
			require.Len(t, sn.Completions(), len(spans))
			for j, c := range sn.Completions() {
				spans[j] += c.Bytes
			}
			bytes += sh.Bytes
			got := frags(&sh.Plan)
			require.Len(t, got, len(want))
			carried := 0
			for j, g := range got {
				if !g.carry || g.n == 0 {
					continue
				}
				carried++
				w := want[j]
				require.True(t, w.carry)
				// The piece lies inside the plan's fragment, at the same
				// distance from its start in source and destination.
				src := g.src + cuts[i]
				require.GreaterOrEqual(t, src, w.src)
				require.LessOrEqual(t, src+g.n, w.src+w.n)
				require.Equal(t, w.dst+(src-w.src), g.dst, "fragment %d in shard %d", j, i)
				require.GreaterOrEqual(t, src, cuts[i])
				require.LessOrEqual(t, src+g.n, cuts[i+1])
				covered[j] += g.n
			}
			require.Equal(t, sh.Fragments, carried)
		}
		for j, w := range want {
			if w.carry {
				require.Equal(t, w.n, covered[j], "fragment %d whole over the shards", j)
			}
		}
		require.Equal(t, norm.Summary().Bytes, bytes)
		for j, c := range norm.Completions() {
			require.Equal(t, c.Bytes, spans[j], "span %d", j)
		}
	}
	require.Greater(t, checked, 500)
	_, err := sp.SplitDst(&Plan{Form: FormRows, Rows: Rows{RowSize: 1}}, []uint64{0, 1})
	require.ErrorIs(t, err, ErrInvalid, "a rows plan is not cut by its destination")
}

// TestSplitRefuses: bad cuts and invalid plans are refused with this
// package's typed errors.
func TestSplitRefuses(t *testing.T) {
	var sp Splitter
	p := &Plan{Form: FormRanges, SrcExtent: 100, DstExtent: 100, Ranges: []Range{{Src: 0, Dst: 0, Len: 50}}}
	for _, cuts := range [][]uint64{nil, {0}, {1, 100}, {0, 99}, {0, 50, 50, 100}, {0, 60, 40, 100}} {
		_, err := sp.Split(p, cuts)
		var ie *InvalidError
		require.ErrorAs(t, err, &ie, "cuts %v", cuts)
		require.Equal(t, "cuts", ie.Field)
	}
	_, err := sp.Split(nil, []uint64{0, 1})
	require.ErrorIs(t, err, ErrInvalid)
	bad := &Plan{Form: FormRanges, SrcExtent: 100, DstExtent: 100, Ranges: []Range{{Src: 0, Dst: 0, Len: 50}, {Src: 50, Dst: 10, Len: 10}}}
	_, err = sp.Split(bad, []uint64{0, 50, 100})
	require.ErrorIs(t, err, ErrOverlap, "overlapping destinations in different shards")
	out := &Plan{Form: FormRanges, SrcExtent: 100, DstExtent: 100, Ranges: []Range{{Src: 90, Dst: 0, Len: 20}}}
	_, err = sp.Split(out, []uint64{0, 50, 100})
	require.ErrorIs(t, err, ErrBounds)
	// A row across a cut, named by an id.
	rows := &Plan{Form: FormRows, SrcExtent: 100, DstExtent: 100, Rows: Rows{RowSize: 10, TableRows: 10, IDs32: []int32{1, 4, -1}}}
	_, err = sp.Split(rows, []uint64{0, 45, 100})
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "index 1")
	// The same cut with no id on that row is fine.
	rows.Rows.IDs32 = []int32{1, 7, -1}
	shards, err := sp.Split(rows, []uint64{0, 45, 100})
	require.NoError(t, err)
	require.Equal(t, []int32{1, -1, -1}, shards[0].Plan.Rows.IDs32)
	require.Equal(t, []int32{-1, 2, -1}, shards[1].Plan.Rows.IDs32) // rows 5..9
	require.Equal(t, uint64(5), shards[1].Plan.Rows.SrcBase)        // row 5 at byte 50 of the plan, 5 into the shard
	require.Equal(t, uint64(5), shards[1].Plan.Rows.TableRows)
	require.False(t, errors.Is(err, ErrBounds))

	// A rows plan is checked without a whole normalization: its ids in
	// the split's pass, its layout and ends up front, with Normalize's
	// errors.
	cuts := []uint64{0, 45, 100}
	for _, tc := range []struct {
		name string
		rows Rows
		ends []uint32
		want error
	}{
		{"id past the table", Rows{RowSize: 10, TableRows: 10, IDs32: []int32{1, 10}}, nil, ErrBounds},
		{"negative id", Rows{RowSize: 10, TableRows: 10, IDs64: []int64{-2, 1}}, nil, ErrBounds},
		{"rows overlap", Rows{RowSize: 10, TableRows: 10, IDs32: []int32{1, 2, 3, 4}, Layout: Layout{Kind: LayoutStrided, Cols: 2, RowStride: 20, ColStride: 5}}, nil, ErrOverlap},
		{"ends", Rows{RowSize: 10, TableRows: 10, IDs32: []int32{1, 2}}, []uint32{1}, ErrInvalid},
	} {
		q := &Plan{Form: FormRows, SrcExtent: 100, DstExtent: 100, Rows: tc.rows, CompletionEnds: tc.ends}
		var norm Normalized
		require.ErrorIs(t, Normalize(&norm, q), tc.want, tc.name)
		_, err := sp.Split(q, cuts)
		require.ErrorIs(t, err, tc.want, tc.name)
	}
}

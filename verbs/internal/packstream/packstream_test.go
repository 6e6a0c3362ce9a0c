package packstream

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/scatterkit/scatterkit/planfmt"
)

// TestRangePackSplitMatchesSerial: a RangeCursor with Workers packs every
// chunk byte for byte as the serial cursor does (chunks cut inside ranges,
// pieces cut inside ranges, zero-length ranges, a short last chunk), and
// leaves the cursor where the serial one stands.
func TestRangePackSplitMatchesSerial(t *testing.T) {
	w := pack.NewWorkers(4)
	t.Cleanup(w.Close)
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 8<<20)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	for round := range 60 {
		var rs []planfmt.Range
		var total uint64
		for total < uint64(1+r.IntN(3<<20)) {
			var l uint64
			switch r.IntN(10) {
			case 0:
				l = 0
			case 1:
				l = uint64(1 + r.IntN(300<<10)) // larger than a piece
			default:
				l = uint64(1 + r.IntN(600))
			}
			s := r.Uint64N(uint64(len(src)) - l + 1)
			rs = append(rs, planfmt.Range{Src: s, Len: l})
			total += l
		}
		chunk := 128<<10 + r.IntN(1<<20)
		var ser, par RangeCursor
		ser.Init(rs)
		par.Workers, par.ParallelMin = w, 128<<10
		par.Init(rs)
		a, b := make([]byte, chunk), make([]byte, chunk)
		chunks := 0
		for !ser.Done() {
			na := ser.PackInto(a, src)
			nb := par.PackInto(b, src)
			require.Equal(t, na, nb, "round %d chunk %d", round, chunks)
			require.True(t, bytes.Equal(a[:na], b[:nb]), "round %d chunk %d: bytes differ", round, chunks)
			require.Equal(t, ser.i, par.i, "round %d chunk %d", round, chunks)
			require.Equal(t, ser.off, par.off, "round %d chunk %d", round, chunks)
			chunks++
		}
		require.True(t, par.Done(), "round %d", round)
	}
}

// TestScatterRowsMatchesRuns: ScatterRows, chunk by chunk (cut anywhere,
// empty chunks too), places a packed stream's rows exactly where the
// normalized plan's destination runs place them: contiguous and strided
// layouts (one column, several, rows packed back to back, gaps), -1 ids,
// both id widths, a destination base; and it touches no other byte.
func TestScatterRowsMatchesRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		rs := uint64(1 + r.IntN(300))
		n := 1 + r.IntN(3000)
		p := planfmt.Plan{Form: planfmt.FormRows, Rows: planfmt.Rows{RowSize: rs, TableRows: 1 << 10}}
		p.SrcExtent = p.Rows.TableRows * rs
		switch r.IntN(3) {
		case 0: // contiguous
		case 1: // one column, a gap after each row
			p.Rows.Layout = planfmt.Layout{Kind: planfmt.LayoutStrided, Cols: 1, RowStride: rs + uint64(r.IntN(64)), ColStride: rs}
		default: // several columns
			cols := uint64(1 + r.IntN(6))
			n -= n % int(cols)
			if n == 0 {
				n = int(cols)
			}
			cs := rs + uint64(r.IntN(2))*uint64(r.IntN(32))
			p.Rows.Layout = planfmt.Layout{Kind: planfmt.LayoutStrided, Cols: cols, ColStride: cs, RowStride: cols*cs + uint64(r.IntN(2))*uint64(r.IntN(100))}
		}
		p.Rows.DstBase = uint64(r.IntN(4096))
		ids := make([]int64, n)
		var live uint64
		for i := range ids {
			if r.IntN(7) == 0 {
				ids[i] = -1
			} else {
				ids[i] = int64(r.IntN(int(p.Rows.TableRows)))
				live++
			}
		}
		var ids32 []int32
		wide := r.IntN(2) == 0
		if wide {
			p.Rows.IDs64 = ids
		} else {
			ids32 = make([]int32, n)
			for i, id := range ids {
				ids32[i] = int32(id)
			}
			p.Rows.IDs32 = ids32
		}
		// The destination extent: the last place plus a row, and slack.
		last := p.Rows.DstBase + uint64(n-1)*rs
		if p.Rows.Layout.Kind == planfmt.LayoutStrided {
			c := p.Rows.Layout.Cols
			last = p.Rows.DstBase + uint64(n-1)/c*p.Rows.Layout.RowStride + uint64(n-1)%c*p.Rows.Layout.ColStride
		}
		p.DstExtent = last + rs + uint64(r.IntN(100))
		var norm planfmt.Normalized
		if err := planfmt.Normalize(&norm, &p); err != nil {
			t.Logf("round %d: plan refused (%v), drawn again", round, err)
			continue
		}
		stream := make([]byte, live*rs)
		for i := range stream {
			stream[i] = byte(r.Uint32())
		}
		want := make([]byte, p.DstExtent)
		got := make([]byte, p.DstExtent)
		for i := range want {
			want[i] = byte(i * 7)
			got[i] = byte(i * 7)
		}
		norm.ForEachRun(func(dst, at, l uint64) bool {
			copy(want[dst:dst+l], stream[at:at+l])
			return true
		})
		at := 0
		for lo := 0; lo < n; {
			hi := min(n, lo+r.IntN(400))
			var k uint64
			for _, id := range ids[lo:hi] {
				if id >= 0 {
					k++
				}
			}
			chunk := stream[at : at+int(k*rs)]
			var used int
			if wide {
				used = ScatterRows(got, chunk, &p.Rows, p.Rows.IDs64, lo, hi)
			} else {
				used = ScatterRows(got, chunk, &p.Rows, ids32, lo, hi)
			}
			require.Equal(t, len(chunk), used, "round %d chunk [%d, %d)", round, lo, hi)
			at += used
			lo = hi
		}
		require.Equal(t, len(stream), at, "round %d", round)
		require.True(t, bytes.Equal(want, got), "round %d: destination differs from the runs' placement", round)
	}
}

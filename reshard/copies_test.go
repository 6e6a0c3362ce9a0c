package reshard_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/scatterkit/scatterkit/reshard"
)

// TestCopiesProperty: random tensors and layouts on both sides (splits,
// cyclic placements, replicas, memory orders, pages): the plan's 2-D
// copies applied on the host write exactly what Apply writes (into the
// same poisoned memory), never more copies than fragments, and only the
// pairs kept.
func TestCopiesProperty(t *testing.T) {
	r := newRand(t)
	cases := 200
	if testing.Short() {
		cases = 40
	}
	for i := range cases {
		tensor, src, dst := randomReshard(t, r, 1+r.IntN(4))
		plan, err := reshard.NewPlan(src, dst, reshard.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		srcMem := make([][]byte, len(src.Ranks))
		for k, rk := range src.Ranks {
			srcMem[k] = make([]byte, rk.RegionBytes)
			for b := range srcMem[k] {
				srcMem[k][b] = byte(r.Uint32())
			}
		}
		poison := make([][]byte, len(dst.Ranks))
		for k, rk := range dst.Ranks {
			poison[k] = make([]byte, rk.RegionBytes)
			for b := range poison[k] {
				poison[k][b] = byte(r.Uint32())
			}
		}
		clone := func() [][]byte {
			out := make([][]byte, len(poison))
			for k := range poison {
				out[k] = bytes.Clone(poison[k])
			}
			return out
		}
		// Keep a random subset of the pairs.
		kept := map[[2]int]bool{}
		for _, pr := range plan.Pairs {
			kept[[2]int{pr.Src, pr.Dst}] = r.IntN(4) != 0
		}
		keep := func(pr *reshard.Pair) bool { return kept[[2]int{pr.Src, pr.Dst}] }
		sub := &reshard.Plan{Tensor: plan.Tensor, Src: plan.Src, Dst: plan.Dst}
		var frags int64
		for _, pr := range plan.Pairs {
			if keep(&pr) {
				sub.Pairs = append(sub.Pairs, pr)
				frags += pr.Fragments
			}
		}
		want := clone()
		if err := sub.Apply(func(k int) []byte { return srcMem[k] }, func(k int) []byte { return want[k] }); err != nil {
			t.Fatal(err)
		}
		cs, err := plan.Copies(nil, keep)
		if err != nil {
			t.Fatal(err)
		}
		got := clone()
		if err := reshard.ApplyCopies(cs, func(k int) []byte { return srcMem[k] }, func(k int) []byte { return got[k] }); err != nil {
			t.Fatal(err)
		}
		for k := range got {
			if b := firstDiff(got[k], want[k]); b >= 0 {
				t.Fatalf("case %d (tensor %v x %d B): destination rank %d differs at byte %d", i, tensor.Shape, tensor.ElemSize, k, b)
			}
		}
		if int64(len(cs)) > frags {
			t.Fatalf("case %d: %d copies for %d fragments", i, len(cs), frags)
		}
		var n int64
		for _, c := range cs {
			n += c.Bytes()
			if !keep(&reshard.Pair{Src: c.Src, Dst: c.Dst}) {
				t.Fatalf("case %d: a copy of pair %d->%d, not kept", i, c.Src, c.Dst)
			}
			if c.Rows > 1 && (c.SrcPitch < c.Width || c.DstPitch < c.Width) {
				t.Fatalf("case %d: %+v: a pitch below the width", i, c)
			}
		}
		var bytesKept int64
		for _, pr := range sub.Pairs {
			bytesKept += pr.Bytes
		}
		if n != bytesKept {
			t.Fatalf("case %d: copies move %d B, the kept pairs %d", i, n, bytesKept)
		}
	}
}

// TestCopiesShapes: a TP2 -> TP1 weight (two row halves into one matrix)
// is one copy per rank, a column split (TP2 by columns -> TP1) one 2-D
// copy per rank with the destination's pitch, and a replicated read
// (source stride 0) one copy per fragment.
func TestCopiesShapes(t *testing.T) {
	tensor := reshard.Tensor{Shape: []int64{64, 48}, ElemSize: 2}
	whole, err := reshard.Sharded(tensor, reshard.ShardSpec{Parts: []int64{1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		parts []int64
		rows  int64 // rows of each copy
	}{
		{"rows", []int64{2, 1}, 1},
		{"columns", []int64{1, 2}, 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp2, err := reshard.Sharded(tensor, reshard.ShardSpec{Parts: c.parts})
			if err != nil {
				t.Fatal(err)
			}
			plan, err := reshard.NewPlan(tp2, whole, reshard.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			cs, err := plan.Copies(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != 2 {
				t.Fatalf("%d copies: %+v", len(cs), cs)
			}
			for _, cp := range cs {
				if cp.Rows != c.rows || cp.Bytes() != 64*48*2/2 {
					t.Fatalf("%+v: want %d rows of half the tensor", cp, c.rows)
				}
			}
		})
	}
	rg := reshard.Region{SrcOff: 8, DstOff: 0, Inner: 4, Counts: []int64{5}, SrcStrides: []int64{0}, DstStrides: []int64{4}}
	p := &reshard.Plan{Pairs: []reshard.Pair{{Src: 0, Dst: 1, Regions: []reshard.Region{rg}, Bytes: 20, Fragments: 5}}}
	cs, err := p.Copies(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Contiguous on the destination but reading one source fragment five
	// times: not a 2-D copy (source pitch 0 < width), five copies.
	if len(cs) != 5 || slices.ContainsFunc(cs, func(c reshard.Copy2D) bool { return c.Rows != 1 || c.SrcOff != 8 }) {
		t.Fatalf("%+v", cs)
	}
}

// TestCopiesRefuse: malformed regions append nothing, and ApplyCopies
// writes nothing when any copy reaches past a rank's memory.
func TestCopiesRefuse(t *testing.T) {
	for name, rg := range map[string]reshard.Region{
		"negative count":     {Inner: 4, Counts: []int64{-1}, SrcStrides: []int64{4}, DstStrides: []int64{4}},
		"missing strides":    {Inner: 4, Counts: []int64{2}},
		"overflowing stride": {Inner: 4, Counts: []int64{3}, SrcStrides: []int64{1 << 62}, DstStrides: []int64{4}},
		"negative offset":    {SrcOff: -8, Inner: 4},
	} {
		p := &reshard.Plan{Pairs: []reshard.Pair{{Src: 0, Dst: 0, Regions: []reshard.Region{{Inner: 4}, rg}}}}
		cs, err := p.Copies([]reshard.Copy2D{}, nil)
		if !errors.Is(err, reshard.ErrLayout) || len(cs) != 0 {
			t.Errorf("%s: %v, %d copies", name, err, len(cs))
		}
	}
	src, dst := bytes.Repeat([]byte{1}, 64), make([]byte, 32)
	cs := []reshard.Copy2D{
		{Width: 4, Rows: 3, DstOff: 8, SrcPitch: 4, DstPitch: 8}, // fits, and still not written
		{Width: 4, Rows: 2, DstOff: 24, DstPitch: 8},             // its second row past the destination
	}
	err := reshard.ApplyCopies(cs, func(int) []byte { return src }, func(int) []byte { return dst })
	if !errors.Is(err, reshard.ErrLayout) || !bytes.Equal(dst, make([]byte, 32)) {
		t.Fatalf("%v, %v", err, dst)
	}
	for name, c := range map[string]reshard.Copy2D{
		"negative pitch":  {Width: 4, Rows: 2, SrcPitch: -4, DstPitch: 4},
		"overflowing end": {Width: 4, Rows: 3, SrcPitch: 1 << 62, DstPitch: 4},
	} {
		if err := reshard.ApplyCopies([]reshard.Copy2D{c}, func(int) []byte { return src }, func(int) []byte { return dst }); !errors.Is(err, reshard.ErrLayout) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

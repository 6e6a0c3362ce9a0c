package reshard

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"unsafe"
)

// planTestRowMajor is a dense row-major piece of box at offset off.
func planTestRowMajor(box []Interval, elem, off int64) Piece {
	strides := make([]int64, len(box))
	s := elem
	for a := len(box) - 1; a >= 0; a-- {
		strides[a] = s
		s *= box[a].Len()
	}
	return Piece{Box: box, Offset: off, Strides: strides}
}

// planTestBytes is the payload of a box.
func planTestBytes(box []Interval, elem int64) int64 {
	n := elem
	for _, iv := range box {
		n *= iv.Len()
	}
	return n
}

// planTestDense is a layout of t whose rank r holds, row-major and back
// to back, the pieces whose boxes are boxes[r].
func planTestDense(t Tensor, boxes [][][]Interval) *Layout {
	l := &Layout{Tensor: t}
	for _, rb := range boxes {
		var r Rank
		for _, b := range rb {
			r.Pieces = append(r.Pieces, planTestRowMajor(b, t.ElemSize, r.RegionBytes))
			r.RegionBytes += planTestBytes(b, t.ElemSize)
		}
		l.Ranks = append(l.Ranks, r)
	}
	return l
}

// planTestFull is the interval of a whole axis.
func planTestFull(n int64) Interval { return Interval{Lo: 0, Hi: n, Step: 1} }

// planTestHeads is [T, H, D] split along heads over n ranks, row-major.
func planTestHeads(tok, heads, dim, elem int64, n int) *Layout {
	var boxes [][][]Interval
	per := heads / int64(n)
	for r := range int64(n) {
		boxes = append(boxes, [][]Interval{{planTestFull(tok), {Lo: r * per, Hi: (r + 1) * per, Step: 1}, planTestFull(dim)}})
	}
	return planTestDense(Tensor{Shape: []int64{tok, heads, dim}, ElemSize: elem}, boxes)
}

// planTestKV is a KV cache [tok, heads, dim] split along heads over n
// ranks and paged along tokens: each rank holds tok/page pages of
// [page, heads/n, dim], row-major, in the slots of a random page table.
func planTestKV(rng *rand.Rand, tok, heads, dim, elem int64, n int, page int64) *Layout {
	per := heads / int64(n)
	pages := tok / page
	pageBytes := page * per * dim * elem
	l := &Layout{Tensor: Tensor{Shape: []int64{tok, heads, dim}, ElemSize: elem}}
	for r := range int64(n) {
		slots := rng.Perm(int(pages))
		rk := Rank{Pieces: make([]Piece, pages), RegionBytes: pages * pageBytes}
		for p := range pages {
			rk.Pieces[p] = Piece{
				Box: []Interval{
					{Lo: p * page, Hi: (p + 1) * page, Step: 1},
					{Lo: r * per, Hi: (r + 1) * per, Step: 1},
					planTestFull(dim),
				},
				Offset:  int64(slots[p]) * pageBytes,
				Strides: []int64{per * dim * elem, dim * elem, elem},
			}
		}
		l.Ranks = append(l.Ranks, rk)
	}
	return l
}

// planTestGenOpts shapes planTestRandLayout's layouts.
type planTestGenOpts struct {
	maxParts int  // parts per axis
	maxBase  int  // distinct owners
	maxRep   int  // replicas of each owner
	negative bool // allow negative strides
}

// planTestRandLayout is a random layout of t: each axis split in blocks
// at random cut points or cyclically, the boxes dealt to base ranks, each
// base rank replicated on ranks b, b+base, b+2*base, ...; every piece has
// a random memory order, padding between elements and rows, and a gap
// before it. It returns the layout and the number of base ranks.
func planTestRandLayout(rng *rand.Rand, t Tensor, o planTestGenOpts) (*Layout, int) {
	var parts [][]Interval
	for _, n := range t.Shape {
		p := 1 + rng.IntN(min(int(n), o.maxParts))
		var ivs []Interval
		if rng.IntN(3) == 0 {
			for r := range p {
				ivs = append(ivs, Interval{Lo: int64(r), Hi: n, Step: int64(p)})
			}
		} else {
			cuts := rng.Perm(int(n) - 1)[:p-1]
			for i := range cuts {
				cuts[i]++
			}
			slices.Sort(cuts)
			lo := int64(0)
			for _, c := range append(cuts, int(n)) {
				ivs = append(ivs, Interval{Lo: lo, Hi: int64(c), Step: 1})
				lo = int64(c)
			}
		}
		parts = append(parts, ivs)
	}
	boxes := [][]Interval{nil}
	for _, ivs := range parts {
		var next [][]Interval
		for _, b := range boxes {
			for _, iv := range ivs {
				next = append(next, append(slices.Clone(b), iv))
			}
		}
		boxes = next
	}
	rng.Shuffle(len(boxes), func(i, j int) { boxes[i], boxes[j] = boxes[j], boxes[i] })
	base := 1 + rng.IntN(min(len(boxes), o.maxBase))
	rep := 1 + rng.IntN(o.maxRep)
	l := &Layout{Tensor: t, Ranks: make([]Rank, base*rep)}
	for i, b := range boxes {
		for k := range rep {
			r := &l.Ranks[i%base+k*base]
			pc := Piece{Box: b, Strides: make([]int64, len(b))}
			perm := rng.Perm(len(b))
			s := t.ElemSize + int64(rng.IntN(2))*int64(rng.IntN(3))
			for j := len(perm) - 1; j >= 0; j-- {
				a := perm[j]
				pc.Strides[a] = s
				s = s*b[a].Len() + int64(rng.IntN(2))*int64(rng.IntN(5))
			}
			pc.Offset = r.RegionBytes + int64(rng.IntN(4))
			extent := t.ElemSize
			for a := range b {
				if o.negative && b[a].Len() > 1 && rng.IntN(2) == 0 {
					pc.Offset += (b[a].Len() - 1) * pc.Strides[a]
					pc.Strides[a] = -pc.Strides[a]
				}
				extent += (b[a].Len() - 1) * max(pc.Strides[a], -pc.Strides[a])
			}
			lowest := pc.Offset
			for a := range b {
				if pc.Strides[a] < 0 {
					lowest += (b[a].Len() - 1) * pc.Strides[a]
				}
			}
			r.RegionBytes = lowest + extent
			r.Pieces = append(r.Pieces, pc)
		}
	}
	for i := range l.Ranks {
		l.Ranks[i].RegionBytes += int64(rng.IntN(3))
	}
	return l, base
}

// planTestMap maps every byte of every rank's region to the tensor byte
// it holds (element in row-major order times ElemSize plus the byte
// within the element) and to the piece that holds it, -1 for bytes that
// are in no piece.
func planTestMap(t *testing.T, l *Layout) (bytes, pieces [][]int64) {
	t.Helper()
	out := make([][]int64, len(l.Ranks))
	pieces = make([][]int64, len(l.Ranks))
	e := l.Tensor.ElemSize
	for r, rk := range l.Ranks {
		m := make([]int64, rk.RegionBytes)
		pm := make([]int64, rk.RegionBytes)
		for i := range m {
			m[i], pm[i] = -1, -1
		}
		for pi, pc := range rk.Pieces {
			k := make([]int64, len(pc.Box))
			for {
				off, lin := pc.Offset, int64(0)
				for a, iv := range pc.Box {
					off += k[a] * pc.Strides[a]
					lin = lin*l.Tensor.Shape[a] + iv.Lo + k[a]*iv.Step
				}
				for b := range e {
					if m[off+b] != -1 {
						t.Fatalf("test layout: rank %d piece %d overlaps at byte %d", r, pi, off+b)
					}
					m[off+b], pm[off+b] = lin*e+b, int64(pi)
				}
				a := len(k) - 1
				for ; a >= 0; a-- {
					if k[a]++; k[a] < pc.Box[a].Len() {
						break
					}
					k[a] = 0
				}
				if a < 0 {
					break
				}
			}
		}
		out[r], pieces[r] = m, pm
	}
	return out, pieces
}

// planTestCheck expands the plan and checks it against a brute-force
// reading of both layouts: every destination byte of every destination
// piece is written exactly once, from a source byte that holds the same
// tensor byte, and nothing else is written; totals add up; pairs are
// sorted; regions run through the destination ascending: loops by
// destination stride, largest first, and the regions of a pair in order
// of destination piece, then of destination offset. It returns the bytes
// each source rank sends.
func planTestCheck(t *testing.T, p *Plan, src, dst *Layout) []int64 {
	t.Helper()
	sm, _ := planTestMap(t, src)
	dm, dpm := planTestMap(t, dst)
	written := make([][]int32, len(dst.Ranks))
	for i := range written {
		written[i] = make([]int32, len(dm[i]))
	}
	load := make([]int64, len(src.Ranks))
	for i, pr := range p.Pairs {
		if i > 0 {
			q := p.Pairs[i-1]
			if q.Src > pr.Src || q.Src == pr.Src && q.Dst >= pr.Dst {
				t.Fatalf("pairs out of order: %d->%d before %d->%d", q.Src, q.Dst, pr.Src, pr.Dst)
			}
		}
		if len(pr.Regions) == 0 {
			t.Fatalf("pair %d->%d has no regions", pr.Src, pr.Dst)
		}
		var bytes, frags int64
		prevPiece, prevOff := int64(-1), int64(-1)
		for ri := range pr.Regions {
			rg := &pr.Regions[ri]
			if rg.Inner <= 0 || len(rg.SrcStrides) != len(rg.Counts) || len(rg.DstStrides) != len(rg.Counts) {
				t.Fatalf("pair %d->%d region %d malformed: %+v", pr.Src, pr.Dst, ri, *rg)
			}
			for l, c := range rg.Counts {
				if c < 2 {
					t.Fatalf("pair %d->%d region %d has a loop of %d: %+v", pr.Src, pr.Dst, ri, c, *rg)
				}
				if rg.DstStrides[l] <= 0 || l > 0 && rg.DstStrides[l] > rg.DstStrides[l-1] {
					t.Fatalf("pair %d->%d region %d: destination strides not descending: %+v", pr.Src, pr.Dst, ri, *rg)
				}
			}
			if rg.DstOff >= 0 && rg.DstOff < int64(len(dpm[pr.Dst])) {
				piece := dpm[pr.Dst][rg.DstOff]
				if piece < prevPiece || piece == prevPiece && rg.DstOff <= prevOff {
					t.Fatalf("pair %d->%d region %d (piece %d, offset %d) after piece %d, offset %d",
						pr.Src, pr.Dst, ri, piece, rg.DstOff, prevPiece, prevOff)
				}
				prevPiece, prevOff = piece, rg.DstOff
			}
			bytes += rg.Bytes()
			frags += rg.Fragments()
			var n int64
			rg.Each(func(s, d int64) bool {
				n++
				for b := range rg.Inner {
					if s+b < 0 || s+b >= int64(len(sm[pr.Src])) || d+b < 0 || d+b >= int64(len(dm[pr.Dst])) {
						t.Fatalf("pair %d->%d region %+v: byte %d->%d outside the regions", pr.Src, pr.Dst, *rg, s+b, d+b)
					}
					sv, dv := sm[pr.Src][s+b], dm[pr.Dst][d+b]
					if sv < 0 || dv < 0 || sv != dv {
						t.Fatalf("pair %d->%d region %+v: source byte %d holds %d, destination byte %d holds %d",
							pr.Src, pr.Dst, *rg, s+b, sv, d+b, dv)
					}
					written[pr.Dst][d+b]++
				}
				return true
			})
			if n != rg.Fragments() {
				t.Fatalf("Each visited %d fragments of %d", n, rg.Fragments())
			}
		}
		if bytes != pr.Bytes || frags != pr.Fragments {
			t.Fatalf("pair %d->%d totals %d bytes %d fragments, regions add up to %d, %d", pr.Src, pr.Dst, pr.Bytes, pr.Fragments, bytes, frags)
		}
		load[pr.Src] += bytes
	}
	var want int64
	for d := range dm {
		for b, v := range dm[d] {
			if v >= 0 {
				want++
				if written[d][b] != 1 {
					t.Fatalf("destination rank %d byte %d (tensor byte %d) written %d times", d, b, v, written[d][b])
				}
			}
		}
	}
	if p.Bytes != want {
		t.Fatalf("Plan.Bytes = %d, destination pieces hold %d", p.Bytes, want)
	}
	if p.Src != src || p.Dst != dst || !reflect.DeepEqual(p.Tensor, src.Tensor) {
		t.Fatalf("plan does not name its layouts and tensor")
	}
	return load
}

// planTestBalanced checks that the replicas of each base rank (ranks b,
// b+base, ...) are loaded within the largest region's bytes of each
// other, which greedy fewest-bytes assignment guarantees.
func planTestBalanced(t *testing.T, p *Plan, load []int64, base int) {
	t.Helper()
	var largest int64
	for _, pr := range p.Pairs {
		for i := range pr.Regions {
			largest = max(largest, pr.Regions[i].Bytes())
		}
	}
	for b := range base {
		lo, hi := load[b], load[b]
		for r := b; r < len(load); r += base {
			lo, hi = min(lo, load[r]), max(hi, load[r])
		}
		if hi-lo > largest {
			t.Fatalf("replicas of base rank %d loaded %d..%d bytes, more apart than the largest region (%d): %v", b, lo, hi, largest, load)
		}
	}
}

func planTestRandTensor(rng *rand.Rand) Tensor {
	axes := 1 + rng.IntN(4)
	t := Tensor{ElemSize: []int64{1, 2, 3, 4}[rng.IntN(4)]}
	for range axes {
		t.Shape = append(t.Shape, 1+rng.Int64N(int64(7-axes)))
	}
	return t
}

// planTestBoxes is what validating l returns about its boxes, for a
// layout whose boxes are valid but whose strides Validate may refuse
// (negative ones).
func planTestBoxes(t *testing.T, l *Layout) *layoutBoxes {
	t.Helper()
	n := 0
	for _, rk := range l.Ranks {
		n += len(rk.Pieces)
	}
	counts := newAxisCounts(l.Tensor.Shape, n, nil)
	for _, rk := range l.Ranks {
		for _, pc := range rk.Pieces {
			counts.add(pc.Box)
		}
	}
	lb := &layoutBoxes{l: l, sc: new(scratch)}
	if err := lb.group(n, counts); err != nil {
		t.Fatal(err)
	}
	return lb
}

// TestPlanBrute checks random small reshards against the brute-force
// reference, replicas on both sides.
func TestPlanBrute(t *testing.T) {
	const seed = 20240611
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	o := planTestGenOpts{maxParts: 3, maxBase: 4, maxRep: 3}
	for i := range 1000 {
		ten := planTestRandTensor(rng)
		src, base := planTestRandLayout(rng, ten, o)
		dst, _ := planTestRandLayout(rng, ten, o)
		p, err := NewPlan(src, dst, Limits{})
		if err != nil {
			t.Fatalf("case %d (seed %d): %v", i, seed, err)
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			load := planTestCheck(t, p, src, dst)
			planTestBalanced(t, p, load, base)
		})
	}
}

// TestPlanNegativeStrides checks the planner on pieces with negative
// strides (reversed axes), bypassing Validate, which may or may not
// accept them.
func TestPlanNegativeStrides(t *testing.T) {
	const seed = 77
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	o := planTestGenOpts{maxParts: 3, maxBase: 3, maxRep: 2, negative: true}
	for i := range 200 {
		ten := planTestRandTensor(rng)
		src, _ := planTestRandLayout(rng, ten, o)
		dst, _ := planTestRandLayout(rng, ten, o)
		p, err := planLayouts(src, dst, planTestBoxes(t, src), Limits{}.withDefaults())
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			planTestCheck(t, p, src, dst)
			for _, pr := range p.Pairs {
				for _, rg := range pr.Regions {
					for _, d := range rg.DstStrides {
						if d <= 0 {
							t.Fatalf("region %+v: destination does not ascend", rg)
						}
					}
				}
			}
		})
	}
}

// TestPlanManyPieces checks reshards between layouts of many pieces of
// mixed lengths along every axis, which exercises the source index.
func TestPlanManyPieces(t *testing.T) {
	const seed = 4242
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := range 20 {
		ten := Tensor{Shape: []int64{40 + rng.Int64N(40), 1 + rng.Int64N(6), 1 + rng.Int64N(3)}, ElemSize: 2}
		o := planTestGenOpts{maxParts: 25, maxBase: 6, maxRep: 2}
		src, base := planTestRandLayout(rng, ten, o)
		dst, _ := planTestRandLayout(rng, ten, o)
		p, err := NewPlan(src, dst, Limits{})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			load := planTestCheck(t, p, src, dst)
			planTestBalanced(t, p, load, base)
		})
	}
}

// TestPlanMixedLengths reads a destination from a source that holds one
// head for all tokens in one piece and the other heads in short pages:
// spans of very different lengths along the token axis.
func TestPlanMixedLengths(t *testing.T) {
	const seed = 99
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	ten := Tensor{Shape: []int64{64, 4, 3}, ElemSize: 4}
	src := planTestDense(ten, [][][]Interval{{{planTestFull(64), {Lo: 0, Hi: 1, Step: 1}, planTestFull(3)}}})
	for p := int64(0); p < 64; p += 4 {
		b := []Interval{{Lo: p, Hi: p + 4, Step: 1}, {Lo: 1, Hi: 4, Step: 1}, planTestFull(3)}
		r := &src.Ranks[0]
		if p%8 != 0 {
			src.Ranks = append(src.Ranks, Rank{})
			r = &src.Ranks[len(src.Ranks)-1]
		}
		r.Pieces = append(r.Pieces, planTestRowMajor(b, 4, r.RegionBytes))
		r.RegionBytes += planTestBytes(b, 4)
	}
	for range 5 {
		dst, _ := planTestRandLayout(rng, ten, planTestGenOpts{maxParts: 20, maxBase: 4, maxRep: 2})
		p, err := NewPlan(src, dst, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		planTestCheck(t, p, src, dst)
	}
}

// TestPlanKVSmall checks a paged KV cache reshard (TP4, pages of 4 ->
// TP2, pages of 16) against the reference and its exact regions: each
// is one source page's tokens for the source rank's heads, Counts
// [4], Inner = 2 heads * 4 dims * 2 bytes.
func TestPlanKVSmall(t *testing.T) {
	const seed = 5
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	src := planTestKV(rng, 64, 8, 4, 2, 4, 4)
	dst := planTestKV(rng, 64, 8, 4, 2, 2, 16)
	p, err := NewPlan(src, dst, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	planTestCheck(t, p, src, dst)
	if len(p.Pairs) != 4 {
		t.Fatalf("%d pairs, want 4", len(p.Pairs))
	}
	for _, pr := range p.Pairs {
		if pr.Dst != pr.Src/2 || len(pr.Regions) != 16 || pr.Fragments != 64 || pr.Bytes != 64*16 {
			t.Fatalf("pair %d->%d: %d regions %d fragments %d bytes", pr.Src, pr.Dst, len(pr.Regions), pr.Fragments, pr.Bytes)
		}
		for _, rg := range pr.Regions {
			if rg.Inner != 16 || !slices.Equal(rg.Counts, []int64{4}) || !slices.Equal(rg.SrcStrides, []int64{16}) || !slices.Equal(rg.DstStrides, []int64{32}) {
				t.Fatalf("pair %d->%d region %+v", pr.Src, pr.Dst, rg)
			}
		}
	}
}

// TestPlanReplicaLoad: two replicas of every source box share the bytes
// evenly, whether or not the destination is replicated too.
func TestPlanReplicaLoad(t *testing.T) {
	ten := Tensor{Shape: []int64{16, 16}, ElemSize: 4}
	rows := func(lo int64) []Interval { return []Interval{{Lo: lo, Hi: lo + 8, Step: 1}, planTestFull(16)} }
	// Ranks 0 and 1 hold rows 0..7, ranks 2 and 3 rows 8..15.
	src := planTestDense(ten, [][][]Interval{{rows(0)}, {rows(0)}, {rows(8)}, {rows(8)}})
	cols := func(c int64) [][]Interval {
		return [][]Interval{{planTestFull(16), {Lo: 4 * c, Hi: 4*c + 4, Step: 1}}}
	}
	for _, tc := range []struct {
		name string
		dst  [][][]Interval
		want int64 // bytes per source rank
	}{
		{"columns", [][][]Interval{cols(0), cols(1), cols(2), cols(3)}, 256},
		{"replicated columns", [][][]Interval{cols(0), cols(1), cols(2), cols(3), cols(0), cols(1), cols(2), cols(3)}, 512},
		{"uneven", [][][]Interval{cols(0), cols(1), {{planTestFull(16), {Lo: 8, Hi: 16, Step: 1}}}}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := planTestDense(ten, tc.dst)
			p, err := NewPlan(src, dst, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			load := planTestCheck(t, p, src, dst)
			if tc.want >= 0 {
				for _, l := range load {
					if l != tc.want {
						t.Fatalf("load %v, want %d bytes each", load, tc.want)
					}
				}
				return
			}
			// Parts of 128, 128 and 256 bytes per source box, in that
			// order: the lower rank, the other, then the lower on a tie.
			if load[0] != 384 || load[1] != 128 || load[2] != 384 || load[3] != 128 {
				t.Fatalf("load %v, want [384 128 384 128]", load)
			}
		})
	}
}

// TestPlanCompact checks exact regions of reshards whose compaction is
// known.
func TestPlanCompact(t *testing.T) {
	t.Run("same layout", func(t *testing.T) {
		// [8, 6, 4] x 4 bytes, two row blocks per rank on four ranks:
		// every piece is one fragment.
		ten := Tensor{Shape: []int64{8, 6, 4}, ElemSize: 4}
		var boxes [][][]Interval
		for r := int64(0); r < 4; r++ {
			boxes = append(boxes, [][]Interval{
				{{Lo: r, Hi: r + 1, Step: 1}, planTestFull(6), planTestFull(4)},
				{{Lo: 4 + r, Hi: 5 + r, Step: 1}, planTestFull(6), planTestFull(4)},
			})
		}
		src, dst := planTestDense(ten, boxes), planTestDense(ten, boxes)
		dst.Ranks[2].Pieces[1].Offset += 8
		dst.Ranks[2].RegionBytes += 8
		p, err := NewPlan(src, dst, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		planTestCheck(t, p, src, dst)
		for r, pr := range p.Pairs {
			want := Pair{Src: r, Dst: r, Bytes: 192, Fragments: 2, Regions: []Region{
				{SrcOff: 0, DstOff: 0, Inner: 96},
				{SrcOff: 96, DstOff: 96, Inner: 96},
			}}
			if r == 2 {
				want.Regions[1].DstOff += 8
			}
			if !reflect.DeepEqual(pr, want) {
				t.Fatalf("pair %d:\n got %+v\nwant %+v", r, pr, want)
			}
		}
	})
	t.Run("TP8 to TP2", func(t *testing.T) {
		// [T=6, H=16, D=8] x 2 bytes: source rank r holds heads
		// 2r, 2r+1, destination rank q heads 8q..8q+7. Each source rank
		// sends T fragments of H/8*D*2 = 32 bytes, one per token,
		// destination rows of H/2*D*2 = 128 bytes apart.
		src, dst := planTestHeads(6, 16, 8, 2, 8), planTestHeads(6, 16, 8, 2, 2)
		p, err := NewPlan(src, dst, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		planTestCheck(t, p, src, dst)
		var want []Pair
		for r := range 8 {
			want = append(want, Pair{Src: r, Dst: r / 4, Bytes: 192, Fragments: 6, Regions: []Region{{
				SrcOff: 0, DstOff: int64(r%4) * 32, Inner: 32,
				Counts: []int64{6}, SrcStrides: []int64{32}, DstStrides: []int64{128},
			}}})
		}
		if !reflect.DeepEqual(p.Pairs, want) {
			t.Fatalf("got  %+v\nwant %+v", p.Pairs, want)
		}
		if p.Bytes != 6*16*8*2 {
			t.Fatalf("Plan.Bytes = %d", p.Bytes)
		}
	})
	t.Run("cyclic heads fused", func(t *testing.T) {
		// [T=3, H=8, D=2] x 2 bytes; source rank r of 4 holds heads r
		// and r+4 row-major, the destination everything. Tokens and
		// heads fuse into one loop of 6 (source: consecutive 4-byte
		// rows; destination: every fourth head, 16 bytes apart).
		ten := Tensor{Shape: []int64{3, 8, 2}, ElemSize: 2}
		var boxes [][][]Interval
		for r := int64(0); r < 4; r++ {
			boxes = append(boxes, [][]Interval{{planTestFull(3), {Lo: r, Hi: 8, Step: 4}, planTestFull(2)}})
		}
		src := planTestDense(ten, boxes)
		dst := planTestDense(ten, [][][]Interval{{{planTestFull(3), planTestFull(8), planTestFull(2)}}})
		p, err := NewPlan(src, dst, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		planTestCheck(t, p, src, dst)
		for r, pr := range p.Pairs {
			want := Pair{Src: r, Dst: 0, Bytes: 24, Fragments: 6, Regions: []Region{{
				SrcOff: 0, DstOff: int64(r) * 4, Inner: 4,
				Counts: []int64{6}, SrcStrides: []int64{4}, DstStrides: []int64{16},
			}}}
			if !reflect.DeepEqual(pr, want) {
				t.Fatalf("pair %d:\n got %+v\nwant %+v", r, pr, want)
			}
		}
	})
}

// TestPlanLimits: exceeding MaxRegions or MaxFragments fails with a
// *LimitError naming the limit.
func TestPlanLimits(t *testing.T) {
	src, dst := planTestHeads(6, 16, 8, 2, 8), planTestHeads(6, 16, 8, 2, 2)
	for _, tc := range []struct {
		lim  Limits
		want LimitError
	}{
		{Limits{MaxRegions: 7}, LimitError{Limit: "regions", Value: 8, Max: 7}},
		{Limits{MaxFragments: 5}, LimitError{Limit: "fragments of pair 0->0", Value: 6, Max: 5}},
	} {
		p, err := NewPlan(src, dst, tc.lim)
		var le *LimitError
		if !errors.As(err, &le) || !errors.Is(err, ErrLimit) || *le != tc.want {
			t.Fatalf("%+v: plan %v, error %v, want %v", tc.lim, p, err, &tc.want)
		}
	}
	if _, err := NewPlan(src, dst, Limits{MaxRegions: 8, MaxFragments: 6}); err != nil {
		t.Fatalf("at the limits: %v", err)
	}
}

// TestPlanOverflow: destination replicas whose bytes add up past int64
// fail with ErrLayout instead of wrapping.
func TestPlanOverflow(t *testing.T) {
	ten := Tensor{Shape: []int64{1 << 40}, ElemSize: 1 << 20} // 2^60 bytes
	whole := [][]Interval{{planTestFull(1 << 40)}}
	src := planTestDense(ten, [][][]Interval{whole})
	for _, tc := range []struct {
		replicas int
		fail     bool
	}{{7, false}, {8, true}} {
		var boxes [][][]Interval
		for range tc.replicas {
			boxes = append(boxes, whole)
		}
		dst := planTestDense(ten, boxes)
		p, err := NewPlan(src, dst, Limits{})
		if !tc.fail {
			if err != nil || p.Bytes != 7<<60 || len(p.Pairs) != 7 || p.Pairs[6].Regions[0].Inner != 1<<60 {
				t.Fatalf("%d replicas: %v, %v", tc.replicas, p, err)
			}
			continue
		}
		var le *LayoutError
		if !errors.As(err, &le) || le.Kind != ErrLayout || le.Rank != 7 || le.Piece != 0 || p != nil {
			t.Fatalf("%d replicas: plan %v, error %v", tc.replicas, p, err)
		}
	}
}

// TestPlanMismatch: layouts of different tensors fail with ErrMismatch.
func TestPlanMismatch(t *testing.T) {
	one := func(shape []int64, elem int64) *Layout {
		var box []Interval
		for _, n := range shape {
			box = append(box, planTestFull(n))
		}
		return planTestDense(Tensor{Shape: shape, ElemSize: elem}, [][][]Interval{{box}})
	}
	src := one([]int64{4, 4}, 2)
	for _, dst := range []*Layout{one([]int64{4, 5}, 2), one([]int64{4, 4, 1}, 2), one([]int64{16}, 2), one([]int64{4, 4}, 4)} {
		p, err := NewPlan(src, dst, Limits{})
		var le *LayoutError
		if !errors.As(err, &le) || le.Kind != ErrMismatch || le.Rank != -1 || le.Piece != -1 || !errors.Is(err, ErrMismatch) {
			t.Fatalf("%v -> %v: plan %v, error %v", src.Tensor, dst.Tensor, p, err)
		}
	}
	for _, pair := range [][2]*Layout{{nil, src}, {src, nil}} {
		if _, err := NewPlan(pair[0], pair[1], Limits{}); !errors.Is(err, ErrLayout) {
			t.Fatalf("nil layout: %v", err)
		}
	}
}

// TestRegionEach checks Each's order, early stop and that it allocates
// nothing.
func TestRegionEach(t *testing.T) {
	r := Region{SrcOff: 100, DstOff: 7, Inner: 2, Counts: []int64{2, 3}, SrcStrides: []int64{10, 2}, DstStrides: []int64{1, 40}}
	var got [][2]int64
	r.Each(func(s, d int64) bool { got = append(got, [2]int64{s, d}); return true })
	want := [][2]int64{{100, 7}, {102, 47}, {104, 87}, {110, 8}, {112, 48}, {114, 88}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Each: %v, want %v", got, want)
	}
	got = got[:0]
	r.Each(func(s, d int64) bool { got = append(got, [2]int64{s, d}); return len(got) < 4 })
	if !reflect.DeepEqual(got, want[:4]) {
		t.Fatalf("Each stopping after 4: %v", got)
	}
	one := Region{SrcOff: 5, DstOff: 9, Inner: 8}
	got = got[:0]
	one.Each(func(s, d int64) bool { got = append(got, [2]int64{s, d}); return true })
	if !reflect.DeepEqual(got, [][2]int64{{5, 9}}) {
		t.Fatalf("Each of one fragment: %v", got)
	}
	var sum int64
	f := func(s, d int64) bool { sum += s ^ d; return true }
	if n := testing.AllocsPerRun(100, func() { r.Each(f) }); n != 0 {
		t.Fatalf("Each allocates %v times", n)
	}
	if sum == 0 {
		t.Fatal("Each visited nothing")
	}
}

// TestPlanAxisIndex checks the source index's queries against a scan,
// on spans that nest (the segment tree) and on spans of equal length
// (ends ascending with starts: binary searches).
func TestPlanAxisIndex(t *testing.T) {
	const seed = 31
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 6))
	nested := 0
	for i := range 400 {
		// Few distinct starts and lengths, so that spans repeat.
		n := rng.IntN(40)
		lo, hi := make([]int64, n), make([]int64, n)
		length := 1 + rng.Int64N(10)*3
		for j := range lo {
			lo[j] = rng.Int64N(25) * 4
			if i%2 == 0 {
				length = 1 + rng.Int64N(10)*3
			}
			hi[j] = lo[j] + length
		}
		extent := int64(100 + 30)
		if i%4 < 2 {
			extent = 1 << 40 // sorted, not counted
		}
		var x planAxisIndex
		x.build(2, slices.Clone(lo), slices.Clone(hi), extent)
		if x.axis != 2 {
			t.Fatalf("axis %d", x.axis)
		}
		if x.nested {
			nested++
		}
		for range 20 {
			qlo := rng.Int64N(120)
			qhi := qlo + 1 + rng.Int64N(20)
			got := x.query(qlo, qhi, nil)
			var want []int32
			for j := range lo {
				if lo[j] < qhi && hi[j] > qlo {
					want = append(want, int32(j))
				}
			}
			for k := 1; k < len(got); k++ {
				if a, b := got[k-1], got[k]; lo[a] > lo[b] || lo[a] == lo[b] && a > b {
					t.Fatalf("query [%d, %d): %v not in order of (start, box)", qlo, qhi, got)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("query [%d, %d) (nested %v): %v, want %v", qlo, qhi, x.nested, got, want)
			}
		}
	}
	if nested == 0 || nested == 400 {
		t.Fatalf("%d of 400 indexes nested: one kind of query untested", nested)
	}
}

// TestPlanOverlaps checks the count that picks the index axis against
// a scan of all (distinct source box, destination piece) pairs.
func TestPlanOverlaps(t *testing.T) {
	const seed = 12
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range 200 {
		ten := planTestRandTensor(rng)
		o := planTestGenOpts{maxParts: 4, maxBase: 5, maxRep: 2}
		if i%2 == 0 { // long axes: sorted, not counted
			ten = Tensor{Shape: []int64{20 + rng.Int64N(20), 1 + rng.Int64N(30)}, ElemSize: 1}
		}
		src, _ := planTestRandLayout(rng, ten, o)
		dst, _ := planTestRandLayout(rng, ten, o)
		boxes, err := src.validate(Limits{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := &planner{src: src, dst: dst, boxes: boxes, axes: len(ten.Shape)}
		var dsts []*Piece
		for d := range dst.Ranks {
			for j := range dst.Ranks[d].Pieces {
				dsts = append(dsts, &dst.Ranks[d].Pieces[j])
			}
		}
		n := len(boxes.distinct) - 1
		for a := range ten.Shape {
			var want int64
			distinct := map[Interval]bool{}
			for _, at := range boxes.distinct[:n] {
				distinct[canonical(boxes.box(boxes.refs[at])[a])] = true
				slo, shi := planSpan(boxes.box(boxes.refs[at])[a])
				for _, dp := range dsts {
					if dlo, dhi := planSpan(dp.Box[a]); slo < dhi && dlo < shi {
						want++
					}
				}
			}
			got, ok := p.overlaps(a)
			if ok != (len(distinct) > 1) || ok && got != want {
				t.Fatalf("case %d axis %d: %d, %v; want %d over %d distinct intervals", i, a, got, ok, want, len(distinct))
			}
		}
	}
}

// TestPlanIndexAxis: the planner indexes the token axis of a paged KV
// cache and the head axis of a tensor-parallel split.
func TestPlanIndexAxis(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, tc := range []struct {
		name     string
		src, dst *Layout
		axis     int
	}{
		{"kv", planTestKV(rng, 256, 8, 4, 2, 4, 16), planTestKV(rng, 256, 8, 4, 2, 2, 64), 0},
		{"tp", planTestHeads(64, 16, 8, 2, 8), planTestHeads(64, 16, 8, 2, 2), 1},
	} {
		boxes, err := tc.src.validate(Limits{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := &planner{src: tc.src, dst: tc.dst, boxes: boxes, axes: 3}
		p.buildIndex()
		if p.index.axis != tc.axis {
			t.Fatalf("%s: index axis %d, want %d", tc.name, p.index.axis, tc.axis)
		}
	}
}

// BenchmarkPlanKV plans a KV cache reshard: [32768 tokens, 32 heads, 128
// dims] x 2 bytes from 8 ranks (4 heads each, pages of 16 tokens) to 2
// ranks (16 heads each, pages of 64 tokens), random page tables: 16384
// source pieces, 1024 destination pieces, 16384 regions; and, under
// scatterbench/, scatterbench's reshard-kv (exKVLayouts: [16384, 16, 128],
// 8192 source pieces, 512 destination pieces, 8192 regions). NewPlan
// includes validating both layouts; plan is the planning alone, from the
// source's boxes as validating it found them, in parallel where NewPlan
// would; plan-sequential plans on one goroutine.
func BenchmarkPlanKV(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	sbSrc, sbDst := exKVLayouts(b, rng)
	for _, g := range []struct {
		prefix   string
		src, dst *Layout
		regions  int
	}{
		{"", planTestKV(rng, 32768, 32, 128, 2, 8, 16), planTestKV(rng, 32768, 32, 128, 2, 2, 64), 1024 * 16},
		{"scatterbench/", sbSrc, sbDst, 8192},
	} {
		src, dst := g.src, g.dst
		boxes, err := src.validate(Limits{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, bc := range []struct {
			name string
			plan func() (*Plan, error)
		}{
			{"NewPlan", func() (*Plan, error) { return NewPlan(src, dst, Limits{}) }},
			{"plan", func() (*Plan, error) { return planLayouts(src, dst, boxes, Limits{}.withDefaults()) }},
			{"plan-sequential", func() (*Plan, error) {
				defer func(m int64) { planParallelMin = m }(planParallelMin)
				planParallelMin = math.MaxInt64
				return planLayouts(src, dst, boxes, Limits{}.withDefaults())
			}},
		} {
			b.Run(g.prefix+bc.name, func(b *testing.B) {
				var regions int
				b.ReportAllocs()
				for b.Loop() {
					p, err := bc.plan()
					if err != nil {
						b.Fatal(err)
					}
					regions = 0
					for _, pr := range p.Pairs {
						regions += len(pr.Regions)
					}
				}
				if regions != g.regions {
					b.Fatalf("%d regions, want %d", regions, g.regions)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(regions), "ns/region")
			})
		}
	}
}

// planTestSize is the bytes a plan holds: its pairs, regions and loops.
func planTestSize(p *Plan) int64 {
	size := int64(len(p.Pairs)) * int64(unsafe.Sizeof(Pair{}))
	for _, pr := range p.Pairs {
		size += int64(len(pr.Regions)) * int64(unsafe.Sizeof(Region{}))
		for _, rg := range pr.Regions {
			size += 3 * 8 * int64(len(rg.Counts))
		}
	}
	return size
}

// TestPlanAllocs: NewPlan allocates a small multiple of the plan it
// returns (its scratch is reused), in a number of allocations that does
// not grow with the regions. It takes the least of several calls: the
// scratch pool may drop its buffers (under the race detector at random).
func TestPlanAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, tok := range []int64{1024, 8192} {
		src := planTestKV(rng, tok, 32, 128, 2, 8, 16)
		dst := planTestKV(rng, tok, 32, 128, 2, 2, 64)
		p, err := NewPlan(src, dst, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		size := planTestSize(p)
		allocs, bytes := uint64(math.MaxUint64), uint64(math.MaxUint64)
		for range 10 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if _, err := NewPlan(src, dst, Limits{}); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			allocs = min(allocs, after.Mallocs-before.Mallocs)
			bytes = min(bytes, after.TotalAlloc-before.TotalAlloc)
		}
		t.Logf("%d tokens: %d allocations, %d bytes for a plan of %d bytes", tok, allocs, bytes, size)
		// 200: about 60 normally; the race detector's pool drops and the
		// planning goroutines add some (100 was reached under -race).
		// Bytes: twice the plan, plus 16 KiB of fixed working state that
		// dominates small plans (1024 tokens under -race once took 192
		// bytes over twice the plan).
		if allocs > 200 || bytes > 2*uint64(size)+16<<10 {
			t.Errorf("%d tokens: %d allocations, %d bytes for a plan of %d bytes", tok, allocs, bytes, size)
		}
	}
}

// planTestSame fails unless two plans are equal value for value, down to
// the capacities of their slices (each cut to its length).
func planTestSame(t *testing.T, what string, got, want []Pair) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: parallel plan differs from the sequential one:\n%+v\nwant\n%+v", what, got, want)
	}
	for i := range got {
		pr := &got[i]
		if cap(pr.Regions) != len(pr.Regions) {
			t.Fatalf("%s: pair %d: regions capacity %d, length %d", what, i, cap(pr.Regions), len(pr.Regions))
		}
		for j := range pr.Regions {
			rg := &pr.Regions[j]
			if n := len(rg.Counts); cap(rg.Counts) != n || cap(rg.SrcStrides) != n || cap(rg.DstStrides) != n {
				t.Fatalf("%s: pair %d region %d: loops not cut to their length", what, i, j)
			}
		}
	}
}

// planTestSorted sorts pairs as planLayouts does.
func planTestSorted(pairs []Pair) []Pair {
	slices.SortFunc(pairs, func(a, b Pair) int {
		if a.Src != b.Src {
			return a.Src - b.Src
		}
		return a.Dst - b.Dst
	})
	return pairs
}

// TestPlanParallel plans random reshards from sources without replicas
// on 2 to 5 goroutines, in runs of a few pieces, and sequentially: the
// same pairs, regions and bytes; with limits that the plan exceeds,
// parallel planning gives up (and NewPlan reports the sequential
// planner's error).
func TestPlanParallel(t *testing.T) {
	const seed = 31337
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	runMin := planRunMin
	defer func() { planRunMin = runMin }()
	planned, refused := 0, 0
	for i := range 300 {
		ten := planTestRandTensor(rng)
		if i%3 == 0 {
			ten = Tensor{Shape: []int64{30 + rng.Int64N(30), 1 + rng.Int64N(6), 1 + rng.Int64N(4)}, ElemSize: 2}
		}
		src, _ := planTestRandLayout(rng, ten, planTestGenOpts{maxParts: 6, maxBase: 6, maxRep: 1, negative: i%4 == 0})
		dst, _ := planTestRandLayout(rng, ten, planTestGenOpts{maxParts: 6, maxBase: 6, maxRep: 2, negative: i%4 == 1})
		boxes := planTestBoxes(t, src)
		lim := Limits{}
		switch i % 5 {
		case 3:
			lim.MaxRegions = 1 + rng.IntN(12)
		case 4:
			lim.MaxFragments = 1 + rng.Int64N(40)
		}
		p := newPlanner(src, dst, boxes, lim.withDefaults())
		if p.replicas() {
			t.Fatalf("case %d: source with replicas", i)
		}
		want, wantTotal, err := p.planSequential()
		for _, workers := range []int{2, 3, 5} {
			// Runs of 1 to 4 pieces: ranks cut into several runs.
			runs := 1 + rng.IntN(4)
			planRunMin = runs
			got, total, ok := p.planParallel(workers)
			planRunMin = runMin
			what := fmt.Sprintf("case %d, %d workers, runs of %d pieces or more, %d destination ranks", i, workers, runs, len(dst.Ranks))
			if ok != (err == nil) {
				t.Fatalf("%s: parallel planning succeeded %v, sequential error %v", what, ok, err)
			}
			if !ok {
				refused++
				continue
			}
			planned++
			if total != wantTotal {
				t.Fatalf("%s: %d bytes, sequential %d", what, total, wantTotal)
			}
			planTestSame(t, what, planTestSorted(got), planTestSorted(slices.Clone(want)))
		}
	}
	t.Logf("%d parallel plans, %d refused", planned, refused)
	if planned < 100 || refused < 10 {
		t.Fatalf("%d parallel plans, %d refused: too few of either", planned, refused)
	}
}

// TestPlanParallelNewPlan: NewPlan gives the same plan, or the same
// error, whether it may plan in parallel (GOMAXPROCS 4, no least work)
// or not, sources with replicas (planned sequentially either way)
// included.
func TestPlanParallelNewPlan(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	defaultMin := planParallelMin
	defer func() { planParallelMin = defaultMin }()
	const seed = 4711
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 10))
	plan := func(src, dst *Layout, lim Limits, min int64) (*Plan, error) {
		planParallelMin = min
		return NewPlan(src, dst, lim)
	}
	for i := range 200 {
		ten := planTestRandTensor(rng)
		src, _ := planTestRandLayout(rng, ten, planTestGenOpts{maxParts: 4, maxBase: 6, maxRep: 1 + i%3})
		dst, _ := planTestRandLayout(rng, ten, planTestGenOpts{maxParts: 4, maxBase: 6, maxRep: 2})
		lim := Limits{}
		if i%4 == 3 {
			lim.MaxRegions = 1 + rng.IntN(8)
		}
		got, err := plan(src, dst, lim, 0)
		want, werr := plan(src, dst, lim, math.MaxInt64)
		what := fmt.Sprintf("case %d", i)
		if fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Fatalf("%s: error %v, sequential %v", what, err, werr)
		}
		if werr != nil {
			continue
		}
		if got.Bytes != want.Bytes {
			t.Fatalf("%s: %d bytes, sequential %d", what, got.Bytes, want.Bytes)
		}
		planTestSame(t, what, got.Pairs, want.Pairs)
	}
	// A KV cache reshard, large enough to plan in parallel by default.
	src := planTestKV(rng, 4096, 16, 8, 2, 8, 16)
	dst := planTestKV(rng, 4096, 16, 8, 2, 2, 64)
	boxes, err := src.validate(Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if work := newPlanner(src, dst, boxes, Limits{}.withDefaults()).work; work < defaultMin {
		t.Fatalf("kv: work %d below the default least parallel work %d", work, defaultMin)
	}
	got, err := plan(src, dst, Limits{}, defaultMin)
	if err != nil {
		t.Fatal(err)
	}
	want, err := plan(src, dst, Limits{}, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	planTestSame(t, "kv", got.Pairs, want.Pairs)
}

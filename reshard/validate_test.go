package reshard

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// twoRows is a [4, 6] tensor of 2-byte elements split along axis 0 over
// two ranks, each half row-major at offset 0 of a 24-byte region.
func twoRows() *Layout {
	return &Layout{
		Tensor: Tensor{Shape: []int64{4, 6}, ElemSize: 2},
		Ranks: []Rank{
			{Pieces: []Piece{{Box: []Interval{{0, 2, 1}, {0, 6, 1}}, Strides: []int64{12, 2}}}, RegionBytes: 24},
			{Pieces: []Piece{{Box: []Interval{{2, 4, 1}, {0, 6, 1}}, Strides: []int64{12, 2}}}, RegionBytes: 24},
		},
	}
}

// twoPieces is twoRows with rank 0 holding its rows as two pieces, row 0
// at byte 0 and row 1 at byte 12.
func twoPieces() *Layout {
	l := twoRows()
	l.Ranks[0].Pieces = []Piece{
		{Box: []Interval{{0, 1, 1}, {0, 6, 1}}, Offset: 0, Strides: []int64{12, 2}},
		{Box: []Interval{{1, 2, 1}, {0, 6, 1}}, Offset: 12, Strides: []int64{12, 2}},
	}
	return l
}

func TestValidateRefuses(t *testing.T) {
	piece := func(l *Layout, r, i int) *Piece { return &l.Ranks[r].Pieces[i] }
	for _, tc := range []struct {
		name        string
		base        func() *Layout
		lim         Limits
		mutate      func(l *Layout)
		kind        error
		rank, piece int
		reason      string // a substring of the reason
	}{
		{"no axes", twoRows, Limits{}, func(l *Layout) { l.Tensor.Shape = nil }, ErrLayout, -1, -1, "no axes"},
		{"zero extent", twoRows, Limits{}, func(l *Layout) { l.Tensor.Shape[1] = 0 }, ErrLayout, -1, -1, "axis 1 has extent 0"},
		{"zero element size", twoRows, Limits{}, func(l *Layout) { l.Tensor.ElemSize = 0 }, ErrLayout, -1, -1, "element size 0"},
		{"elements overflow", twoRows, Limits{}, func(l *Layout) { l.Tensor.Shape = []int64{1 << 40, 1 << 30} }, ErrLayout, -1, -1, "elements"},
		{"bytes overflow", twoRows, Limits{}, func(l *Layout) { l.Tensor.Shape = []int64{1 << 31, 1 << 31} }, ErrLayout, -1, -1, "exceed"},
		{"no ranks", twoRows, Limits{}, func(l *Layout) { l.Ranks = nil }, ErrLayout, -1, -1, "no ranks"},
		{"negative region", twoRows, Limits{}, func(l *Layout) { l.Ranks[1].RegionBytes = -1 }, ErrLayout, 1, -1, "negative region"},
		{"box too short", twoRows, Limits{}, func(l *Layout) { piece(l, 1, 0).Box = piece(l, 1, 0).Box[:1] }, ErrLayout, 1, 0, "1 intervals for 2 axes"},
		{"strides too long", twoRows, Limits{}, func(l *Layout) { piece(l, 0, 0).Strides = []int64{12, 2, 1} }, ErrLayout, 0, 0, "3 strides"},
		{"step 0", twoRows, Limits{}, func(l *Layout) { piece(l, 1, 0).Box[1].Step = 0 }, ErrLayout, 1, 0, "step < 1"},
		{"negative lo", twoRows, Limits{}, func(l *Layout) { piece(l, 0, 0).Box[0].Lo = -1 }, ErrLayout, 0, 0, "outside [0, 4)"},
		{"hi past shape", twoRows, Limits{}, func(l *Layout) { piece(l, 1, 0).Box[1].Hi = 7 }, ErrLayout, 1, 0, "outside [0, 6)"},
		{"empty interval", twoRows, Limits{}, func(l *Layout) { piece(l, 1, 0).Box[0] = Interval{3, 3, 1} }, ErrLayout, 1, 0, "is empty"},
		{"negative stride", twoRows, Limits{}, func(l *Layout) { piece(l, 1, 0).Strides[1] = -2 }, ErrLayout, 1, 0, "negative stride"},
		{"zero stride", twoRows, Limits{}, func(l *Layout) { piece(l, 1, 0).Strides[0] = 0 }, ErrLayout, 1, 0, "stride 0 but selects 2"},
		{"negative offset", twoRows, Limits{}, func(l *Layout) { piece(l, 0, 0).Offset = -4 }, ErrLayout, 0, 0, "negative offset"},
		{"past region", twoRows, Limits{}, func(l *Layout) { piece(l, 1, 0).Offset = 2 }, ErrLayout, 1, 0, "bytes [2, 26) exceed the region of 24"},
		{"offset overflow", twoRows, Limits{}, func(l *Layout) {
			piece(l, 1, 0).Offset = math.MaxInt64 - 5
			l.Ranks[1].RegionBytes = math.MaxInt64
		}, ErrLayout, 1, 0, "overflow"},
		{"stride overflow", twoRows, Limits{}, func(l *Layout) {
			piece(l, 0, 0).Strides[0] = math.MaxInt64 / 2
			piece(l, 0, 0).Strides[1] = math.MaxInt64 / 8
			l.Ranks[0].RegionBytes = math.MaxInt64
		}, ErrLayout, 0, 0, "overflow"},
		{"equal strides", twoRows, Limits{}, func(l *Layout) { piece(l, 1, 0).Strides = []int64{2, 2} }, ErrOverlap, 1, 0, "axis 1 stride 2 is inside the 4-byte extent"},
		{"stride below element", twoRows, Limits{}, func(l *Layout) { piece(l, 0, 0).Strides[1] = 1 }, ErrOverlap, 0, 0, "less than the element size"},
		{"row overlaps next row", twoRows, Limits{}, func(l *Layout) { piece(l, 0, 0).Strides[0] = 10 }, ErrOverlap, 0, 0, "axis 0 stride 10 is inside the 12-byte extent"},
		{"exotic interleaving", twoRows, Limits{}, func(l *Layout) {
			// Rows 6 bytes apart, columns 4 apart: no two elements of
			// the [2, 6] piece collide, but the axes do not nest.
			piece(l, 0, 0).Strides = []int64{6, 4}
			l.Ranks[0].RegionBytes = 64
		}, ErrOverlap, 0, 0, "axis 0 stride 6 is inside the 22-byte extent of the axes within it (axis 1 stride 4)"},
		{"nest of a piece with the strides of the last", twoPieces, Limits{}, func(l *Layout) {
			// Piece 0 passes with strides {2, 2} (one row); piece 1 has
			// the same strides but two rows, which collide.
			piece(l, 0, 0).Strides = []int64{2, 2}
			piece(l, 0, 1).Box[0] = Interval{1, 3, 1}
			piece(l, 0, 1).Strides = []int64{2, 2}
			l.Ranks[0].RegionBytes = 64
		}, ErrOverlap, 0, 1, "axis 1 stride 2 is inside the 4-byte extent of the axes within it (axis 0 stride 2)"},
		{"spans overlap", twoPieces, Limits{}, func(l *Layout) { piece(l, 0, 1).Offset = 10 }, ErrOverlap, 0, 1, "bytes [10, 22) overlap bytes [0, 12) of piece 0"},
		{"spans interleave", twoPieces, Limits{}, func(l *Layout) {
			// Row 1 in the odd elements of row 0's bytes: no element
			// collides, but the spans [0, 22) and [2, 24) intersect.
			piece(l, 0, 0).Strides = []int64{24, 4}
			piece(l, 0, 1).Strides = []int64{24, 4}
			piece(l, 0, 1).Offset = 2
		}, ErrOverlap, 0, 1, "overlap bytes [0, 22) of piece 0"},
		{"same box on one rank", twoPieces, Limits{}, func(l *Layout) {
			piece(l, 0, 1).Box[0] = Interval{0, 1, 1}
		}, ErrOverlap, 0, 1, "same elements [0, 1)×[0, 6) as piece 0 of the same rank"},
		{"same indices on one rank", twoPieces, Limits{}, func(l *Layout) {
			// A different spelling of the same single index.
			piece(l, 0, 1).Box[0] = Interval{0, 1, 3}
		}, ErrOverlap, 0, 1, "as piece 0 of the same rank"},
		{"partial overlap on one rank", twoPieces, Limits{}, func(l *Layout) {
			piece(l, 0, 0).Box[1] = Interval{0, 3, 1}
			piece(l, 0, 1).Box = []Interval{{0, 2, 1}, {2, 5, 1}}
			piece(l, 0, 1).Strides = []int64{6, 2}
		}, ErrOverlap, 0, 1, "shares element [0 2] with piece 0 [0, 1)×[0, 3) of the same rank"},
		{"partial overlap across ranks", twoRows, Limits{}, func(l *Layout) {
			piece(l, 1, 0).Box[0] = Interval{1, 3, 1}
		}, ErrOverlap, 1, 0, "shares element [1 0] with rank 0 piece 0"},
		{"replica of a different box", twoRows, Limits{}, func(l *Layout) {
			// Rank 2 holds rows [0, 3): it overlaps both ranks' rows.
			l.Ranks = append(l.Ranks, Rank{
				Pieces:      []Piece{{Box: []Interval{{0, 3, 1}, {0, 6, 1}}, Strides: []int64{12, 2}}},
				RegionBytes: 36,
			})
		}, ErrOverlap, 2, 0, "with rank 0 piece 0"},
		{"cyclic meets block", twoRows, Limits{}, func(l *Layout) {
			// Rank 0 holds rows 0 and 2 (step 2), rank 1 rows [2, 4).
			piece(l, 0, 0).Box[0] = Interval{0, 4, 2}
		}, ErrOverlap, 1, 0, "shares element [2 0] with rank 0 piece 0"},
		{"gap", twoRows, Limits{}, func(l *Layout) { piece(l, 1, 0).Box[1] = Interval{0, 5, 1} }, ErrCoverage, -1, -1, "2 of the tensor's 24 elements"},
		{"cyclic gap", twoRows, Limits{}, func(l *Layout) { piece(l, 1, 0).Box[1] = Interval{0, 6, 2} }, ErrCoverage, -1, -1, "6 of the tensor's 24"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.base()
			if err := l.Validate(tc.lim); err != nil {
				t.Fatalf("base layout: %v", err)
			}
			tc.mutate(l)
			before := l.Clone()
			err := l.Validate(tc.lim)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("Validate = %v, want %v", err, tc.kind)
			}
			var le *LayoutError
			if !errors.As(err, &le) {
				t.Fatalf("Validate = %T %v, want *LayoutError", err, err)
			}
			if le.Rank != tc.rank || le.Piece != tc.piece {
				t.Errorf("error at rank %d piece %d, want rank %d piece %d: %v", le.Rank, le.Piece, tc.rank, tc.piece, err)
			}
			if !strings.Contains(le.Reason, tc.reason) {
				t.Errorf("reason %q does not say %q", le.Reason, tc.reason)
			}
			if !layoutsEqual(l, before) {
				t.Errorf("Validate changed the layout")
			}
		})
	}
}

func TestValidateLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lim   Limits
		limit string
		value int64
		max   int64
	}{
		{"axes", Limits{MaxAxes: 1}, "axes", 2, 1},
		{"pieces", Limits{MaxPieces: 1}, "pieces", 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := twoRows().Validate(tc.lim)
			var le *LimitError
			if !errors.Is(err, ErrLimit) || !errors.As(err, &le) {
				t.Fatalf("Validate = %v, want a *LimitError", err)
			}
			if le.Limit != tc.limit || le.Value != tc.value || le.Max != tc.max {
				t.Errorf("got %+v, want %s %d > %d", *le, tc.limit, tc.value, tc.max)
			}
		})
	}
	if err := twoRows().Validate(Limits{MaxAxes: 2, MaxPieces: 2}); err != nil {
		t.Errorf("at the limits: %v", err)
	}
	var nilLayout *Layout
	if err := nilLayout.Validate(Limits{}); !errors.Is(err, ErrLayout) {
		t.Errorf("nil layout: %v", err)
	}
}

func TestValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		base   func() *Layout
		mutate func(l *Layout)
	}{
		{"row-major", twoRows, func(*Layout) {}},
		{"column-major", twoRows, func(l *Layout) { l.Ranks[1].Pieces[0].Strides = []int64{2, 4} }},
		{"padded rows", twoRows, func(l *Layout) {
			l.Ranks[0].Pieces[0].Strides = []int64{16, 2}
			l.Ranks[0].RegionBytes = 28
		}},
		{"padded elements", twoRows, func(l *Layout) {
			l.Ranks[0].Pieces[0].Strides = []int64{48, 8}
			l.Ranks[0].Pieces[0].Offset = 3
			l.Ranks[0].RegionBytes = 3 + 48 + 40 + 2
		}},
		{"pieces in any byte order", twoPieces, func(l *Layout) {
			l.Ranks[0].Pieces[0].Offset, l.Ranks[0].Pieces[1].Offset = 12, 0
		}},
		{"zero stride on one index", twoPieces, func(l *Layout) { l.Ranks[0].Pieces[1].Strides[0] = 0 }},
		{"any stride on one index", twoPieces, func(l *Layout) { l.Ranks[0].Pieces[0].Strides[0] = 1 }},
		{"replicas", twoRows, func(l *Layout) {
			l.Ranks = append(l.Ranks, twoRows().Ranks...)
			l.Ranks[2].Pieces[0].Strides = []int64{2, 4} // a replica may store its box differently
		}},
		{"replica spelled differently", twoPieces, func(l *Layout) {
			rk := twoPieces().Ranks[0]
			rk.Pieces[1].Box[0] = Interval{1, 2, 9}
			l.Ranks = append(l.Ranks, rk)
		}},
		{"cyclic", twoRows, func(l *Layout) {
			l.Ranks[0].Pieces[0].Box[0] = Interval{0, 4, 2}
			l.Ranks[1].Pieces[0].Box[0] = Interval{1, 4, 2}
		}},
		{"region larger than needed", twoRows, func(l *Layout) { l.Ranks[1].RegionBytes = 1 << 40 }},
		{"rank holding nothing", twoRows, func(l *Layout) { l.Ranks = append(l.Ranks, Rank{RegionBytes: 0}) }},
		{"one piece", twoRows, func(l *Layout) {
			l.Ranks = l.Ranks[:1]
			l.Ranks[0].Pieces[0].Box[0].Hi = 4
			l.Ranks[0].RegionBytes = 48
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.base()
			tc.mutate(l)
			if err := l.Validate(Limits{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNestSound checks on random strides that whatever the nest rule
// accepts has no two elements colliding in memory, and that every nested
// arrangement (a permutation of padded dense strides) is accepted.
func TestNestSound(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	accepted := 0
	for range 3000 {
		axes := 1 + rng.IntN(3)
		elem := 1 + rng.Int64N(3)
		p := Piece{Box: make([]Interval, axes), Strides: make([]int64, axes)}
		for a := range axes {
			p.Box[a] = Interval{Lo: 0, Hi: 1 + rng.Int64N(4), Step: 1}
			p.Strides[a] = rng.Int64N(24)
		}
		scratch := make([]int, axes)
		if checkNest(&p, elem, scratch) == "" {
			accepted++
			if !pieceBytesDisjoint(&p, elem) {
				t.Fatalf("accepted colliding strides %v, box %v, element %d", p.Strides, p.Box, elem)
			}
		}
		// A nested arrangement of the same box: dense strides in a random
		// order, each padded.
		order := rng.Perm(axes)
		size := elem
		for k := axes - 1; k >= 0; k-- {
			size += rng.Int64N(3)
			p.Strides[order[k]] = size
			size *= p.Box[order[k]].Len()
		}
		if reason := checkNest(&p, elem, scratch); reason != "" {
			t.Fatalf("refused nested strides %v, box %v: %s", p.Strides, p.Box, reason)
		}
	}
	if accepted == 0 {
		t.Fatal("no random strides accepted: the test checks nothing")
	}
}

// pieceBytesDisjoint reports whether no two elements of p share a byte.
func pieceBytesDisjoint(p *Piece, elem int64) bool {
	used := map[int64]bool{}
	ok := true
	forEachElement(p.Box, func(k []int64, _ []int64) {
		addr := p.Offset
		for a := range k {
			addr += k[a] * p.Strides[a]
		}
		for b := addr; b < addr+elem; b++ {
			if used[b] {
				ok = false
			}
			used[b] = true
		}
	})
	return ok
}

// forEachElement calls f with the position (k_a) and index of every
// element the box selects.
func forEachElement(box []Interval, f func(k, idx []int64)) {
	for _, iv := range box {
		if iv.Len() == 0 {
			return
		}
	}
	k := make([]int64, len(box))
	idx := make([]int64, len(box))
	for a := range box {
		idx[a] = box[a].Lo
	}
	for {
		f(k, idx)
		a := len(box) - 1
		for ; a >= 0; a-- {
			k[a]++
			if k[a] < box[a].Len() {
				idx[a] = box[a].Lo + k[a]*box[a].Step
				break
			}
			k[a], idx[a] = 0, box[a].Lo
		}
		if a < 0 {
			return
		}
	}
}

func TestFirstCommon(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	// Small progressions against brute force.
	for range 20000 {
		x := Interval{Lo: rng.Int64N(40), Step: 1 + rng.Int64N(7)}
		x.Hi = x.Lo + 1 + rng.Int64N(60)
		y := Interval{Lo: rng.Int64N(40), Step: 1 + rng.Int64N(7)}
		y.Hi = y.Lo + 1 + rng.Int64N(60)
		x, y = canonical(x), canonical(y)
		want, wantOK := int64(0), false
		for i := int64(0); i < 120; i++ {
			if x.Contains(i) && y.Contains(i) {
				want, wantOK = i, true
				break
			}
		}
		got, ok := firstCommon(x, y)
		if ok != wantOK || ok && got != want {
			t.Fatalf("firstCommon(%+v, %+v) = %d %v, want %d %v", x, y, got, ok, want, wantOK)
		}
	}
	// Huge steps, whose least common multiple overflows int64, against
	// the Chinese remainder theorem in big integers.
	for iter := range 4000 {
		x := Interval{Lo: rng.Int64N(1 << 40), Step: 1<<30 + rng.Int64N(1<<40)}
		y := Interval{Lo: rng.Int64N(1 << 40), Step: 1<<30 + rng.Int64N(1<<40)}
		if iter%2 == 0 { // make c a common index
			c := rng.Int64N(1 << 52)
			x.Lo = c % x.Step
			y.Lo = c % y.Step
		}
		x.Hi = x.Lo + x.Step*rng.Int64N(1<<20) + 1
		y.Hi = y.Lo + y.Step*rng.Int64N(1<<20) + 1
		x, y = canonical(x), canonical(y)
		want, wantOK := bigFirstCommon(x, y)
		got, ok := firstCommon(x, y)
		if ok != wantOK || ok && got != want {
			t.Fatalf("firstCommon(%+v, %+v) = %d %v, want %d %v", x, y, got, ok, want, wantOK)
		}
		if ok && (!x.Contains(got) || !y.Contains(got)) {
			t.Fatalf("firstCommon(%+v, %+v) = %d, not common", x, y, got)
		}
	}
	// A common index exists although the lcm of the steps overflows.
	x := Interval{Lo: 3, Hi: 1 << 62, Step: 1<<35 + 1}
	y := Interval{Lo: 5, Hi: 1 << 62, Step: 1<<35 - 1}
	if i, ok := firstCommon(x, y); !ok || !x.Contains(i) || !y.Contains(i) {
		t.Errorf("firstCommon(%+v, %+v) = %d %v", x, y, i, ok)
	}
}

// bigFirstCommon is firstCommon by the Chinese remainder theorem in big
// integers, where nothing overflows.
func bigFirstCommon(x, y Interval) (int64, bool) {
	lo, hi := max(x.Lo, y.Lo), min(x.Hi, y.Hi)
	if hi <= lo {
		return 0, false
	}
	A, B := big.NewInt(x.Step), big.NewInt(y.Step)
	g := new(big.Int).GCD(nil, nil, A, B)
	d := big.NewInt(y.Lo - x.Lo)
	if new(big.Int).Rem(d, g).Sign() != 0 {
		return 0, false
	}
	m := new(big.Int).Quo(B, g)
	period := new(big.Int).Mul(A, m)
	k := new(big.Int) // x.Lo + A*k is common: A*k = d (mod B)
	if m.Cmp(big.NewInt(1)) != 0 {
		k.ModInverse(new(big.Int).Quo(A, g), m)
		k.Mul(k, new(big.Int).Quo(d, g))
		k.Mod(k, m)
	}
	c := new(big.Int).Mul(A, k)
	c.Add(c, big.NewInt(x.Lo))
	// The first common index at or after lo: c + ceil((lo-c)/period)*period.
	n := new(big.Int).Sub(big.NewInt(lo), c)
	n.Add(n, period)
	n.Sub(n, big.NewInt(1))
	n.Div(n, period) // Euclidean: the floor for a positive divisor
	c.Add(c, n.Mul(n, period))
	if c.Cmp(big.NewInt(hi)) >= 0 {
		return 0, false
	}
	return c.Int64(), true
}

// bruteVerdict decides a layout of a small tensor element by element and
// byte by byte, independently of Validate: the sentinel Validate must
// return (ErrLayout before ErrOverlap before ErrCoverage), or nil. The
// tensor itself must be well formed.
func bruteVerdict(l *Layout) error {
	shape := l.Tensor.Shape
	elem := l.Tensor.ElemSize
	axes := len(shape)
	type ref struct{ r, i int }
	var refs []ref
	ends := map[ref]int64{}
	for r, rk := range l.Ranks {
		if rk.RegionBytes < 0 {
			return ErrLayout
		}
		for i, p := range rk.Pieces {
			refs = append(refs, ref{r, i})
			if len(p.Box) != axes || len(p.Strides) != axes || p.Offset < 0 {
				return ErrLayout
			}
			for a, iv := range p.Box {
				if iv.Step < 1 || iv.Lo < 0 || iv.Hi > shape[a] || iv.Len() == 0 || p.Strides[a] < 0 ||
					p.Strides[a] == 0 && iv.Len() > 1 {
					return ErrLayout
				}
			}
			end := int64(0)
			forEachElement(p.Box, func(k, _ []int64) {
				addr := p.Offset
				for a := range k {
					addr += k[a] * p.Strides[a]
				}
				end = max(end, addr+elem)
			})
			if end > rk.RegionBytes {
				return ErrLayout
			}
			ends[ref{r, i}] = end
		}
	}
	// Memory: elements of a piece, spans of a rank's pieces.
	for r, rk := range l.Ranks {
		for i := range rk.Pieces {
			p := &rk.Pieces[i]
			if !pieceBytesDisjoint(p, elem) {
				return ErrOverlap
			}
			for j := range i {
				q := &rk.Pieces[j]
				if p.Offset < ends[ref{r, j}] && q.Offset < ends[ref{r, i}] {
					return ErrOverlap
				}
			}
		}
	}
	// The tensor: holders of every element.
	strides := make([]int64, axes)
	n := int64(1)
	for a := axes - 1; a >= 0; a-- {
		strides[a] = n
		n *= shape[a]
	}
	holders := make([][]ref, n)
	for _, f := range refs {
		forEachElement(l.Ranks[f.r].Pieces[f.i].Box, func(_, idx []int64) {
			e := int64(0)
			for a := range idx {
				e += idx[a] * strides[a]
			}
			holders[e] = append(holders[e], f)
		})
	}
	sameIndices := func(x, y []Interval) bool {
		for a := range x {
			for i := int64(0); i < shape[a]; i++ {
				if x[a].Contains(i) != y[a].Contains(i) {
					return false
				}
			}
		}
		return true
	}
	missing := false
	for _, hs := range holders {
		missing = missing || len(hs) == 0
		for i := range hs {
			for j := range i {
				x, y := hs[i], hs[j]
				if x.r == y.r || !sameIndices(l.Ranks[x.r].Pieces[x.i].Box, l.Ranks[y.r].Pieces[y.i].Box) {
					return ErrOverlap
				}
			}
		}
	}
	if missing {
		return ErrCoverage
	}
	return nil
}

// checkVerdict runs Validate on l and compares it with bruteVerdict,
// and checks that a *LayoutError names a rank and piece of l.
func checkVerdict(t *testing.T, l *Layout, what string) error {
	t.Helper()
	want := bruteVerdict(l)
	err := l.Validate(Limits{})
	switch {
	case want == nil && err != nil:
		t.Fatalf("%s: Validate = %v, brute force accepts", what, err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("%s: Validate = %v, want %v", what, err, want)
	}
	var le *LayoutError
	if err != nil {
		if !errors.As(err, &le) {
			t.Fatalf("%s: %T %v is not a *LayoutError", what, err, err)
		}
		if le.Rank < -1 || le.Rank >= len(l.Ranks) ||
			le.Piece < -1 || le.Rank >= 0 && le.Piece >= len(l.Ranks[le.Rank].Pieces) ||
			le.Rank < 0 && le.Piece >= 0 {
			t.Fatalf("%s: %v names no piece of the layout", what, err)
		}
		if (le.Kind == ErrCoverage) != (le.Rank < 0) {
			t.Fatalf("%s: %v: rank %d", what, err, le.Rank)
		}
	}
	return err
}

// randomLayout is a random small Sharded layout, paginated along a random
// contiguous axis half of the time.
func randomLayout(t *testing.T, rng *rand.Rand) *Layout {
	t.Helper()
	axes := 1 + rng.IntN(3)
	tensor := Tensor{Shape: make([]int64, axes), ElemSize: 1 + rng.Int64N(4)}
	spec := ShardSpec{Parts: make([]int64, axes), Cyclic: make([]bool, axes),
		Replicas: rng.IntN(3), Order: rng.Perm(axes), Base: rng.Int64N(8)}
	for a := range axes {
		tensor.Shape[a] = 1 + rng.Int64N(6)
		spec.Parts[a] = 1 + rng.Int64N(tensor.Shape[a])
		spec.Cyclic[a] = rng.IntN(3) == 0
	}
	l, err := Sharded(tensor, spec)
	if err != nil {
		t.Fatalf("Sharded(%+v, %+v): %v", tensor, spec, err)
	}
	if rng.IntN(2) == 0 {
		return l
	}
	var contiguous []int
	for a := range axes {
		if !spec.Cyclic[a] || spec.Parts[a] == 1 {
			contiguous = append(contiguous, a)
		}
	}
	if len(contiguous) == 0 {
		return l
	}
	axis := contiguous[rng.IntN(len(contiguous))]
	pageLen := 1 + rng.Int64N(3)
	tables := make([][]int64, len(l.Ranks))
	for r := range tables {
		n := l.Ranks[r].Pieces[0].Box[axis].Len()
		pages := (n + pageLen - 1) / pageLen
		perm := rng.Perm(int(pages) + rng.IntN(3))
		for _, s := range perm[:pages] {
			tables[r] = append(tables[r], int64(s))
		}
	}
	p, err := Paginate(l, axis, pageLen, tables)
	if err != nil {
		t.Fatalf("Paginate(axis %d, page %d, %v): %v", axis, pageLen, tables, err)
	}
	return p
}

// TestValidateProperty builds random small layouts, confirms by brute
// force that each element is held by exactly one distinct box and that
// Validate accepts, then mutates them and compares Validate with the
// brute-force verdict.
func TestValidateProperty(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	refused := map[string]map[error]int{}
	for iter := range 1500 {
		l := randomLayout(t, rng)
		if err := bruteVerdict(l); err != nil {
			t.Fatalf("iteration %d: brute force refuses the built layout: %v", iter, err)
		}
		if err := l.Validate(Limits{}); err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		checkDistinctCover(t, l)

		m := l.Clone()
		name := mutate(rng, m)
		if name == "" {
			continue
		}
		err := checkVerdict(t, m, name)
		if refused[name] == nil {
			refused[name] = map[error]int{}
		}
		for _, kind := range []error{ErrLayout, ErrOverlap, ErrCoverage} {
			if errors.Is(err, kind) {
				refused[name][kind]++
			}
		}
		if err == nil {
			refused[name][nil]++
		}
	}
	t.Logf("verdicts per mutation: %v", refused)
	for _, want := range []struct {
		name string
		kind error
	}{
		{"shrink", ErrCoverage}, {"shrink", ErrOverlap}, {"shift", ErrOverlap}, {"shift", ErrLayout},
		{"duplicate", ErrOverlap}, {"extend", ErrOverlap},
	} {
		if refused[want.name][want.kind] == 0 {
			t.Errorf("no %s mutation was refused with %v: the property test lacks variety", want.name, want.kind)
		}
	}
}

// checkDistinctCover checks by brute force that every element of l's
// tensor is held by exactly one distinct box (replicas counted once).
func checkDistinctCover(t *testing.T, l *Layout) {
	t.Helper()
	shape := l.Tensor.Shape
	strides := make([]int64, len(shape))
	n := int64(1)
	for a := len(shape) - 1; a >= 0; a-- {
		strides[a] = n
		n *= shape[a]
	}
	count := make([]int, n)
	seen := map[string]bool{}
	for _, rk := range l.Ranks {
		for _, p := range rk.Pieces {
			key := boxKey(p.Box, shape)
			if seen[key] {
				continue
			}
			seen[key] = true
			forEachElement(p.Box, func(_, idx []int64) {
				e := int64(0)
				for a := range idx {
					e += idx[a] * strides[a]
				}
				count[e]++
			})
		}
	}
	for e, c := range count {
		if c != 1 {
			t.Fatalf("element %d (row-major) held by %d distinct boxes", e, c)
		}
	}
}

// boxKey names the indices a box selects.
func boxKey(box []Interval, shape []int64) string {
	var b strings.Builder
	for a, iv := range box {
		for i := range shape[a] {
			if iv.Contains(i) {
				fmt.Fprintf(&b, "%d,", i)
			}
		}
		b.WriteByte('|')
	}
	return b.String()
}

// mutate applies one random damaging change to l and names it, or
// returns "" when l offers no place for the chosen change.
func mutate(rng *rand.Rand, l *Layout) string {
	r := rng.IntN(len(l.Ranks))
	rk := &l.Ranks[r]
	i := rng.IntN(len(rk.Pieces))
	p := &rk.Pieces[i]
	a := rng.IntN(len(p.Box))
	iv := &p.Box[a]
	switch rng.IntN(4) {
	case 0: // shrink an interval by its first or last index
		if iv.Len() < 2 {
			return ""
		}
		if rng.IntN(2) == 0 {
			iv.Lo += iv.Step
		} else {
			iv.Hi = iv.Last()
		}
		return "shrink"
	case 1: // shift the offset into another piece of the rank, or anywhere
		if len(rk.Pieces) > 1 && rng.IntN(4) != 0 {
			q := &rk.Pieces[(i+1+rng.IntN(len(rk.Pieces)-1))%len(rk.Pieces)]
			p.Offset = q.Offset + rng.Int64N(l.Tensor.ElemSize+1)
		} else {
			p.Offset = rng.Int64N(rk.RegionBytes + 1)
		}
		return "shift"
	case 2: // duplicate the piece on its rank, somewhere in a larger region
		q := Piece{Box: append([]Interval(nil), p.Box...), Strides: append([]int64(nil), p.Strides...),
			Offset: rk.RegionBytes}
		rk.RegionBytes *= 2
		rk.Pieces = append(rk.Pieces, q)
		return "duplicate"
	default: // extend an interval by one index onto a neighbour
		switch {
		case iv.Last()+iv.Step < l.Tensor.Shape[a]:
			iv.Hi = iv.Last() + iv.Step + 1
		case iv.Lo-iv.Step >= 0:
			iv.Lo -= iv.Step
		default:
			return ""
		}
		rk.RegionBytes += rk.RegionBytes + 64 // room for the longer piece
		return "extend"
	}
}

// layoutsEqual reports whether two layouts are identical.
func layoutsEqual(x, y *Layout) bool {
	if x.Tensor.ElemSize != y.Tensor.ElemSize || !slicesEqual(x.Tensor.Shape, y.Tensor.Shape) ||
		len(x.Ranks) != len(y.Ranks) {
		return false
	}
	for r := range x.Ranks {
		a, b := x.Ranks[r], y.Ranks[r]
		if a.RegionBytes != b.RegionBytes || len(a.Pieces) != len(b.Pieces) {
			return false
		}
		for i := range a.Pieces {
			p, q := a.Pieces[i], b.Pieces[i]
			if p.Offset != q.Offset || !slicesEqual(p.Box, q.Box) || !slicesEqual(p.Strides, q.Strides) {
				return false
			}
		}
	}
	return true
}

func slicesEqual[T comparable](x, y []T) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

// pagedKV is a KV cache [2, 65536 tokens, 64 heads, 128] of 2-byte
// elements, tensor parallel over 8 ranks along heads, each rank's shard
// paged along tokens into 4096 pages of 16 tokens in a shuffled pool:
// 32768 pieces, which a sweep along axis 0 would test pairwise.
func pagedKV(tb testing.TB) *Layout {
	tb.Helper()
	const ranks, pages, pageLen = 8, 4096, 16
	t := Tensor{Shape: []int64{2, pages * pageLen, 64, 128}, ElemSize: 2}
	l, err := Sharded(t, ShardSpec{Parts: []int64{1, 1, ranks, 1}, Order: []int{1, 0, 2, 3}})
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	tables := make([][]int64, ranks)
	for r := range tables {
		for _, s := range rng.Perm(pages + 100)[:pages] {
			tables[r] = append(tables[r], int64(s))
		}
	}
	p, err := Paginate(l, 1, pageLen, tables)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestValidatePaged(t *testing.T) {
	l := pagedKV(t)
	if err := l.Validate(Limits{}); err != nil {
		t.Fatal(err)
	}
	// One page moved half way onto rank 4's heads overlaps rank 4's page.
	heads := &l.Ranks[5].Pieces[1234].Box[2]
	*heads = Interval{Lo: heads.Lo - 4, Hi: heads.Hi - 4, Step: 1}
	err := l.Validate(Limits{})
	var le *LayoutError
	if !errors.Is(err, ErrOverlap) || !errors.As(err, &le) || le.Rank != 5 || le.Piece != 1234 ||
		!strings.Contains(le.Reason, "with rank 4 piece 1234") {
		t.Fatalf("Validate = %v, want an overlap at rank 5 piece 1234", err)
	}
	// Moved all the way it is a replica of rank 4's page, and rank 5's
	// heads of those 16 tokens are missing.
	*heads = l.Ranks[4].Pieces[1234].Box[2]
	err = l.Validate(Limits{})
	if !errors.Is(err, ErrCoverage) || !strings.Contains(err.Error(), "32768 of the tensor's") {
		t.Fatalf("Validate = %v, want 2*16*8*128 = 32768 elements missing", err)
	}
}

func BenchmarkValidatePaged(b *testing.B) {
	l := pagedKV(b)
	pieces := 0
	for _, rk := range l.Ranks {
		pieces += len(rk.Pieces)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Validate(Limits{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(pieces), "ns/piece")
}

// TestEdgeCounts checks the counts of interval starts and ends against a
// scan, counted densely (short axes) and by sorting (long ones).
func TestEdgeCounts(t *testing.T) {
	const seed = 41
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	var c edgeCounts // reused, as the scratch reuses it
	dense := 0
	for iter := range 500 {
		n := rng.IntN(30)
		extent := 1 + rng.Int64N(int64(8*n+8))
		lo, hi := make([]int64, n), make([]int64, n)
		c.reset(n, extent)
		for i := range n {
			lo[i] = rng.Int64N(extent)
			hi[i] = lo[i] + 1 + rng.Int64N(extent-lo[i])
			c.add(lo[i], hi[i])
		}
		c.done()
		if c.dense {
			dense++
		}
		var apart int64
		for i := range n {
			for j := range n {
				if hi[i] <= lo[j] {
					apart++
				}
			}
		}
		if got := c.apart(); got != apart {
			t.Fatalf("iteration %d (dense %v): apart %d, want %d", iter, c.dense, got, apart)
		}
		for x := int64(-1); x <= extent+1; x++ {
			var below, by int64
			for i := range n {
				if lo[i] < x {
					below++
				}
				if hi[i] <= x {
					by++
				}
			}
			if got := c.startsBelow(x); got != below {
				t.Fatalf("iteration %d (dense %v): startsBelow(%d) = %d, want %d", iter, c.dense, x, got, below)
			}
			if got := c.endsBy(x); got != by {
				t.Fatalf("iteration %d (dense %v): endsBy(%d) = %d, want %d", iter, c.dense, x, got, by)
			}
		}
	}
	if dense == 0 || dense == 500 {
		t.Fatalf("%d of 500 counts dense: one kind untested", dense)
	}
}

// TestSpanCheck checks that bucketing proves spans disjoint only when
// they are, and that check reports what sorting reports.
func TestSpanCheck(t *testing.T) {
	const seed = 43
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	proved, overlapping := 0, 0
	for iter := range 2000 {
		// Pages of a pool, in a shuffled order, sometimes nudged onto a
		// neighbour, sometimes far apart.
		n := 1 + rng.IntN(20)
		page := 1 + rng.Int64N(64)
		slots := rng.Perm(n + rng.IntN(n+1))
		var c spanCheck
		for i := range n {
			lo := int64(slots[i])*page + rng.Int64N(3)
			if rng.IntN(8) == 0 {
				lo += rng.Int64N(1 << 20)
			}
			hi := lo + page - rng.Int64N(min(page, 3))
			c.spans = append(c.spans, span{lo: lo, hi: hi, piece: i})
		}
		disjoint := true
		for i, x := range c.spans {
			for _, y := range c.spans[:i] {
				disjoint = disjoint && (x.hi <= y.lo || y.hi <= x.lo)
			}
		}
		if !disjoint {
			overlapping++
		}
		saved := slices.Clone(c.spans)
		if c.bucketed() {
			proved++
			if !disjoint {
				t.Fatalf("iteration %d: bucketing proved overlapping spans %v disjoint", iter, saved)
			}
		}
		got := c.check(3)
		c.spans = saved
		want := c.sorted(3)
		if (got == nil) != disjoint || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("iteration %d: check %v, sorting %v, disjoint %v: %v", iter, got, want, disjoint, saved)
		}
	}
	if proved == 0 || proved == 2000 || overlapping == 0 {
		t.Fatalf("bucketing proved %d of 2000, %d overlapping: a path untested", proved, overlapping)
	}
}

// TestSortRefs checks sortRefs, counting by buckets of one index or of
// several, against a sort by the same order.
func TestSortRefs(t *testing.T) {
	const seed = 47
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 6))
	dense := 0
	for iter := range 300 {
		axes := 1 + rng.IntN(3)
		ten := Tensor{ElemSize: 1}
		for range axes {
			ten.Shape = append(ten.Shape, 1+rng.Int64N(40))
		}
		l := randomBoxes(rng, ten)
		n := 0
		for _, rk := range l.Ranks {
			n += len(rk.Pieces)
		}
		ax, ax2 := rng.IntN(axes), rng.IntN(axes+1)-1
		if ax2 == ax {
			ax2 = -1
		}
		counts := newAxisCounts(ten.Shape, n, nil)
		for _, rk := range l.Ranks {
			for _, pc := range rk.Pieces {
				counts.add(pc.Box)
			}
		}
		ec := &counts.ec[ax]
		ec.done()
		if ec.dense {
			dense++
		}
		below := slices.Clone(ec.below)
		got := sortRefs(l, n, ax, ax2, ec, new(scratch))
		if ec.dense && !slices.Equal(ec.below, below) {
			t.Fatalf("iteration %d: sortRefs left the counts changed", iter)
		}
		var want []boxRef
		for r, rk := range l.Ranks {
			for i, pc := range rk.Pieces {
				x := boxRef{lo: canonical(pc.Box[ax]).Lo, hi: canonical(pc.Box[ax]).Hi, lo2: 0, hi2: 1, rank: int32(r), piece: int32(i)}
				if ax2 >= 0 {
					x.lo2, x.hi2 = int32(canonical(pc.Box[ax2]).Lo), int32(canonical(pc.Box[ax2]).Hi)
				}
				want = append(want, x)
			}
		}
		slices.SortFunc(want, func(x, y boxRef) int {
			return cmp.Or(cmp.Compare(x.lo, y.lo), cmp.Compare(x.lo2, y.lo2), cmp.Compare(x.hi2, y.hi2),
				compareBoxes(l.Ranks[x.rank].Pieces[x.piece].Box, l.Ranks[y.rank].Pieces[y.piece].Box),
				cmp.Compare(x.rank, y.rank), cmp.Compare(x.piece, y.piece))
		})
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d (axis %d, filter %d, dense %v):\n got %v\nwant %v", iter, ax, ax2, ec.dense, got, want)
		}
	}
	if dense == 0 || dense == 300 {
		t.Fatalf("%d of 300 sorts counted by single indices: one kind untested", dense)
	}
}

// randomBoxes is a layout of t whose pieces have random boxes, repeated
// on some ranks (memory left out: sortRefs reads only the boxes).
func randomBoxes(rng *rand.Rand, t Tensor) *Layout {
	l := &Layout{Tensor: t, Ranks: make([]Rank, 1+rng.IntN(4))}
	for range rng.IntN(12) {
		box := make([]Interval, len(t.Shape))
		for a, e := range t.Shape {
			lo := rng.Int64N(e)
			box[a] = Interval{Lo: lo, Hi: lo + 1 + rng.Int64N(e-lo), Step: 1 + rng.Int64N(3)}
		}
		for r := range l.Ranks {
			if rng.IntN(2) == 0 {
				l.Ranks[r].Pieces = append(l.Ranks[r].Pieces, Piece{Box: box})
			}
		}
	}
	return l
}

// TestFilterAxisFits: an axis longer than 2^31-1 is never the filter
// axis, whose spans the refs hold in 32 bits; such a layout validates
// and plans.
func TestFilterAxisFits(t *testing.T) {
	const long = int64(1) << 40
	ten := Tensor{Shape: []int64{long, 8}, ElemSize: 1}
	var boxes [][][]Interval
	for h := range int64(2) {
		for c := range int64(4) {
			boxes = append(boxes, [][]Interval{{{Lo: h * long / 2, Hi: (h + 1) * long / 2, Step: 1}, {Lo: 2 * c, Hi: 2*c + 2, Step: 1}}})
		}
	}
	l := planTestDense(ten, boxes)
	lb, err := l.validate(Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Pairs meeting along axis 0: 12, along axis 1: 4.
	if lb.ax != 1 || lb.ax2 != -1 {
		t.Fatalf("sweep axis %d, filter axis %d; want 1, -1", lb.ax, lb.ax2)
	}
	p, err := NewPlan(l, l, Limits{})
	if err != nil || p.Bytes != 8*long || len(p.Pairs) != 8 {
		t.Fatalf("plan %v, %v", p, err)
	}
}

// TestValidateAllocs: Validate allocates a few small buffers per call,
// not per piece: its large ones are reused. It takes the least of several
// calls: the scratch pool may drop its buffers (under the race detector
// at random).
func TestValidateAllocs(t *testing.T) {
	l := pagedKV(t)
	if err := l.Validate(Limits{}); err != nil {
		t.Fatal(err)
	}
	bytes := uint64(math.MaxUint64)
	for range 10 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := l.Validate(Limits{}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		bytes = min(bytes, after.TotalAlloc-before.TotalAlloc)
	}
	if bytes > 4096 {
		t.Fatalf("Validate of %d pieces allocates %d bytes", 8*4096, bytes)
	}
}

package reshard

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestShardedAccepts(t *testing.T) {
	kv := Tensor{Shape: []int64{4, 8, 16}, ElemSize: 2} // [layers, heads, dim]
	type want struct {
		rank    int
		box     []Interval
		offset  int64
		strides []int64
		region  int64
	}
	for _, tc := range []struct {
		name  string
		t     Tensor
		spec  ShardSpec
		ranks int
		want  []want
	}{
		{"TP along heads", kv, ShardSpec{Parts: []int64{1, 4, 1}}, 4, []want{
			{0, []Interval{{0, 4, 1}, {0, 2, 1}, {0, 16, 1}}, 0, []int64{64, 32, 2}, 256},
			{3, []Interval{{0, 4, 1}, {6, 8, 1}, {0, 16, 1}}, 0, []int64{64, 32, 2}, 256},
		}},
		{"PP along layers", kv, ShardSpec{Parts: []int64{2, 1, 1}}, 2, []want{
			{1, []Interval{{2, 4, 1}, {0, 8, 1}, {0, 16, 1}}, 0, []int64{256, 32, 2}, 512},
		}},
		{"PP x TP", kv, ShardSpec{Parts: []int64{2, 4, 1}}, 8, []want{
			{6, []Interval{{2, 4, 1}, {4, 6, 1}, {0, 16, 1}}, 0, []int64{64, 32, 2}, 128}, // 6 = 1*4 + 2
		}},
		{"DP replicas", kv, ShardSpec{Parts: []int64{1, 2, 1}, Replicas: 3}, 6, []want{
			{1, []Interval{{0, 4, 1}, {4, 8, 1}, {0, 16, 1}}, 0, []int64{128, 32, 2}, 512},
			{4, []Interval{{0, 4, 1}, {0, 4, 1}, {0, 16, 1}}, 0, []int64{128, 32, 2}, 512},
			{5, []Interval{{0, 4, 1}, {4, 8, 1}, {0, 16, 1}}, 0, []int64{128, 32, 2}, 512},
		}},
		{"cyclic heads", kv, ShardSpec{Parts: []int64{1, 4, 1}, Cyclic: []bool{false, true, false}}, 4, []want{
			{1, []Interval{{0, 4, 1}, {1, 8, 4}, {0, 16, 1}}, 0, []int64{64, 32, 2}, 256},
		}},
		{"permuted order", kv, ShardSpec{Parts: []int64{1, 4, 1}, Order: []int{2, 0, 1}}, 4, []want{
			{2, []Interval{{0, 4, 1}, {4, 6, 1}, {0, 16, 1}}, 0, []int64{4, 2, 16}, 256},
		}},
		{"column-major", Tensor{Shape: []int64{3, 5}, ElemSize: 4}, ShardSpec{Parts: []int64{1, 1}, Order: []int{1, 0}}, 1, []want{
			{0, []Interval{{0, 3, 1}, {0, 5, 1}}, 0, []int64{4, 12}, 60},
		}},
		{"uneven split", Tensor{Shape: []int64{10, 3}, ElemSize: 1}, ShardSpec{Parts: []int64{3, 2}}, 6, []want{
			{0, []Interval{{0, 3, 1}, {0, 1, 1}}, 0, []int64{1, 1}, 3},
			{3, []Interval{{3, 6, 1}, {1, 3, 1}}, 0, []int64{2, 1}, 6},
			{5, []Interval{{6, 10, 1}, {1, 3, 1}}, 0, []int64{2, 1}, 8},
		}},
		{"uneven cyclic", Tensor{Shape: []int64{10}, ElemSize: 1}, ShardSpec{Parts: []int64{4}, Cyclic: []bool{true}}, 4, []want{
			{1, []Interval{{1, 10, 4}}, 0, []int64{1}, 3},
			{3, []Interval{{3, 10, 4}}, 0, []int64{1}, 2},
		}},
		{"one index per part", Tensor{Shape: []int64{3}, ElemSize: 8}, ShardSpec{Parts: []int64{3}}, 3, []want{
			{2, []Interval{{2, 3, 1}}, 0, []int64{8}, 8},
		}},
		{"base", kv, ShardSpec{Parts: []int64{4, 1, 1}, Base: 100}, 4, []want{
			{3, []Interval{{3, 4, 1}, {0, 8, 1}, {0, 16, 1}}, 100, []int64{256, 32, 2}, 356},
		}},
		{"huge axis", Tensor{Shape: []int64{1 << 62}, ElemSize: 1}, ShardSpec{Parts: []int64{7}}, 7, []want{
			// p*n/7 with p*n beyond int64.
			// 2^62 = 7q + 4, so block 6 starts at floor(6*2^62/7) = 6q + 3.
			{6, []Interval{{6*((1<<62)/7) + 3, 1 << 62, 1}}, 0, []int64{1}, (1 << 62) - 6*((1<<62)/7) - 3},
		}},
		{"TP x PP x EP x DP", Tensor{Shape: []int64{32, 8, 64, 128}, ElemSize: 2},
			ShardSpec{Parts: []int64{4, 2, 8, 1}, Replicas: 2}, 128, []want{
				// rank 64*dp + 16*pp + 8*ep + tp = 64 + 32 + 8 + 3.
				{107, []Interval{{16, 24, 1}, {4, 8, 1}, {24, 32, 1}, {0, 128, 1}}, 0,
					[]int64{4 * 8 * 128 * 2, 8 * 128 * 2, 128 * 2, 2}, 8 * 4 * 8 * 128 * 2},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			l, err := Sharded(tc.t, spec)
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Ranks) != tc.ranks {
				t.Fatalf("%d ranks, want %d", len(l.Ranks), tc.ranks)
			}
			for _, w := range tc.want {
				rk := l.Ranks[w.rank]
				if len(rk.Pieces) != 1 {
					t.Fatalf("rank %d holds %d pieces", w.rank, len(rk.Pieces))
				}
				p := rk.Pieces[0]
				if !slicesEqual(p.Box, w.box) || p.Offset != w.offset || !slicesEqual(p.Strides, w.strides) ||
					rk.RegionBytes != w.region {
					t.Errorf("rank %d: box %v offset %d strides %v region %d, want %v %d %v %d",
						w.rank, p.Box, p.Offset, p.Strides, rk.RegionBytes, w.box, w.offset, w.strides, w.region)
				}
			}
			if err := l.Validate(Limits{}); err != nil {
				t.Fatal(err)
			}
			for r, rk := range l.Ranks {
				if rk.Pieces[0].Offset != spec.Base {
					t.Errorf("rank %d at offset %d", r, rk.Pieces[0].Offset)
				}
			}
			elems := int64(1)
			for _, s := range tc.t.Shape {
				elems *= s
			}
			if elems <= 1<<12 {
				if err := bruteVerdict(l); err != nil {
					t.Fatalf("brute force: %v", err)
				}
				checkDistinctCover(t, l)
			}
			// Sharded kept nothing of its arguments.
			tc.t.Shape[0]++
			defer func() { tc.t.Shape[0]-- }()
			if l.Tensor.Shape[0] == tc.t.Shape[0] {
				t.Error("the layout shares the tensor's shape")
			}
		})
	}
}

func TestShardedRefuses(t *testing.T) {
	kv := Tensor{Shape: []int64{4, 8, 16}, ElemSize: 2}
	for _, tc := range []struct {
		name   string
		t      Tensor
		spec   ShardSpec
		kind   error
		reason string
	}{
		{"no axes", Tensor{ElemSize: 2}, ShardSpec{}, ErrLayout, "no axes"},
		{"bad element size", Tensor{Shape: []int64{4}}, ShardSpec{Parts: []int64{1}}, ErrLayout, "element size"},
		{"too many axes", Tensor{Shape: make([]int64, 17), ElemSize: 1}, ShardSpec{}, ErrLimit, ""},
		{"parts per axis", kv, ShardSpec{Parts: []int64{1, 2}}, ErrLayout, "2 parts for 3 axes"},
		{"zero parts", kv, ShardSpec{Parts: []int64{1, 0, 1}}, ErrLayout, "0 parts along axis 1"},
		{"more parts than indices", kv, ShardSpec{Parts: []int64{1, 9, 1}}, ErrLayout, "9 parts along axis 1 of extent 8"},
		{"cyclic flags", kv, ShardSpec{Parts: []int64{1, 1, 1}, Cyclic: []bool{true}}, ErrLayout, "1 cyclic flags"},
		{"negative replicas", kv, ShardSpec{Parts: []int64{1, 1, 1}, Replicas: -1}, ErrLayout, "-1 replicas"},
		{"negative base", kv, ShardSpec{Parts: []int64{1, 1, 1}, Base: -8}, ErrLayout, "negative base"},
		{"short order", kv, ShardSpec{Parts: []int64{1, 1, 1}, Order: []int{0, 1}}, ErrLayout, "2 entries for 3 axes"},
		{"repeated order", kv, ShardSpec{Parts: []int64{1, 1, 1}, Order: []int{0, 1, 1}}, ErrLayout, "not a permutation"},
		{"order out of range", kv, ShardSpec{Parts: []int64{1, 1, 1}, Order: []int{0, 1, 3}}, ErrLayout, "not a permutation"},
		{"base overflow", kv, ShardSpec{Parts: []int64{1, 1, 1}, Base: math.MaxInt64 - 100}, ErrLayout, "overflows"},
		{"too many ranks", Tensor{Shape: []int64{1 << 12, 1 << 12}, ElemSize: 1},
			ShardSpec{Parts: []int64{1 << 12, 1 << 12}}, ErrLimit, ""},
		{"ranks overflow", Tensor{Shape: []int64{1 << 40, 1 << 20}, ElemSize: 1},
			ShardSpec{Parts: []int64{1 << 40, 1 << 20}, Replicas: 1 << 20}, ErrLimit, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Sharded(tc.t, tc.spec)
			if !errors.Is(err, tc.kind) || l != nil {
				t.Fatalf("Sharded = %v, %v, want %v", l, err, tc.kind)
			}
			var le *LayoutError
			if tc.kind == ErrLayout {
				if !errors.As(err, &le) || le.Rank != -1 || le.Piece != -1 || !strings.Contains(le.Reason, tc.reason) {
					t.Fatalf("Sharded = %v, want a *LayoutError saying %q", err, tc.reason)
				}
			} else if le := (*LimitError)(nil); !errors.As(err, &le) {
				t.Fatalf("Sharded = %v, want a *LimitError", err)
			}
		})
	}
}

// kvPaged is a [2, 10 tokens, 4 heads] tensor of 2-byte elements split
// over 2 ranks along heads, in memory order order, ready to paginate.
func kvPaged(t *testing.T, order []int) *Layout {
	t.Helper()
	l, err := Sharded(Tensor{Shape: []int64{2, 10, 4}, ElemSize: 2}, ShardSpec{Parts: []int64{1, 1, 2}, Order: order})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestPaginate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		order   []int
		strides []int64
	}{
		// Tokens outermost: a page is [4 tokens, 2, 2 heads].
		{"tokens outermost", []int{1, 0, 2}, []int64{4, 8, 2}},
		// Row-major: inside a page the K/V axis stays outermost, its
		// stride spanning the page's 4 token positions.
		{"tokens inside", nil, []int64{16, 4, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := kvPaged(t, tc.order)
			before := l.Clone()
			tables := [][]int64{{5, 0, 2, 7}, {1, 3, 0}}
			p, err := Paginate(l, 1, 4, tables)
			if err != nil {
				t.Fatal(err)
			}
			if !layoutsEqual(l, before) {
				t.Fatal("Paginate changed its input")
			}
			const pageBytes = 4 * 2 * 2 * 2
			for r, rk := range p.Ranks {
				if len(rk.Pieces) != 3 {
					t.Fatalf("rank %d: %d pages, want 3", r, len(rk.Pieces))
				}
				for j, pg := range rk.Pieces {
					heads := Interval{int64(2 * r), int64(2*r + 2), 1}
					tokens := []Interval{{0, 4, 1}, {4, 8, 1}, {8, 10, 1}}[j]
					want := []Interval{{0, 2, 1}, tokens, heads}
					if !slicesEqual(pg.Box, want) || pg.Offset != tables[r][j]*pageBytes || !slicesEqual(pg.Strides, tc.strides) {
						t.Errorf("rank %d page %d: box %v offset %d strides %v, want %v %d %v",
							r, j, pg.Box, pg.Offset, pg.Strides, want, tables[r][j]*pageBytes, tc.strides)
					}
				}
			}
			if p.Ranks[0].RegionBytes != 6*pageBytes || p.Ranks[1].RegionBytes != 4*pageBytes {
				t.Errorf("regions %d and %d bytes, want %d and %d",
					p.Ranks[0].RegionBytes, p.Ranks[1].RegionBytes, 6*pageBytes, 4*pageBytes)
			}
			if err := p.Validate(Limits{}); err != nil {
				t.Fatal(err)
			}
			if err := bruteVerdict(p); err != nil {
				t.Fatalf("brute force: %v", err)
			}
			checkPagesInSlots(t, p, tables)
			// Paginating a paged layout is refused: ranks hold pages.
			if _, err := Paginate(p, 1, 2, tables); !errors.Is(err, ErrLayout) {
				t.Errorf("paginating pages: %v", err)
			}
		})
	}
}

// checkPagesInSlots checks by enumerating every element that page j of
// rank r lies inside slot tables[r][j] of the pool: the bytes
// [slot, slot+1) * (RegionBytes / (largest slot + 1)).
func checkPagesInSlots(t *testing.T, l *Layout, tables [][]int64) {
	t.Helper()
	for r, rk := range l.Ranks {
		maxSlot := int64(0)
		for j := range rk.Pieces {
			maxSlot = max(maxSlot, tables[r][j])
		}
		pageBytes := rk.RegionBytes / (maxSlot + 1)
		for j, pg := range rk.Pieces {
			lo, hi := tables[r][j]*pageBytes, (tables[r][j]+1)*pageBytes
			forEachElement(pg.Box, func(k, _ []int64) {
				addr := pg.Offset
				for a := range k {
					addr += k[a] * pg.Strides[a]
				}
				if addr < lo || addr+l.Tensor.ElemSize > hi {
					t.Fatalf("rank %d page %d: element at byte %d outside its slot [%d, %d)", r, j, addr, lo, hi)
				}
			})
		}
	}
}

// TestPaginateRandom paginates random Sharded layouts with random page
// tables and checks the result by brute force.
func TestPaginateRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	for range 500 {
		axes := 1 + rng.IntN(3)
		tensor := Tensor{Shape: make([]int64, axes), ElemSize: 1 + rng.Int64N(4)}
		spec := ShardSpec{Parts: make([]int64, axes), Replicas: rng.IntN(3), Order: rng.Perm(axes), Base: rng.Int64N(8)}
		for a := range axes {
			tensor.Shape[a] = 1 + rng.Int64N(7)
			spec.Parts[a] = 1 + rng.Int64N(tensor.Shape[a])
		}
		l, err := Sharded(tensor, spec)
		if err != nil {
			t.Fatal(err)
		}
		axis := rng.IntN(axes)
		pageLen := 1 + rng.Int64N(4)
		tables := make([][]int64, len(l.Ranks))
		for r := range tables {
			pages := (l.Ranks[r].Pieces[0].Box[axis].Len() + pageLen - 1) / pageLen
			perm := rng.Perm(int(pages) + rng.IntN(4))
			for _, s := range perm[:int(pages)+rng.IntN(len(perm)-int(pages)+1)] {
				tables[r] = append(tables[r], int64(s))
			}
		}
		p, err := Paginate(l, axis, pageLen, tables)
		if err != nil {
			t.Fatalf("Paginate(%+v %+v, axis %d, page %d, %v): %v", tensor, spec, axis, pageLen, tables, err)
		}
		if err := p.Validate(Limits{}); err != nil {
			t.Fatalf("Paginate(%+v %+v, axis %d, page %d, %v): %v", tensor, spec, axis, pageLen, tables, err)
		}
		if err := bruteVerdict(p); err != nil {
			t.Fatalf("brute force: %v", err)
		}
		checkDistinctCover(t, p)
		checkPagesInSlots(t, p, tables)
	}
}

func TestPaginateRefuses(t *testing.T) {
	tables := func() [][]int64 { return [][]int64{{0, 1, 2}, {2, 1, 0}} }
	for _, tc := range []struct {
		name        string
		layout      func(t *testing.T) *Layout
		axis        int
		pageLen     int64
		tables      [][]int64
		kind        error
		rank, piece int
		reason      string
	}{
		{"invalid layout", func(t *testing.T) *Layout {
			l := kvPaged(t, nil)
			l.Ranks[1].Pieces[0].Box[2].Hi = 3
			return l
		}, 1, 4, tables(), ErrCoverage, -1, -1, "held by no rank"},
		{"axis", func(t *testing.T) *Layout { return kvPaged(t, nil) }, 3, 4, tables(), ErrLayout, -1, -1, "axis 3"},
		{"negative axis", func(t *testing.T) *Layout { return kvPaged(t, nil) }, -1, 4, tables(), ErrLayout, -1, -1, "axis -1"},
		{"page length", func(t *testing.T) *Layout { return kvPaged(t, nil) }, 1, 0, tables(), ErrLayout, -1, -1, "page length 0"},
		{"tables", func(t *testing.T) *Layout { return kvPaged(t, nil) }, 1, 4, tables()[:1], ErrLayout, -1, -1, "1 page tables for 2 ranks"},
		{"two pieces", func(t *testing.T) *Layout {
			l := kvPaged(t, nil)
			rk := &l.Ranks[1]
			rk.Pieces = append(rk.Pieces, rk.Pieces[0])
			rk.Pieces[0].Box = []Interval{{0, 1, 1}, {0, 10, 1}, {2, 4, 1}}
			rk.Pieces[1].Box = []Interval{{1, 2, 1}, {0, 10, 1}, {2, 4, 1}}
			rk.Pieces[1].Offset = 40
			return l
		}, 1, 4, tables(), ErrLayout, 1, -1, "2 pieces"},
		{"no piece", func(t *testing.T) *Layout {
			l := kvPaged(t, nil)
			l.Ranks = append(l.Ranks, Rank{})
			return l
		}, 1, 4, append(tables(), nil), ErrLayout, 2, -1, "0 pieces"},
		{"cyclic axis", func(t *testing.T) *Layout {
			l, err := Sharded(Tensor{Shape: []int64{2, 10, 4}, ElemSize: 2},
				ShardSpec{Parts: []int64{1, 2, 1}, Cyclic: []bool{false, true, false}})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, 1, 4, tables(), ErrLayout, 0, 0, "not contiguous"},
		{"short table", func(t *testing.T) *Layout { return kvPaged(t, nil) }, 1, 4, [][]int64{{0, 1, 2}, {0, 1}},
			ErrLayout, 1, -1, "2 slots for 3 pages"},
		{"negative slot", func(t *testing.T) *Layout { return kvPaged(t, nil) }, 1, 4, [][]int64{{0, 1, 2}, {0, -3, 1}},
			ErrLayout, 1, 1, "negative slot -3"},
		{"repeated slot", func(t *testing.T) *Layout { return kvPaged(t, nil) }, 1, 4, [][]int64{{4, 1, 4}, {0, 1, 2}},
			ErrLayout, 0, 2, "slot 4 already holds page 0"},
		{"slot overflow", func(t *testing.T) *Layout { return kvPaged(t, nil) }, 1, 4, [][]int64{{0, 1, 2}, {0, 1, math.MaxInt64 / 8}},
			ErrLayout, 1, -1, "overflows"},
		{"page overflow", func(t *testing.T) *Layout { return kvPaged(t, nil) }, 1, math.MaxInt64 / 4, [][]int64{{0}, {0}},
			ErrLayout, 0, -1, "overflow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.layout(t)
			before := l.Clone()
			var tablesBefore [][]int64
			for _, tb := range tc.tables {
				tablesBefore = append(tablesBefore, append([]int64(nil), tb...))
			}
			p, err := Paginate(l, tc.axis, tc.pageLen, tc.tables)
			if !errors.Is(err, tc.kind) || p != nil {
				t.Fatalf("Paginate = %v, %v, want %v", p, err, tc.kind)
			}
			var le *LayoutError
			if !errors.As(err, &le) || le.Rank != tc.rank || le.Piece != tc.piece || !strings.Contains(le.Reason, tc.reason) {
				t.Fatalf("Paginate = %v, want rank %d piece %d saying %q", err, tc.rank, tc.piece, tc.reason)
			}
			if !layoutsEqual(l, before) {
				t.Error("Paginate changed the layout")
			}
			for i := range tc.tables {
				if !slicesEqual(tc.tables[i], tablesBefore[i]) {
					t.Error("Paginate changed a table")
				}
			}
		})
	}
}

func TestPaginateSingleIndex(t *testing.T) {
	// Every rank holds one index of axis 1, dealt cyclically (Step 4):
	// one page each, whatever the step.
	l, err := Sharded(Tensor{Shape: []int64{3, 4}, ElemSize: 1}, ShardSpec{Parts: []int64{1, 4}, Cyclic: []bool{false, true}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Paginate(l, 1, 2, [][]int64{{1}, {0}, {3}, {2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := p.Ranks[2].Pieces[0]; got.Offset != 3*6 || p.Ranks[2].RegionBytes != 4*6 {
		t.Errorf("rank 2: offset %d, region %d; want 18, 24", got.Offset, p.Ranks[2].RegionBytes)
	}
}

func TestClone(t *testing.T) {
	l := twoPieces()
	c := l.Clone()
	if !layoutsEqual(l, c) {
		t.Fatal("the clone differs")
	}
	c.Tensor.Shape[0] = 99
	c.Ranks[0].Pieces[1].Box[0].Lo = 99
	c.Ranks[0].Pieces[1].Strides[0] = 99
	c.Ranks[1].RegionBytes = 99
	if !layoutsEqual(l, twoPieces()) {
		t.Error("changing the clone changed the original")
	}
	if (*Layout)(nil).Clone() != nil {
		t.Error("the clone of nil is not nil")
	}
}

// ExampleSharded shards the weights [layers 32, experts 8, heads 64,
// headDim 128] over 4 pipeline stages, 2 expert groups, 8-way tensor
// parallelism and 2 data-parallel replicas.
func ExampleSharded() {
	t := Tensor{Shape: []int64{32, 8, 64, 128}, ElemSize: 2}
	l, err := Sharded(t, ShardSpec{Parts: []int64{4, 2, 8, 1}, Replicas: 2})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(l.Ranks), "ranks:", l.Validate(Limits{}))
	for _, r := range []int{0, 11, 107} {
		fmt.Println(r, boxString(l.Ranks[r].Pieces[0].Box), l.Ranks[r].RegionBytes)
	}
	// Output:
	// 128 ranks: <nil>
	// 0 [0, 8)×[0, 4)×[0, 8)×[0, 128) 65536
	// 11 [0, 8)×[4, 8)×[24, 32)×[0, 128) 65536
	// 107 [16, 24)×[4, 8)×[24, 32)×[0, 128) 65536
}

package planfmt

import (
	stdcmp "cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func rangeDst(r *Range) *uint64 { return &r.Dst }

// radixKeys draws n keys whose varying bits are a random window of the
// 64 (narrow and wide spreads, a random common prefix) with duplicates.
func radixKeys(rng *rand.Rand, n int) []uint64 {
	base := rng.Uint64() &^ (1<<uint(rng.IntN(64)) - 1)
	spread := rng.Uint64N(64)
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = base + rng.Uint64()>>spread
		if i > 0 && rng.IntN(5) == 0 {
			keys[i] = keys[rng.IntN(i)]
		}
	}
	return keys
}

func TestRadixSort(t *testing.T) {
	rng := newRand(t)
	sortRanges := func(keys []uint64) {
		t.Helper()
		a := make([]Range, len(keys))
		for i, k := range keys {
			a[i] = Range{Src: uint64(i), Dst: k, Len: ^uint64(i)} // Src records input order
		}
		want := slices.Clone(a)
		slices.SortStableFunc(want, func(x, y Range) int { return stdcmp.Compare(x.Dst, y.Dst) })
		tmp := make([]Range, len(a), len(a)+3)
		got := RadixSort(a, tmp, rangeDst)
		require.Equal(t, want, got)
		if len(a) > 0 {
			require.True(t, &got[0] == &a[0] || &got[0] == &tmp[0], "result is a or tmp[:len(a)]")
		}
	}
	for _, tc := range []struct {
		name string
		keys []uint64
	}{
		{"empty", nil},
		{"one", []uint64{7}},
		{"equal keys", []uint64{5, 5, 5, 5}},
		{"sorted", []uint64{1, 2, 3, 300, 70000}},
		{"reversed", []uint64{1 << 60, 1 << 40, 1 << 20, 1, 0}},
		{"top byte only", []uint64{3 << 56, 1 << 56, 2 << 56, 1 << 56}},
		{"all digits", []uint64{^uint64(0), 0, 0x0102030405060708, 0x0807060504030201, 1 << 63}},
	} {
		t.Run(tc.name, func(t *testing.T) { sortRanges(tc.keys) })
	}
	t.Run("random", func(t *testing.T) {
		for range 200 {
			sortRanges(radixKeys(rng, rng.IntN(300)))
		}
	})
}

// TestRadixSortBuffer checks that the result is a or tmp[:len(a)] and
// that a short tmp with room enough (len < len(a) <= cap) is used.
func TestRadixSortBuffer(t *testing.T) {
	for _, keys := range [][]uint64{{2, 1}, {0x200, 0x100, 0x1}} { // one pass, two passes
		a := make([]Range, len(keys))
		for i, k := range keys {
			a[i].Dst = k
		}
		tmp := make([]Range, 0, len(a))
		got := RadixSort(a, tmp, rangeDst)
		require.True(t, slices.IsSortedFunc(got, func(x, y Range) int { return stdcmp.Compare(x.Dst, y.Dst) }))
		require.True(t, &got[0] == &a[0] || &got[0] == &tmp[:1][0], "result in a or tmp")
	}
}

func TestRadixSortBadKey(t *testing.T) {
	var outside uint64
	a := make([]Range, 2)
	for name, key := range map[string]func(*Range) *uint64{
		"outside":      func(*Range) *uint64 { return &outside },
		"next element": func(r *Range) *uint64 { return &a[1].Dst },
	} {
		t.Run(name, func(t *testing.T) {
			require.PanicsWithValue(t, "planfmt: RadixSort key does not point to a field of its element", func() {
				RadixSort(a, make([]Range, 2), key)
			})
		})
	}
}

func TestRadixSortAllocs(t *testing.T) {
	rng := newRand(t)
	keys := radixKeys(rng, 1000)
	a, tmp := make([]Range, len(keys)), make([]Range, len(keys))
	allocs := testing.AllocsPerRun(100, func() {
		for i, k := range keys {
			a[i] = Range{Dst: k}
		}
		RadixSort(a, tmp, rangeDst)
	})
	require.Zero(t, allocs)
}

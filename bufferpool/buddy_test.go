package bufferpool

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// freeBlock is a free block as (first unit, order).
type freeBlock struct{ Unit, Order int }

// freeBlocks lists the free blocks by walking every free list, checking the
// list links, the nonEmpty mask and the free unit count on the way.
func freeBlocks(t testing.TB, b *buddy) []freeBlock {
	t.Helper()
	var out []freeBlock
	units := 0
	for k := range b.heads {
		require.Equal(t, b.heads[k] != noUnit, b.nonEmpty&(1<<k) != 0, "nonEmpty bit %d", k)
		prev := int32(noUnit)
		for u := b.heads[k]; u != noUnit; u = b.units[u].next {
			require.Equal(t, prev, b.units[u].prev, "prev link of unit %d", u)
			require.Equal(t, k, int(b.units[u].freeOrder), "order of free unit %d", u)
			require.Zero(t, int(u)&(1<<k-1), "free block %d of order %d misaligned", u, k)
			out = append(out, freeBlock{int(u), k})
			units += 1 << k
			prev = u
		}
	}
	require.Equal(t, units, b.freeUnit, "free unit count")
	slices.SortFunc(out, func(a, b freeBlock) int { return a.Unit - b.Unit })
	return out
}

func TestBuddyRoots(t *testing.T) {
	cases := []struct {
		name     string
		units    int
		maxOrder int
		want     []freeBlock
	}{
		{"one unit", 1, 0, []freeBlock{{0, 0}}},
		{"power of two", 8, 3, []freeBlock{{0, 3}}},
		{"thirteen units", 13, 3, []freeBlock{{0, 3}, {8, 2}, {12, 0}}},
		{"capped order", 13, 1, []freeBlock{{0, 1}, {2, 1}, {4, 1}, {6, 1}, {8, 1}, {10, 1}, {12, 0}}},
		{"seven units", 7, 2, []freeBlock{{0, 2}, {4, 1}, {6, 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuddy(tc.units, tc.maxOrder)
			if diff := cmp.Diff(tc.want, freeBlocks(t, &b)); diff != "" {
				t.Fatalf("roots (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuddySplitAndCoalesce(t *testing.T) {
	b := newBuddy(13, 3)
	initial := freeBlocks(t, &b)

	// An order-0 block comes from the smallest free block: the lone unit 12.
	u, ok := b.alloc(0)
	require.True(t, ok)
	require.Equal(t, int32(12), u)

	// The next one splits the order-2 root at 8: 8 is taken, 9 and 10-11 go free.
	v, ok := b.alloc(0)
	require.True(t, ok)
	require.Equal(t, int32(8), v)
	require.Equal(t, []freeBlock{{0, 3}, {9, 0}, {10, 1}}, freeBlocks(t, &b))

	// Order 3 is still free; order 3 twice is not.
	w, ok := b.alloc(3)
	require.True(t, ok)
	require.Equal(t, int32(0), w)
	require.False(t, b.canAlloc(3))
	require.False(t, b.canAlloc(2))
	require.True(t, b.canAlloc(1))
	require.Equal(t, 1, b.largestFree())
	_, ok = b.alloc(2)
	require.False(t, ok)

	// Freeing 8 coalesces with 9, then with 10-11, back into the order-2 root;
	// it must not coalesce across the root boundary with unit 12.
	require.True(t, b.free(v))
	require.Equal(t, []freeBlock{{8, 2}}, freeBlocks(t, &b))
	require.False(t, b.free(v), "second free of the same block")
	require.False(t, b.free(9), "free of a unit inside a free block")
	require.False(t, b.free(-1), "free of a negative unit")
	require.False(t, b.free(13), "free past the end")
	require.True(t, b.free(u))
	require.True(t, b.free(w))
	require.Equal(t, initial, freeBlocks(t, &b))
}

func TestBuddyRandom(t *testing.T) {
	rng := newRand(t)
	for _, geo := range []struct{ units, maxOrder int }{{13, 3}, {64, 6}, {100, 4}, {1, 0}, {31, 2}} {
		b := newBuddy(geo.units, geo.maxOrder)
		initial := freeBlocks(t, &b)
		owner := make([]int, geo.units) // lease number + 1 owning each unit
		var live []int32
		for step := range 2000 {
			if len(live) > 0 && rng.IntN(2) == 0 {
				i := rng.IntN(len(live))
				u := live[i]
				order := b.allocated(u)
				require.GreaterOrEqual(t, order, 0)
				for j := int(u); j < int(u)+1<<order; j++ {
					owner[j] = 0
				}
				require.True(t, b.free(u))
				live = slices.Delete(live, i, i+1)
				continue
			}
			order := rng.IntN(geo.maxOrder + 1)
			can := b.canAlloc(order)
			u, ok := b.alloc(order)
			require.Equal(t, can, ok)
			if !ok {
				// Nothing of the order is free: every free block is smaller.
				for _, fb := range freeBlocks(t, &b) {
					require.Less(t, fb.Order, order)
				}
				continue
			}
			require.Zero(t, int(u)&(1<<order-1), "misaligned block")
			for j := int(u); j < int(u)+1<<order; j++ {
				require.Zero(t, owner[j], "step %d: unit %d handed out twice", step, j)
				owner[j] = step + 1
			}
			live = append(live, u)
		}
		for _, u := range live {
			require.True(t, b.free(u))
		}
		require.Equal(t, initial, freeBlocks(t, &b), "all freed must coalesce back to the roots")
	}
}

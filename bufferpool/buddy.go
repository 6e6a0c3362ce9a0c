package bufferpool

import (
	"math/bits"
)

// buddy is a binary buddy allocator over units of MinSlot bytes. A block of
// order k spans 1<<k units and starts at a unit index that is a multiple of
// 1<<k. The arena is cut into roots, greedily largest first: as many blocks
// of maxOrder as fit, then one block per set bit of the remainder. Because
// larger roots come first, every root is aligned to its own size, so the
// buddy of a block of order k < its root's order is at unit ^ (1<<k).
//
// Free blocks sit on one intrusive doubly linked list per order (LIFO, so a
// just-released block, warm in cache and TLB, is reused first); nonEmpty has
// bit k set when list k is not empty, which makes "is a block of order >= k
// free" one shift. Acquire and release are O(maxOrder) with no allocation.
// buddy does no locking.
type buddy struct {
	maxOrder int
	units    []bunit
	heads    [64]int32 // free list head per order, -1 when empty
	nonEmpty uint64
	freeUnit int // units on free lists
}

type bunit struct {
	next, prev int32 // free list links, valid while freeOrder >= 0
	freeOrder  int8  // order of the free block starting here, or -1
	allocOrder int8  // order of the allocated block starting here, or -1
	rootOrder  int8  // order of the root that contains this unit
}

const noUnit = -1

func newBuddy(units, maxOrder int) buddy {
	b := buddy{maxOrder: maxOrder, units: make([]bunit, units)}
	for i := range b.heads {
		b.heads[i] = noUnit
	}
	for i := range b.units {
		b.units[i] = bunit{next: noUnit, prev: noUnit, freeOrder: -1, allocOrder: -1}
	}
	for u := 0; u < units; {
		k := min(maxOrder, bits.Len(uint(units-u))-1)
		for i := u; i < u+1<<k; i++ {
			b.units[i].rootOrder = int8(k)
		}
		b.push(int32(u), k)
		u += 1 << k
	}
	return b
}

func (b *buddy) push(u int32, order int) {
	h := b.heads[order]
	b.units[u] = bunit{next: h, prev: noUnit, freeOrder: int8(order), allocOrder: -1, rootOrder: b.units[u].rootOrder}
	if h != noUnit {
		b.units[h].prev = u
	}
	b.heads[order] = u
	b.nonEmpty |= 1 << order
	b.freeUnit += 1 << order
}

func (b *buddy) remove(u int32) {
	x := &b.units[u]
	order := int(x.freeOrder)
	if x.prev != noUnit {
		b.units[x.prev].next = x.next
	} else {
		b.heads[order] = x.next
	}
	if x.next != noUnit {
		b.units[x.next].prev = x.prev
	}
	if b.heads[order] == noUnit {
		b.nonEmpty &^= 1 << order
	}
	x.next, x.prev, x.freeOrder = noUnit, noUnit, -1
	b.freeUnit -= 1 << order
}

// canAlloc reports whether a block of the order is free now.
func (b *buddy) canAlloc(order int) bool { return b.nonEmpty>>order != 0 }

// largestFree returns the largest order with a free block, or -1.
func (b *buddy) largestFree() int { return bits.Len64(b.nonEmpty) - 1 }

// alloc takes the smallest free block of at least the order, splitting it
// down and returning the upper halves to their lists.
func (b *buddy) alloc(order int) (int32, bool) {
	m := b.nonEmpty >> order
	if m == 0 {
		return noUnit, false
	}
	k := order + bits.TrailingZeros64(m)
	u := b.heads[k]
	b.remove(u)
	for k > order {
		k--
		b.push(u+1<<k, k)
	}
	b.units[u].allocOrder = int8(order)
	return u, true
}

// allocated returns the order of the allocated block starting at u, or -1.
func (b *buddy) allocated(u int32) int {
	if u < 0 || int(u) >= len(b.units) {
		return -1
	}
	return int(b.units[u].allocOrder)
}

// free returns the allocated block at u and coalesces it with free buddies.
// It reports false, changing nothing, when no block is allocated at u.
func (b *buddy) free(u int32) bool {
	order := b.allocated(u)
	if order < 0 {
		return false
	}
	b.units[u].allocOrder = -1
	root := int(b.units[u].rootOrder)
	for order < root {
		bud := u ^ 1<<order
		if int(b.units[bud].freeOrder) != order {
			break
		}
		b.remove(bud)
		u = min(u, bud)
		order++
	}
	b.push(u, order)
	return true
}

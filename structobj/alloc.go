package structobj

import (
	"fmt"
	"slices"

	"github.com/scatterkit/scatterkit/structobj/internal/proto"
)

// Align is the alignment of every extent the owner's allocator hands out,
// in bytes: offsets and lengths of reserved space are multiples of it, so
// payloads start on cache-line boundaries. The control protocol refuses
// region offsets and lengths that are not.
const Align = proto.Align

// extent is a run of arena bytes: [off, off+len). An extent of length 0
// takes no space (an empty payload) and is never in the free list.
type extent struct{ off, len uint64 }

func (e extent) end() uint64 { return e.off + e.len }

// allocator hands out disjoint extents of an arena of size bytes, best
// fit: the smallest free extent that holds the request (the lowest
// offset among equals), split at its start. Freed extents merge with
// their free neighbours, so the free list never holds two adjacent
// extents.
//
// The free list is a slice sorted by offset. Allocation scans it (O(n) in
// free extents); freeing finds the place by binary search and moves the
// tail (O(n) copy, O(log n) compares). The owner's free list stays short:
// it grows only by fragmentation between live objects, and objects are
// large.
//
// An allocator is not safe for concurrent use (the owner holds its lock).
type allocator struct {
	size      uint64
	free      []extent // sorted by off, disjoint, never adjacent, never empty
	freeBytes uint64
}

// newAllocator returns an allocator over size bytes (rounded down to
// Align), all free.
func newAllocator(size uint64) *allocator {
	size &^= Align - 1
	a := &allocator{size: size, freeBytes: size}
	if size > 0 {
		a.free = []extent{{0, size}}
	}
	return a
}

// alignUp rounds n up to Align; ok is false when that overflows.
func alignUp(n uint64) (uint64, bool) {
	r := (n + Align - 1) &^ (Align - 1)
	return r, r >= n
}

// alloc takes n bytes (rounded up to Align) and returns their extent.
// n == 0 returns an empty extent at offset 0 that takes nothing. It fails
// with a *NoSpaceError when no free extent is large enough.
func (a *allocator) alloc(n uint64) (extent, error) {
	if n == 0 {
		return extent{}, nil
	}
	want, ok := alignUp(n)
	best := -1
	if ok {
		for i, f := range a.free {
			if f.len >= want && (best < 0 || f.len < a.free[best].len) {
				best = i
				if f.len == want {
					break
				}
			}
		}
	}
	if best < 0 {
		if !ok {
			want = n
		}
		return extent{}, &NoSpaceError{Want: want, Free: a.freeBytes, Largest: a.largest()}
	}
	f := &a.free[best]
	e := extent{f.off, want}
	if f.len == want {
		a.free = slices.Delete(a.free, best, best+1)
	} else {
		f.off += want
		f.len -= want
	}
	a.freeBytes -= want
	return e, nil
}

// release returns e to the free list, merging it with free neighbours.
// Releasing an empty extent does nothing. Releasing space that is
// outside the arena, misaligned or (partly) free already is a broken
// invariant of the owner and panics.
func (a *allocator) release(e extent) {
	if e.len == 0 {
		return
	}
	if e.off%Align != 0 || e.len%Align != 0 || e.off >= a.size || e.len > a.size-e.off {
		panic(fmt.Sprintf("structobj: release of bad extent [%d,+%d) in an arena of %d", e.off, e.len, a.size))
	}
	// i is the first free extent at or after e.
	i, _ := slices.BinarySearchFunc(a.free, e.off, func(f extent, off uint64) int {
		switch {
		case f.off < off:
			return -1
		case f.off > off:
			return 1
		}
		return 0
	})
	if (i < len(a.free) && a.free[i].off < e.end()) || (i > 0 && a.free[i-1].end() > e.off) {
		panic(fmt.Sprintf("structobj: release of [%d,+%d), which overlaps free space", e.off, e.len))
	}
	a.freeBytes += e.len
	mergePrev := i > 0 && a.free[i-1].end() == e.off
	mergeNext := i < len(a.free) && a.free[i].off == e.end()
	switch {
	case mergePrev && mergeNext:
		a.free[i-1].len += e.len + a.free[i].len
		a.free = slices.Delete(a.free, i, i+1)
	case mergePrev:
		a.free[i-1].len += e.len
	case mergeNext:
		a.free[i].off = e.off
		a.free[i].len += e.len
	default:
		a.free = slices.Insert(a.free, i, e)
	}
}

// shrink gives back the tail of e beyond n bytes (n rounded up to Align)
// and returns the extent that remains. n == 0 releases all of e.
func (a *allocator) shrink(e extent, n uint64) extent {
	keep, ok := alignUp(n)
	if !ok || keep >= e.len {
		return e
	}
	a.release(extent{e.off + keep, e.len - keep})
	if keep == 0 {
		return extent{}
	}
	return extent{e.off, keep}
}

// largest returns the largest free extent's length.
func (a *allocator) largest() uint64 {
	var m uint64
	for _, f := range a.free {
		m = max(m, f.len)
	}
	return m
}

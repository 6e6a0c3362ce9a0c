package planfmt

import "unsafe"

// RadixSort sorts a stably by a uint64 key and returns the sorted
// elements: a itself or tmp[:len(a)], whichever the last pass wrote (the
// other is left holding the same elements in no useful order). tmp is the
// second buffer, which the caller supplies so that sorting allocates
// nothing: it needs room for len(a) elements (cap(tmp) >= len(a)) and its
// contents are overwritten.
//
// key selects the key: it returns a pointer to a uint64 field of the
// element it is given, the same field for every element, as in
//
//	sorted := planfmt.RadixSort(rs, tmp, func(r *planfmt.Range) *uint64 { return &r.Dst })
//
// It is called once, on a[0] when len(a) >= 2, to find the field's offset
// in E; the loops then load the field directly, so they are as tight as a
// sort written for E by hand. (A key method on a constraint type, or a key
// func called per element, is an indirect call per element per pass that
// the compiler does not inline: 1.4-1.6x the time, docs/perf-notes.md.) A
// key that does not point inside the element it is given panics.
//
// The sort is least-significant-digit over 8-bit digits: one pass over a
// finds the digits in which the keys differ, then each such digit costs one
// counting pass and one scattering pass; digits in which all keys agree are
// skipped. Keys that differ only in their low 24 bits take 3 digits, 8 at
// most: O(len(a)) time whatever the input order, which is why Normalize
// can afford to sort a hostile, shuffled plan.
func RadixSort[E any](a, tmp []E, key func(e *E) *uint64) []E {
	if len(a) < 2 {
		return a
	}
	off := keyOffset(&a[0], key)
	at := func(e *E) uint64 { return *(*uint64)(unsafe.Add(unsafe.Pointer(e), off)) }

	or, and := uint64(0), ^uint64(0)
	for i := range a {
		k := at(&a[i])
		or, and = or|k, and&k
	}
	diff := or ^ and
	src, dst := a, tmp[:len(a)]
	var count [256]int
	for shift := 0; shift < 64; shift += 8 {
		if (diff>>shift)&0xff == 0 {
			continue
		}
		clear(count[:])
		for i := range src {
			count[byte(at(&src[i])>>shift)]++
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for i := range src {
			d := byte(at(&src[i]) >> shift)
			dst[count[d]] = src[i]
			count[d]++
		}
		src, dst = dst, src
	}
	return src
}

// keyOffset is the offset in E of the uint64 field that key returns for e,
// checked to lie inside *e (a broken key is a programming error: panic).
func keyOffset[E any](e *E, key func(*E) *uint64) uintptr {
	base, p := uintptr(unsafe.Pointer(e)), uintptr(unsafe.Pointer(key(e)))
	size := unsafe.Sizeof(*e)
	if off := p - base; p >= base && off < size && size-off >= 8 {
		return off
	}
	panic("planfmt: RadixSort key does not point to a field of its element")
}

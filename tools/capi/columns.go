package main

import (
	"strings"
	"unsafe"
)

// columnsObj is a column set: the K table names of a lookup, converted
// once so that a lookup converts none.
type columnsObj struct {
	st    *storeObj
	names []string
}

// cStrings reads k NUL-terminated strings stored back to back at p.
// Repeated neighbours share one string.
func cStrings(p unsafe.Pointer, k int) []string {
	out := make([]string, k)
	for i := range out {
		n := 0
		for *(*byte)(unsafe.Add(p, n)) != 0 {
			n++
		}
		s := unsafe.String((*byte)(p), n)
		if i > 0 && s == out[i-1] {
			out[i] = out[i-1]
		} else {
			out[i] = strings.Clone(s) // the bytes are the caller's
		}
		p = unsafe.Add(p, n+1)
	}
	return out
}

// newColumns is sk_columns: every name must be one of the store's tables.
func newColumns(h uint64, names unsafe.Pointer, k int32) (uint64, error) {
	st, err := getStore(h)
	if err != nil {
		return 0, err
	}
	if k < 0 {
		return 0, badArg("k", "%d: negative", k)
	}
	if k > 0 && names == nil {
		return 0, badArg("names", "NULL with k = %d", k)
	}
	cs := cStrings(names, int(k))
	for _, name := range cs {
		if _, err := st.s.TableSpec(name); err != nil {
			return 0, err
		}
	}
	return adopt(st, columns, &columnsObj{st: st, names: cs}, colsOf)
}

// freeColumns is sk_columns_free.
func freeColumns(h uint64) error {
	c := columns.take(h)
	if c == nil {
		return &HandleError{Handle: h, Want: kindColumns}
	}
	disown(c.st, colsOf, h)
	return nil
}

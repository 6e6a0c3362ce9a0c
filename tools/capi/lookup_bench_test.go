package main

import (
	"fmt"
	"testing"

	"github.com/scatterkit/scatterkit/engram"
)

// BenchmarkLookup compares the ABI's lookup (handles, checks, slices,
// panic guard) with the store's own call on the same ids: the difference
// is the boundary's cost before cgo's.
func BenchmarkLookup(b *testing.B) {
	const R, N = 264, 20000
	for _, T := range []int{1, 4096} {
		const K = 24
		r := newRand(b)
		dir := b.TempDir()
		store, err := open(configJSON(b, map[string]table{"a": {rows: N, rowBytes: R}}, dir, nil))
		if err != nil {
			b.Fatal(err)
		}
		rows := randBytes(r, N*R)
		if err := populate(store, "a", ptr(rows), int64(len(rows))); err != nil {
			b.Fatal(err)
		}
		names := make([]string, K)
		for k := range names {
			names[k] = "a"
		}
		cols, err := newColumns(store, cnames(names...), K)
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]int32, T*K)
		for i := range ids {
			ids[i] = int32(r.IntN(N))
		}
		out := make([]byte, T*K*R)
		a := lookupArgs{store: store, cols: cols, t: int64(T), k: K, ids: ptr(ids), idBits: 32,
			out: ptr(out), outLen: int64(len(out)), tStride: K * R, kStride: R}
		b.Run(fmt.Sprintf("T=%d/capi", T), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(out)))
			for b.Loop() {
				if err := protect(func() error { return lookup(&a) }); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("T=%d/store", T), func(b *testing.B) {
			s := stores.get(store).s
			b.ReportAllocs()
			b.SetBytes(int64(len(out)))
			for b.Loop() {
				if err := s.Lookup(names, engram.IDs32(ids, T, K), engram.TokenMajor(out, T, K, R), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		if err := closeStore(store); err != nil {
			b.Fatal(err)
		}
	}
}

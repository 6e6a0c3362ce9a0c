package main

import (
	"bytes"
	"errors"
	"math"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/engram"
)

const rowBytes = 24

var lookupTables = map[string]table{"a": {rows: 500, rowBytes: rowBytes}, "b": {rows: 300, rowBytes: rowBytes}}

func TestLookupLayouts(t *testing.T) {
	r := newRand(t)
	store, rows := populated(t, r, lookupTables)
	for _, tc := range []struct {
		name    string
		names   []string
		T       int
		idBits  int32
		offsets []int64
		layout  func(T, K int) (off, ts, ks, n int)
	}{
		{"token-major int32", []string{"a", "a", "b"}, 7, 32, nil,
			func(T, K int) (int, int, int, int) { return 0, K * rowBytes, rowBytes, T * K * rowBytes }},
		{"head-major int64 offsets", []string{"a", "b", "b", "a"}, 5, 64, []int64{0, 100, 1000, 7},
			func(T, K int) (int, int, int, int) { return 0, rowBytes, T * rowBytes, T * K * rowBytes }},
		{"padded", []string{"b", "b"}, 9, 64, nil,
			func(T, K int) (int, int, int, int) { return 13, K*rowBytes + 5, rowBytes + 1, 13 + T*(K*rowBytes+5) }},
		{"one token", []string{"a", "a", "a", "a", "a", "a"}, 1, 64, nil,
			func(T, K int) (int, int, int, int) { return 0, K * rowBytes, rowBytes, K * rowBytes }},
		{"no tokens", []string{"a"}, 0, 32, nil,
			func(T, K int) (int, int, int, int) { return 0, rowBytes, rowBytes, 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			K := len(tc.names)
			cols := newCols(t, store, tc.names...)
			ids := make([]int64, tc.T*K)
			for i := range ids {
				k := i % K
				ids[i] = r.Int64N(lookupTables[tc.names[k]].rows)
				if tc.offsets != nil {
					ids[i] += tc.offsets[k]
				}
				if r.IntN(5) == 0 {
					ids[i] = -1
				}
			}
			off, ts, ks, n := tc.layout(tc.T, K)
			out := randBytes(r, n)
			want := bytes.Clone(out)
			refLookup(rows, rowBytes, tc.names, ids, tc.T, K, off, ts, ks, tc.offsets, want)
			var idp unsafe.Pointer = ptr(ids)
			if tc.idBits == 32 {
				ids32 := make([]int32, len(ids))
				for i, id := range ids {
					ids32[i] = int32(id)
				}
				idp = ptr(ids32)
			}
			a := lookupArgs{store: store, cols: cols, t: int64(tc.T), k: int32(K), ids: idp, idBits: tc.idBits,
				out: ptr(out), outLen: int64(n), off: int64(off), tStride: int64(ts), kStride: int64(ks), offsets: ptr(tc.offsets)}
			require.NoError(t, lookup(&a))
			require.Equal(t, want, out)

			// The benchmark runs the same lookup.
			out2 := bytes.Clone(want)
			a.out = ptr(out2)
			d, err := benchLookup(&a, 3)
			require.NoError(t, err)
			require.Positive(t, d)
			require.Equal(t, want, out2)
		})
	}
}

// Every bad argument fails with its code before anything is written: the
// output, and the guard bytes around [out_base, out_base+out_len), keep
// their poison.
func TestLookupBounds(t *testing.T) {
	r := newRand(t)
	store, _ := populated(t, r, lookupTables)
	other, _ := populated(t, r, map[string]table{"a": lookupTables["a"]})
	unpop := openStore(t, configJSON(t, map[string]table{"a": lookupTables["a"], "c": {rows: 10, rowBytes: rowBytes}}, t.TempDir(), nil))
	const T, K = 3, 2
	cols := newCols(t, store, "a", "b")
	otherCols := newCols(t, other, "a", "a")
	unpopCols := newCols(t, unpop, "c", "c")
	freed := newCols(t, store, "a", "b")
	require.NoError(t, freeColumns(freed))

	const guard = 64
	mem := make([]byte, guard+T*K*rowBytes+guard+8)
	base := unsafe.Pointer(&mem[guard])
	ids := []int64{1, 2, 3, 4, 5, 6}
	ids32 := []int32{1, 2, 3, 4, 5, 6, 0}
	offsets := make([]int64, K+1)
	good := lookupArgs{store: store, cols: cols, t: T, k: K, ids: ptr(ids), idBits: 64,
		out: base, outLen: T * K * rowBytes, tStride: K * rowBytes, kStride: rowBytes}

	for _, tc := range []struct {
		name string
		want code
		edit func(a *lookupArgs)
	}{
		{"out_len one short", codeInval, func(a *lookupArgs) { a.outLen-- }},
		{"out_len zero", codeInval, func(a *lookupArgs) { a.outLen = 0 }},
		{"out_len negative", codeInval, func(a *lookupArgs) { a.outLen = -1 }},
		{"off past the end", codeInval, func(a *lookupArgs) { a.off = 1 }},
		{"off negative", codeInval, func(a *lookupArgs) { a.off = -rowBytes }},
		{"tstride too long", codeInval, func(a *lookupArgs) { a.tStride++ }},
		{"negative strides", codeInval, func(a *lookupArgs) {
			a.off, a.tStride, a.kStride = (T*K-1)*rowBytes, -K*rowBytes, -rowBytes
		}},
		{"overlapping rows", codeInval, func(a *lookupArgs) { a.kStride = rowBytes - 1 }},
		{"huge stride", codeInval, func(a *lookupArgs) { a.tStride = math.MaxInt64 / 2 }},
		{"NULL out_base", codeInval, func(a *lookupArgs) { a.out = nil }},
		{"out_base wraps", codeInval, func(a *lookupArgs) { a.out = wildPointer(^uintptr(0) - 8) }},
		{"NULL ids", codeInval, func(a *lookupArgs) { a.ids = nil }},
		{"misaligned ids", codeInval, func(a *lookupArgs) { a.ids = unsafe.Add(ptr(ids), 1) }},
		{"misaligned ids32", codeInval, func(a *lookupArgs) { a.ids, a.idBits = unsafe.Add(ptr(ids32), 2), 32 }},
		{"id_bits 16", codeInval, func(a *lookupArgs) { a.idBits = 16 }},
		{"k differs from the columns", codeInval, func(a *lookupArgs) { a.k = 3 }},
		{"t negative", codeInval, func(a *lookupArgs) { a.t = -1 }},
		{"t x k overflows", codeInval, func(a *lookupArgs) { a.t = math.MaxInt64/2 + 1 }},
		{"t x k too large for the address space", codeInval, func(a *lookupArgs) { a.t = math.MaxInt64 / 4 }},
		{"misaligned offsets", codeInval, func(a *lookupArgs) { a.offsets = unsafe.Add(ptr(offsets), 4) }},
		{"offsets push ids out", codeID, func(a *lookupArgs) { offsets[1] = 100; a.offsets = ptr(offsets) }},
		{"bad id", codeID, func(a *lookupArgs) { a.ids = ptr([]int64{1, 2, 3, 4, 500, 6}) }},
		{"columns of another store", codeInval, func(a *lookupArgs) { a.cols = otherCols }},
		{"unpopulated table", codeIO, func(a *lookupArgs) { a.store, a.cols = unpop, unpopCols }},
		{"freed columns", codeClosed, func(a *lookupArgs) { a.cols = freed }},
		{"columns handle as store", codeClosed, func(a *lookupArgs) { a.store = cols }},
		{"store handle as columns", codeClosed, func(a *lookupArgs) { a.cols = store }},
		{"zero store", codeClosed, func(a *lookupArgs) { a.store = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			poison(mem)
			for i := range offsets {
				offsets[i] = 0
			}
			a := good
			tc.edit(&a)
			err := lookup(&a)
			requireCode(t, tc.want, err)
			require.Equal(t, bytes.Repeat([]byte{0xA5}, len(mem)), mem, "memory written by a failed lookup")
			_, err = benchLookup(&a, 2)
			requireCode(t, tc.want, err)
			require.Equal(t, bytes.Repeat([]byte{0xA5}, len(mem)), mem, "memory written by a failed bench")
		})
	}

	t.Run("bad id position", func(t *testing.T) {
		a := good
		a.ids = ptr([]int64{1, 2, 3, -1, 500, 6})
		var ce cError
		require.Equal(t, codeID, ce.set(lookup(&a)))
		require.Equal(t, [3]int64{2, 0, 500}, [3]int64{ce.T, ce.K, ce.ID})
	})
	t.Run("the good lookup", func(t *testing.T) {
		a := good
		require.NoError(t, lookup(&a))
		require.Equal(t, bytes.Repeat([]byte{0xA5}, guard), mem[:guard])
		require.Equal(t, bytes.Repeat([]byte{0xA5}, 8+guard), mem[guard+T*K*rowBytes:])
		_, err := benchLookup(&a, 0)
		requireCode(t, codeInval, err)
	})
}

// The lookup path, the export's wrapper included, allocates nothing.
func TestLookupAllocs(t *testing.T) {
	r := newRand(t)
	store, _ := populated(t, r, lookupTables)
	const T, K = 16, 24
	names := make([]string, K)
	for k := range names {
		names[k] = "a"
	}
	names[3] = "b"
	cols := newCols(t, store, names...)
	ids := make([]int32, T*K)
	for i := range ids {
		ids[i] = int32(r.IntN(300))
	}
	out := make([]byte, T*K*rowBytes)
	offsets := make([]int64, K)
	for _, offs := range []unsafe.Pointer{nil, ptr(offsets)} {
		a := lookupArgs{store: store, cols: cols, t: T, k: K, ids: ptr(ids), idBits: 32,
			out: ptr(out), outLen: int64(len(out)), tStride: K * rowBytes, kStride: rowBytes, offsets: offs}
		require.NoError(t, lookup(&a))
		allocs := testing.AllocsPerRun(200, func() {
			if err := protect(func() error { return lookup(&a) }); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs)
	}
}

// Lookups racing sk_close see a whole lookup or SK_ECLOSED (run with
// -race).
func TestLookupDuringClose(t *testing.T) {
	r := newRand(t)
	store, _ := populated(t, r, lookupTables)
	cols := newCols(t, store, "a", "b")
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := []int64{1, 2}
			out := make([]byte, 2*rowBytes)
			a := lookupArgs{store: store, cols: cols, t: 1, k: 2, ids: ptr(ids), idBits: 64,
				out: ptr(out), outLen: int64(len(out)), tStride: 2 * rowBytes, kStride: rowBytes}
			<-start
			for {
				if err := lookup(&a); err != nil {
					if classify(err) != codeClosed {
						t.Error(err)
					}
					return
				}
			}
		}()
	}
	close(start)
	require.NoError(t, closeStore(store))
	wg.Wait()
	requireCode(t, codeClosed, closeStore(store))
	_, err := newColumns(store, cnames("a"), 1)
	requireCode(t, codeClosed, err)
}

func TestColumns(t *testing.T) {
	r := newRand(t)
	store, _ := populated(t, r, lookupTables)
	c := newCols(t, store, "a", "a", "b", "a")
	obj := columns.get(c)
	require.Equal(t, []string{"a", "a", "b", "a"}, obj.names)
	require.Equal(t, unsafe.StringData(obj.names[0]), unsafe.StringData(obj.names[1]), "repeated names share one string")

	_, err := newColumns(store, cnames("a", "nope"), 2)
	requireCode(t, codeNoTable, err)
	require.True(t, errors.Is(err, engram.ErrUnknownTable))
	_, err = newColumns(store, nil, 1)
	requireCode(t, codeInval, err)
	_, err = newColumns(store, nil, -1)
	requireCode(t, codeInval, err)
	empty, err := newColumns(store, nil, 0)
	require.NoError(t, err)
	require.Empty(t, columns.get(empty).names)

	require.NoError(t, freeColumns(c))
	requireCode(t, codeClosed, freeColumns(c))
	require.Nil(t, columns.get(c))
}

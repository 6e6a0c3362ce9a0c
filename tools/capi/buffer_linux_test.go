package main

import (
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// heapGrowth returns how much the Go heap grew while f ran.
func heapGrowth(f func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return int64(after.HeapSys) - int64(before.HeapSys)
}

// mapped reports whether the page at p is mapped (msync fails with
// ENOMEM for an unmapped page).
func mapped(p unsafe.Pointer) bool {
	page := uintptr(os.Getpagesize())
	b := unsafe.Slice((*byte)(unsafe.Pointer(uintptr(p)&^(page-1))), page)
	return unix.Msync(b, unix.MS_ASYNC) == nil
}

func TestLocalBuffers(t *testing.T) {
	store := openStore(t, configJSON(t, map[string]table{"a": {rows: 10, rowBytes: 8}}, t.TempDir(), nil))
	const n = 64 << 20
	var h uint64
	var p unsafe.Pointer
	grew := heapGrowth(func() {
		var err error
		h, p, err = newBuffer(store, n)
		require.NoError(t, err)
	})
	require.Less(t, grew, int64(n/4), "a %d-byte buffer grew the Go heap by %d", n, grew)
	require.Zero(t, uintptr(p)%uintptr(os.Getpagesize()), "page-aligned")
	b := unsafe.Slice((*byte)(p), n)
	require.Zero(t, b[0]|b[n/2]|b[n-1])
	b[0], b[n-1] = 1, 2
	require.True(t, mapped(p))

	h2, p2, err := newBuffer(store, 100)
	require.NoError(t, err)
	require.NotEqual(t, p, p2)

	_, _, err = newBuffer(store, 0)
	requireCode(t, codeInval, err)
	_, _, err = newBuffer(store, -1)
	requireCode(t, codeInval, err)
	_, _, err = newBuffer(h, 8)
	requireCode(t, codeClosed, err) // a buffer handle is not a store

	require.NoError(t, freeBuffer(h))
	require.False(t, mapped(p))
	requireCode(t, codeClosed, freeBuffer(h))

	// Close unmaps what is still out.
	require.True(t, mapped(p2))
	require.NoError(t, closeStore(store))
	require.False(t, mapped(p2))
	requireCode(t, codeClosed, freeBuffer(h2))
	_, _, err = newBuffer(store, 8)
	requireCode(t, codeClosed, err)
}

// A remote store's arena and buffers are mapped memory too.
func TestRemoteBuffersOffHeap(t *testing.T) {
	r := newRand(t)
	owner, _ := populated(t, r, map[string]table{"a": {rows: 10, rowBytes: 8}})
	_, addr, err := serve(owner, "tcp", "", "")
	require.NoError(t, err)
	const arena = 64 << 20
	var store, h uint64
	var p unsafe.Pointer
	grew := heapGrowth(func() {
		store = openStore(t, configJSON(t, map[string]table{"a": {rows: 10, rowBytes: 8}}, "",
			map[string]any{"addr": addr, "buffer_bytes": arena})) // transport "" is tcp
		h, p, err = newBuffer(store, arena/2)
		require.NoError(t, err)
	})
	require.Less(t, grew, int64(arena/4), "a %d-byte arena grew the Go heap by %d", arena, grew)
	require.True(t, mapped(p))
	unsafe.Slice((*byte)(p), arena/2)[arena/2-1] = 1
	require.NoError(t, freeBuffer(h))
	require.NoError(t, closeStore(store))
	require.False(t, mapped(p), "the arena is unmapped at close")
}

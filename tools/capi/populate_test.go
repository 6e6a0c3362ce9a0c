package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/engram"
)

var streamTables = map[string]table{"s": {rows: 3000, rowBytes: 40}, "u": {rows: 10, rowBytes: 8}}

// readRows looks up every row of a table (token-major, T rows of K=1).
func readRows(t *testing.T, store uint64, name string, tb table) []byte {
	t.Helper()
	cols := newCols(t, store, name)
	ids := make([]int64, tb.rows)
	for i := range ids {
		ids[i] = int64(i)
	}
	out := make([]byte, int(tb.rows)*tb.rowBytes)
	a := lookupArgs{store: store, cols: cols, t: tb.rows, k: 1, ids: ptr(ids), idBits: 64,
		out: ptr(out), outLen: int64(len(out)), tStride: int64(tb.rowBytes), kStride: int64(tb.rowBytes)}
	require.NoError(t, lookup(&a))
	return out
}

func isPopulated(t *testing.T, store uint64, name string) bool {
	t.Helper()
	_, pop, err := tableSpec(store, name)
	require.NoError(t, err)
	return pop
}

// write streams rows in random chunks (empty ones included).
func write(t *testing.T, r interface{ IntN(int) int }, w uint64, rows []byte) {
	t.Helper()
	for len(rows) > 0 {
		n := min(r.IntN(5000), len(rows))
		require.NoError(t, writePopulate(w, ptr(rows[:n]), int64(n)))
		rows = rows[n:]
	}
}

func TestPopulateStream(t *testing.T) {
	r := newRand(t)
	dir := t.TempDir()
	store := openStore(t, configJSON(t, streamTables, dir, nil))
	tb := streamTables["s"]
	rows := randBytes(r, int(tb.rows)*tb.rowBytes)

	t.Run("abort after the last row publishes nothing", func(t *testing.T) {
		w, err := beginPopulate(store, "s")
		require.NoError(t, err)
		write(t, r, w, rows)
		require.NoError(t, abortPopulate(w))
		require.False(t, isPopulated(t, store, "s"))
		requireCode(t, codeClosed, writePopulate(w, ptr(rows), 1))
		requireCode(t, codeClosed, commitPopulate(w))
		requireCode(t, codeClosed, abortPopulate(w))
		requireCode(t, codeClosed, abortPopulate(w))
	})
	t.Run("short commit publishes nothing", func(t *testing.T) {
		w, err := beginPopulate(store, "s")
		require.NoError(t, err)
		write(t, r, w, rows[:len(rows)-1])
		requireCode(t, codeInval, commitPopulate(w))
		require.False(t, isPopulated(t, store, "s"))
	})
	t.Run("too many rows", func(t *testing.T) {
		w, err := beginPopulate(store, "s")
		require.NoError(t, err)
		write(t, r, w, rows[:100])
		requireCode(t, codeInval, writePopulate(w, ptr(rows), int64(len(rows))))
		// The stream is still good: the rest, then commit.
		write(t, r, w, rows[100:])
		requireCode(t, codeInval, writePopulate(w, ptr(rows), 1))
		require.NoError(t, commitPopulate(w))
		require.True(t, isPopulated(t, store, "s"))
		require.Equal(t, rows, readRows(t, store, "s", tb))
	})
	t.Run("populated", func(t *testing.T) {
		_, err := beginPopulate(store, "s")
		requireCode(t, codeExist, err)
		requireCode(t, codeExist, populate(store, "s", ptr(rows), int64(len(rows))))
		require.Equal(t, rows, readRows(t, store, "s", tb))
	})
	t.Run("bad arguments", func(t *testing.T) {
		_, err := beginPopulate(store, "nope")
		requireCode(t, codeNoTable, err)
		w, err := beginPopulate(store, "u")
		require.NoError(t, err)
		requireCode(t, codeInval, writePopulate(w, nil, 8))
		requireCode(t, codeInval, writePopulate(w, ptr(rows), -1))
		requireCode(t, codeClosed, writePopulate(store, ptr(rows), 8))
		require.NoError(t, abortPopulate(w))
	})
	t.Run("reopen", func(t *testing.T) {
		require.NoError(t, closeStore(store))
		again := openStore(t, configJSON(t, streamTables, dir, nil))
		require.True(t, isPopulated(t, again, "s"))
		require.False(t, isPopulated(t, again, "u"))
		require.Equal(t, rows, readRows(t, again, "s", tb))
	})
}

// sk_close with a stream open aborts it: nothing is published, even with
// every row written.
func TestPopulateCloseAborts(t *testing.T) {
	r := newRand(t)
	dir := t.TempDir()
	store := openStore(t, configJSON(t, streamTables, dir, nil))
	tb := streamTables["u"]
	rows := randBytes(r, int(tb.rows)*tb.rowBytes)
	w, err := beginPopulate(store, "u")
	require.NoError(t, err)
	write(t, r, w, rows)
	w2, err := beginPopulate(store, "s")
	require.NoError(t, err)
	require.NoError(t, closeStore(store))
	requireCode(t, codeClosed, commitPopulate(w))
	requireCode(t, codeClosed, writePopulate(w2, ptr(rows), 1))
	_, err = beginPopulate(store, "u")
	requireCode(t, codeClosed, err)
	ents, err := os.ReadDir(filepath.Join(dir, "ns"))
	require.NoError(t, err)
	require.Empty(t, ents)
}

func TestPopulateWhole(t *testing.T) {
	r := newRand(t)
	store := openStore(t, configJSON(t, streamTables, t.TempDir(), nil))
	tb := streamTables["u"]
	rows := randBytes(r, int(tb.rows)*tb.rowBytes)
	requireCode(t, codeInval, populate(store, "u", ptr(rows), int64(len(rows)-1)))
	requireCode(t, codeInval, populate(store, "u", nil, int64(len(rows))))
	requireCode(t, codeInval, populate(store, "u", wildPointer(^uintptr(0)-4), 80))
	requireCode(t, codeNoTable, populate(store, "x", ptr(rows), int64(len(rows))))
	require.NoError(t, populate(store, "u", ptr(rows), int64(len(rows))))
	err := populate(store, "u", ptr(rows), int64(len(rows)))
	requireCode(t, codeExist, err)
	require.True(t, errors.Is(err, engram.ErrExists))
	require.Equal(t, rows, readRows(t, store, "u", tb))

	// Remove, then populate again.
	require.NoError(t, remove(store, "u"))
	require.False(t, isPopulated(t, store, "u"))
	requireCode(t, codeIO, remove(store, "u"))
	requireCode(t, codeNoTable, remove(store, "x"))
	rows2 := bytes.Clone(rows)
	rows2[0]++
	require.NoError(t, populate(store, "u", ptr(rows2), int64(len(rows2))))
	require.Equal(t, rows2, readRows(t, store, "u", tb))
}

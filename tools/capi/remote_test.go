package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A local store served over each transport, read by a remote store opened
// by name: lookups land in its registered buffers, everything a remote
// store cannot do fails with its code.
func TestRemote(t *testing.T) {
	for _, tr := range []string{"tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			r := newRand(t)
			tables := map[string]table{"a": {rows: 700, rowBytes: 264}, "b": {rows: 90, rowBytes: 264}}
			owner, rows := populated(t, r, tables)
			srv, addr, err := serve(owner, tr, "", "")
			require.NoError(t, err)
			require.NotEmpty(t, addr)
			requireCode(t, codeIO, remove(owner, "a")) // served

			const arena = 1 << 20
			store := openStore(t, configJSON(t, tables, "", map[string]any{"transport": tr, "addr": addr, "buffer_bytes": arena}))
			spec, pop, err := tableSpec(store, "b")
			require.NoError(t, err)
			require.True(t, pop)
			require.EqualValues(t, 90, spec.NumRows)

			const T, K = 6, 3
			names := []string{"a", "b", "a"}
			cols := newCols(t, store, names...)
			ids := make([]int64, T*K)
			for i := range ids {
				ids[i] = r.Int64N(tables[names[i%K]].rows)
			}
			ids[4] = -1
			n := T * K * 264
			bh, p, err := newBuffer(store, int64(n))
			require.NoError(t, err)
			out := buffers.get(bh).bytes()
			require.Equal(t, p, ptr(out))
			poison(out)
			want := bytes.Clone(out)
			refLookup(rows, 264, names, ids, T, K, 0, 264, T*264, nil, want)
			a := lookupArgs{store: store, cols: cols, t: T, k: K, ids: ptr(ids), idBits: 64,
				out: p, outLen: int64(n), tStride: 264, kStride: T * 264}
			require.NoError(t, lookup(&a))
			require.Equal(t, want, out)
			d, err := benchLookup(&a, 2)
			require.NoError(t, err)
			require.Positive(t, d)

			// Memory outside the registered buffers is refused.
			plain := make([]byte, n)
			poison(plain)
			b := a
			b.out = ptr(plain)
			requireCode(t, codeInval, lookup(&b))
			require.Equal(t, bytes.Repeat([]byte{0xA5}, n), plain)
			// A bad id fails before anything moves.
			poison(out)
			b = a
			b.ids = ptr(append([]int64{0, 0, 0, 0, 90, 0}, ids[6:]...))
			var ce cError
			require.Equal(t, codeID, ce.set(lookup(&b)))
			require.Equal(t, [3]int64{1, 1, 90}, [3]int64{ce.T, ce.K, ce.ID})
			require.Equal(t, bytes.Repeat([]byte{0xA5}, n), out)

			// A remote store is read-only.
			requireCode(t, codeNotSup, populate(store, "a", ptr(rows["a"]), int64(len(rows["a"]))))
			_, err = beginPopulate(store, "a")
			requireCode(t, codeNotSup, err)
			requireCode(t, codeNotSup, remove(store, "a"))
			_, _, err = serve(store, tr, "", "")
			requireCode(t, codeInval, err)

			// The arena runs out.
			_, _, err = newBuffer(store, 2*arena)
			requireCode(t, codeNoMem, err)
			var live []uint64
			for {
				h, _, err := newBuffer(store, arena/4)
				if err != nil {
					requireCode(t, codeNoMem, err)
					break
				}
				live = append(live, h)
			}
			require.NotEmpty(t, live)
			require.NoError(t, freeBuffer(live[0]))
			requireCode(t, codeClosed, freeBuffer(live[0]))

			// Close frees the buffers still out, then the server goes.
			require.NoError(t, closeStore(store))
			require.Nil(t, buffers.get(bh))
			requireCode(t, codeClosed, freeBuffer(bh))
			require.NoError(t, closeServer(srv))
			requireCode(t, codeClosed, closeServer(srv))
			require.NoError(t, remove(owner, "a")) // no longer served
		})
	}
}

// sk_close of an owner closes its servers; their handles die with it.
func TestServeClosedWithStore(t *testing.T) {
	r := newRand(t)
	owner, _ := populated(t, r, map[string]table{"a": {rows: 10, rowBytes: 8}})
	srv, _, err := serve(owner, "tcp", "127.0.0.1:0", "")
	require.NoError(t, err)
	_, _, err = serve(owner, "udp", "", "")
	requireCode(t, codeInval, err)
	require.NoError(t, closeStore(owner))
	requireCode(t, codeClosed, closeServer(srv))
	_, _, err = serve(owner, "tcp", "", "")
	requireCode(t, codeClosed, err)

	empty := openStore(t, configJSON(t, map[string]table{"a": {rows: 10, rowBytes: 8}}, t.TempDir(), nil))
	_, _, err = serve(empty, "tcp", "", "")
	requireCode(t, codeIO, err) // nothing populated to serve
}

// A server published into a directory (sk_serve_publish), read by a store
// opened with {"directory": ...}: over a discovery file here and over a
// real etcd server in remote_etcd_test.go; bad specs fail SK_EINVAL and serve nothing; closing
// the server withdraws its records, after which opening by directory
// fails.
func TestServePublished(t *testing.T) {
	testServePublished(t, filepath.Join(t.TempDir(), "d.json"))
}

func testServePublished(t *testing.T, dirs ...string) {
	for _, dir := range dirs {
		r := newRand(t)
		tables := map[string]table{"a": {rows: 300, rowBytes: 264}}
		owner, rows := populated(t, r, tables)
		for _, bad := range []string{"off", "http://h:1/x", "etcd://h:0/x"} {
			_, _, err := serve(owner, "tcp", "", bad)
			requireCode(t, codeInval, err)
		}
		sh, _, err := serve(owner, "tcp", "", dir)
		require.NoError(t, err)
		store := openStore(t, configJSON(t, tables, "", map[string]any{"directory": dir, "buffer_bytes": 1 << 20}))
		const T, K = 8, 2
		cols := newCols(t, store, "a", "a")
		ids := make([]int64, T*K)
		for i := range ids {
			ids[i] = r.Int64N(300)
		}
		n := T * K * 264
		bh, p, err := newBuffer(store, int64(n))
		require.NoError(t, err)
		out := buffers.get(bh).bytes()
		want := make([]byte, n)
		refLookup(rows, 264, []string{"a", "a"}, ids, T, K, 0, 264, T*264, nil, want)
		a := lookupArgs{store: store, cols: cols, t: T, k: K, ids: ptr(ids), idBits: 64,
			out: p, outLen: int64(n), tStride: 264, kStride: T * 264}
		require.NoError(t, lookup(&a))
		require.Equal(t, want, out, dir)
		require.NoError(t, closeStore(store))

		require.NoError(t, closeServer(sh))
		_, err = open(configJSON(t, tables, "", map[string]any{"directory": dir}))
		requireCode(t, codeNoTable, err) // no record of table a is left
	}
	_, err := open(configJSON(t, map[string]table{"a": {rows: 1, rowBytes: 1}}, "", map[string]any{"directory": "off"}))
	requireCode(t, codeInval, err)
	_, err = open(configJSON(t, map[string]table{"a": {rows: 1, rowBytes: 1}}, "", map[string]any{"directory": "x", "addr": "y"}))
	requireCode(t, codeInval, err)
}

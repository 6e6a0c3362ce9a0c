package engram

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLayers(t *testing.T) {
	r := newRand(t)
	dir := t.TempDir()
	ls := LayerSpec{Layers: 2, Heads: 3, NumRows: 300, RowBytes: 64}
	l, err := OpenLayers(context.Background(), Config{Namespace: "ds", Dir: dir}, ls)
	require.NoError(t, err)
	rows := map[string][]byte{}
	for layer := range ls.Layers {
		for h := range ls.Heads {
			b := randRows(r, TableSpec{NumRows: ls.NumRows, RowBytes: ls.RowBytes})
			rows[LayerTableName(layer, h)] = b
			require.NoError(t, l.Populate(layer, h, b))
		}
	}
	const T = 11
	ids := make([]int64, T*ls.Heads)
	for i := range ids {
		ids[i] = r.Int64N(ls.NumRows)
	}
	for layer := range ls.Layers {
		got := make([]byte, T*ls.Heads*64)
		require.NoError(t, l.Lookup(layer, IDs64(ids, T, ls.Heads), TokenMajor(got, T, ls.Heads, 64), nil))
		want := make([]byte, len(got))
		refLookup(rows, 64, l.names[layer], ids, T, ls.Heads, TokenMajor(want, T, ls.Heads, 64), nil)
		require.True(t, bytes.Equal(got, want))
	}
	out := make([]byte, T*ls.Heads*64)
	require.ErrorIs(t, l.Lookup(2, IDs64(ids, T, ls.Heads), TokenMajor(out, T, ls.Heads, 64), nil), ErrBadLayer)
	require.ErrorIs(t, l.Lookup(-1, IDs64(ids, T, ls.Heads), TokenMajor(out, T, ls.Heads, 64), nil), ErrBadLayer)
	require.ErrorIs(t, l.Populate(0, 3, nil), ErrBadLayer)
	require.ErrorIs(t, l.Lookup(0, IDs64(ids[:T*2], T, 2), TokenMajor(out, T, 2, 64), nil), ErrShape)
	require.NoError(t, l.Store().Close())

	// The same directory reopened as layers sees the rows; a view with a
	// different shape is refused.
	l2, err := OpenLayers(context.Background(), Config{Namespace: "ds", Dir: dir}, ls)
	require.NoError(t, err)
	defer l2.Store().Close()
	_, err = NewLayers(l2.Store(), LayerSpec{Layers: 2, Heads: 3, NumRows: 301, RowBytes: 64})
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewLayers(l2.Store(), LayerSpec{Layers: 3, Heads: 3, NumRows: 300, RowBytes: 64})
	require.ErrorIs(t, err, ErrUnknownTable)
	_, err = OpenLayers(context.Background(), Config{Namespace: "ds", Dir: dir, Tables: map[string]TableSpec{"x": {1, 1}}}, ls)
	require.ErrorIs(t, err, ErrConfig)
}

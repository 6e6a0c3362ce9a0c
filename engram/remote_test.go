package engram

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/tcp"
)

func TestRemoteStore(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	spec := TableSpec{NumRows: 5000, RowBytes: 264}
	specs := map[string]TableSpec{"a": spec, "b": spec}
	local := openLocal(t, t.TempDir(), specs)
	defer local.Close()
	rows := map[string][]byte{"a": randRows(r, spec), "b": randRows(r, spec)}
	require.NoError(t, local.Populate("a", rows["a"]))

	ownerT := tcp.New(tcp.Config{})
	defer ownerT.Close()
	srv, err := local.Serve(ServeConfig{Transport: ownerT, Addr: "127.0.0.1:0", StagingBytes: 8 << 20})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, srv.Tables())

	reqT := tcp.New(tcp.Config{})
	defer reqT.Close()

	// The owner serves only populated tables: a store asking for b fails.
	_, err = Open(ctx, Config{Tables: specs, Namespace: "ns", Remote: &RemoteConfig{Transport: reqT, Addr: srv.Addr(), BufferBytes: 4 << 20}})
	require.ErrorIs(t, err, ErrUnknownTable)
	// ... and one asking for another shape fails.
	_, err = Open(ctx, Config{Tables: map[string]TableSpec{"a": {NumRows: 5001, RowBytes: 264}}, Namespace: "ns", Remote: &RemoteConfig{Transport: reqT, Addr: srv.Addr(), BufferBytes: 4 << 20}})
	require.Error(t, err)

	rs, err := Open(ctx, Config{Tables: map[string]TableSpec{"a": spec}, Namespace: "ns", Remote: &RemoteConfig{Transport: reqT, Addr: srv.Addr(), BufferBytes: 16 << 20}})
	require.NoError(t, err)
	ok, err := rs.Populated("a")
	require.NoError(t, err)
	require.True(t, ok)
	require.ErrorIs(t, rs.Populate("a", rows["a"]), ErrReadOnly)
	require.ErrorIs(t, rs.Remove("a"), ErrReadOnly)

	for _, tk := range [][2]int{{1, 24}, {16, 24}, {2048, 24}} {
		T, K := tk[0], tk[1]
		tables := make([]string, K)
		for k := range tables {
			tables[k] = "a"
		}
		ids := make([]int64, T*K)
		for i := range ids {
			ids[i] = r.Int64N(spec.NumRows)
		}
		ids[0] = -1
		buf, err := rs.NewBuffer(T * K * 264)
		require.NoError(t, err)
		for i := range buf.Bytes() {
			buf.Bytes()[i] = 0xEE
		}
		want := bytes.Clone(buf.Bytes())
		require.NoError(t, rs.Lookup(tables, IDs64(ids, T, K), HeadMajor(buf.Bytes(), T, K, 264), nil))
		refLookup(rows, 264, tables, ids, T, K, HeadMajor(want, T, K, 264), nil)
		require.True(t, bytes.Equal(want, buf.Bytes()), "T=%d", T)
		buf.Release()
		buf.Release()
	}

	// Output outside the registered buffers: refused, nothing written.
	plain := bytes.Repeat([]byte{7}, 264)
	err = rs.Lookup([]string{"a"}, IDs64([]int64{1}, 1, 1), TokenMajor(plain, 1, 1, 264), nil)
	require.ErrorIs(t, err, ErrUnregisteredOutput)
	require.Equal(t, bytes.Repeat([]byte{7}, 264), plain)

	// A bad id fails before anything moves.
	buf, err := rs.NewBuffer(264 * 2)
	require.NoError(t, err)
	copy(buf.Bytes(), make([]byte, 264*2)) // buffers are reused memory: clear it
	err = rs.Lookup([]string{"a", "a"}, IDs64([]int64{1, spec.NumRows}, 1, 2), TokenMajor(buf.Bytes(), 1, 2, 264), nil)
	require.ErrorIs(t, err, ErrID)
	err = rs.Lookup([]string{"a", "b"}, IDs64([]int64{1, 1}, 1, 2), TokenMajor(buf.Bytes(), 1, 2, 264), nil)
	require.ErrorIs(t, err, ErrUnknownTable)
	err = rs.Lookup([]string{"a", "a"}, IDs64([]int64{1, 1}, 1, 2), Output{Buf: buf.Bytes(), TStride: 264, KStride: 100}, nil)
	require.ErrorIs(t, err, ErrOutput)
	require.Equal(t, make([]byte, 264*2), buf.Bytes())
	buf.Release()

	// A served table cannot be removed; after the server closes it can.
	require.ErrorIs(t, local.Remove("a"), ErrServed)
	require.NoError(t, rs.Close())
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close())
	require.NoError(t, local.Remove("a"))
}

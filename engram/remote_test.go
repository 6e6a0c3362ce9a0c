package engram

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/discovery"
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

// TestLookupErrorsLocalAndRemote runs the same rejected lookups on a local
// store and on a remote store served by it: both paths check the request
// with the one lookup check, so each fails with the same sentinel, the
// same typed error (errors.As with engram's types) and the same message,
// starting "engram:", and neither writes a byte. A remote store counts
// every rejected lookup as failed.
func TestLookupErrorsLocalAndRemote(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	const T, K, R = 3, 4, 64
	spec := TableSpec{NumRows: 40, RowBytes: R}
	tiny := TableSpec{NumRows: 5, RowBytes: R}
	narrow := TableSpec{NumRows: 10, RowBytes: R / 2}
	specs := map[string]TableSpec{"a": spec, "tiny": tiny, "narrow": narrow}
	local := openLocal(t, t.TempDir(), specs)
	defer local.Close()
	for name, sp := range specs {
		require.NoError(t, local.Populate(name, randRows(r, sp)))
	}
	ownerT := tcp.New(tcp.Config{})
	defer ownerT.Close()
	srv, err := local.Serve(ServeConfig{Transport: ownerT, Addr: "127.0.0.1:0", StagingBytes: 1 << 20})
	require.NoError(t, err)
	defer srv.Close()
	reqT := tcp.New(tcp.Config{})
	defer reqT.Close()
	rs, err := Open(ctx, Config{Tables: specs, Namespace: "ns", Remote: &RemoteConfig{Transport: reqT, Addr: srv.Addr(), BufferBytes: 1 << 20}})
	require.NoError(t, err)
	defer rs.Close()

	rbuf, err := rs.NewBuffer(2 * T * K * R)
	require.NoError(t, err)
	defer rbuf.Release()
	lbuf := make([]byte, 2*T*K*R)
	good := func() []int64 {
		ids := make([]int64, T*K)
		for i := range ids {
			ids[i] = r.Int64N(tiny.NumRows)
		}
		return ids
	}
	tables := []string{"a", "a", "tiny", "a"}

	type want struct {
		is     error
		as     func(err error) bool // errors.As with an engram type, and its fields
		remote bool                 // a remote lookup only
	}
	asID := func(wantErr IDError) func(error) bool {
		return func(err error) bool {
			var e *IDError
			return errors.As(err, &e) && *e == wantErr
		}
	}
	cases := []struct {
		name   string
		tables []string
		ids    func() IDs
		out    func(buf []byte) Output
		opts   *LookupOptions
		want   want
	}{
		{"id past its table", tables, func() IDs { ids := good(); ids[K+2] = 5; return IDs64(ids, T, K) }, nil, nil,
			want{is: ErrID, as: asID(IDError{T: 1, K: 2, ID: 5, Rows: 5, Table: "tiny"})}},
		{"id -2", tables, func() IDs { ids := good(); ids[2*K] = -2; return IDs64(ids, T, K) }, nil, nil,
			want{is: ErrID, as: asID(IDError{T: 2, K: 0, ID: -2, Rows: 40, Table: "a"})}},
		{"id below its offset", tables, func() IDs { return IDs64(good(), T, K) }, nil, &LookupOptions{Offsets: []int64{0, 10, 0, 0}},
			want{is: ErrID, as: func(err error) bool {
				var e *IDError
				return errors.As(err, &e) && e.K == 1 && e.Offset == 10 && e.Table == "a"
			}}},
		{"unknown table", []string{"a", "a", "nope", "a"}, func() IDs { return IDs64(good(), T, K) }, nil, nil,
			want{is: ErrUnknownTable, as: func(err error) bool {
				var e *TableError
				return errors.As(err, &e) && *e == TableError{Table: "nope", Op: "lookup", Err: ErrUnknownTable}
			}}},
		{"row sizes differ", []string{"a", "narrow", "tiny", "a"}, func() IDs { return IDs64(good(), T, K) }, nil, nil,
			want{is: ErrRowBytes, as: func(err error) bool {
				var e *ColumnError
				return errors.As(err, &e) && e.Column == 1 && e.Table == "narrow" && e.RowBytes == R/2 && e.Want == R
			}}},
		{"names vs K", tables[:3], func() IDs { return IDs64(good(), T, K) }, nil, nil,
			want{is: ErrShape, as: func(err error) bool {
				var e *ShapeError
				return errors.As(err, &e) && *e == ShapeError{T: T, K: K, IDs: T * K, Columns: 3}
			}}},
		{"offsets vs K", tables, func() IDs { return IDs64(good(), T, K) }, nil, &LookupOptions{Offsets: []int64{0}},
			want{is: ErrShape, as: func(err error) bool { var e *ShapeError; return errors.As(err, &e) && e.Reason != "" }}},
		{"both id types", tables, func() IDs { return IDs{I32: []int32{1}, I64: good(), T: T, K: K} }, nil, nil,
			want{is: ErrShape, as: func(err error) bool { var e *ShapeError; return errors.As(err, &e) && e.Reason != "" }}},
		{"rows overlap", tables, func() IDs { return IDs64(good(), T, K) },
			func(buf []byte) Output { return Output{Buf: buf, TStride: K * R, KStride: R - 1} }, nil,
			want{is: ErrOutput, as: func(err error) bool { var e *OutputError; return errors.As(err, &e) && e.KStride == R-1 }}},
		{"output too short", tables, func() IDs { return IDs64(good(), T, K) },
			func(buf []byte) Output { return TokenMajor(buf[:T*K*R-1], T, K, R) }, nil,
			want{is: ErrOutput, as: func(err error) bool { var e *OutputError; return errors.As(err, &e) }}},
		{"output not in a buffer", tables, func() IDs { return IDs64(good(), T, K) },
			func([]byte) Output { return TokenMajor(make([]byte, T*K*R), T, K, R) }, nil,
			want{is: ErrUnregisteredOutput, remote: true, as: func(err error) bool { var e *BufferError; return errors.As(err, &e) }}},
		{"negative offset", tables, func() IDs { return IDs64(good(), T, K) }, nil, &LookupOptions{Offsets: []int64{0, 0, -1, 0}},
			want{is: ErrShape, remote: true, as: func(err error) bool {
				var e *ColumnError
				return errors.As(err, &e) && e.Column == 2 && e.Offset == -1
			}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var msgs []string
			ids := tc.ids() // the same request on both paths
			for _, s := range []*Store{local, rs} {
				buf := lbuf
				if s == rs {
					buf = rbuf.Bytes()
				} else if tc.want.remote {
					continue
				}
				for i := range buf {
					buf[i] = 0x5A
				}
				out := TokenMajor(buf, T, K, R)
				if tc.out != nil {
					out = tc.out(buf)
				}
				var failed uint64
				if s == rs {
					st, err := rs.Stats()
					require.NoError(t, err)
					failed = st.Remote.Failed
				}
				err := s.Lookup(tc.tables, ids, out, tc.opts)
				require.ErrorIs(t, err, tc.want.is)
				require.True(t, tc.want.as(err), "errors.As with the engram type: %v", err)
				require.True(t, strings.HasPrefix(err.Error(), "engram: "), "message prefix: %v", err)
				require.Equal(t, bytes.Repeat([]byte{0x5A}, len(buf)), buf, "a failed lookup wrote bytes")
				if s == rs {
					st, err := rs.Stats()
					require.NoError(t, err)
					require.Equal(t, failed+1, st.Remote.Failed, "a rejected remote lookup counts as failed")
				}
				msgs = append(msgs, err.Error())
			}
			if len(msgs) == 2 {
				require.Equal(t, msgs[0], msgs[1], "local and remote lookups fail alike")
			}
		})
	}

	// A local store takes negative offsets (the remote rule above is the
	// remote path's own).
	ids := good()
	for i := range ids {
		ids[i] -= 3
	}
	require.NoError(t, local.Lookup(tables, IDs64(ids, T, K), TokenMajor(lbuf, T, K, R), &LookupOptions{Offsets: []int64{-3, -3, -3, -3}}))
}

// shardOwner is a local store of 264-byte-row tables (name -> rows)
// served over its own tcp transport with cfg's Directory and Shards; both
// are closed at cleanup.
func shardOwner(t *testing.T, tables map[string][]byte, cfg ServeConfig) (*Store, *Server) {
	t.Helper()
	specs := map[string]TableSpec{}
	for name, b := range tables {
		specs[name] = TableSpec{NumRows: int64(len(b) / 264), RowBytes: 264}
	}
	st := openLocal(t, t.TempDir(), specs)
	t.Cleanup(func() { st.Close() })
	for name, b := range tables {
		require.NoError(t, st.Populate(name, b))
	}
	tr := tcp.New(tcp.Config{})
	t.Cleanup(func() { tr.Close() })
	cfg.Transport, cfg.Addr, cfg.StagingBytes = tr, "127.0.0.1:0", 8<<20
	srv, err := st.Serve(cfg)
	require.NoError(t, err)
	return st, srv
}

// checkTableLookup looks up T x K random rows of table "a" (numRows rows
// of 264 bytes, whose bytes are rows) from rs and compares them with rows.
func checkTableLookup(t *testing.T, r *rand.Rand, rs *Store, rows []byte, numRows int64, T, K int) {
	t.Helper()
	tables := make([]string, K)
	for k := range tables {
		tables[k] = "a"
	}
	ids := make([]int64, T*K)
	for i := range ids {
		ids[i] = r.Int64N(numRows)
	}
	buf, err := rs.NewBuffer(T * K * 264)
	require.NoError(t, err)
	defer buf.Release()
	want := bytes.Clone(buf.Bytes())
	require.NoError(t, rs.Lookup(tables, IDs64(ids, T, K), TokenMajor(buf.Bytes(), T, K, 264), nil))
	refLookup(map[string][]byte{"a": rows}, 264, tables, ids, T, K, TokenMajor(want, T, K, 264), nil)
	require.True(t, bytes.Equal(want, buf.Bytes()))
}

// TestRemoteShardedStore opens a store whose table is cut over two owner
// stores (each serving one shard, and the second a replica of the first
// shard too), looks rows up, closes the first owner, and looks up again:
// the replica serves its rows and the caller sees the same bytes.
func TestRemoteShardedStore(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	spec := TableSpec{NumRows: 6000, RowBytes: 264}
	rows := randRows(r, spec)
	const cut = 2500
	lo, hi := rows[:cut*264], rows[cut*264:]
	st0, srv0 := shardOwner(t, map[string][]byte{"a.s0": lo}, ServeConfig{})
	_, srv1 := shardOwner(t, map[string][]byte{"a.s0": lo, "a.s1": hi}, ServeConfig{})
	reqT := tcp.New(tcp.Config{})
	defer reqT.Close()
	rs, err := Open(ctx, Config{Tables: map[string]TableSpec{"a": spec}, Namespace: "ns", Remote: &RemoteConfig{Transport: reqT, BufferBytes: 16 << 20,
		Shards: []RemoteShard{
			{Table: "a", Served: "a.s0", Lo: 0, Hi: cut, Addrs: []string{srv0.Addr(), srv1.Addr()}},
			{Table: "a", Served: "a.s1", Lo: cut, Hi: spec.NumRows, Addrs: []string{srv1.Addr()}},
		}}})
	require.NoError(t, err)
	defer rs.Close()
	check := func() { checkTableLookup(t, r, rs, rows, spec.NumRows, 64, 24) }
	check()
	require.NoError(t, st0.Close()) // the first owner goes (its server with it)
	check()
	// A store config with both Addr and Shards is refused.
	_, err = Open(ctx, Config{Tables: map[string]TableSpec{"a": spec}, Namespace: "ns", Remote: &RemoteConfig{Transport: reqT, Addr: srv1.Addr(),
		Shards: []RemoteShard{{Table: "a", Lo: 0, Hi: 1, Addrs: []string{srv1.Addr()}}}}})
	require.ErrorIs(t, err, ErrConfig)
	// So is a shard with no rows.
	_, err = Open(ctx, Config{Tables: map[string]TableSpec{"a": spec}, Namespace: "ns", Remote: &RemoteConfig{Transport: reqT,
		Shards: []RemoteShard{{Table: "a", Lo: 3, Hi: 3, Addrs: []string{srv1.Addr()}}}}})
	require.ErrorIs(t, err, ErrConfig)
}

// TestRemoteStoreFromDirectory: owners' servers publish their tables (a
// table cut in two, its first shard on both owners) in a directory; a
// remote store opened with the directory alone finds and reads them, and
// keeps reading when an owner closes (its records go with it).
func TestRemoteStoreFromDirectory(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	spec := TableSpec{NumRows: 900, RowBytes: 264}
	rows := randRows(r, spec)
	const cut = 400
	dir := discovery.NewMemory()
	defer dir.Close()
	published := ServeConfig{Directory: dir, Shards: map[string]ShardOf{"a.s0": {Table: "a", Lo: 0}, "a.s1": {Table: "a", Lo: cut}}}
	_, srv0 := shardOwner(t, map[string][]byte{"a.s0": rows[:cut*264]}, published)
	_, srv1 := shardOwner(t, map[string][]byte{"a.s0": rows[:cut*264], "a.s1": rows[cut*264:]}, published)
	recs, err := dir.List(ctx, DirectoryPrefix("ns"))
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for _, rec := range recs {
		require.Equal(t, "a", rec.Attrs["table"])
		require.Equal(t, "tcp", rec.Transport)
	}
	reqT := tcp.New(tcp.Config{})
	defer reqT.Close()
	open := func() *Store {
		rs, err := Open(ctx, Config{Tables: map[string]TableSpec{"a": spec}, Namespace: "ns",
			Remote: &RemoteConfig{Transport: reqT, BufferBytes: 8 << 20, Directory: dir}})
		require.NoError(t, err)
		t.Cleanup(func() { rs.Close() })
		return rs
	}
	check := func(rs *Store) { checkTableLookup(t, r, rs, rows, spec.NumRows, 32, 8) }
	rs := open()
	check(rs)
	require.NoError(t, srv0.Close()) // its shard has a replica on srv1
	recs, err = dir.List(ctx, DirectoryPrefix("ns"))
	require.NoError(t, err)
	require.Len(t, recs, 2, "the closed server's record went with it")
	check(rs)     // the open store reads the first shard from its replica
	check(open()) // a store opened now finds the remaining owner alone

	// A table no record names: refused by name.
	_, err = Open(ctx, Config{Tables: map[string]TableSpec{"b": spec}, Namespace: "ns",
		Remote: &RemoteConfig{Transport: reqT, Directory: dir}})
	require.ErrorIs(t, err, ErrUnknownTable)
	// Directory with Addr: one or the other.
	_, err = Open(ctx, Config{Tables: map[string]TableSpec{"a": spec}, Namespace: "ns",
		Remote: &RemoteConfig{Transport: reqT, Directory: dir, Addr: srv1.Addr()}})
	require.ErrorIs(t, err, ErrConfig)
}

package engram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/shm"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// fakeDevMem is device memory the test can read: CopyIn copies nothing
// until its wait is called, so a bounce slot the engine reused before
// waiting would land the wrong bytes, and a run it names past the source
// or the memory fails the test.
type fakeDevMem struct {
	mu     sync.Mutex
	mem    []byte
	copies int
	fail   error // CopyIn's error, when set
}

func (d *fakeDevMem) DeviceLen() uint64 { return uint64(len(d.mem)) }

func (d *fakeDevMem) CopyIn(devOff uint64, src []byte, runs [][2]uint64) (func() error, error) {
	if d.fail != nil {
		return nil, d.fail
	}
	rs := append([][2]uint64(nil), runs...)
	return func() error {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.copies++
		for _, r := range rs {
			if r[0]+r[1] > uint64(len(src)) || devOff+r[0]+r[1] > uint64(len(d.mem)) {
				return fmt.Errorf("run %v at %d: past the source (%d) or the memory (%d)", r, devOff, len(src), len(d.mem))
			}
			copy(d.mem[devOff+r[0]:], src[r[0]:r[0]+r[1]])
		}
		return nil
	}, nil
}

var _ DeviceDst = (*fakeDevMem)(nil)

// TestLookupDevice looks rows up from remote stores (one owner over tcp
// and shm, a sharded table over two owners) into device memory (a fake
// one whose copies land only when waited for), in both dense layouts,
// with -1 ids, offsets, int32 and int64 ids, and outputs from one row to
// several bounce windows (many pieces), and compares every device byte
// with the host lookup's: rows named -1 and bytes between rows keep the
// memory's earlier contents.
func TestLookupDevice(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	spec := TableSpec{NumRows: 6000, RowBytes: 264}
	rowsA, rowsB := randRows(r, spec), randRows(r, spec)
	rows := map[string][]byte{"a": rowsA, "b": rowsB}

	stores := map[string]*Store{}
	for _, name := range []string{"tcp", "shm"} {
		local := openLocal(t, t.TempDir(), map[string]TableSpec{"a": spec, "b": spec})
		t.Cleanup(func() { local.Close() })
		require.NoError(t, local.Populate("a", rowsA))
		require.NoError(t, local.Populate("b", rowsB))
		var ownerT, reqT interface {
			Close() error
		}
		cfg := ServeConfig{StagingBytes: 8 << 20}
		rc := &RemoteConfig{BufferBytes: 32 << 20, DeviceWindow: 256 << 10} // outputs of several windows
		if name == "tcp" {
			o, q := tcp.New(tcp.Config{}), tcp.New(tcp.Config{})
			cfg.Transport, cfg.Addr, rc.Transport = o, "127.0.0.1:0", q
			ownerT, reqT = o, q
		} else {
			o, q := shm.New(shm.Config{}), shm.New(shm.Config{})
			cfg.Transport, cfg.Addr, rc.Transport = o, fmt.Sprintf("devout-%d", r.Uint64()), q
			ownerT, reqT = o, q
		}
		t.Cleanup(func() { ownerT.Close() })
		t.Cleanup(func() { reqT.Close() })
		srv, err := local.Serve(cfg)
		require.NoError(t, err)
		rc.Addr = srv.Addr()
		rs, err := Open(ctx, Config{Tables: map[string]TableSpec{"a": spec, "b": spec}, Namespace: "ns", Remote: rc})
		require.NoError(t, err)
		t.Cleanup(func() { rs.Close() })
		stores[name] = rs
	}
	{ // a sharded table: "a" cut over two owners, "b" on the second
		const cut = 2500
		_, srv0 := shardOwner(t, map[string][]byte{"a.s0": rowsA[:cut*264]}, ServeConfig{})
		_, srv1 := shardOwner(t, map[string][]byte{"a.s1": rowsA[cut*264:], "b": rowsB}, ServeConfig{})
		reqT := tcp.New(tcp.Config{})
		t.Cleanup(func() { reqT.Close() })
		rs, err := Open(ctx, Config{Tables: map[string]TableSpec{"a": spec, "b": spec}, Namespace: "ns", Remote: &RemoteConfig{Transport: reqT, BufferBytes: 32 << 20, DeviceWindow: 128 << 10,
			Shards: []RemoteShard{
				{Table: "a", Served: "a.s0", Lo: 0, Hi: cut, Addrs: []string{srv0.Addr()}},
				{Table: "a", Served: "a.s1", Lo: cut, Hi: spec.NumRows, Addrs: []string{srv1.Addr()}},
				{Table: "b", Lo: 0, Hi: spec.NumRows, Addrs: []string{srv1.Addr()}},
			}}})
		require.NoError(t, err)
		t.Cleanup(func() { rs.Close() })
		stores["sharded"] = rs
	}

	for _, name := range []string{"tcp", "shm", "sharded"} {
		rs := stores[name]
		for _, tk := range [][2]int{{1, 1}, {16, 24}, {600, 24}} {
			for _, headMajor := range []bool{false, true} {
				T, K := tk[0], tk[1]
				t.Run(fmt.Sprintf("%s/T=%d/K=%d/headmajor=%v", name, T, K, headMajor), func(t *testing.T) {
					tables := make([]string, K)
					offsets := make([]int64, K)
					for k := range tables {
						tables[k] = "a"
						if k%3 == 2 {
							tables[k], offsets[k] = "b", 1000
						}
					}
					ids := make([]int64, T*K)
					for i := range ids {
						ids[i] = r.Int64N(spec.NumRows)
						if offsets[i%K] != 0 {
							ids[i] += offsets[i%K]
						}
						if r.IntN(10) == 0 {
							ids[i] = -1
						}
					}
					const pad = 4096
					dev := &fakeDevMem{mem: make([]byte, T*K*264+2*pad)}
					for i := range dev.mem {
						dev.mem[i] = byte(r.Uint32())
					}
					want := bytes.Clone(dev.mem)
					out := DeviceTokenMajor(dev, T, K, 264)
					host := TokenMajor(want, T, K, 264)
					if headMajor {
						out, host = DeviceHeadMajor(dev, T, K, 264), HeadMajor(want, T, K, 264)
					}
					out.Off, host.Off = pad, pad
					refLookup(rows, 264, tables, ids, T, K, host, offsets)
					opts := &LookupOptions{Offsets: offsets}
					if T%2 == 0 { // int32 ids too
						ids32 := make([]int32, len(ids))
						for i, id := range ids {
							ids32[i] = int32(id)
						}
						require.NoError(t, rs.LookupDevice(ctx, tables, IDs32(ids32, T, K), out, opts))
					} else {
						require.NoError(t, rs.LookupDevice(ctx, tables, IDs64(ids, T, K), out, opts))
					}
					require.True(t, bytes.Equal(want, dev.mem), "device bytes differ from the host lookup's")
					if slices.ContainsFunc(ids, func(id int64) bool { return id != -1 }) {
						require.Positive(t, dev.copies)
					}
				})
			}
		}
	}

	rs := stores["tcp"]
	t.Run("errors", func(t *testing.T) {
		dev := &fakeDevMem{mem: bytes.Repeat([]byte{7}, 2*264)}
		untouched := bytes.Clone(dev.mem)
		two := []string{"a", "a"}
		// A bad id, an unknown table, rows past the device memory, an
		// overlapping layout: typed errors, nothing copied.
		err := rs.LookupDevice(ctx, two, IDs64([]int64{1, spec.NumRows}, 1, 2), DeviceTokenMajor(dev, 1, 2, 264), nil)
		require.ErrorIs(t, err, ErrID)
		err = rs.LookupDevice(ctx, []string{"a", "zz"}, IDs64([]int64{1, 1}, 1, 2), DeviceTokenMajor(dev, 1, 2, 264), nil)
		require.ErrorIs(t, err, ErrUnknownTable)
		err = rs.LookupDevice(ctx, two, IDs64([]int64{1, 1, 2, 2}, 2, 2), DeviceTokenMajor(dev, 2, 2, 264), nil)
		require.ErrorIs(t, err, ErrOutput)
		err = rs.LookupDevice(ctx, two, IDs64([]int64{1, 1}, 1, 2), DeviceOutput{Dst: dev, TStride: 528, KStride: 100}, nil)
		require.ErrorIs(t, err, ErrOutput)
		err = rs.LookupDevice(ctx, two, IDs64([]int64{1, 1}, 1, 2), DeviceOutput{}, nil)
		require.ErrorIs(t, err, ErrConfig)
		require.Equal(t, untouched, dev.mem)
		require.Zero(t, dev.copies)

		// A device copy that fails: a TransferError wrapping the
		// engine's DeviceError.
		bad := &fakeDevMem{mem: make([]byte, 264), fail: errors.New("copy refused")}
		err = rs.LookupDevice(ctx, []string{"a"}, IDs64([]int64{3}, 1, 1), DeviceTokenMajor(bad, 1, 1, 264), nil)
		var te *TransferError
		require.ErrorAs(t, err, &te)
		var de *engine.DeviceError
		require.ErrorAs(t, err, &de)
		require.True(t, de.Copy)

		// A local store reads its tables on the device through
		// AttachDevice: LookupDevice refuses it.
		local := openLocal(t, t.TempDir(), map[string]TableSpec{"a": spec})
		defer local.Close()
		require.NoError(t, local.Populate("a", rowsA))
		err = local.LookupDevice(ctx, []string{"a"}, IDs64([]int64{3}, 1, 1), DeviceTokenMajor(dev, 1, 1, 264), nil)
		require.ErrorIs(t, err, ErrConfig)
		require.ErrorIs(t, local.PinBuffers(func([]byte) (func() error, error) { return nil, nil }), ErrConfig)

		// A host output given to the host path is still one.
		buf, err := rs.NewBuffer(264)
		require.NoError(t, err)
		defer buf.Release()
		require.NoError(t, rs.Lookup([]string{"a"}, IDs64([]int64{3}, 1, 1), TokenMajor(buf.Bytes(), 1, 1, 264), nil))
		require.Equal(t, rowsA[3*264:4*264], buf.Bytes())
	})

	t.Run("pin", func(t *testing.T) {
		var pinned []byte
		released := 0
		require.NoError(t, rs.PinBuffers(func(mem []byte) (func() error, error) {
			pinned = mem
			return func() error { released++; return nil }, nil
		}))
		require.NotEmpty(t, pinned)
		require.ErrorIs(t, rs.PinBuffers(func([]byte) (func() error, error) { return nil, nil }), ErrConfig)
		require.NoError(t, rs.UnpinBuffers())
		require.Equal(t, 1, released)
		require.NoError(t, rs.UnpinBuffers())
		require.NoError(t, rs.PinBuffers(func(mem []byte) (func() error, error) {
			return func() error { released++; return nil }, nil
		}))
		require.NoError(t, rs.Close())
		require.Equal(t, 2, released)
		require.NoError(t, rs.Close())
		require.Equal(t, 2, released)
		err := rs.LookupDevice(ctx, []string{"a"}, IDs64([]int64{3}, 1, 1), DeviceTokenMajor(&fakeDevMem{mem: make([]byte, 264)}, 1, 1, 264), nil)
		require.ErrorIs(t, err, ErrClosed)
	})
}

// TestLookupDeviceRandomLayouts draws padded token-major and head-major
// device outputs, shapes and ids at random and checks each against the
// host lookup of the same request.
func TestLookupDeviceRandomLayouts(t *testing.T) {
	r := newRand(t)
	ctx := context.Background()
	spec := TableSpec{NumRows: 3000, RowBytes: 136}
	rows := randRows(r, spec)
	local := openLocal(t, t.TempDir(), map[string]TableSpec{"a": spec})
	defer local.Close()
	require.NoError(t, local.Populate("a", rows))
	ownerT, reqT := tcp.New(tcp.Config{}), tcp.New(tcp.Config{})
	defer ownerT.Close()
	defer reqT.Close()
	srv, err := local.Serve(ServeConfig{Transport: ownerT, Addr: "127.0.0.1:0", StagingBytes: 8 << 20})
	require.NoError(t, err)
	rs, err := Open(ctx, Config{Tables: map[string]TableSpec{"a": spec}, Namespace: "ns",
		Remote: &RemoteConfig{Transport: reqT, Addr: srv.Addr(), BufferBytes: 32 << 20, DeviceWindow: 64 << 10}})
	require.NoError(t, err)
	defer rs.Close()
	_, err = Open(ctx, Config{Tables: map[string]TableSpec{"a": spec}, Namespace: "ns",
		Remote: &RemoteConfig{Transport: reqT, Addr: srv.Addr(), DeviceWindow: 100}})
	require.ErrorIs(t, err, ErrConfig, "a device window below 4 KiB")
	for range 40 {
		T, K := 1+r.IntN(3000), 1+r.IntN(8)
		R := 136
		tables := make([]string, K)
		for k := range tables {
			tables[k] = "a"
		}
		ids := make([]int64, T*K)
		for i := range ids {
			ids[i] = r.Int64N(spec.NumRows)
			if r.IntN(20) == 0 {
				ids[i] = -1
			}
		}
		pad := r.IntN(3) * 8
		out := DeviceOutput{Off: r.IntN(64), TStride: K*R + pad, KStride: R}
		if r.IntN(2) == 0 {
			out.TStride, out.KStride = R, T*R+pad
		}
		n := out.Off + (T-1)*out.TStride + (K-1)*out.KStride + R + r.IntN(100)
		dev := &fakeDevMem{mem: make([]byte, n)}
		for i := range dev.mem {
			dev.mem[i] = byte(r.Uint32())
		}
		want := bytes.Clone(dev.mem)
		refLookup(map[string][]byte{"a": rows}, R, tables, ids, T, K, Output{Buf: want, Off: out.Off, TStride: out.TStride, KStride: out.KStride}, nil)
		out.Dst = dev
		require.NoError(t, rs.LookupDevice(ctx, tables, IDs64(ids, T, K), out, nil), "T=%d K=%d strides %d/%d", T, K, out.TStride, out.KStride)
		require.True(t, bytes.Equal(want, dev.mem), "T=%d K=%d off %d strides %d/%d", T, K, out.Off, out.TStride, out.KStride)
	}

}

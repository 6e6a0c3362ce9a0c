package structobj

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// newObjClient makes a Client on a fresh transport of b, with an engine of
// fixed calibration unless cfg.Engine is set and testLink unless cfg.Link
// is. The client is closed at cleanup, and must close cleanly (no leaked
// Buffers or leases). SmallBytes 0 means -1 here: the tests' small
// objects exercise the pool paths (TestClientSmallInline covers the
// default).
func newObjClient(t testing.TB, b backend, cfg ClientConfig) *Client {
	t.Helper()
	if cfg.SmallBytes == 0 {
		cfg.SmallBytes = -1
	}
	tr := b.new()
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	cfg.Transport = tr
	if cfg.Link == (verbs.LinkParams{}) {
		cfg.Link = testLink
	}
	if cfg.Engine == nil {
		eng, err := engine.New(engine.Config{Calibration: &testCalibration})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, eng.Close()) })
		cfg.Engine = eng
	}
	c, err := NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, c.Close())
		require.Zero(t, c.Stats().Pool.Leases, "leases outlived the client")
	})
	return c
}

// randBytes returns n random bytes, none zero (so zeroed padding and
// missing bytes show).
func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32()) | 1
	}
	return b
}

// randomObject builds an object with a member of every kind, random data
// and shapes.
func randomObject(t testing.TB, r *rand.Rand) *Object {
	t.Helper()
	var b Builder
	b.Meta("seed", strconv.FormatUint(r.Uint64(), 10)).Meta("empty", "")
	// A [4,3] float32 view of every other element of 32-byte rows.
	b.Tensor("t", DTypeFloat32, []int64{4, 3}, []int64{32, 8}, randBytes(r, 128))
	b.NDArray("nc", DTypeInt16, []int64{7, 9}, OrderC, randBytes(r, 7*9*2))
	b.NDArray("nf", DTypeFloat64, []int64{5, 3, 2}, OrderF, randBytes(r, 5*3*2*8))
	b.Bytes("blob", randBytes(r, 1+r.IntN(5000)))
	b.Bytes("empty", nil)
	rows := 1 + r.IntN(20)
	offs := []int64{0}
	for range rows {
		offs = append(offs, offs[len(offs)-1]+int64(r.IntN(30)))
	}
	b.Ragged("rg", DTypeInt32, randBytes(r, 4*int(offs[rows])), offs)
	nnz := 1 + r.IntN(40)
	idx := make([]int64, 0, 2*nnz)
	for range nnz {
		idx = append(idx, r.Int64N(100), r.Int64N(50))
	}
	b.Sparse("sp", DTypeFloat32, []int64{100, 50}, idx, randBytes(r, 4*nnz))
	b.Sparse("sp0", DTypeInt8, []int64{3}, nil, nil)
	obj, err := b.Build()
	require.NoError(t, err)
	return obj
}

// objectPayload is the payload a PUT of o stores: the parts at their
// offsets, zeros elsewhere.
func objectPayload(o *Object) []byte {
	out := make([]byte, o.Manifest.PayloadBytes)
	k := 0
	for i := range o.Manifest.Members {
		for _, p := range o.Manifest.Members[i].Parts() {
			if p.Length > 0 {
				copy(out[p.Offset:], o.Data[k])
				k++
			}
		}
	}
	return out
}

// memberBytes is what a selection of the whole member name returns: its
// parts' bytes, concatenated.
func memberBytes(o *Object, name string) []byte {
	out := []byte{}
	k := 0
	for i := range o.Manifest.Members {
		for _, p := range o.Manifest.Members[i].Parts() {
			if p.Length > 0 {
				if o.Manifest.Members[i].Name == name {
					out = append(out, o.Data[k]...)
				}
				k++
			}
		}
	}
	return out
}

// getWhole reads key's manifest and whole payload.
func getWhole(t testing.TB, c *Client, addr, key string) (*Manifest, []byte, GetInfo) {
	t.Helper()
	ctx := testContext(t)
	st, err := c.Stat(ctx, addr, key)
	require.NoError(t, err)
	data := make([]byte, st.PayloadBytes)
	m, info, err := c.Get(ctx, addr, key, nil, [][]byte{data})
	require.NoError(t, err)
	require.Empty(t, diffManifests(st, m))
	require.Equal(t, st.PayloadBytes, info.Bytes)
	return m, data, info
}

// requireIdle checks that the owner holds no reservation or hold.
func requireIdle(t testing.TB, o *Owner) {
	t.Helper()
	s := o.Stats()
	require.Zero(t, s.Reservations, "reservations left")
	require.Zero(t, s.Holds, "holds left")
	requireAccounted(t, s)
}

func TestClientRoundTrip(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		ctx := testContext(t)
		o := newTestOwner(t, b, OwnerConfig{})
		c := newObjClient(t, b, ClientConfig{PoolBytes: 1 << 20})
		obj := randomObject(t, r)

		v, err := c.Put(ctx, o.Addr(), "obj/1", obj)
		require.NoError(t, err)
		require.NotZero(t, v)
		require.Equal(t, totalPartBytes(&obj.Manifest), c.Stats().StagedBytes, "plain memory is staged")
		m, data, info := getWhole(t, c, o.Addr(), "obj/1")
		require.Equal(t, v, info.Version)
		require.Equal(t, PathPool, info.Path)
		require.Empty(t, diffManifests(&obj.Manifest, m))
		require.Equal(t, objectPayload(obj), data)

		for _, mem := range obj.Manifest.Members {
			sel := []Select{{Member: mem.Name}}
			sizes, err := Sizes(m, sel)
			require.NoError(t, err)
			dst := [][]byte{make([]byte, sizes[0])}
			_, info, err := c.Get(ctx, o.Addr(), "obj/1", sel, dst)
			require.NoError(t, err, mem.Name)
			require.Equal(t, memberBytes(obj, mem.Name), dst[0], mem.Name)
			require.Equal(t, uint64(sizes[0]), info.Bytes)
		}
		// What a reader trusts checks out on the bytes that came back.
		rg, _ := m.Member("rg")
		require.NoError(t, rg.CheckRagged(data[rg.Offsets.Offset:rg.Offsets.Offset+rg.Offsets.Length], int64(rg.Data.Length/4)))

		s := c.Stats()
		require.Equal(t, PathStats{Pool: 1}, s.Puts)
		require.Equal(t, uint64(1+len(obj.Manifest.Members)), s.Gets.Pool)
		require.Zero(t, s.Fallbacks)
		require.Zero(t, s.DirectBytes+s.RegisteredBytes+s.InlineBytes)
		require.Equal(t, 1, s.Conns)
		requireIdle(t, o)

		dv, err := c.Delete(ctx, o.Addr(), "obj/1")
		require.NoError(t, err)
		require.Equal(t, v, dv)
		_, err = c.Stat(ctx, o.Addr(), "obj/1")
		require.ErrorIs(t, err, ErrNotFound)
		_, _, err = c.Get(ctx, o.Addr(), "obj/1", nil, [][]byte{data})
		require.ErrorIs(t, err, ErrNotFound)
		require.Equal(t, uint64(1), c.Stats().GetsFailed)
		t.Logf("a GET of a deleted key: %v", err)
		requireIdle(t, o)
	})
}

// totalPartBytes sums the lengths of m's parts.
func totalPartBytes(m *Manifest) uint64 {
	var n uint64
	for i := range m.Members {
		n += m.Members[i].Bytes()
	}
	return n
}

// TestClientMultiBuffer stores 64 separate buffers and the same bytes as
// one buffer: the payloads are identical, padding included.
func TestClientMultiBuffer(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		ctx := testContext(t)
		o := newTestOwner(t, b, OwnerConfig{})
		c := newObjClient(t, b, ClientConfig{PoolBytes: 1 << 20, ChunkBytes: 32 << 10})
		var bld Builder
		for i := range 64 {
			bld.Bytes(fmt.Sprintf("buf/%02d", i), randBytes(r, 1+r.IntN(3000)))
		}
		multi, err := bld.Build()
		require.NoError(t, err)
		require.Len(t, multi.Data, 64)
		payload := objectPayload(multi)
		single, err := bld.Bytes("all", payload).Build()
		require.NoError(t, err)
		require.Len(t, single.Data, 1)
		require.Same(t, unsafe.SliceData(payload), unsafe.SliceData(single.Data[0]), "Build does not copy")

		_, err = c.Put(ctx, o.Addr(), "multi", multi)
		require.NoError(t, err)
		_, err = c.Put(ctx, o.Addr(), "single", single)
		require.NoError(t, err)
		_, got1, _ := getWhole(t, c, o.Addr(), "multi")
		_, got2, _ := getWhole(t, c, o.Addr(), "single")
		require.Equal(t, payload, got1)
		require.Equal(t, got1, got2)
		s := c.Stats()
		require.Equal(t, uint64(2), s.Puts.Pool)
		require.Greater(t, s.Chunks, uint64(2), "payloads of %d bytes in 32 KiB chunks", len(payload))
		requireIdle(t, o)
	})
}

// TestClientSelectiveGet reads random members and byte ranges, ranges
// across the two parts of ragged and sparse members included, in one
// Get, and compares them with slices of the whole payload.
func TestClientSelectiveGet(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		ctx := testContext(t)
		o := newTestOwner(t, b, OwnerConfig{})
		c := newObjClient(t, b, ClientConfig{PoolBytes: 1 << 20, ChunkBytes: 16 << 10, InFlight: 2})
		obj := randomObject(t, r)
		_, err := c.Put(ctx, o.Addr(), "sel", obj)
		require.NoError(t, err)
		m, whole, _ := getWhole(t, c, o.Addr(), "sel")

		rg, _ := m.Member("rg")
		blobAt := min(7, len(memberBytes(obj, "blob"))-1) // a blob has at least one byte
		sel := []Select{
			{Member: "rg", Offset: rg.Data.Length - min(rg.Data.Length, 5), Length: min(rg.Data.Length, 5) + 12}, // across both parts
			{Member: "sp", Offset: 1},
			{Member: "", Offset: 3, Length: 100},
			{Member: "blob", Offset: uint64(blobAt), Length: 1},
			{Member: "empty"},
			{Member: "nc", Offset: m.Members[1].Data.Length}, // empty, at the end
		}
		want := [][]byte{
			memberBytes(obj, "rg")[rg.Data.Length-min(rg.Data.Length, 5) : rg.Data.Length+12],
			memberBytes(obj, "sp")[1:],
			whole[3:103],
			memberBytes(obj, "blob")[blobAt : blobAt+1],
			{},
			{},
		}
		for range 200 {
			mem := m.Members[r.IntN(len(m.Members))]
			all := memberBytes(obj, mem.Name)
			if r.IntN(4) == 0 {
				mem.Name, all = "", whole
			}
			if len(all) == 0 {
				continue
			}
			off := r.IntN(len(all))
			n := r.IntN(len(all) - off + 1)
			sel = append(sel, Select{Member: mem.Name, Offset: uint64(off), Length: uint64(n)})
			if n == 0 {
				want = append(want, all[off:])
			} else {
				want = append(want, all[off:off+n])
			}
		}
		sizes, err := Sizes(m, sel)
		require.NoError(t, err)
		dst := make([][]byte, len(sel))
		for i, n := range sizes {
			require.Len(t, want[i], n, "selection %d", i)
			dst[i] = make([]byte, n)
		}
		_, info, err := c.Get(ctx, o.Addr(), "sel", sel, dst)
		require.NoError(t, err)
		for i := range sel {
			require.Equal(t, want[i], dst[i], "selection %d %+v", i, sel[i])
		}
		t.Logf("%d selections: %d bytes, %d chunks", len(sel), info.Bytes, info.Chunks)

		// Bad selections are refused with the destinations untouched and
		// the hold closed.
		poison := bytes.Repeat([]byte{0xee}, 16)
		bad := []struct {
			sel []Select
			dst [][]byte
		}{
			{[]Select{{Member: "nope"}}, [][]byte{poison}},
			{[]Select{{Member: "blob", Offset: 1 << 40}}, [][]byte{poison}},
			{[]Select{{Member: "blob", Length: 1 << 40}}, [][]byte{poison}},
			{[]Select{{Member: "t"}}, [][]byte{poison}}, // wrong length
			{[]Select{{Member: "t"}, {Member: "blob"}}, [][]byte{poison}},
			{nil, [][]byte{poison, poison}},
		}
		for i, cs := range bad {
			_, _, err := c.Get(ctx, o.Addr(), "sel", cs.sel, cs.dst)
			require.ErrorIs(t, err, ErrSelect, "case %d", i)
			var se *SelectError
			require.ErrorAs(t, err, &se, "case %d", i)
			require.Equal(t, bytes.Repeat([]byte{0xee}, 16), poison, "case %d wrote", i)
		}
		requireIdle(t, o)
	})
}

// TestClientBuffers uses Buffers as PUT sources and GET destinations:
// their bytes move straight, the rest through leases.
func TestClientBuffers(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		ctx := testContext(t)
		o := newTestOwner(t, b, OwnerConfig{GatherStagingBytes: 1 << 20, Calibration: &testCalibration})
		c := newObjClient(t, b, ClientConfig{PoolBytes: 2 << 20, ChunkBytes: 64 << 10})

		b1, err := c.NewBuffer(100_000)
		require.NoError(t, err)
		defer func() { require.NoError(t, b1.Release()) }()
		b2, err := c.NewBuffer(3000)
		require.NoError(t, err)
		defer func() { require.NoError(t, b2.Release()) }()
		copy(b1.Bytes(), randBytes(r, 100_000))
		copy(b2.Bytes(), randBytes(r, 3000))
		plain := randBytes(r, 50_000)
		obj, err := new(Builder).Bytes("pooled", b1.Bytes()).Bytes("plain", plain).
			NDArray("small", DTypeUint8, []int64{3000}, OrderC, b2.Bytes()).Build()
		require.NoError(t, err)

		_, err = c.Put(ctx, o.Addr(), "k", obj)
		require.NoError(t, err)
		s := c.Stats()
		require.Equal(t, uint64(103_000), s.DirectBytes, "Buffers are written straight")
		require.Equal(t, uint64(50_000), s.StagedBytes, "plain memory is staged")

		// The whole payload into a Buffer: straight in, no staging.
		dst, err := c.NewBuffer(int(obj.Manifest.PayloadBytes))
		require.NoError(t, err)
		defer func() { require.NoError(t, dst.Release()) }()
		_, info, err := c.Get(ctx, o.Addr(), "k", nil, [][]byte{dst.Bytes()})
		require.NoError(t, err)
		require.Equal(t, objectPayload(obj), dst.Bytes())
		require.Zero(t, info.Staged)
		require.Zero(t, info.Chunks)
		require.Equal(t, s.StagedBytes, c.Stats().StagedBytes)

		// Many small ranges into a Buffer: on tcp the pool is exposed and
		// the owner may gather them.
		var sel []Select
		var want []byte
		for i := 0; i+40 <= 100_000; i += 97 {
			sel = append(sel, Select{Member: "pooled", Offset: uint64(i), Length: 40})
			want = append(want, obj.Data[0][i:i+40]...)
		}
		ds := make([][]byte, len(sel))
		for i := range ds {
			ds[i] = dst.Bytes()[40*i : 40*i+40]
		}
		_, info, err = c.Get(ctx, o.Addr(), "k", sel, ds)
		require.NoError(t, err)
		require.Equal(t, want, dst.Bytes()[:len(want)])
		require.Zero(t, info.Staged)
		require.Equal(t, b.name != "shm", info.Gathered, "gathered into the exposed pool (tcp, ucx); shm cannot expose it and runs direct")
		requireIdle(t, o)
	})
}

// TestClientChunked moves payloads much larger than the pool in many
// chunks, several in flight.
func TestClientChunked(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		ctx := testContext(t)
		o := newTestOwner(t, b, OwnerConfig{ArenaBytes: 8 << 20})
		const chunk = 32 << 10
		c := newObjClient(t, b, ClientConfig{PoolBytes: 256 << 10, ChunkBytes: chunk, InFlight: 3})
		obj, err := new(Builder).Bytes("a", randBytes(r, 1<<20)).Bytes("b", randBytes(r, 1<<20+12345)).
			NDArray("c", DTypeFloat32, []int64{256, 1024}, OrderF, randBytes(r, 1<<20)).Build()
		require.NoError(t, err)
		payload := objectPayload(obj)

		_, err = c.Put(ctx, o.Addr(), "big", obj)
		require.NoError(t, err)
		s := c.Stats()
		require.GreaterOrEqual(t, s.Chunks, uint64(len(payload)/chunk))
		require.GreaterOrEqual(t, s.Pool.Peak, 3*chunk, "three chunks in flight at once")
		require.Zero(t, s.Pool.Leases)

		_, got, info := getWhole(t, c, o.Addr(), "big")
		require.Equal(t, payload, got)
		require.GreaterOrEqual(t, info.Chunks, len(payload)/chunk)
		require.Equal(t, uint64(len(payload)), info.Staged)
		requireIdle(t, o)
	})
}

// TestClientFallback runs PUT and GET without the fast path and checks
// the bytes are those of the fast path and the path is reported.
func TestClientFallback(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		ctx := testContext(t)
		small := randomObject(t, r)
		bigObj, err := new(Builder).Bytes("x", randBytes(r, 300_000)).Bytes("y", randBytes(r, 7)).Build()
		require.NoError(t, err)
		selY := []Select{{Member: "y"}, {Member: "x", Offset: 299_990}}

		cases := []struct {
			name      string
			owner     OwnerConfig
			client    ClientConfig
			exhaust   bool
			smallPath Path // PUT and whole GET of the small object
			bigPath   Path
			selPath   Path // selective GET of the big object
		}{
			{"no pool", OwnerConfig{MaxInline: 128 << 10}, ClientConfig{}, false, PathInline, PathRegistered, PathInline},
			{"no pool, inline off", OwnerConfig{MaxInline: -1}, ClientConfig{}, false, PathRegistered, PathRegistered, PathRegistered},
			{"pool exhausted", OwnerConfig{MaxInline: 128 << 10}, ClientConfig{PoolBytes: 64 << 10}, true, PathInline, PathRegistered, PathInline},
			{"pool exhausted, inline off", OwnerConfig{MaxInline: -1}, ClientConfig{PoolBytes: 64 << 10}, true, PathRegistered, PathRegistered, PathRegistered},
		}
		for _, cs := range cases {
			o := newTestOwner(t, b, cs.owner)
			c := newObjClient(t, b, cs.client)
			if cs.exhaust {
				hog, err := c.NewBuffer(64 << 10)
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, hog.Release()) })
				_, err = c.NewBuffer(1)
				require.ErrorIs(t, err, bufferpool.ErrExhausted)
			}
			for _, obj := range []*Object{small, bigObj} {
				want := PathRegistered
				if obj == small {
					want = cs.smallPath
				} else {
					want = cs.bigPath
				}
				before := c.Stats().Puts
				_, err := c.Put(ctx, o.Addr(), "k", obj)
				require.NoError(t, err, cs.name)
				after := c.Stats().Puts
				require.Equal(t, before.Pool, after.Pool, cs.name)
				require.Equal(t, uint64(1), pathCount(after, want)-pathCount(before, want), "%s: PUT path %v", cs.name, want)

				_, got, info := getWhole(t, c, o.Addr(), "k")
				require.Equal(t, objectPayload(obj), got, cs.name)
				wantGet := want
				if cs.name == "no pool" || cs.name == "pool exhausted" {
					wantGet = PathInline // the whole payload fits the inline limit
					if obj == bigObj {
						wantGet = PathRegistered
					}
				}
				require.Equal(t, wantGet, info.Path, "%s: whole GET", cs.name)
			}
			dst := [][]byte{make([]byte, 7), make([]byte, 10)}
			_, info, err := c.Get(ctx, o.Addr(), "k", selY, dst)
			require.NoError(t, err, cs.name)
			require.Equal(t, bigObj.Data[1], dst[0], cs.name)
			require.Equal(t, bigObj.Data[0][299_990:], dst[1], cs.name)
			require.Equal(t, cs.selPath, info.Path, "%s: selective GET", cs.name)
			if cs.exhaust {
				require.NotZero(t, c.Stats().Fallbacks, cs.name)
			}
			require.Zero(t, c.Stats().Puts.Pool+c.Stats().Gets.Pool, cs.name)
			requireIdle(t, o)
		}
	})
}

func pathCount(s PathStats, p Path) uint64 {
	switch p {
	case PathPool:
		return s.Pool
	case PathInline:
		return s.Inline
	}
	return s.Registered
}

// versionObject is one version of TestClientConcurrentReplace's key: two
// members filled from seed, so any version has the same layout.
func versionObject(t testing.TB, seed uint64) *Object {
	t.Helper()
	obj, err := new(Builder).Meta("seed", strconv.FormatUint(seed, 10)).
		Bytes("a", fillPattern(make([]byte, 10_000), seed)).
		Bytes("b", fillPattern(make([]byte, 30_000), seed+1)).Build()
	require.NoError(t, err)
	return obj
}

// TestClientConcurrentReplace reads a key, whole and in part, through the
// fast and fallback paths while another client replaces and deletes it:
// every read sees one whole version.
func TestClientConcurrentReplace(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		ctx := testContext(t)
		o := newTestOwner(t, b, OwnerConfig{ArenaBytes: 4 << 20})
		writer := newObjClient(t, b, ClientConfig{PoolBytes: 256 << 10, ChunkBytes: 8 << 10})
		pooled := newObjClient(t, b, ClientConfig{PoolBytes: 256 << 10, ChunkBytes: 8 << 10})
		plain := newObjClient(t, b, ClientConfig{})
		_, err := writer.Put(ctx, o.Addr(), "k", versionObject(t, 1))
		require.NoError(t, err)
		payload := versionObject(t, 1).Manifest.PayloadBytes

		var done atomic.Bool
		var reads, missing atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		wseed := r.Uint64()
		wg.Go(func() {
			defer done.Store(true)
			rr := rand.New(rand.NewPCG(wseed, 1))
			for i := range 40 {
				var err error
				if i%6 == 5 {
					if _, err = writer.Delete(ctx, o.Addr(), "k"); errors.Is(err, ErrNotFound) {
						err = nil
					}
				} else {
					_, err = writer.Put(ctx, o.Addr(), "k", versionObject(t, rr.Uint64()>>1))
				}
				if err != nil {
					errs <- fmt.Errorf("writer: %w", err)
					return
				}
			}
		})
		reader := func(c *Client, selective bool) {
			for !done.Load() {
				var sel []Select
				dst := [][]byte{make([]byte, payload)}
				if selective {
					sel = []Select{{Member: "b", Offset: 100, Length: 5000}, {Member: "a"}}
					dst = [][]byte{make([]byte, 5000), make([]byte, 10_000)}
				}
				m, _, err := c.Get(ctx, o.Addr(), "k", sel, dst)
				if errors.Is(err, ErrNotFound) {
					missing.Add(1)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				seed, err := strconv.ParseUint(m.Meta[0].Value, 10, 64)
				if err != nil {
					errs <- err
					return
				}
				want := versionObject(t, seed)
				ok := bytes.Equal(dst[0], objectPayload(want))
				if selective {
					ok = bytes.Equal(dst[0], want.Data[1][100:5100]) && bytes.Equal(dst[1], want.Data[0])
				}
				if !ok {
					errs <- fmt.Errorf("a read of version seed %d saw other bytes", seed)
					return
				}
				reads.Add(1)
			}
		}
		wg.Go(func() { reader(pooled, false) })
		wg.Go(func() { reader(pooled, true) })
		wg.Go(func() { reader(plain, false) })
		wg.Go(func() { reader(plain, true) })
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.NotZero(t, reads.Load())
		t.Logf("%d reads checked, %d found the key deleted", reads.Load(), missing.Load())
		requireIdle(t, o)
		require.Zero(t, o.Stats().Retired)
	})
}

// TestClientRefusesBeforeSending puts invalid objects and keys: each is
// refused with nothing sent (the owner's counters do not move and no
// connection is opened).
func TestClientRefusesBeforeSending(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		ctx := testContext(t)
		o := newTestOwner(t, b, OwnerConfig{})
		c := newObjClient(t, b, ClientConfig{PoolBytes: 1 << 20})
		good := randomObject(t, r)
		mutate := func(f func(o *Object)) *Object {
			o := &Object{Manifest: *cloneManifest(&good.Manifest), Data: append([][]byte(nil), good.Data...)}
			f(o)
			return o
		}
		cases := []struct {
			name string
			key  string
			obj  *Object
			want error
		}{
			{"nil object", "k", nil, ErrObject},
			{"overlapping parts", "k", mutate(func(o *Object) { o.Manifest.Members[1].Data.Offset = o.Manifest.Members[0].Data.Offset }), ErrManifest},
			{"bad member name", "k", mutate(func(o *Object) { o.Manifest.Members[0].Name = "bad\x00name" }), ErrManifest},
			{"part past the payload", "k", mutate(func(o *Object) { o.Manifest.PayloadBytes -= 1 }), ErrManifest},
			{"missing data slice", "k", mutate(func(o *Object) { o.Data = o.Data[:len(o.Data)-1] }), ErrObject},
			{"short data slice", "k", mutate(func(o *Object) { o.Data[0] = o.Data[0][:len(o.Data[0])-1] }), ErrObject},
			{"ragged offsets", "k", mutate(func(o *Object) {
				k := dataIndex(o, "rg", 1)
				bad := bytes.Clone(o.Data[k])
				bad[0] = 1 // offsets must start at 0
				o.Data[k] = bad
			}), ErrMemberData},
			{"sparse coordinate", "k", mutate(func(o *Object) {
				k := dataIndex(o, "sp", 1)
				bad := bytes.Clone(o.Data[k])
				bad[0], bad[1] = 0xff, 0x7f // 32767 >= 100
				o.Data[k] = bad
			}), ErrMemberData},
			{"empty key", "", good, ErrRefused},
			{"bad key", "a//b", good, ErrRefused},
		}
		before := o.Stats()
		for _, cs := range cases {
			_, err := c.Put(ctx, o.Addr(), cs.key, cs.obj)
			require.ErrorIs(t, err, cs.want, cs.name)
			if cs.want != ErrRefused {
				require.ErrorIs(t, err, ErrObject, cs.name)
			}
		}
		require.Equal(t, before, o.Stats(), "the owner saw nothing")
		s := c.Stats()
		require.Zero(t, s.Conns, "no connection was opened")
		require.Equal(t, uint64(len(cases)), s.PutsFailed)
	})
}

// dataIndex returns the index in o.Data of member name's part j.
func dataIndex(o *Object, name string, j int) int {
	k := 0
	for i := range o.Manifest.Members {
		for pj, p := range o.Manifest.Members[i].Parts() {
			if p.Length == 0 {
				continue
			}
			if o.Manifest.Members[i].Name == name && pj == j {
				return k
			}
			k++
		}
	}
	panic("no part " + name)
}

// TestClientCancelPut cancels a PUT after its third chunk: the key keeps
// its old version and the reservation is aborted.
func TestClientCancelPut(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		o := newTestOwner(t, b, OwnerConfig{ArenaBytes: 4 << 20})
		c := newObjClient(t, b, ClientConfig{PoolBytes: 256 << 10, ChunkBytes: 32 << 10, InFlight: 2})
		old := randomObject(t, r)
		v, err := c.Put(testContext(t), o.Addr(), "k", old)
		require.NoError(t, err)

		obj, err := new(Builder).Bytes("big", randBytes(r, 1<<20)).Build()
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(testContext(t))
		c.hookChunk = func(n int) {
			if n == 3 {
				cancel()
			}
		}
		_, err = c.Put(ctx, o.Addr(), "k", obj)
		c.hookChunk = nil
		require.ErrorIs(t, err, context.Canceled)
		t.Logf("the canceled PUT: %v", err)

		s := o.Stats()
		require.Zero(t, s.Reservations)
		require.Equal(t, MethodStats{Calls: 1}, s.Method(MethodAbort), "the reservation was aborted")
		require.Equal(t, uint64(2), s.Method(MethodReserve).Calls)
		require.Equal(t, uint64(1), s.Method(MethodCommit).Calls, "only the first PUT committed")
		require.Zero(t, s.PendingBytes)
		m, data, info := getWhole(t, c, o.Addr(), "k")
		require.Equal(t, v, info.Version, "the key keeps its old version")
		require.Empty(t, diffManifests(&old.Manifest, m))
		require.Equal(t, objectPayload(old), data)
		require.Zero(t, c.Stats().Pool.Leases)
		require.Equal(t, uint64(1), c.Stats().PutsFailed)
		requireIdle(t, o)
	})
}

// TestClientTTLBound stalls a PUT and a GET past the owner's TTLs: each
// fails at its deadline (the TTL less a margin) instead of writing into a
// lapsed reservation or reading a released object, and leaves nothing
// behind.
func TestClientTTLBound(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		const ttl = 100 * time.Millisecond
		o := newTestOwner(t, b, OwnerConfig{ReserveTTL: ttl, HoldTTL: ttl})
		c := newObjClient(t, b, ClientConfig{PoolBytes: 256 << 10, ChunkBytes: 16 << 10, InFlight: 1})
		obj, err := new(Builder).Bytes("x", randBytes(r, 100_000)).Build()
		require.NoError(t, err)
		_, err = c.Put(testContext(t), o.Addr(), "k", obj)
		require.NoError(t, err)
		stall := func(n int) {
			if n == 1 {
				time.Sleep(ttl + ttl/5)
			}
		}

		c.hookChunk = stall
		_, err = c.Put(testContext(t), o.Addr(), "k2", obj)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		_, err = c.Stat(testContext(t), o.Addr(), "k2")
		require.ErrorIs(t, err, ErrNotFound)

		dst := [][]byte{make([]byte, obj.Manifest.PayloadBytes)}
		c.hookChunk = stall
		_, _, err = c.Get(testContext(t), o.Addr(), "k", nil, dst)
		c.hookChunk = nil
		require.ErrorIs(t, err, context.DeadlineExceeded)
		requireIdle(t, o)
		_, got, _ := getWhole(t, c, o.Addr(), "k")
		require.Equal(t, objectPayload(obj), got)
	})
}

// TestClientGetMany reads keys of two owners in one call.
func TestClientGetMany(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		ctx := testContext(t)
		o1 := newTestOwner(t, b, OwnerConfig{})
		o2 := newTestOwner(t, b, OwnerConfig{})
		eng, err := engine.New(engine.Config{Calibration: &testCalibration})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, eng.Close()) })
		c := newObjClient(t, b, ClientConfig{PoolBytes: 1 << 20, Engine: eng})
		objs := map[string]*Object{}
		addrs := map[string]string{}
		for i := range 6 {
			key := fmt.Sprintf("k%d", i)
			objs[key] = randomObject(t, r)
			addrs[key] = []string{o1.Addr(), o2.Addr()}[i%2]
			_, err := c.Put(ctx, addrs[key], key, objs[key])
			require.NoError(t, err)
		}
		buf, err := c.NewBuffer(256 << 10)
		require.NoError(t, err)
		defer func() { require.NoError(t, buf.Release()) }()
		bufAt := 0
		inBuf := func(n int) []byte { bufAt += n; return buf.Bytes()[bufAt-n : bufAt] }

		var reqs []GetRequest
		for i := range 6 {
			key := fmt.Sprintf("k%d", i)
			obj := objs[key]
			switch i % 3 {
			case 0: // whole, plain memory
				reqs = append(reqs, GetRequest{Addr: addrs[key], Key: key, Dst: [][]byte{make([]byte, obj.Manifest.PayloadBytes)}})
			case 1: // selective, into the Buffer
				reqs = append(reqs, GetRequest{Addr: addrs[key], Key: key, Select: []Select{{Member: "rg"}, {Member: "blob", Offset: 1}},
					Dst: [][]byte{inBuf(len(memberBytes(obj, "rg"))), inBuf(len(memberBytes(obj, "blob")) - 1)}})
			default: // selective, plain
				reqs = append(reqs, GetRequest{Addr: addrs[key], Key: key, Select: []Select{{Member: "sp"}},
					Dst: [][]byte{make([]byte, len(memberBytes(obj, "sp")))}})
			}
		}
		reqs = append(reqs, GetRequest{Addr: o2.Addr(), Key: "missing", Dst: [][]byte{nil}})
		err = c.GetMany(ctx, reqs)
		require.ErrorIs(t, err, ErrNotFound)
		for i, req := range reqs[:6] {
			require.NoError(t, req.Err, req.Key)
			obj := objs[req.Key]
			require.Empty(t, diffManifests(&obj.Manifest, req.Manifest))
			switch i % 3 {
			case 0:
				require.Equal(t, objectPayload(obj), req.Dst[0])
			case 1:
				require.Equal(t, memberBytes(obj, "rg"), req.Dst[0])
				require.Equal(t, memberBytes(obj, "blob")[1:], req.Dst[1])
			default:
				require.Equal(t, memberBytes(obj, "sp"), req.Dst[0])
			}
			require.NotZero(t, req.Info.Version)
			require.Equal(t, PathPool, req.Info.Path)
		}
		require.ErrorIs(t, reqs[6].Err, ErrNotFound)
		requireIdle(t, o1)
		requireIdle(t, o2)

		// Destinations all in the Buffer: one scatter READ per owner.
		reqs = reqs[:0]
		bufAt = 0
		for i := range 6 {
			key := fmt.Sprintf("k%d", i)
			reqs = append(reqs, GetRequest{Addr: addrs[key], Key: key, Select: []Select{{Member: "nc"}, {Member: "t"}},
				Dst: [][]byte{inBuf(7 * 9 * 2), inBuf(128)}})
		}
		ops := eng.Stats().Ops
		require.NoError(t, c.GetMany(ctx, reqs))
		require.Equal(t, uint64(2), eng.Stats().Ops-ops)
		for _, req := range reqs {
			require.Equal(t, memberBytes(objs[req.Key], "nc"), req.Dst[0])
			require.Equal(t, memberBytes(objs[req.Key], "t"), req.Dst[1])
		}
		requireIdle(t, o1)
		requireIdle(t, o2)
	})
}

// TestClientDirectory resolves keys through the owners' records, with an
// engine the client makes itself.
func TestClientDirectory(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		ctx := testContext(t)
		dir := discovery.NewMemory()
		t.Cleanup(func() { require.NoError(t, dir.Close()) })
		o := newTestOwner(t, b, OwnerConfig{Directory: dir, Namespace: "job"})
		tr := b.new()
		t.Cleanup(func() { require.NoError(t, tr.Close()) })
		c, err := NewClient(ClientConfig{Transport: tr, Directory: dir, Namespace: "job", PoolBytes: 1 << 20, Link: testLink})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		obj := randomObject(t, r)

		_, err = c.Put(ctx, "", "layer/0", obj)
		require.ErrorIs(t, err, ErrNotFound, "a new key needs an address")
		v, err := c.Put(ctx, o.Addr(), "layer/0", obj)
		require.NoError(t, err)
		v2, err := c.Put(ctx, "", "layer/0", obj)
		require.NoError(t, err, "the record leads to the owner")
		require.Greater(t, v2, v)
		m, data, _ := getWhole(t, c, "", "layer/0")
		require.Empty(t, diffManifests(&obj.Manifest, m))
		require.Equal(t, objectPayload(obj), data)
		_, err = c.Delete(ctx, "", "layer/0")
		require.NoError(t, err)
		_, err = c.Stat(ctx, "", "layer/0")
		require.ErrorIs(t, err, ErrNotFound)

		bare := newObjClient(t, b, ClientConfig{})
		_, err = bare.Stat(ctx, "", "layer/0")
		require.ErrorIs(t, err, ErrClientConfig)
	})
}

func TestNewClientConfig(t *testing.T) {
	checkLeaks(t)
	tr := backends[1].new()
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	cases := []struct {
		name string
		cfg  ClientConfig
	}{
		{"no transport", ClientConfig{}},
		{"negative pool", ClientConfig{Transport: tr, PoolBytes: -1}},
		{"tiny pool", ClientConfig{Transport: tr, PoolBytes: 4096}},
		{"tiny chunk", ClientConfig{Transport: tr, ChunkBytes: 100}},
		{"negative in flight", ClientConfig{Transport: tr, InFlight: -1}},
		{"too many in flight", ClientConfig{Transport: tr, InFlight: MaxInFlight + 1}},
		{"negative wait", ClientConfig{Transport: tr, StagingWait: -1}},
		{"bad namespace", ClientConfig{Transport: tr, Namespace: "a b"}},
	}
	for _, cs := range cases {
		_, err := NewClient(cs.cfg)
		var ce *ClientConfigError
		require.ErrorAs(t, err, &ce, cs.name)
		require.ErrorIs(t, err, ErrClientConfig, cs.name)
	}
	c, err := NewClient(ClientConfig{Transport: tr, PoolBytes: 100 << 10})
	require.NoError(t, err)
	require.Equal(t, uint64(50<<10), c.chunk, "a chunk is at most half the pool")
	_, err = c.NewBuffer(0)
	require.ErrorIs(t, err, bufferpool.ErrInvalidSize)
	require.NoError(t, c.Close())
	c, err = NewClient(ClientConfig{Transport: tr})
	require.NoError(t, err)
	_, err = c.NewBuffer(10)
	require.ErrorIs(t, err, ErrNoPool)
	require.NoError(t, c.Close())
}

// TestClientClose reports Buffers still held, and refuses calls after
// Close.
func TestClientClose(t *testing.T) {
	checkLeaks(t)
	b := backends[1]
	o := newTestOwner(t, b, OwnerConfig{})
	tr := b.new()
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	c, err := NewClient(ClientConfig{Transport: tr, PoolBytes: 1 << 20, Link: testLink})
	require.NoError(t, err)
	ctx := testContext(t)
	_, err = c.Put(ctx, o.Addr(), "k", randomObject(t, newRand(t)))
	require.NoError(t, err)
	buf, err := c.NewBuffer(1000)
	require.NoError(t, err)

	err = c.Close()
	require.ErrorIs(t, err, bufferpool.ErrLeak)
	var le *bufferpool.LeakError
	require.ErrorAs(t, err, &le)
	require.Len(t, le.Leases, 1)
	_, err = c.Stat(ctx, o.Addr(), "k")
	require.ErrorIs(t, err, ErrClientClosed)
	_, _, err = c.Get(ctx, o.Addr(), "k", nil, [][]byte{nil})
	require.ErrorIs(t, err, ErrClientClosed)
	require.NoError(t, buf.Release())
	require.NoError(t, c.Close(), "closes the pool once the Buffer is back")
	require.NoError(t, c.Close())
	requireIdle(t, o)
}

// TestClientReconnect replaces the owner at the same address: the first
// call after the loss fails, the next one reconnects.
func TestClientReconnect(t *testing.T) {
	checkLeaks(t)
	b := backends[0]
	r := newRand(t)
	ctx := testContext(t)
	addr := b.addr()
	start := func() (*Owner, verbs.Transport) {
		tr := b.new()
		o, err := NewOwner(OwnerConfig{Transport: tr, Addr: addr, ArenaBytes: 1 << 20})
		require.NoError(t, err)
		return o, tr
	}
	o, otr := start()
	c := newObjClient(t, b, ClientConfig{PoolBytes: 1 << 20})
	obj := randomObject(t, r)
	_, err := c.Put(ctx, addr, "k", obj)
	require.NoError(t, err)
	require.NoError(t, o.Close())
	require.NoError(t, otr.Close())

	o, otr = start()
	t.Cleanup(func() {
		require.NoError(t, o.Close())
		require.NoError(t, otr.Close())
	})
	require.Eventually(t, func() bool {
		_, err = c.Put(ctx, addr, "k", obj)
		return err == nil
	}, 5*time.Second, time.Millisecond)
	_, data, _ := getWhole(t, c, addr, "k")
	require.Equal(t, objectPayload(obj), data)
	require.Equal(t, 1, c.Stats().Conns)
}

func TestBuilder(t *testing.T) {
	r := newRand(t)
	values := randBytes(r, 40)
	var b Builder
	obj, err := b.Meta("k", "v").Bytes("a", values[:3]).Ragged("r", DTypeInt32, values, []int64{0, 4, 4, 10}).
		Bytes("z", nil).NDArray("n", DTypeUint8, []int64{5}, OrderC, values[:5]).Build()
	require.NoError(t, err)
	m := &obj.Manifest
	require.Equal(t, []KV{{"k", "v"}}, m.Meta)
	require.Equal(t, Part{0, 3}, m.Members[0].Data)
	require.Equal(t, Part{64, 40}, m.Members[1].Data)
	require.Equal(t, Part{128, 32}, m.Members[1].Offsets)
	require.Equal(t, []int64{3}, m.Members[1].Shape)
	require.Equal(t, Part{}, m.Members[2].Data, "an empty part takes no space")
	require.Equal(t, Part{192, 5}, m.Members[3].Data)
	require.Equal(t, uint64(197), m.PayloadBytes)
	require.Len(t, obj.Data, 4)
	require.Same(t, &values[0], &obj.Data[1][0], "values are not copied")
	require.NoError(t, obj.Validate(Limits{}))

	// The Builder is reset by Build.
	obj, err = b.Bytes("only", values).Build()
	require.NoError(t, err)
	require.Len(t, obj.Manifest.Members, 1)

	bad := []struct {
		name  string
		build func(b *Builder) *Builder
		want  error
	}{
		{"ragged without offsets", func(b *Builder) *Builder { return b.Ragged("r", DTypeInt32, nil, nil) }, ErrObject},
		{"ragged offsets decrease", func(b *Builder) *Builder { return b.Ragged("r", DTypeInt8, values[:4], []int64{0, 3, 2, 4}) }, ErrMemberData},
		{"ragged offsets short", func(b *Builder) *Builder { return b.Ragged("r", DTypeInt8, values[:4], []int64{0, 3}) }, ErrMemberData},
		{"encoded offsets", func(b *Builder) *Builder { return b.RaggedEncoded("r", DTypeInt8, values, values[:7]) }, ErrObject},
		{"sparse tuple", func(b *Builder) *Builder {
			return b.SparseEncoded("s", DTypeInt8, []int64{4, 4}, values[:24], values[:1])
		}, ErrObject},
		{"sparse no shape", func(b *Builder) *Builder { return b.Sparse("s", DTypeInt8, nil, nil, nil) }, ErrObject},
		{"sparse outside", func(b *Builder) *Builder { return b.Sparse("s", DTypeInt8, []int64{4}, []int64{4}, values[:1]) }, ErrMemberData},
		{"ndarray size", func(b *Builder) *Builder { return b.NDArray("n", DTypeInt16, []int64{3}, OrderC, values[:5]) }, ErrManifest},
		{"duplicate name", func(b *Builder) *Builder { return b.Bytes("x", values).Bytes("x", values) }, ErrManifest},
		{"sticky", func(b *Builder) *Builder {
			return b.Ragged("r", DTypeInt32, nil, nil).Bytes("fine", values)
		}, ErrObject},
	}
	for _, cs := range bad {
		_, err := cs.build(&b).Build()
		require.ErrorIs(t, err, cs.want, cs.name)
		require.ErrorIs(t, err, ErrObject, cs.name)
		var oe *ObjectError
		require.ErrorAs(t, err, &oe, cs.name)
	}
}

func TestSizes(t *testing.T) {
	var b Builder
	obj, err := b.Bytes("a", make([]byte, 10)).Ragged("r", DTypeInt16, make([]byte, 6), []int64{0, 1, 3}).Build()
	require.NoError(t, err)
	m := &obj.Manifest
	got, err := Sizes(m, nil)
	require.NoError(t, err)
	require.Equal(t, []int{int(m.PayloadBytes)}, got)
	got, err = Sizes(m, []Select{{Member: "a"}, {Member: "r"}, {Member: "r", Offset: 4}, {Member: "r", Offset: 2, Length: 10},
		{Member: "", Offset: 5, Length: 2}, {Member: "a", Offset: 10}})
	require.NoError(t, err)
	require.Equal(t, []int{10, 6 + 24, 26, 10, 2, 0}, got)
	for _, s := range []Select{{Member: "x"}, {Member: "a", Offset: 11}, {Member: "a", Offset: 9, Length: 2}, {Offset: m.PayloadBytes + 1}} {
		_, err := Sizes(m, []Select{{Member: "a"}, s})
		var se *SelectError
		require.ErrorAs(t, err, &se, "%+v", s)
		require.Equal(t, 1, se.Index)
		require.ErrorIs(t, err, ErrSelect)
	}
}

// BenchmarkPut compares, in one timed loop, PUTs of 64 separate 64 KiB
// buffers (multi), of the same 4 MiB as one buffer (single), of the 64
// buffers concatenated into a new buffer first (concat), of the 64
// buffers lying in Buffers (buffers, no staging copy) and of the 64
// buffers without a pool (unpooled: the inline fallback). Ratios:
// single/multi (goal about 1: multi-buffer PUT costs nothing), concat/multi
// (what concatenating would cost), unpooled/multi and buffers/multi.
func BenchmarkPut(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			r := newRand(b)
			ctx := testContext(b)
			o := newTestOwner(b, be, OwnerConfig{ArenaBytes: 64 << 20})
			pooled := newObjClient(b, be, ClientConfig{PoolBytes: 32 << 20})
			unpooled := newObjClient(b, be, ClientConfig{})
			const parts, partBytes = 64, 64 << 10
			var mb, bb Builder
			var bufs []*Buffer
			for i := range parts {
				data := randBytes(r, partBytes)
				mb.Bytes(fmt.Sprintf("p%02d", i), data)
				buf, err := pooled.NewBuffer(partBytes)
				require.NoError(b, err)
				bufs = append(bufs, buf)
				copy(buf.Bytes(), data)
				bb.Bytes(fmt.Sprintf("p%02d", i), buf.Bytes())
			}
			b.Cleanup(func() {
				for _, buf := range bufs {
					require.NoError(b, buf.Release())
				}
			})
			multi, err := mb.Build()
			require.NoError(b, err)
			inBufs, err := bb.Build()
			require.NoError(b, err)
			payload := objectPayload(multi)
			single, err := new(Builder).Bytes("all", payload).Build()
			require.NoError(b, err)
			variants := []struct {
				name string
				put  func() error
			}{
				{"multi", func() error { _, err := pooled.Put(ctx, o.Addr(), "multi", multi); return err }},
				{"single", func() error { _, err := pooled.Put(ctx, o.Addr(), "single", single); return err }},
				{"concat", func() error {
					one := make([]byte, 0, len(payload))
					for _, d := range multi.Data {
						one = append(one, d...)
					}
					obj, err := new(Builder).Bytes("all", one).Build()
					if err != nil {
						return err
					}
					_, err = pooled.Put(ctx, o.Addr(), "concat", obj)
					return err
				}},
				{"buffers", func() error { _, err := pooled.Put(ctx, o.Addr(), "buffers", inBufs); return err }},
				{"unpooled", func() error { _, err := unpooled.Put(ctx, o.Addr(), "unpooled", multi); return err }},
			}
			times := runPaired(b, int64(len(payload)), len(variants), func(v int) error { return variants[v].put() })
			names := make([]string, len(variants))
			for i, v := range variants {
				names[i] = v.name
			}
			reportPaired(b, times, names, [][2]string{{"single", "multi"}, {"concat", "multi"}, {"unpooled", "multi"}, {"buffers", "multi"}})
		})
	}
}

// runPaired runs every variant once per iteration, rotating which goes
// first, and returns each variant's summed time.
func runPaired(b *testing.B, bytesPerVariant int64, n int, run func(v int) error) []time.Duration {
	times := make([]time.Duration, n)
	b.SetBytes(bytesPerVariant * int64(n))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for k := range n {
			v := (i + k) % n
			t0 := time.Now()
			if err := run(v); err != nil {
				b.Fatal(err)
			}
			times[v] += time.Since(t0)
		}
		i++
	}
	return times
}

// reportPaired reports each variant's time per operation and the ratios
// asked for (first over second).
func reportPaired(b *testing.B, times []time.Duration, names []string, ratios [][2]string) {
	idx := map[string]int{}
	for i, n := range names {
		idx[n] = i
		b.ReportMetric(float64(times[i].Microseconds())/float64(b.N), n+"-us")
	}
	for _, r := range ratios {
		b.ReportMetric(float64(times[idx[r[0]]])/float64(times[idx[r[1]]]), r[0]+"/"+r[1])
	}
}

// BenchmarkGet compares, in one timed loop, GETs of an object of 64
// members of 64 KiB: the whole payload and 8 members plus 8 byte ranges
// (selective), each through the pool into plain memory (pooled), into a
// Buffer (buffer) and without a pool (fallback: inline calls). Ratios:
// selective/whole (pooled), fallback/pooled for both, buffer/pooled.
func BenchmarkGet(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			r := newRand(b)
			ctx := testContext(b)
			o := newTestOwner(b, be, OwnerConfig{ArenaBytes: 16 << 20})
			pooled := newObjClient(b, be, ClientConfig{PoolBytes: 32 << 20})
			fallback := newObjClient(b, be, ClientConfig{})
			var mb Builder
			for i := range 64 {
				mb.Bytes(fmt.Sprintf("p%02d", i), randBytes(r, 64<<10))
			}
			obj, err := mb.Build()
			require.NoError(b, err)
			_, err = pooled.Put(ctx, o.Addr(), "k", obj)
			require.NoError(b, err)
			whole := [][]byte{make([]byte, obj.Manifest.PayloadBytes)}
			buf, err := pooled.NewBuffer(int(obj.Manifest.PayloadBytes))
			require.NoError(b, err)
			b.Cleanup(func() { require.NoError(b, buf.Release()) })
			var sel []Select
			for i := range 8 {
				sel = append(sel, Select{Member: fmt.Sprintf("p%02d", 8*i)}, Select{Member: fmt.Sprintf("p%02d", 8*i+3), Offset: 1000, Length: 4096})
			}
			sizes, err := Sizes(&obj.Manifest, sel)
			require.NoError(b, err)
			part := make([][]byte, len(sel))
			var partBytes int64
			for i, n := range sizes {
				part[i] = make([]byte, n)
				partBytes += int64(n)
			}
			get := func(c *Client, sel []Select, dst [][]byte) func() error {
				return func() error { _, _, err := c.Get(ctx, o.Addr(), "k", sel, dst); return err }
			}
			variants := []struct {
				name string
				get  func() error
			}{
				{"whole", get(pooled, nil, whole)},
				{"selective", get(pooled, sel, part)},
				{"whole-buffer", get(pooled, nil, [][]byte{buf.Bytes()})},
				{"whole-fallback", get(fallback, nil, whole)},
				{"selective-fallback", get(fallback, sel, part)},
			}
			times := runPaired(b, int64(obj.Manifest.PayloadBytes), len(variants), func(v int) error { return variants[v].get() })
			names := make([]string, len(variants))
			for i, v := range variants {
				names[i] = v.name
			}
			reportPaired(b, times, names, [][2]string{{"selective", "whole"}, {"whole-fallback", "whole"},
				{"selective-fallback", "selective"}, {"whole-buffer", "whole"}})
			b.Logf("selective reads %d of %d bytes", partBytes, obj.Manifest.PayloadBytes)
		})
	}
}

// TestClientSmallInline: a pooled client with the default SmallBytes moves
// small whole objects inline (one round trip) and large ones through the
// pool, with the same bytes either way.
func TestClientSmallInline(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			r := newRand(t)
			o := newTestOwner(t, b, OwnerConfig{ArenaBytes: 4 << 20})
			c := newObjClient(t, b, ClientConfig{PoolBytes: 4 << 20, SmallBytes: DefaultSmallBytes})
			ctx := testContext(t)
			for _, n := range []int{1000, DefaultSmallBytes / 2, 2 * DefaultSmallBytes} {
				data := fillPattern(make([]byte, n), r.Uint64())
				var bld Builder
				obj, err := bld.Bytes("b", data).Build()
				require.NoError(t, err)
				before := c.Stats()
				_, err = c.Put(ctx, o.Addr(), "k", obj)
				require.NoError(t, err)
				got := make([]byte, obj.Manifest.PayloadBytes)
				_, info, err := c.Get(ctx, o.Addr(), "k", nil, [][]byte{got})
				require.NoError(t, err)
				require.Equal(t, data, got[:n])
				after := c.Stats()
				small := n <= DefaultSmallBytes/2
				require.Equal(t, small, after.Puts.Inline == before.Puts.Inline+1, "PUT of %d bytes", n)
				require.Equal(t, !small, after.Puts.Pool == before.Puts.Pool+1, "PUT of %d bytes", n)
				want := PathPool
				if small {
					want = PathInline
				}
				require.Equal(t, want, info.Path, "GET of %d bytes", n)
			}
		})
	}
}

// BenchmarkSmall compares, for a 4 KiB object, the pooled client with
// small objects inline (the default SmallBytes) and with every operation
// on the pool (SmallBytes -1): PUT and whole GET, alternating inside one
// timed loop. Reports the pool path's time over the inline path's.
func BenchmarkSmall(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			r := newRand(b)
			ctx := testContext(b)
			o := newTestOwner(b, be, OwnerConfig{ArenaBytes: 4 << 20})
			inline := newObjClient(b, be, ClientConfig{PoolBytes: 1 << 20, SmallBytes: DefaultSmallBytes})
			pool := newObjClient(b, be, ClientConfig{PoolBytes: 1 << 20})
			obj, err := new(Builder).Bytes("b", randBytes(r, 4<<10)).Build()
			require.NoError(b, err)
			dst := [][]byte{make([]byte, obj.Manifest.PayloadBytes)}
			var t [2]time.Duration
			b.ResetTimer()
			for range b.N {
				for i, c := range []*Client{inline, pool} {
					start := time.Now()
					_, err := c.Put(ctx, o.Addr(), "small", obj)
					require.NoError(b, err)
					_, _, err = c.Get(ctx, o.Addr(), "small", nil, dst)
					require.NoError(b, err)
					t[i] += time.Since(start)
				}
			}
			b.ReportMetric(float64(t[0].Microseconds())/float64(b.N), "inline-us/op")
			b.ReportMetric(float64(t[1].Microseconds())/float64(b.N), "pool-us/op")
			b.ReportMetric(t[1].Seconds()/t[0].Seconds(), "pool/inline")
		})
	}
}

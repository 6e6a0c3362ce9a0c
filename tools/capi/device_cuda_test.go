//go:build cuda

package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/cudagather"
)

// The device tests run on a GPU machine (scripts/gpu-run.sh runs
// .gpu/capi.test, built by scripts/gpu-build.sh). Each compares device
// lookups through the ABI's Go functions with the same store's CPU lookup.

const devR = 264 // FP8+scale rows, the RFC's size

// gpu is the test's own context on device 0 (the same primary context as
// the attachments', so its buffers and stream serve their lookups) and a
// stream of it.
type gpu struct {
	t *testing.T
	c *cudagather.Context
	s cudagather.Stream
}

func newGPU(t *testing.T) *gpu {
	t.Helper()
	n, err := deviceCount()
	require.NoError(t, err)
	if n == 0 {
		if os.Getenv("REQUIRE_CUDA") == "1" {
			t.Fatal("REQUIRE_CUDA=1 but the driver has no CUDA device")
		}
		t.Skip("no CUDA device")
	}
	c, err := cudagather.NewContext(0)
	require.NoError(t, err)
	s, err := c.NewStream()
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, c.DestroyStream(s))
		require.NoError(t, c.Close())
	})
	return &gpu{t: t, c: c, s: s}
}

// alloc returns n bytes of device memory, freed at cleanup.
func (g *gpu) alloc(n int) cudagather.DevPtr {
	g.t.Helper()
	p, err := g.c.Alloc(int64(n))
	require.NoError(g.t, err)
	g.t.Cleanup(func() { require.NoError(g.t, g.c.Free(p)) })
	return p
}

func (g *gpu) upload(p cudagather.DevPtr, b []byte) {
	g.t.Helper()
	require.NoError(g.t, g.c.Sync(g.s))
	require.NoError(g.t, g.c.CopyIn(p, b))
}

func (g *gpu) download(p cudagather.DevPtr, n int) []byte {
	g.t.Helper()
	require.NoError(g.t, g.c.Sync(g.s))
	b := make([]byte, n)
	require.NoError(g.t, g.c.CopyOut(b, p))
	return b
}

// poisonDevice fills n bytes at p with poison's byte, in order on the
// stream.
func (g *gpu) poisonDevice(p cudagather.DevPtr, n int) {
	g.t.Helper()
	require.NoError(g.t, g.c.Memset(p, 0xA5, int64(n), g.s))
}

// attachT attaches store to device 0 and detaches it at cleanup (a
// second detach, after the store's close, fails SK_ECLOSED, ignored).
func attachT(t *testing.T, store uint64, flags int32) uint64 {
	t.Helper()
	h, err := attach(store, 0, flags)
	require.NoError(t, err)
	t.Cleanup(func() { detach(h) })
	return h
}

// idBytes is ids as C-contiguous int32 or int64 values, and a pointer to
// them (aligned to their size) for the CPU lookup.
func idBytes(ids []int64, bits int32) ([]byte, unsafe.Pointer) {
	if bits == 64 {
		s := append([]int64(nil), ids...)
		return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 8*len(s)), unsafe.Pointer(&s[0])
	}
	s := make([]int32, len(ids))
	for i, v := range ids {
		s[i] = int32(v)
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s)), unsafe.Pointer(&s[0])
}

// layout is an output layout for [T,K] rows of devR bytes.
type layout struct {
	name           string
	off, ts, ks    int64
	outLen         int64
	tokens, heads  int
	offsetsPresent bool
}

func layouts(T, K int) []layout {
	R := int64(devR)
	tk := func(l layout) layout {
		l.tokens, l.heads = T, K
		l.outLen = l.off + int64(T-1)*l.ts + int64(K-1)*l.ks + R + 16 // slack past the last row
		return l
	}
	return []layout{
		tk(layout{name: "token-major", ts: int64(K) * R, ks: R}),
		tk(layout{name: "head-major", ts: R, ks: int64(T) * R}),
		tk(layout{name: "padded", off: 8, ts: int64(K)*R + 40, ks: R}),
	}
}

// devCase is one device lookup and its CPU twin.
type devCase struct {
	st, dev, cols uint64
	names         []string
	T, K          int
	bits          int32
	lay           layout
	offsets       []int64
}

// randomIDs draws [T,K] ids for the column tables, about one in 13 -1,
// shifted by offsets when set.
func randomIDs(r *rand.Rand, rows map[string]int64, names []string, T int, offsets []int64) []int64 {
	K := len(names)
	ids := make([]int64, T*K)
	for i := range ids {
		k := i % K
		ids[i] = r.Int64N(rows[names[k]])
		if offsets != nil {
			ids[i] += offsets[k]
		}
		if r.IntN(13) == 0 {
			ids[i] = -1
		}
	}
	return ids
}

// cpu is the CPU lookup of ids into a poisoned buffer of the layout.
func (dc *devCase) cpu(t *testing.T, ids []int64) []byte {
	t.Helper()
	_, hp := idBytes(ids, dc.bits)
	want := make([]byte, dc.lay.outLen)
	poison(want)
	a := lookupArgs{store: dc.st, cols: dc.cols, t: int64(dc.T), k: int32(dc.K), ids: hp, idBits: dc.bits,
		out: ptr(want), outLen: dc.lay.outLen, off: dc.lay.off, tStride: dc.lay.ts, kStride: dc.lay.ks, offsets: ptr(dc.offsets)}
	require.NoError(t, lookup(&a))
	return want
}

// args are the device lookup's arguments for ids at idp into out.
func (dc *devCase) args(g *gpu, idp, out cudagather.DevPtr) deviceLookupArgs {
	return deviceLookupArgs{dev: dc.dev, cols: dc.cols, stream: uint64(g.s), t: int64(dc.T), k: int32(dc.K),
		ids: uint64(idp), idBits: dc.bits, out: uint64(out), outLen: dc.lay.outLen, off: dc.lay.off,
		tStride: dc.lay.ts, kStride: dc.lay.ks, offsets: ptr(dc.offsets)}
}

// requireRows compares a device output with the CPU lookup's, naming the
// first differing row.
func requireRows(t *testing.T, dc *devCase, want, got []byte) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	for tt := range dc.T {
		for k := range dc.K {
			at := dc.lay.off + int64(tt)*dc.lay.ts + int64(k)*dc.lay.ks
			if !bytes.Equal(want[at:at+devR], got[at:at+devR]) {
				t.Fatalf("%s: row (%d,%d) differs from the CPU lookup's", dc.lay.name, tt, k)
			}
		}
	}
	t.Fatalf("%s: bytes outside the rows differ (written past a row?)", dc.lay.name)
}

// devStore is a store of two tables of devR-byte rows, populated, and
// K=24 columns alternating between them (repeated names).
func devStore(t *testing.T, r *rand.Rand) (uint64, map[string]int64, []string) {
	t.Helper()
	tables := map[string]table{"a": {rows: 5000, rowBytes: devR}, "b": {rows: 3001, rowBytes: devR}}
	st, _ := populated(t, r, tables)
	names := make([]string, 24)
	for k := range names {
		names[k] = []string{"a", "b"}[k%2]
	}
	return st, map[string]int64{"a": 5000, "b": 3001}, names
}

func columnOffsets(K int) []int64 {
	offs := make([]int64, K)
	for k := range offs {
		offs[k] = int64(k) * 10007
	}
	return offs
}

// TestCUDALookup: host (zero-copy), host with SK_CUDA_ASYNC and device-copy attachments, int32 and
// int64 ids, token-major, head-major and padded outputs, with and without
// offsets, small and ordered (T*K >= 16,384 from host tables) lookups,
// enqueued on a stream into device buffers: byte for byte the CPU
// lookup's, -1 rows left as they were.
func TestCUDALookup(t *testing.T) {
	g := newGPU(t)
	r := newRand(t)
	st, rows, names := devStore(t, r)
	cols := newCols(t, st, names...)
	for _, flags := range []int32{0, cudaHost, cudaHost | cudaAsync} {
		dev := attachT(t, st, flags)
		for _, T := range []int{8, 1024} {
			for _, bits := range []int32{32, 64} {
				for _, lay := range layouts(T, len(names)) {
					for _, withOffsets := range []bool{false, true} {
						name := fmt.Sprintf("flags=%d/T=%d/ids%d/%s/offsets=%v", flags, T, bits, lay.name, withOffsets)
						t.Run(name, func(t *testing.T) {
							dc := &devCase{st: st, dev: dev, cols: cols, names: names, T: T, K: len(names), bits: bits, lay: lay}
							if withOffsets {
								dc.offsets = columnOffsets(dc.K)
							}
							ids := randomIDs(r, rows, names, T, dc.offsets)
							want := dc.cpu(t, ids)
							idb, _ := idBytes(ids, bits)
							idp, out := g.alloc(len(idb)), g.alloc(int(lay.outLen))
							g.upload(idp, idb)
							g.poisonDevice(out, int(lay.outLen))
							a := dc.args(g, idp, out)
							require.NoError(t, deviceLookup(&a))
							requireRows(t, dc, want, g.download(out, int(lay.outLen)))
							require.NoError(t, status(dev, uint64(g.s), int32(dc.K)))
						})
					}
				}
			}
		}
		// One host attachment at a time: the next flags attach again.
		require.NoError(t, detach(dev))
	}
}

// TestCUDABadID: an id past its table (or below its offset) leaves its
// row untouched and the other rows written (SK_CUDA_STRICT: none
// written); sk_cuda_status reports the first in token-major order by
// position (SK_EID, id -1) and clears it.
func TestCUDABadID(t *testing.T) {
	g := newGPU(t)
	r := newRand(t)
	st, rows, names := devStore(t, r)
	cols := newCols(t, st, names...)
	const T = 16
	K := len(names)
	for _, flags := range []int32{0, cudaStrict, cudaHost | cudaStrict} {
		t.Run(fmt.Sprintf("flags=%d", flags), func(t *testing.T) {
			dev := attachT(t, st, flags)
			lay := layouts(T, K)[0]
			dc := &devCase{st: st, dev: dev, cols: cols, names: names, T: T, K: K, bits: 64, lay: lay, offsets: columnOffsets(K)}
			ids := randomIDs(r, rows, names, T, dc.offsets)
			good := append([]int64(nil), ids...)
			ids[3*K+5] = rows[names[5]] + dc.offsets[5] // one past the table
			ids[9*K+2] = dc.offsets[2] - 1              // below the column's offset
			good[3*K+5], good[9*K+2] = -1, -1
			want := dc.cpu(t, good)
			if flags&cudaStrict != 0 {
				poison(want)
			}
			idb, _ := idBytes(ids, 64)
			idp, out := g.alloc(len(idb)), g.alloc(int(lay.outLen))
			g.upload(idp, idb)
			g.poisonDevice(out, int(lay.outLen))
			a := dc.args(g, idp, out)
			require.NoError(t, deviceLookup(&a), "a bad id is the device's to report")
			err := status(dev, uint64(g.s), int32(K))
			requireCode(t, codeID, err)
			var e cError
			e.set(err)
			require.Equal(t, [3]int64{3, 5, -1}, [3]int64{e.T, e.K, e.ID})
			requireRows(t, dc, want, g.download(out, int(lay.outLen)))
			require.NoError(t, status(dev, uint64(g.s), int32(K)), "status clears the record")

			if flags&cudaStrict == 0 {
				return
			}
			// Strict: while the record holds an unread bad id, even a good
			// lookup writes nothing; once read, it writes.
			require.NoError(t, deviceLookup(&a))
			g.upload(idp, func() []byte { b, _ := idBytes(good, 64); return b }())
			g.poisonDevice(out, int(lay.outLen))
			require.NoError(t, deviceLookup(&a))
			poisoned := make([]byte, lay.outLen)
			poison(poisoned)
			requireRows(t, dc, poisoned, g.download(out, int(lay.outLen)))
			requireCode(t, codeID, status(dev, uint64(g.s), int32(K)))
			require.NoError(t, deviceLookup(&a))
			requireRows(t, dc, dc.cpu(t, good), g.download(out, int(lay.outLen)))
			require.NoError(t, status(dev, uint64(g.s), int32(K)))
		})
	}
}

// TestCUDAGraph: after attach (which warms up) a lookup is captured into
// a graph; replays gather the ids the id buffer holds at replay time,
// including an ordered lookup (memory nodes) and a bad id reported after
// its replay.
func TestCUDAGraph(t *testing.T) {
	g := newGPU(t)
	r := newRand(t)
	st, rows, names := devStore(t, r)
	cols := newCols(t, st, names...)
	K := len(names)
	for _, tc := range []struct {
		flags int32
		T     int
	}{{0, 8}, {cudaHost, 8}, {cudaHost, 1024}, {cudaStrict, 64}} {
		t.Run(fmt.Sprintf("flags=%d/T=%d", tc.flags, tc.T), func(t *testing.T) {
			dev := attachT(t, st, tc.flags)
			require.NoError(t, warmup(dev, uint64(g.s)))
			lay := layouts(tc.T, K)[1] // head-major
			dc := &devCase{st: st, dev: dev, cols: cols, names: names, T: tc.T, K: K, bits: 64, lay: lay, offsets: columnOffsets(K)}
			idp, out := g.alloc(8*tc.T*K), g.alloc(int(lay.outLen))
			a := dc.args(g, idp, out)
			graph, err := g.c.Capture(g.s, func() error { return deviceLookup(&a) })
			require.NoError(t, err)
			defer func() { require.NoError(t, graph.Close()) }()
			require.NoError(t, status(dev, uint64(g.s), int32(K)), "capturing runs nothing")
			for round := range 3 {
				ids := randomIDs(r, rows, names, tc.T, dc.offsets)
				good := append([]int64(nil), ids...)
				bad := round == 2
				if bad {
					ids[1*K+3] = -2
					good[1*K+3] = -1
				}
				want := dc.cpu(t, good)
				if bad && tc.flags&cudaStrict != 0 {
					poison(want)
				}
				idb, _ := idBytes(ids, 64)
				g.upload(idp, idb)
				g.poisonDevice(out, int(lay.outLen))
				require.NoError(t, graph.Launch(g.s))
				requireRows(t, dc, want, g.download(out, int(lay.outLen)))
				err := status(dev, uint64(g.s), int32(K))
				if bad {
					requireCode(t, codeID, err)
				} else {
					require.NoError(t, err, "round %d", round)
				}
			}
		})
	}
}

// TestCUDABenchGraph: sk_cuda_bench_graph's Go-side replay figure (the
// ceiling the Python graph benchmark divides by), and its refusal of the
// legacy default stream.
func TestCUDABenchGraph(t *testing.T) {
	g := newGPU(t)
	r := newRand(t)
	st, rows, names := devStore(t, r)
	cols := newCols(t, st, names...)
	dev := attachT(t, st, 0)
	const T = 8
	K := len(names)
	lay := layouts(T, K)[0]
	dc := &devCase{st: st, dev: dev, cols: cols, names: names, T: T, K: K, bits: 64, lay: lay}
	ids := randomIDs(r, rows, names, T, nil)
	idb, _ := idBytes(ids, 64)
	idp, out := g.alloc(len(idb)), g.alloc(int(lay.outLen))
	g.upload(idp, idb)
	g.poisonDevice(out, int(lay.outLen))
	a := dc.args(g, idp, out)
	const n = 2000
	d, err := benchGraph(&a, n)
	require.NoError(t, err)
	require.Positive(t, d)
	t.Logf("graph replay T=%d K=%d R=%d: %.2f us", T, K, devR, float64(d.Nanoseconds())/n/1e3)
	requireRows(t, dc, dc.cpu(t, ids), g.download(out, int(lay.outLen)))
	a.stream = 0
	_, err = benchGraph(&a, 1)
	requireCode(t, codeInval, err)
}

// TestCUDALookupAllocs: in steady state a device lookup allocates
// nothing.
func TestCUDALookupAllocs(t *testing.T) {
	g := newGPU(t)
	r := newRand(t)
	st, rows, names := devStore(t, r)
	cols := newCols(t, st, names...)
	dev := attachT(t, st, cudaHost)
	const T = 8
	K := len(names)
	lay := layouts(T, K)[0]
	dc := &devCase{st: st, dev: dev, cols: cols, names: names, T: T, K: K, bits: 32, lay: lay, offsets: columnOffsets(K)}
	idb, _ := idBytes(randomIDs(r, rows, names, T, dc.offsets), 32)
	idp, out := g.alloc(len(idb)), g.alloc(int(lay.outLen))
	g.upload(idp, idb)
	a := dc.args(g, idp, out)
	require.NoError(t, deviceLookup(&a))
	allocs := testing.AllocsPerRun(200, func() {
		if err := deviceLookup(&a); err != nil {
			t.Fatal(err)
		}
	})
	require.NoError(t, g.c.Sync(g.s))
	require.Zero(t, allocs)
}

// TestCUDACallerContext: a call leaves the thread's current CUDA context
// as it found it (none here).
func TestCUDACallerContext(t *testing.T) {
	g := newGPU(t)
	r := newRand(t)
	st, rows, names := devStore(t, r)
	cols := newCols(t, st, names...)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	setContext(driverContext{})
	dev := attachT(t, st, 0)
	require.Equal(t, driverContext{}, currentContext(), "after attach")
	const T = 4
	K := len(names)
	lay := layouts(T, K)[0]
	dc := &devCase{st: st, dev: dev, cols: cols, names: names, T: T, K: K, bits: 64, lay: lay}
	idb, _ := idBytes(randomIDs(r, rows, names, T, nil), 64)
	idp, out := g.alloc(len(idb)), g.alloc(int(lay.outLen))
	g.upload(idp, idb)
	setContext(driverContext{})
	a := dc.args(g, idp, out)
	require.NoError(t, deviceLookup(&a))
	require.Equal(t, driverContext{}, currentContext(), "after a lookup")
	require.NoError(t, status(dev, uint64(g.s), int32(K)))
	require.Equal(t, driverContext{}, currentContext(), "after status")
}

// TestCUDALifetime: the ABI's rules around an attachment: mapped tables
// cannot be removed, one host attachment per store, tables populated after
// attach are not mapped, bad flags and ordinals, a remote store, detach
// twice, and the store's close detaching what is still attached (its
// handles then SK_ECLOSED, its host registration released so the tables
// can be attached again).
func TestCUDALifetime(t *testing.T) {
	g := newGPU(t)
	r := newRand(t)
	tables := map[string]table{"a": {rows: 300, rowBytes: devR}, "b": {rows: 200, rowBytes: devR}}
	dir := t.TempDir()
	st := openStore(t, configJSON(t, tables, dir, nil))
	rowsA := randBytes(r, 300*devR)
	require.NoError(t, populate(st, "a", ptr(rowsA), int64(len(rowsA))))

	n, err := cudaAvailable()
	require.NoError(t, err)
	_, err = attach(st, int32(n), 0)
	requireCode(t, codeInval, err)
	_, err = attach(st, -1, 0)
	requireCode(t, codeInval, err)
	_, err = attach(st, 0, 8)
	requireCode(t, codeInval, err) // an unknown bit
	_, err = attach(st, 0, cudaAsync)
	requireCode(t, codeInval, err) // SK_CUDA_ASYNC reads host tables: no meaning without SK_CUDA_HOST
	_, err = attach(^uint64(0), 0, 0)
	requireCode(t, codeClosed, err)

	host, err := attach(st, 0, cudaHost)
	require.NoError(t, err)
	_, err = attach(st, 0, cudaHost|cudaStrict)
	requireCode(t, codeInval, err) // one host attachment per store
	copies, err := attach(st, 0, 0)
	require.NoError(t, err)
	requireCode(t, codeIO, remove(st, "a")) // mapped

	rowsB := randBytes(r, 200*devR)
	require.NoError(t, populate(st, "b", ptr(rowsB), int64(len(rowsB))))
	colsB := newCols(t, st, "b")
	idp, out := g.alloc(8), g.alloc(devR)
	g.upload(idp, make([]byte, 8))
	a := deviceLookupArgs{dev: host, cols: colsB, stream: uint64(g.s), t: 1, k: 1, ids: uint64(idp), idBits: 64,
		out: uint64(out), outLen: devR, tStride: devR, kStride: devR}
	requireCode(t, codeIO, deviceLookup(&a)) // b was populated after attach

	require.NoError(t, detach(copies))
	requireCode(t, codeClosed, detach(copies))
	a.dev = copies
	requireCode(t, codeClosed, deviceLookup(&a))

	// The store's close detaches host; its handle is then closed.
	require.NoError(t, closeStore(st))
	require.Equal(t, 0, devices.len())
	a.dev = host
	requireCode(t, codeClosed, deviceLookup(&a))
	requireCode(t, codeClosed, status(host, uint64(g.s), 1))
	requireCode(t, codeClosed, warmup(host, uint64(g.s)))
	requireCode(t, codeClosed, detach(host))

	// Reopened, the same snapshots attach zero-copy again: the close
	// unregistered them.
	st2 := openStore(t, configJSON(t, tables, dir, nil))
	again, err := attach(st2, 0, cudaHost)
	require.NoError(t, err)
	require.NoError(t, detach(again))
	require.NoError(t, closeStore(st2))

	t.Run("remote", func(t *testing.T) {
		owner, _ := populated(t, r, map[string]table{"a": {rows: 10, rowBytes: devR}})
		srv, addr, err := serve(owner, "tcp", "", "")
		require.NoError(t, err)
		t.Cleanup(func() { closeServer(srv) }) // after the remote store's close
		rs := openStore(t, configJSON(t, map[string]table{"a": {rows: 10, rowBytes: devR}}, "", map[string]any{"addr": addr}))
		_, err = attach(rs, 0, 0)
		requireCode(t, codeInval, err)
	})
}

// TestCUDARemoteLookup: a remote store (over tcp and shm) attached to
// device 0 looks rows up into device buffers with its ids in device
// memory: int32 and int64 ids, token-major, head-major and padded outputs,
// with and without offsets, byte for byte the owner's CPU lookup, -1 rows
// as they were; a bad id is refused whole (SK_EID) with the output
// untouched; SK_CUDA_ASYNC is refused; a lookup captured into a graph
// lands the rows its id buffer holds at each replay, and a bad id there
// leaves the output as it was and is reported by sk_cuda_status; the
// store's buffer memory is pinned by the first attachment
// and lookups still work after a second attachment is detached.
func TestCUDARemoteLookup(t *testing.T) {
	g := newGPU(t)
	for _, tr := range []string{"tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			r := newRand(t)
			tables := map[string]table{"a": {rows: 5000, rowBytes: devR}, "b": {rows: 3001, rowBytes: devR}}
			owner, _ := populated(t, r, tables)
			srv, addr, err := serve(owner, tr, "", "")
			require.NoError(t, err)
			t.Cleanup(func() { closeServer(srv) })
			remote := map[string]any{"transport": tr, "addr": addr, "buffer_bytes": 32 << 20}
			if tr == "shm" {
				remote["capture_spin_us"] = 0 // its captured lookups: the proxy never polls busily
			}
			st := openStore(t, configJSON(t, tables, "", remote))
			names := make([]string, 24)
			for k := range names {
				names[k] = []string{"a", "b"}[k%2]
			}
			rows := map[string]int64{"a": 5000, "b": 3001}
			ownerCols, cols := newCols(t, owner, names...), newCols(t, st, names...)
			_, err = attach(st, 0, cudaHost|cudaAsync)
			requireCode(t, codeInval, err)
			dev := attachT(t, st, cudaHost)
			for _, T := range []int{1, 16, 700} {
				for _, bits := range []int32{32, 64} {
					for _, lay := range layouts(T, len(names)) {
						for _, withOffsets := range []bool{false, true} {
							t.Run(fmt.Sprintf("T=%d/ids%d/%s/offsets=%v", T, bits, lay.name, withOffsets), func(t *testing.T) {
								dc := &devCase{st: owner, dev: dev, cols: ownerCols, names: names, T: T, K: len(names), bits: bits, lay: lay}
								if withOffsets {
									dc.offsets = columnOffsets(dc.K)
								}
								ids := randomIDs(r, rows, names, T, dc.offsets)
								want := dc.cpu(t, ids) // the owner's own lookup
								idb, _ := idBytes(ids, bits)
								idp, out := g.alloc(len(idb)), g.alloc(int(lay.outLen))
								g.upload(idp, idb)
								g.poisonDevice(out, int(lay.outLen))
								dc.cols = cols
								a := dc.args(g, idp, out)
								require.NoError(t, deviceLookup(&a))
								requireRows(t, dc, want, g.download(out, int(lay.outLen)))
								require.NoError(t, status(dev, uint64(g.s), int32(dc.K)))
							})
						}
					}
				}
			}
			// A bad id: refused whole, nothing written.
			dc := &devCase{st: st, dev: dev, cols: cols, names: names, T: 4, K: len(names), bits: 64, lay: layouts(4, len(names))[0]}
			ids := randomIDs(r, rows, names, 4, nil)
			ids[30] = 5000 + 7
			idb, _ := idBytes(ids, 64)
			idp, out := g.alloc(len(idb)), g.alloc(int(dc.lay.outLen))
			g.upload(idp, idb)
			g.poisonDevice(out, int(dc.lay.outLen))
			a := dc.args(g, idp, out)
			requireCode(t, codeID, deviceLookup(&a))
			poisoned := make([]byte, dc.lay.outLen)
			poison(poisoned)
			require.Equal(t, poisoned, g.download(out, int(dc.lay.outLen)))
			// A capture (sk_cuda_bench_graph: captured, replayed three
			// times) lands the rows the id buffer holds; with a bad id
			// there, every replay leaves the output as it was and
			// sk_cuda_status reports the id.
			ids[30] = 1
			idb, _ = idBytes(ids, 64)
			g.upload(idp, idb)
			g.poisonDevice(out, int(dc.lay.outLen))
			_, err = benchGraph(&a, 2)
			require.NoError(t, err)
			require.NoError(t, status(dev, uint64(g.s), int32(dc.K)))
			oc := *dc
			oc.st, oc.cols = owner, ownerCols
			requireRows(t, dc, oc.cpu(t, ids), g.download(out, int(dc.lay.outLen)))
			ids[30] = 5000 + 7
			idb, _ = idBytes(ids, 64)
			g.upload(idp, idb)
			g.poisonDevice(out, int(dc.lay.outLen))
			_, err = benchGraph(&a, 2)
			require.NoError(t, err)
			requireCode(t, codeID, status(dev, uint64(g.s), int32(dc.K)))
			require.Equal(t, poisoned, g.download(out, int(dc.lay.outLen)))
			ids[30] = 1
			idb, _ = idBytes(ids, 64)
			g.upload(idp, idb)
			// A second attachment (the same device) and its detach leave
			// the first one's lookups working.
			dev2, err := attach(st, 0, 0)
			require.NoError(t, err)
			require.NoError(t, detach(dev2))
			require.NoError(t, deviceLookup(&a))
		})
	}
}

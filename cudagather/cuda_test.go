//go:build cuda

package cudagather

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var testCtx *Context

// TestMain opens device 0 once. Without a usable device the tests skip,
// unless REQUIRE_CUDA=1, where that is a failure.
func TestMain(m *testing.M) {
	c, err := NewContext(0)
	if err != nil {
		if os.Getenv("REQUIRE_CUDA") == "1" {
			fmt.Fprintf(os.Stderr, "REQUIRE_CUDA=1 but no CUDA device: %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "no CUDA device (%v): skipping the CUDA tests\n", err)
		os.Exit(0)
	}
	if err := c.Warmup(0); err != nil {
		fmt.Fprintf(os.Stderr, "warmup: %v\n", err)
		os.Exit(1)
	}
	testCtx = c
	code := m.Run()
	if err := c.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "close: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

func newRand(tb testing.TB) *rand.Rand {
	seed := rand.Uint64()
	tb.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0xc0da))
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32() | 1)
	}
	return b
}

// mapRows returns n bytes of anonymous shared memory (as an mmap'd
// snapshot would be), filled with random bytes.
func mapRows(tb testing.TB, r *rand.Rand, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = unix.Munmap(b) })
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64()|0x0101010101010101)
	}
	copy(b[n&^7:], randBytes(r, n&7))
	return b
}

// ref is the CPU lookup the kernels must match.
func ref(out []byte, tables [][]byte, rb int, ids []int64, t, k int, off, ts, ks int64, offsets []int64) {
	for ti := range t {
		for ki := range k {
			id := ids[ti*k+ki]
			if id == -1 {
				continue
			}
			if offsets != nil {
				id -= offsets[ki]
			}
			o := off + int64(ti)*ts + int64(ki)*ks
			copy(out[o:o+int64(rb)], tables[ki][id*int64(rb):])
		}
	}
}

func devBytes(t testing.TB, b []byte) DevPtr {
	p, err := testCtx.Alloc(int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testCtx.Free(p) })
	if err := testCtx.CopyIn(p, b); err != nil {
		t.Fatal(err)
	}
	return p
}

func idBytes(ids []int64, id64 bool) []byte {
	if id64 {
		b := make([]byte, 8*len(ids))
		for i, v := range ids {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
		}
		return b
	}
	b := make([]byte, 4*len(ids))
	for i, v := range ids {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(v)))
	}
	return b
}

func TestLookupMatchesCPU(t *testing.T) {
	r := newRand(t)
	s, err := testCtx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	for _, R := range []int{64, 128, 264, 300, 512, 1024, 4096} {
		for _, host := range []bool{false, true} {
			rows := int64(max(2000, (4<<20)/R))
			a, b := mapRows(t, r, int(rows)*R), mapRows(t, r, int(rows)*R)
			var ta, tb *Table
			if host {
				ta, err = testCtx.RegisterHost(a, rows, R)
				if err == nil {
					tb, err = testCtx.RegisterHost(b, rows, R)
				}
			} else {
				ta, err = testCtx.Upload(a, rows, R)
				if err == nil {
					tb, err = testCtx.Upload(b, rows, R)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, id64 := range []bool{false, true} {
				for _, c := range orderCases(host) {
					setOrderMin(t, c.min)
					for _, layout := range []string{"token", "head", "padded"} {
						name := fmt.Sprintf("R=%d/host=%v/ordered=%v/id64=%v/%s", R, host, c.ordered, id64, layout)
						const T, K = 37, 6
						tabs := []*Table{ta, tb, ta, ta, tb, ta}
						src := [][]byte{a, b, a, a, b, a}
						offsets := []int64{0, 100, 0, 7, 0, 3}
						ids := make([]int64, T*K)
						for i := range ids {
							ids[i] = offsets[i%K] + r.Int64N(rows)
							if r.IntN(9) == 0 {
								ids[i] = -1
							}
						}
						req := &Request{Tables: tabs, IDs: devBytes(t, idBytes(ids, id64)), IDs64: id64, T: T, K: K, Offsets: offsets}
						size := setLayout(req, layout, R)
						poison := bytes.Repeat([]byte{0xA7}, int(size))
						req.Out, req.OutBytes = devBytes(t, poison), size
						wantOrdered(t, req, c.ordered)
						if err := testCtx.Lookup(s, req); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if err := testCtx.Status(s, K); err != nil {
							t.Fatalf("%s: status %v", name, err)
						}
						got := make([]byte, size)
						if err := testCtx.CopyOut(got, req.Out); err != nil {
							t.Fatal(err)
						}
						want := bytes.Clone(poison)
						ref(want, src, R, ids, T, K, req.Off, req.TStride, req.KStride, offsets)
						if !bytes.Equal(got, want) {
							t.Fatalf("%s: output differs from the CPU lookup", name)
						}
					}
				}
			}
			if err := ta.Close(); err != nil {
				t.Fatal(err)
			}
			if err := tb.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// setLayout gives req the output layout named ("token", "head", or
// "padded": token-major with 40 bytes between tokens and 24 before the
// first) for R-byte rows and returns the output's size, 16 bytes past
// its last row.
func setLayout(req *Request, layout string, R int) int64 {
	switch layout {
	case "token":
		req.TokenMajor(R)
	case "head":
		req.HeadMajor(R)
	default:
		req.TokenMajor(R)
		req.TStride += 40
		req.Off = 24
	}
	return req.Off + int64(req.T-1)*req.TStride + int64(req.K-1)*req.KStride + int64(R) + 16
}

// orderCase is a lookup threshold (orderMinRows) and whether a test's
// lookups run ordered under it.
type orderCase struct {
	min     int64
	ordered bool
}

// orderCases: host tables both ways, device tables unordered only.
func orderCases(host bool) []orderCase {
	if host {
		return []orderCase{{math.MaxInt64, false}, {1, true}}
	}
	return []orderCase{{1, false}}
}

func setOrderMin(tb testing.TB, v int64) {
	old := orderMinRows
	orderMinRows = v
	tb.Cleanup(func() { orderMinRows = old })
}

// wantOrdered fails unless req's plan runs ordered as the test expects:
// a test of the ordered path must not quietly test the other.
func wantOrdered(tb testing.TB, req *Request, ordered bool) {
	tb.Helper()
	var p plan
	if err := req.check(&p, testCtx.status, testCtx.sms); err != nil {
		tb.Fatal(err)
	}
	if p.ordered != ordered || ordered && testCtx.pool == nil {
		tb.Fatalf("plan ordered = %v (pool %v), want %v", p.ordered, testCtx.pool != nil, ordered)
	}
}

// TestOrderedLarge: an ordered lookup of many rows over many buckets and
// blocks, from two host tables, with -1 and bad ids, int32 ids and a
// head-major output, against the CPU lookup; Status names the first bad
// id in token-major order, and a strict lookup writes nothing.
func TestOrderedLarge(t *testing.T) {
	r := newRand(t)
	const R, rows, T, K = 136, 30000, 20000, 3
	a, b := mapRows(t, r, rows*R), mapRows(t, r, rows*R)
	ta, err := testCtx.RegisterHost(a, rows, R)
	if err != nil {
		t.Fatal(err)
	}
	defer ta.Close()
	tb, err := testCtx.RegisterHost(b, rows, R)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	offsets := []int64{0, 5, 0}
	ids := make([]int64, T*K)
	for i := range ids {
		ids[i] = offsets[i%K] + r.Int64N(rows)
		if r.IntN(50) == 0 {
			ids[i] = -1
		}
	}
	firstBad := T*K/2 + 1
	ids[firstBad] = offsets[firstBad%K] + rows // past the end
	ids[T*K-1] = -7
	for _, strict := range []bool{false, true} {
		setOrderMin(t, 1)
		req := &Request{Tables: []*Table{ta, tb, ta}, IDs: devBytes(t, idBytes(ids, false)), T: T, K: K, Offsets: offsets, Strict: strict}
		req.HeadMajor(R)
		poison := bytes.Repeat([]byte{0x6B}, T*K*R)
		req.Out, req.OutBytes = devBytes(t, poison), int64(len(poison))
		wantOrdered(t, req, true)
		if err := testCtx.Lookup(0, req); err != nil {
			t.Fatal(err)
		}
		var ie *IDError
		if err := testCtx.Status(0, K); !errors.As(err, &ie) || ie.T != firstBad/K || ie.K != firstBad%K {
			t.Fatalf("strict=%v: status %v, want the id at (%d, %d)", strict, err, firstBad/K, firstBad%K)
		}
		got := make([]byte, len(poison))
		if err := testCtx.CopyOut(got, req.Out); err != nil {
			t.Fatal(err)
		}
		want := bytes.Clone(poison)
		if !strict {
			good := slices.Clone(ids)
			good[firstBad], good[T*K-1] = -1, -1 // bad rows stay poisoned
			ref(want, [][]byte{a, b, a}, R, good, T, K, 0, R, int64(T)*R, offsets)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("strict=%v: output differs from the CPU lookup", strict)
		}
	}
}

func TestBadIDs(t *testing.T) {
	r := newRand(t)
	const R, rows, T, K = 264, 1000, 8, 3
	src := mapRows(t, r, rows*R)
	dt, ht := bothTables(t, src, rows, R)
	ids := make([]int64, T*K)
	for i := range ids {
		ids[i] = r.Int64N(rows)
	}
	ids[2*K+1] = rows // bad, first in token-major order
	ids[5*K+0] = -5   // bad
	for _, tc := range []struct {
		tab     *Table
		ordered bool
		strict  bool
	}{{dt, false, false}, {dt, false, true}, {ht, true, false}, {ht, true, true}} {
		tab, strict := tc.tab, tc.strict
		setOrderMin(t, 1)
		req := &Request{Tables: []*Table{tab, tab, tab}, IDs: devBytes(t, idBytes(ids, true)), IDs64: true, T: T, K: K, Strict: strict}
		req.TokenMajor(R)
		poison := bytes.Repeat([]byte{0x5C}, T*K*R)
		req.Out, req.OutBytes = devBytes(t, poison), int64(len(poison))
		wantOrdered(t, req, tc.ordered)
		if err := testCtx.Lookup(0, req); err != nil {
			t.Fatal(err)
		}
		err := testCtx.Status(0, K)
		var ie *IDError
		if !errors.As(err, &ie) || ie.T != 2 || ie.K != 1 || !errors.Is(err, ErrBadID) {
			t.Fatalf("strict=%v: status %v", strict, err)
		}
		if err := testCtx.Status(0, K); err != nil {
			t.Fatalf("status not cleared: %v", err)
		}
		got := make([]byte, len(poison))
		if err := testCtx.CopyOut(got, req.Out); err != nil {
			t.Fatal(err)
		}
		for i := range T * K {
			row := got[i*R : (i+1)*R]
			bad := i == 2*K+1 || i == 5*K
			if strict || bad {
				if !bytes.Equal(row, poison[:R]) {
					t.Fatalf("strict=%v: row %d written", strict, i)
				}
			} else if bytes.Equal(row, poison[:R]) {
				t.Fatalf("row %d not written", i)
			}
		}
	}
}

// bothTables returns src as a device table and as a host table, both
// closed at cleanup.
func bothTables(tb testing.TB, src []byte, rows int64, R int) (dt, ht *Table) {
	dt, err := testCtx.Upload(src, rows, R)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dt.Close() })
	if ht, err = testCtx.RegisterHost(src, rows, R); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ht.Close() })
	return dt, ht
}

// TestGraphReplay: a lookup captured once replays on whatever ids the id
// buffer holds, and a prior kernel on the same stream (a memset of the
// ids to -1) is ordered before it.
func TestGraphReplay(t *testing.T) {
	r := newRand(t)
	const R, rows, T, K = 264, 5000, 16, 8
	src := mapRows(t, r, rows*R)
	dt, ht := bothTables(t, src, rows, R)
	// A device table; a host table ordered (its scratch a memory node of
	// the graph).
	t.Run("device", func(t *testing.T) { graphReplay(t, r, dt, src, false) })
	t.Run("host-ordered", func(t *testing.T) { graphReplay(t, r, ht, src, true) })
}

func graphReplay(t *testing.T, r *rand.Rand, tab *Table, src []byte, ordered bool) {
	const R, rows, T, K = 264, 5000, 16, 8
	setOrderMin(t, 1)
	s, err := testCtx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	idBuf := devBytes(t, make([]byte, 4*T*K))
	out := devBytes(t, make([]byte, T*K*R))
	tabs := slices.Repeat([]*Table{tab}, K)
	req := &Request{Tables: tabs, IDs: idBuf, T: T, K: K, Out: out, OutBytes: T * K * R}
	req.TokenMajor(R)
	wantOrdered(t, req, ordered)
	g, err := testCtx.Capture(s, func() error { return testCtx.Lookup(s, req) })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := testCtx.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with a graph and a table open: %v", err)
	}
	// replay launches the graph on s, waits, and returns the output.
	replay := func() []byte {
		if err := g.Launch(s); err != nil {
			t.Fatal(err)
		}
		if err := testCtx.Sync(s); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, T*K*R)
		if err := testCtx.CopyOut(got, out); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for round := range 5 {
		ids := make([]int64, T*K)
		for i := range ids {
			ids[i] = r.Int64N(rows)
		}
		if err := testCtx.CopyIn(idBuf, idBytes(ids, false)); err != nil {
			t.Fatal(err)
		}
		got := replay()
		want := make([]byte, T*K*R)
		ref(want, slices.Repeat([][]byte{src}, K), R, ids, T, K, 0, K*R, R, nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("replay %d: wrong rows", round)
		}
	}
	// Stream order: poison the output, set every id to -1 with a memset
	// on s, then replay: the rows must stay poisoned.
	if err := testCtx.Memset(out, 0x33, T*K*R, s); err != nil {
		t.Fatal(err)
	}
	if err := testCtx.Memset(idBuf, 0xFF, 4*T*K, s); err != nil {
		t.Fatal(err)
	}
	if got := replay(); !bytes.Equal(got, bytes.Repeat([]byte{0x33}, T*K*R)) {
		t.Fatal("the replay did not see the ids the prior memset on its stream wrote")
	}
}

func TestRejectsBeforeLaunch(t *testing.T) {
	r := newRand(t)
	tab, err := testCtx.Upload(randBytes(r, 64*10), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	req := &Request{Tables: []*Table{tab}, IDs: 0x1000, T: 4, K: 1, Out: 0x2000, OutBytes: 4*64 - 1}
	req.TokenMajor(64)
	if err := testCtx.Lookup(0, req); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if _, err := testCtx.Upload(make([]byte, 10), 3, 4); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
}

// --- benchmarks: ratios to ceilings measured in the same run ---

// randomIDSets uploads sets sets of n random int64 ids below rows; timing
// loops turn over them so no run finds the previous run's rows in L2.
func randomIDSets(tb testing.TB, r *rand.Rand, sets, n int, rows int64) []DevPtr {
	out := make([]DevPtr, sets)
	for s := range out {
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = r.Int64N(rows)
		}
		out[s] = devBytes(tb, idBytes(ids, true))
	}
	return out
}

// jsonLine appends a JSON line (scatterbench schema) to $CUDAGATHER_JSON.
func jsonLine(v map[string]any) {
	path := os.Getenv("CUDAGATHER_JSON")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	b, _ := json.Marshal(v)
	f.Write(append(b, '\n'))
}

// timePer runs f n times back to back on s and returns the wall time per
// run after the stream drained (launches overlap execution, so for kernels
// longer than a launch this is the GPU time).
func timePer(tb testing.TB, s Stream, n int, f func() error) time.Duration {
	for range 3 {
		if err := f(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := testCtx.Sync(s); err != nil {
		tb.Fatal(err)
	}
	var best []time.Duration
	for range 5 {
		start := time.Now()
		for range n {
			if err := f(); err != nil {
				tb.Fatal(err)
			}
		}
		if err := testCtx.Sync(s); err != nil {
			tb.Fatal(err)
		}
		best = append(best, time.Since(start)/time.Duration(n))
	}
	slices.Sort(best)
	return best[len(best)/2]
}

func BenchmarkGather(b *testing.B) {
	r := newRand(b)
	s, err := testCtx.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	// Ceilings: device-to-device copy (bytes read + written) and
	// host-to-device copy from registered memory.
	const cb = 1 << 30
	d1, _ := testCtx.Alloc(cb)
	d2, _ := testCtx.Alloc(cb)
	defer testCtx.Free(d1)
	defer testCtx.Free(d2)
	d2d := timePer(b, s, 10, func() error { return testCtx.CopyDevice(d2, d1, cb, s) })
	d2dGBs := 2 * float64(cb) / d2d.Seconds() / 1e9
	hostSrc := mapRows(b, r, 1<<30)
	ht, err := testCtx.RegisterHost(hostSrc, 1<<30, 1) // pinned, for the copy ceiling
	if err != nil {
		b.Fatal(err)
	}
	h2d := timePer(b, 0, 3, func() error { return testCtx.CopyIn(d1, hostSrc) })
	h2dGBs := float64(len(hostSrc)) / h2d.Seconds() / 1e9
	if err := ht.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("ceilings: d2d %.0f GB/s (read+write), h2d %.1f GB/s", d2dGBs, h2dGBs)
	jsonLine(map[string]any{"workload": "ceiling/d2d-copy", "for": "cuda", "transport": "cuda", "goodput_gbps": d2dGBs * 8})
	jsonLine(map[string]any{"workload": "ceiling/h2d-copy", "for": "cuda", "transport": "cuda", "goodput_gbps": h2dGBs * 8})

	table := make([]byte, 2<<30)
	for i := 0; i < len(table); i += 8 {
		binary.LittleEndian.PutUint64(table[i:], r.Uint64()|0x0101010101010101)
	}
	for _, R := range []int{64, 128, 264, 512, 1024, 4096} {
		rows := int64(len(table) / R)
		dt, err := testCtx.Upload(table[:rows*int64(R)], rows, R)
		if err != nil {
			b.Fatal(err)
		}
		hostRows := int64(len(hostSrc) / R)
		hrt, err := testCtx.RegisterHost(hostSrc[:hostRows*int64(R)], hostRows, R)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{128, 98304, 1 << 20} {
			if int64(n)*int64(R) > 1<<30 {
				continue
			}
			T, K := n/8, 8
			ids := make([]int64, n)
			for i := range ids {
				ids[i] = r.Int64N(rows)
			}
			idp := devBytes(b, idBytes(ids, true))
			// Four id sets in turn: no run finds the last run's rows in L2.
			idSets := append([]DevPtr{idp}, randomIDSets(b, r, 3, n, rows)...)
			out, _ := testCtx.Alloc(int64(n * R))
			req := &Request{Tables: slices.Repeat([]*Table{dt}, K), IDs: idp, IDs64: true, T: T, K: K, Out: out, OutBytes: int64(n * R)}
			req.TokenMajor(R)
			reps := max(20, min(2000, (1<<28)/(n*R)))
			turn := 0
			per := timePer(b, s, reps, func() error {
				turn++
				req.IDs = idSets[turn%4]
				return testCtx.Lookup(s, req)
			})
			req.IDs = idp
			gbs := 2 * float64(n*R) / per.Seconds() / 1e9
			// The same bytes copied device to device, timed the same way:
			// the ceiling for a kernel of this size (launch gaps, ramp-up).
			cp, _ := testCtx.Alloc(int64(n * R))
			same := timePer(b, s, reps, func() error { return testCtx.CopyDevice(cp, out, int64(n*R), s) })
			testCtx.Free(cp)
			sameGBs := 2 * float64(n*R) / same.Seconds() / 1e9
			line := map[string]any{"workload": fmt.Sprintf("cuda-device/R=%d/N=%d", R, n), "transport": "cuda", "mode": "device",
				"fragments": n, "payload_bytes": n * R, "p50_ms": per.Seconds() * 1e3, "goodput_gbps": gbs * 8, "ratio": gbs / d2dGBs,
				"ratio_same_size_copy": gbs / sameGBs}
			b.Logf("device R=%d N=%d: %v per lookup, %.0f GB/s r+w, %.3f of d2d", R, n, per, gbs, gbs/d2dGBs)
			if n == 128 {
				g, err := testCtx.Capture(s, func() error { return testCtx.Lookup(s, req) })
				if err != nil {
					b.Fatal(err)
				}
				gper := timePer(b, s, reps, func() error { return g.Launch(s) })
				g.Close()
				line["graph_us"] = gper.Seconds() * 1e6
				b.Logf("device R=%d N=128: graph replay %v per lookup", R, gper)
			}
			jsonLine(line)
			if n <= 98304 {
				hids := make([]int64, n)
				for i := range hids {
					hids[i] = r.Int64N(hostRows)
				}
				hidp := devBytes(b, idBytes(hids, true))
				hreq := *req
				hreq.Tables = slices.Repeat([]*Table{hrt}, K)
				hreq.IDs = hidp
				hper := timePer(b, s, max(5, reps/10), func() error { return testCtx.Lookup(s, &hreq) })
				hgbs := float64(n*R) / hper.Seconds() / 1e9
				hl := map[string]any{"workload": fmt.Sprintf("cuda-host/R=%d/N=%d", R, n), "transport": "cuda", "mode": "host",
					"fragments": n, "payload_bytes": n * R, "p50_ms": hper.Seconds() * 1e3, "goodput_gbps": hgbs * 8, "ratio": hgbs / h2dGBs}
				b.Logf("host R=%d N=%d: %v per lookup, %.1f GB/s, %.3f of h2d", R, n, hper, hgbs, hgbs/h2dGBs)
				if n == 128 {
					g, err := testCtx.Capture(s, func() error { return testCtx.Lookup(s, &hreq) })
					if err != nil {
						b.Fatal(err)
					}
					gper := timePer(b, s, reps, func() error { return g.Launch(s) })
					g.Close()
					hl["graph_us"] = gper.Seconds() * 1e6
				}
				jsonLine(hl)
			}
			testCtx.Free(out)
		}
		dt.Close()
		hrt.Close()
	}
}

// BenchmarkVariants compares kernel specialisations for R=264 device
// tables (the choice pickKernel makes against its neighbours).
func BenchmarkVariants(b *testing.B) {
	r := newRand(b)
	s, err := testCtx.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	const R = 264
	rows := int64((2 << 30) / R)
	src := mapRows(b, r, int(rows)*R)
	tab, err := testCtx.Upload(src, rows, R)
	if err != nil {
		b.Fatal(err)
	}
	defer tab.Close()
	for _, n := range []int{1024 * 24, 4096 * 24, 10240 * 24, 20480 * 24, 43690 * 24} {
		T, K := n/24, 24
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = r.Int64N(rows)
		}
		idp := devBytes(b, idBytes(ids, true))
		idSets := append([]DevPtr{idp}, randomIDSets(b, r, 3, n, rows)...)
		out, _ := testCtx.Alloc(int64(n * R))
		req := &Request{Tables: slices.Repeat([]*Table{tab}, K), IDs: idp, IDs64: true, T: T, K: K, Out: out, OutBytes: int64(n * R)}
		req.TokenMajor(R)
		wantRows := make([]byte, n*R)
		ref(wantRows, slices.Repeat([][]byte{src}, K), R, ids, T, K, 0, int64(K*R), R, nil)
		// The same bytes copied device to device, timed the same way:
		// what launch gaps and ramp-up cost a kernel of this size.
		cp, _ := testCtx.Alloc(int64(n * R))
		same := timePer(b, s, 200, func() error { return testCtx.CopyDevice(cp, out, int64(n*R), s) })
		testCtx.Free(cp)
		b.Logf("variant copy-of-the-same-bytes N=%d: %v, %.0f GB/s r+w", n, same, 2*float64(n*R)/same.Seconds()/1e9)
		for _, v := range []kernelChoice{{"sk_w8x16_g16_m1_r4", 8}, {"sk_w8_g32_m2_r4", 4}} {
			var p plan
			if err := req.check(&p, testCtx.status, testCtx.sms); err != nil {
				b.Fatal(err)
			}
			p.kernel = v
			name := v.name + "_c64"
			checkVariant(b, s, req, &p, wantRows, "variant "+v.name)
			for _, mult := range []int64{1} { // x resident blocks
				blocks := int64(testCtx.sms) * int64(testCtx.occ[name]) * mult
				if mult == 0 {
					blocks = (p.n/int64(v.perWarp) + 7) / 8
				}
				// Four id sets in turn, so no run finds the previous run's
				// rows in the 60 MB L2.
				ps := idPlans(&p, idSets)
				turn := 0
				per := timePer(b, s, 200, func() error {
					f := testCtx.fns[name]
					turn++
					return driverErr("launch", launchRaw(testCtx, f, blocks, s, &ps[turn%4]))
				})
				gbs := 2 * float64(n*R) / per.Seconds() / 1e9
				b.Logf("variant %s N=%d blocks=%d (occ %d/SM): %v, %.0f GB/s r+w, %.3f of d2d", v.name, n, blocks, testCtx.occ[name], per, gbs, gbs/4200)
			}
		}
		testCtx.Free(out)
	}
	// Host-registered table, N=98,304: the zero-copy path.
	hsrc := mapRows(b, r, 1<<30)
	hrows := int64(len(hsrc) / R)
	ht, err := testCtx.RegisterHost(hsrc[:hrows*R], hrows, R)
	if err != nil {
		b.Fatal(err)
	}
	defer ht.Close()
	const n, K = 4096 * 24, 24
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = r.Int64N(hrows)
	}
	idp := devBytes(b, idBytes(ids, true))
	out, _ := testCtx.Alloc(int64(n * R))
	defer testCtx.Free(out)
	req := &Request{Tables: slices.Repeat([]*Table{ht}, K), IDs: idp, IDs64: true, T: n / K, K: K, Out: out, OutBytes: int64(n * R)}
	req.TokenMajor(R)
	for _, v := range []kernelChoice{{"sk_w8x16_g16_m1_r8", 16}, {"sk_w8x16_g16_m1_r4", 8}} {
		var p plan
		if err := req.check(&p, testCtx.status, testCtx.sms); err != nil {
			b.Fatal(err)
		}
		p.kernel = v
		per := timePer(b, s, 20, func() error { return testCtx.enqueue(s, req, &p) })
		b.Logf("variant host %s N=%d: %v, %.1f GB/s", v.name, n, per, float64(n*R)/per.Seconds()/1e9)
	}
	// Ids confined to the first 16 MiB, 128 MiB or all of the table: if
	// the rate rises as the span shrinks, the device's translation of
	// host pages (TLB reach), not the link's bytes, bounds it.
	for _, span := range []int64{16 << 20, 128 << 20, hrows * R} {
		sub := make([]int64, n)
		for i := range sub {
			sub[i] = r.Int64N(span / R)
		}
		sreq := *req
		sreq.IDs = devBytes(b, idBytes(sub, true))
		var p plan
		if err := sreq.check(&p, testCtx.status, testCtx.sms); err != nil {
			b.Fatal(err)
		}
		per := timePer(b, s, 20, func() error { return testCtx.enqueue(s, &sreq, &p) })
		b.Logf("variant host-span %d MiB N=%d: %v, %.1f GB/s", span>>20, n, per, float64(n*R)/per.Seconds()/1e9)
	}
	// The same table in anonymous memory advised for transparent huge
	// pages: does the device's translation of host pages bound the rate?
	hp, err := unix.Mmap(-1, 0, 1<<30, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(hp)
	_ = unix.Madvise(hp, unix.MADV_HUGEPAGE)
	copy(hp, hsrc)
	ht2, err := testCtx.RegisterHost(hp[:hrows*R], hrows, R)
	if err != nil {
		b.Fatal(err)
	}
	defer ht2.Close()
	req2 := *req
	req2.Tables = slices.Repeat([]*Table{ht2}, K)
	var p plan
	if err := req2.check(&p, testCtx.status, testCtx.sms); err != nil {
		b.Fatal(err)
	}
	per := timePer(b, s, 20, func() error { return testCtx.enqueue(s, &req2, &p) })
	// And in 2 MiB pages proper (MAP_HUGETLB), when huge pages are reserved.
	if hb, err := unix.Mmap(-1, 0, 1<<30, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB); err != nil {
		b.Logf("variant host-hugetlb: skipped (%v; reserve pages in /proc/sys/vm/nr_hugepages)", err)
	} else {
		copy(hb, hsrc)
		ht3, err := testCtx.RegisterHost(hb[:hrows*R], hrows, R)
		if err != nil {
			b.Fatal(err)
		}
		req3 := *req
		req3.Tables = slices.Repeat([]*Table{ht3}, K)
		var p3 plan
		if err := req3.check(&p3, testCtx.status, testCtx.sms); err != nil {
			b.Fatal(err)
		}
		per := timePer(b, s, 20, func() error { return testCtx.enqueue(s, &req3, &p3) })
		b.Logf("variant host-hugetlb %s N=%d: %v, %.1f GB/s", p3.kernel.name, n, per, float64(n*R)/per.Seconds()/1e9)
		_ = testCtx.Sync(s)
		ht3.Close()
		_ = unix.Munmap(hb)
	}
	thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	b.Logf("variant host-THP %s N=%d: %v, %.1f GB/s (THP: %s)", p.kernel.name, n, per, float64(n*R)/per.Seconds()/1e9, strings.TrimSpace(string(thp)))
}

// BenchmarkLaunchOverhead splits a small lookup's host cost: the Go-side
// check, a bare launch of the same kernel, and the whole Lookup.
func BenchmarkLaunchOverhead(b *testing.B) {
	r := newRand(b)
	tab, err := testCtx.Upload(mapRows(b, r, 264*5000), 5000, 264)
	if err != nil {
		b.Fatal(err)
	}
	defer tab.Close()
	for _, k := range []int{8, 24} {
		T := 128 / k
		ids := make([]int64, T*k)
		for i := range ids {
			ids[i] = r.Int64N(5000)
		}
		idp := devBytes(b, idBytes(ids, true))
		out, _ := testCtx.Alloc(int64(T * k * 264))
		req := &Request{Tables: slices.Repeat([]*Table{tab}, k), IDs: idp, IDs64: true, T: T, K: k, Out: out, OutBytes: int64(T * k * 264)}
		req.TokenMajor(264)
		var p plan
		const n = 20000
		start := time.Now()
		for range n {
			_ = req.check(&p, testCtx.status, testCtx.sms)
		}
		check := time.Since(start) / n
		name := p.kernel.name + map[bool]string{true: "_c8", false: "_c64"}[k <= 8]
		f := testCtx.fns[name]
		start = time.Now()
		for range n {
			_ = launchRaw(testCtx, f, 1, 0, &p)
		}
		_ = testCtx.Sync(0)
		raw := time.Since(start) / n
		start = time.Now()
		for range n {
			_ = testCtx.Lookup(0, req)
		}
		_ = testCtx.Sync(0)
		full := time.Since(start) / n
		start = time.Now()
		for range n {
			_ = launchParams(testCtx, f, 1, 0, &p, 1)
		}
		_ = testCtx.Sync(0)
		viaParams := time.Since(start) / n
		runtime.LockOSThread()
		_ = launchParams(testCtx, f, 1, 0, &p, 1)
		start = time.Now()
		for range n {
			_ = launchParams(testCtx, f, 1, 0, &p, 0)
		}
		_ = testCtx.Sync(0)
		noCtx := time.Since(start) / n
		runtime.UnlockOSThread()
		b.Logf("overhead K=%d: kernelParams launch %v, without cuCtxSetCurrent %v", k, viaParams, noCtx)
		s, _ := testCtx.NewStream()
		start = time.Now()
		for range n {
			_ = testCtx.Lookup(s, req)
		}
		_ = testCtx.Sync(s)
		fullS := time.Since(start) / n
		_ = testCtx.DestroyStream(s)
		b.Logf("overhead K=%d (%d-byte params): check %v, bare launch %v, Lookup %v (default stream), %v (own stream) per call", k, p.size, check, raw, full, fullS)
		testCtx.Free(out)
	}
}

// TestProfileTarget runs one R=264 lookup of N rows (CUDAGATHER_PROFILE=N)
// from a 2 GiB device table, for a profiler to attach to, e.g.
//
//	CUDAGATHER_PROFILE=1048560 ncu --clock-control none -k regex:sk_ \
//	    .gpu/cudagather.test -test.run TestProfileTarget
//
// Without the variable it skips.
func TestProfileTarget(t *testing.T) {
	nv := os.Getenv("CUDAGATHER_PROFILE")
	if nv == "" {
		t.Skip("set CUDAGATHER_PROFILE=N to run one lookup of N rows for a profiler")
	}
	var n int
	if _, err := fmt.Sscan(nv, &n); err != nil || n < 24 {
		t.Fatalf("CUDAGATHER_PROFILE=%q: want a row count >= 24", nv)
	}
	r := newRand(t)
	const R = 264
	rows := int64((2 << 30) / R)
	tab, err := testCtx.Upload(mapRows(t, r, int(rows)*R), rows, R)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	K := 24
	T := n / K
	ids := make([]int64, T*K)
	for i := range ids {
		ids[i] = r.Int64N(rows)
	}
	out, _ := testCtx.Alloc(int64(T * K * R))
	defer testCtx.Free(out)
	req := &Request{Tables: slices.Repeat([]*Table{tab}, K), IDs: devBytes(t, idBytes(ids, true)), IDs64: true, T: T, K: K,
		Out: out, OutBytes: int64(T * K * R)}
	req.TokenMajor(R)
	for range 2 {
		if err := testCtx.Lookup(0, req); err != nil {
			t.Fatal(err)
		}
	}
	if err := testCtx.Sync(0); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSmallSpread compares rows in flight per warp for N=128
// lookups: fewer rows per warp spread a small lookup over more SMs.
func BenchmarkSmallSpread(b *testing.B) {
	r := newRand(b)
	const R, n, K = 264, 128, 8
	rows := int64((256 << 20) / R)
	src := mapRows(b, r, int(rows)*R)
	dt, ht := bothTables(b, src, rows, R)
	idSets := randomIDSets(b, r, 4, n, rows)
	out, _ := testCtx.Alloc(n * R)
	defer testCtx.Free(out)
	for _, tab := range []*Table{dt, ht} {
		for _, v := range []kernelChoice{{"sk_w8x16_g16_m1_r8", 16}, {"sk_w8x16_g16_m1_r4", 8}, {"sk_w8x16_g16_m1_r1", 2}} {
			req := &Request{Tables: slices.Repeat([]*Table{tab}, K), IDs: idSets[0], IDs64: true, T: n / K, K: K, Out: out, OutBytes: n * R}
			req.TokenMajor(R)
			var ps [4]plan
			for i := range ps {
				req.IDs = idSets[i]
				if err := req.check(&ps[i], testCtx.status, testCtx.sms); err != nil {
					b.Fatal(err)
				}
				ps[i].kernel = v
			}
			turn := 0
			per := timePer(b, 0, 2000, func() error { turn++; return testCtx.enqueue(0, req, &ps[turn%4]) })
			b.Logf("spread host=%v %s N=%d: %v per lookup", tab.Host(), v.name, n, per)
		}
	}
}

// BenchmarkOrdered compares ordered and unordered lookups (the same plan
// with p.ordered forced): host tables across R and N, device tables at
// R=264. The ordering kernels' cost is inside the ordered figures.
func BenchmarkOrdered(b *testing.B) {
	r := newRand(b)
	const K = 24
	run := func(name string, tab *Table, n, reps int) {
		R := tab.rowBytes
		idSets := randomIDSets(b, r, 4, n, tab.rows)
		out, _ := testCtx.Alloc(int64(n * R))
		defer testCtx.Free(out)
		req := &Request{Tables: slices.Repeat([]*Table{tab}, K), IDs64: true, T: n / K, K: K, Out: out, OutBytes: int64(n * R)}
		req.TokenMajor(R)
		var per [2]time.Duration
		for i, ordered := range []bool{false, true} {
			var ps [4]plan
			for j := range ps {
				req.IDs = idSets[j]
				if err := req.check(&ps[j], testCtx.status, testCtx.sms); err != nil {
					b.Fatal(err)
				}
				ps[j].ordered = ordered
			}
			turn := 0
			per[i] = timePer(b, 0, reps, func() error { turn++; return testCtx.enqueue(0, req, &ps[turn%4]) })
		}
		b.Logf("ordered %s R=%d N=%d: unordered %v, ordered %v (%.2fx)", name, R, n, per[0], per[1], per[0].Seconds()/per[1].Seconds())
	}
	hsrc := mapRows(b, r, 1<<30)
	for _, R := range []int{64, 264, 1024, 4096} {
		hrows := int64(len(hsrc) / R)
		ht, err := testCtx.RegisterHost(hsrc[:hrows*int64(R)], hrows, R)
		if err != nil {
			b.Fatal(err)
		}
		ns := []int{98304}
		if R == 264 {
			ns = []int{1536, 6144, 24576, 98304}
		}
		for _, n := range ns {
			if n*R <= 1<<30 {
				run("host", ht, n, 20)
			}
		}
		ht.Close()
	}
	const R = 264
	drows := int64((2 << 30) / R)
	dt, err := testCtx.Upload(mapRows(b, r, int(drows)*R), drows, R)
	if err != nil {
		b.Fatal(err)
	}
	defer dt.Close()
	run("device", dt, 98304, 200)
	run("device", dt, 43690*24, 40)
}

// TestFlatKernels runs every flat kernel (sk_wf8_*) that fits each row
// size, forced in place of pickKernel's choice, over device and host
// tables, ordered and not, int32 and int64 ids, token-major, head-major and
// padded outputs, -1 ids and one bad id, against the CPU lookup on a
// poisoned output: the bad id's row and the -1 rows stay poisoned, and
// Status names the bad id's position.
func TestFlatKernels(t *testing.T) {
	r := newRand(t)
	s, err := testCtx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	for _, R := range []int{32, 72, 136, 200, 264, 520, 1032, 4096} {
		for _, host := range []bool{false, true} {
			rows := int64(max(3000, (2<<20)/R))
			a := mapRows(t, r, int(rows)*R)
			var ta *Table
			if host {
				ta, err = testCtx.RegisterHost(a, rows, R)
			} else {
				ta, err = testCtx.Upload(a, rows, R)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range flatWords {
				kc, ok := flatKernel(int64(R), u)
				if !ok {
					continue
				}
				for _, c := range orderCases(host) {
					setOrderMin(t, c.min)
					for _, id64 := range []bool{false, true} {
						for _, layout := range []string{"token", "head", "padded"} {
							name := fmt.Sprintf("R=%d/host=%v/%s/ordered=%v/id64=%v/%s", R, host, kc.name, c.ordered, id64, layout)
							const T, K = 53, 5
							offsets := []int64{0, 11, 0, 5, 2}
							ids := make([]int64, T*K)
							refIDs := make([]int64, T*K)
							for i := range ids {
								ids[i] = offsets[i%K] + r.Int64N(rows)
								if r.IntN(7) == 0 {
									ids[i] = -1
								}
								refIDs[i] = ids[i]
							}
							bad := 3 + r.IntN(T*K-3)
							ids[bad], refIDs[bad] = offsets[bad%K]+rows+int64(r.IntN(5)), -1
							for i := range bad {
								if ids[i] != -1 && ids[i]-offsets[i%K] >= rows {
									t.Fatal("only one bad id")
								}
							}
							req := &Request{Tables: slices.Repeat([]*Table{ta}, K), IDs: devBytes(t, idBytes(ids, id64)), IDs64: id64, T: T, K: K, Offsets: offsets}
							size := setLayout(req, layout, R)
							poison := bytes.Repeat([]byte{0xA7}, int(size))
							req.Out, req.OutBytes = devBytes(t, poison), size
							var p plan
							if err := req.check(&p, testCtx.status, testCtx.sms); err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							if p.ordered != c.ordered {
								t.Fatalf("%s: plan ordered %v", name, p.ordered)
							}
							p.kernel = kc
							if err := testCtx.enqueue(s, req, &p); err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							var ide *IDError
							if err := testCtx.Status(s, K); !errors.As(err, &ide) || ide.T != bad/K || ide.K != bad%K {
								t.Fatalf("%s: status %v, want the bad id at token %d column %d", name, err, bad/K, bad%K)
							}
							got := make([]byte, size)
							if err := testCtx.CopyOut(got, req.Out); err != nil {
								t.Fatal(err)
							}
							want := bytes.Clone(poison)
							ref(want, slices.Repeat([][]byte{a}, K), R, refIDs, T, K, req.Off, req.TStride, req.KStride, offsets)
							if !bytes.Equal(got, want) {
								t.Fatalf("%s: output differs from the CPU lookup", name)
							}
						}
					}
				}
			}
			if err := ta.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// coldSources is how many source buffers BenchmarkRowKernels' cold copy
// rotates over: with 8, the seven others and the destination (at least
// 8 x 98,304 x 64 B = 50 MB) pass through L2 between two reads of one.
const coldSources = 8

// BenchmarkRowKernels sets, for device tables of row sizes that are not
// powers of two, pickKernel's choice beside every flat kernel that fits,
// each against the same-size device copy timed the same way, over four id
// sets in turn (no run finds the last one's rows in L2). Two copies are
// the ceiling: one that copies the output again and again (its source in
// L2 whenever source and destination fit there) and a cold one whose
// source rotates over coldSources buffers, as the gather's rows do. Every
// variant's rows are checked against the CPU lookup first. Lines
// "rowkernel ...".
func BenchmarkRowKernels(b *testing.B) {
	r := newRand(b)
	s, err := testCtx.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	src := mapRows(b, r, 2<<30)
	for _, R := range []int{64, 136, 200, 264, 520, 1024} {
		rows := int64(len(src) / R)
		tab, err := testCtx.Upload(src[:rows*int64(R)], rows, R)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{98304, 1 << 20} {
			const K = 24
			T := n / K
			ids := make([]int64, T*K)
			for i := range ids {
				ids[i] = r.Int64N(rows)
			}
			n = T * K
			idSets := append([]DevPtr{devBytes(b, idBytes(ids, true))}, randomIDSets(b, r, 3, n, rows)...)
			out, _ := testCtx.Alloc(int64(n * R))
			req := &Request{Tables: slices.Repeat([]*Table{tab}, K), IDs: idSets[0], IDs64: true, T: T, K: K, Out: out, OutBytes: int64(n * R)}
			req.TokenMajor(R)
			want := make([]byte, n*R)
			ref(want, slices.Repeat([][]byte{src}, K), R, ids, T, K, 0, int64(K*R), int64(R), nil)
			cp, _ := testCtx.Alloc(int64(n * R))
			same := timePer(b, s, 100, func() error { return testCtx.CopyDevice(cp, out, int64(n*R), s) })
			// The same copy with its source rotating over coldSources
			// buffers, as the gather's rows rotate over the id sets: a
			// copy that reads what it read one launch ago reads L2 (50
			// MB on the H200) when source and destination fit there,
			// which no gather from a large table can.
			var srcs [coldSources]DevPtr
			for i := range srcs {
				if srcs[i], err = testCtx.Alloc(int64(n * R)); err != nil {
					b.Fatal(err)
				}
			}
			ct := 0
			cold := timePer(b, s, 100, func() error {
				ct++
				return testCtx.CopyDevice(cp, srcs[ct%coldSources], int64(n*R), s)
			})
			for _, p := range srcs {
				testCtx.Free(p)
			}
			testCtx.Free(cp)
			var base plan
			if err := req.check(&base, testCtx.status, testCtx.sms); err != nil {
				b.Fatal(err)
			}
			variants := []kernelChoice{base.kernel}
			for _, u := range flatWords {
				if kc, ok := flatKernel(int64(R), u); ok && kc.name != base.kernel.name {
					variants = append(variants, kc)
				}
			}
			for i, v := range variants {
				p := base
				p.kernel = v
				checkVariant(b, s, req, &p, want, fmt.Sprintf("R=%d N=%d %s", R, n, v.name))
				ps := idPlans(&p, idSets)
				turn := 0
				per := timePer(b, s, 100, func() error {
					turn++
					return testCtx.enqueue(s, req, &ps[turn%4])
				})
				mark := " "
				if i == 0 {
					mark = "*"
				}
				b.Logf("rowkernel R=%d N=%d %s%-22s %8.2f us  same-size copy %8.2f us  ratio %.3f  cold copy %8.2f us  ratio %.3f", R, n, mark, v.name,
					per.Seconds()*1e6, same.Seconds()*1e6, same.Seconds()/per.Seconds(), cold.Seconds()*1e6, cold.Seconds()/per.Seconds())
			}
			testCtx.Free(out)
		}
		tab.Close()
	}
}

// TestStagedLookup: the CPU-staged path (HostStaged) and the split
// (HostSplit: the first tokens zero-copy beside it) over two host tables
// with offsets, -1 ids and one bad id, int32 and int64 ids, token-major,
// head-major and padded outputs, lookups of one chunk and of several (the
// pinned slots reused), against the CPU lookup on a poisoned output; the
// bad id's row and the -1 rows stay poisoned and Status names the bad id
// (the smallest of the staged one and a zero-copy one met before it); a
// strict staged lookup with a bad id writes nothing. HostAuto gives the
// same bytes whichever path it takes, and a device table ignores Host.
func TestStagedLookup(t *testing.T) {
	r := newRand(t)
	s, err := testCtx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	for _, R := range []int{64, 200, 264, 1000} {
		rows := int64(max(5000, (8<<20)/R))
		a, b := mapRows(t, r, int(rows)*R), mapRows(t, r, int(rows)*R)
		ta, err := testCtx.RegisterHost(a, rows, R)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := testCtx.RegisterHost(b, rows, R)
		if err != nil {
			t.Fatal(err)
		}
		for _, T := range []int{7, 9000} { // one chunk; several (T*K*R > 3 x 2 MiB for R >= 200)
			for _, id64 := range []bool{false, true} {
				for _, layout := range []string{"token", "head", "padded"} {
					for _, path := range []HostPath{HostStaged, HostSplit, HostAuto} {
						const K = 3
						name := fmt.Sprintf("R=%d/T=%d/id64=%v/%s/%s", R, T, id64, layout, path)
						tabs := []*Table{ta, tb, ta}
						src := [][]byte{a, b, a}
						offsets := []int64{0, 40, 9}
						n := T * K
						ids, refIDs := make([]int64, n), make([]int64, n)
						for i := range ids {
							ids[i] = offsets[i%K] + r.Int64N(rows)
							if r.IntN(11) == 0 {
								ids[i] = -1
							}
							refIDs[i] = ids[i]
						}
						bad := n/2 + r.IntN(n-n/2)
						ids[bad], refIDs[bad] = offsets[bad%K]-1-int64(r.IntN(3)), -1
						if offsets[bad%K] == 0 {
							ids[bad] = rows + int64(r.IntN(3))
						}
						req := &Request{Tables: tabs, IDs: devBytes(t, idBytes(ids, id64)), IDs64: id64, T: T, K: K, Offsets: offsets, Host: path}
						size := setLayout(req, layout, R)
						poison := bytes.Repeat([]byte{0xA7}, int(size))
						req.Out, req.OutBytes = devBytes(t, poison), size
						if err := testCtx.Lookup(s, req); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						var ide *IDError
						if err := testCtx.Status(s, K); !errors.As(err, &ide) || ide.T*K+ide.K != bad {
							t.Fatalf("%s: status %v, want the bad id at flat %d", name, err, bad)
						}
						got := make([]byte, size)
						if err := testCtx.CopyOut(got, req.Out); err != nil {
							t.Fatal(err)
						}
						want := bytes.Clone(poison)
						ref(want, src, R, refIDs, T, K, req.Off, req.TStride, req.KStride, offsets)
						if !bytes.Equal(got, want) {
							t.Fatalf("%s: output differs from the CPU lookup", name)
						}
					}
				}
			}
		}
		// Strict: nothing written; Status names the smaller of a
		// zero-copy lookup's bad id (flat 5) and this one's (flat 2).
		const T, K = 4, 3
		ids := []int64{1, 2, -1, 4, 5, rows + 1, 7, 8, 9, 10, 11, 12}
		zreq := &Request{Tables: []*Table{ta, ta, ta}, IDs: devBytes(t, idBytes(ids, false)), T: T, K: K, Host: HostZeroCopy}
		zreq.TokenMajor(R)
		zreq.Out, zreq.OutBytes = devBytes(t, make([]byte, T*K*R)), int64(T*K*R)
		if err := testCtx.Lookup(s, zreq); err != nil {
			t.Fatal(err)
		}
		ids[5], ids[2] = 6, rows+7
		poison := bytes.Repeat([]byte{0x5C}, T*K*R)
		sreq := *zreq
		sreq.IDs, sreq.Out, sreq.Host, sreq.Strict = devBytes(t, idBytes(ids, false)), devBytes(t, poison), HostStaged, true
		if err := testCtx.Lookup(s, &sreq); err != nil {
			t.Fatal(err)
		}
		// A strict split with the bad id in its zero-copy tokens and good
		// rows in the others: nothing written either.
		split := sreq
		split.Host = HostSplit
		if err := testCtx.Lookup(s, &split); err != nil {
			t.Fatal(err)
		}
		var ide *IDError
		if err := testCtx.Status(s, K); !errors.As(err, &ide) || ide.T != 0 || ide.K != 2 {
			t.Fatalf("R=%d strict: status %v, want [0,2]", R, err)
		}
		if err := testCtx.Status(s, K); err != nil {
			t.Fatalf("R=%d: Status did not clear: %v", R, err)
		}
		got := make([]byte, T*K*R)
		if err := testCtx.CopyOut(got, sreq.Out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, poison) {
			t.Fatalf("R=%d: a strict staged lookup with a bad id wrote rows", R)
		}
		if cal, ok := ta.Calibration(); ok {
			z, st := cal.Predict(98304)
			t.Logf("R=%d calibration %+v: 98,304 rows zero-copy %v, staged %v", R, cal, z, st)
		}
		for _, tab := range []*Table{ta, tb} {
			if err := tab.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A device table ignores Host.
	const R, rows = 200, 4000
	src := mapRows(t, r, rows*R)
	dt, err := testCtx.Upload(src, rows, R)
	if err != nil {
		t.Fatal(err)
	}
	defer dt.Close()
	ids := []int64{3, 1, 4, 1, 5, 9}
	req := &Request{Tables: []*Table{dt, dt}, IDs: devBytes(t, idBytes(ids, true)), IDs64: true, T: 3, K: 2, Host: HostStaged}
	req.TokenMajor(R)
	req.Out, req.OutBytes = devBytes(t, make([]byte, 6*R)), 6*R
	if err := testCtx.Lookup(s, req); err != nil {
		t.Fatal(err)
	}
	if err := testCtx.Status(s, 2); err != nil {
		t.Fatal(err)
	}
	got, want := make([]byte, 6*R), make([]byte, 6*R)
	ref(want, [][]byte{src, src}, R, ids, 3, 2, 0, 2*R, R, nil)
	if err := testCtx.CopyOut(got, req.Out); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("device table with Host set: %v, equal %v", err, bytes.Equal(got, want))
	}
	if _, err := testCtx.CalibrateHost(dt); !errors.Is(err, ErrInvalid) {
		t.Fatalf("CalibrateHost of a device table: %v", err)
	}
	// Rows larger than a pinned slot (2 MiB): staged refused, auto reads
	// them zero-copy.
	{
		const R, rows = 3 << 20, 4
		big := mapRows(t, r, R*rows)
		bt, err := testCtx.RegisterHost(big, rows, R)
		if err != nil {
			t.Fatal(err)
		}
		defer bt.Close()
		bids := []int64{3, 0, 2}
		breq := &Request{Tables: []*Table{bt}, IDs: devBytes(t, idBytes(bids, true)), IDs64: true, T: 3, K: 1, Host: HostStaged}
		breq.TokenMajor(R)
		breq.Out, breq.OutBytes = devBytes(t, make([]byte, 3*R)), 3*R
		if err := testCtx.Lookup(s, breq); !errors.Is(err, ErrInvalid) {
			t.Fatalf("staged rows of 3 MiB: %v", err)
		}
		if _, err := testCtx.CalibrateHost(bt); !errors.Is(err, ErrInvalid) {
			t.Fatalf("calibrating rows of 3 MiB: %v", err)
		}
		breq.Host = HostAuto
		if err := testCtx.Lookup(s, breq); err != nil {
			t.Fatal(err)
		}
		if err := testCtx.Status(s, 1); err != nil {
			t.Fatal(err)
		}
		got, want := make([]byte, 3*R), make([]byte, 3*R)
		ref(want, [][]byte{big}, R, bids, 3, 1, 0, R, R, nil)
		if err := testCtx.CopyOut(got, breq.Out); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("auto rows of 3 MiB: %v, equal %v", err, bytes.Equal(got, want))
		}
	}
	bad := *req
	bad.Host = 9
	if err := testCtx.Lookup(s, &bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown Host: %v", err)
	}
}

// TestStagedCapture: a staged lookup cannot be captured (ErrStagedCapture,
// and the capture still ends cleanly); HostAuto captures the zero-copy
// path, whose replays gather the ids of replay time.
func TestStagedCapture(t *testing.T) {
	r := newRand(t)
	const R, rows, T, K = 264, 50000, 64, 4
	src := mapRows(t, r, rows*R)
	ht, err := testCtx.RegisterHost(src, rows, R)
	if err != nil {
		t.Fatal(err)
	}
	defer ht.Close()
	cal, err := testCtx.CalibrateHost(ht)
	if err != nil {
		t.Fatal(err)
	}
	if !(cal.SplitFactor >= 0.5 && cal.SplitFactor <= 100) || cal.Rows != calibrationRows(R) {
		t.Fatalf("calibration %+v: no split factor measured, or not at the probe sizes %v", cal, calibrationRows(R))
	}
	for i := range cal.Rows {
		if cal.ZeroCopy[i] <= 0 || cal.Staged[i] <= 0 {
			t.Fatalf("calibration %+v: a probe not timed", cal)
		}
	}
	s, err := testCtx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	if err := testCtx.Warmup(s); err != nil {
		t.Fatal(err)
	}
	idBuf := devBytes(t, make([]byte, 4*T*K))
	out := devBytes(t, make([]byte, T*K*R))
	req := &Request{Tables: slices.Repeat([]*Table{ht}, K), IDs: idBuf, T: T, K: K, Out: out, OutBytes: T * K * R, Host: HostStaged}
	req.TokenMajor(R)
	g, err := testCtx.Capture(s, func() error { return testCtx.Lookup(s, req) })
	if !errors.Is(err, ErrStagedCapture) {
		t.Fatalf("capturing a staged lookup: %v", err)
	}
	if g != nil {
		g.Close()
	}
	req.Host = HostSplit
	if _, err := testCtx.Capture(s, func() error { return testCtx.Lookup(s, req) }); !errors.Is(err, ErrStagedCapture) {
		t.Fatalf("capturing a split lookup: %v", err)
	}
	req.Host = HostAuto
	g, err = testCtx.Capture(s, func() error { return testCtx.Lookup(s, req) })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for round := range 3 {
		ids := make([]int64, T*K)
		for i := range ids {
			ids[i] = r.Int64N(rows)
		}
		if err := testCtx.CopyIn(idBuf, idBytes(ids, false)); err != nil {
			t.Fatal(err)
		}
		if err := g.Launch(s); err != nil {
			t.Fatal(err)
		}
		if err := testCtx.Sync(s); err != nil {
			t.Fatal(err)
		}
		got, want := make([]byte, T*K*R), make([]byte, T*K*R)
		if err := testCtx.CopyOut(got, out); err != nil {
			t.Fatal(err)
		}
		ref(want, slices.Repeat([][]byte{src}, K), R, ids, T, K, 0, K*R, R, nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("replay %d: wrong rows", round)
		}
	}
}

// BenchmarkHostTables: lookups from host tables of production size (two
// tables of half of hostTableGiB each, K=24 columns alternating between
// them with offsets, 3% of ids -1), R in {64, 136, 200, 264, 520, 1024}, N
// in {192 (T=8), 4,096, 98,304, 196,608}, on each path (zero-copy, staged,
// split, auto after calibration), against the host-to-device copy ceiling of the
// same run. The rows of every path are checked against the CPU lookup.
// Lines "hosttable ..." and JSON lines (workload cuda-hosttable/...).
func BenchmarkHostTables(b *testing.B) {
	gib := hostTableGiB()
	size := gib << 30
	t0 := time.Now()
	buf := hugeTable(b, size, 0x5eed)
	thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	b.Logf("hosttable memory: %d GiB built in %v (THP %s; %s)", gib, time.Since(t0).Round(time.Millisecond), strings.TrimSpace(string(thp)), anonHuge())
	s, err := testCtx.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	// The ceiling: 1 GiB pinned host to device.
	pin := mapRows(b, newRand(b), 1<<30)
	pt, err := testCtx.RegisterHost(pin, 1<<30, 1)
	if err != nil {
		b.Fatal(err)
	}
	dbuf, _ := testCtx.Alloc(1 << 30)
	h2d := timePer(b, 0, 3, func() error { return testCtx.CopyIn(dbuf, pin) })
	testCtx.Free(dbuf)
	pt.Close()
	h2dGBs := float64(1<<30) / h2d.Seconds() / 1e9
	b.Logf("hosttable ceiling: h2d %.1f GB/s", h2dGBs)
	jsonLine(map[string]any{"workload": "ceiling/h2d-copy-hosttable", "for": "cuda", "transport": "cuda", "goodput_gbps": h2dGBs * 8})
	r := newRand(b)
	half := size / 2
	const K = 24
	for _, R := range []int{64, 136, 200, 264, 520, 1024} {
		rows := half / int64(R)
		t1 := time.Now()
		ta, err := testCtx.RegisterHost(buf[:rows*int64(R)], rows, R)
		if err != nil {
			b.Fatal(err)
		}
		tb, err := testCtx.RegisterHost(buf[half:half+rows*int64(R)], rows, R)
		if err != nil {
			b.Fatal(err)
		}
		reg := time.Since(t1)
		if R == 64 {
			b.Logf("hosttable registered: %s", anonHuge())
		}
		tabs := make([]*Table, K)
		srcs := make([][]byte, K)
		offsets := make([]int64, K)
		for k := range K {
			tabs[k], srcs[k] = ta, buf[:rows*int64(R)]
			if k%2 == 1 {
				tabs[k], srcs[k] = tb, buf[half:half+rows*int64(R)]
			}
			offsets[k] = int64(k) * 1000
		}
		// The class of the lookups below: both tables' spans together,
		// as a HostAuto lookup would calibrate it on first use.
		t2 := time.Now()
		set := setOf(tabs)
		cal, err := testCtx.calibrate(&set)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("hosttable R=%d: 2 x %d GiB registered in %v, calibrated in %v: %+v", R, half>>30, reg.Round(time.Millisecond), time.Since(t2).Round(time.Millisecond), cal)
		for _, n := range []int{192, 4096, 98304, 196608} {
			T := n / K
			var idSets [4]DevPtr
			var ids0 []int64
			for j := range idSets {
				ids := make([]int64, T*K)
				for i := range ids {
					ids[i] = offsets[i%K] + r.Int64N(rows)
					if r.IntN(100) < 3 {
						ids[i] = -1
					}
				}
				if j == 0 {
					ids0 = ids
				}
				idSets[j] = devBytes(b, idBytes(ids, true))
			}
			out, _ := testCtx.Alloc(int64(n * R))
			want := make([]byte, n*R)
			ref(want, srcs, R, ids0, T, K, 0, int64(K*R), int64(R), offsets)
			for _, path := range []HostPath{HostZeroCopy, HostStaged, HostSplit, HostAuto} {
				req := &Request{Tables: tabs, IDs: idSets[0], IDs64: true, T: T, K: K, Offsets: offsets, Out: out, OutBytes: int64(n * R), Host: path}
				req.TokenMajor(R)
				// -1 rows keep what the output held: the expected bytes.
				if err := testCtx.CopyIn(out, want); err != nil {
					b.Fatal(err)
				}
				if err := testCtx.Lookup(s, req); err != nil {
					b.Fatal(err)
				}
				got := make([]byte, n*R)
				if err := testCtx.Status(s, K); err != nil {
					b.Fatal(err)
				}
				if err := testCtx.Memset(out, 0, int64(n*R), s); err != nil {
					b.Fatal(err)
				}
				if err := testCtx.Lookup(s, req); err != nil {
					b.Fatal(err)
				}
				if err := testCtx.Sync(s); err != nil {
					b.Fatal(err)
				}
				if err := testCtx.CopyOut(got, out); err != nil {
					b.Fatal(err)
				}
				for i, id := range ids0 {
					if id == -1 {
						copy(got[i*R:(i+1)*R], want[i*R:(i+1)*R]) // left untouched: zero here
					}
				}
				if !bytes.Equal(got, want) {
					b.Fatalf("hosttable R=%d N=%d %s: wrong rows", R, n, path)
				}
				turn := 0
				reps := max(5, min(200, (64<<20)/(n*R)))
				per := timePer(b, s, reps, func() error {
					turn++
					req.IDs = idSets[turn%4]
					return testCtx.Lookup(s, req)
				})
				gbs := float64(n*R) / per.Seconds() / 1e9
				line := map[string]any{"workload": fmt.Sprintf("cuda-hosttable/R=%d/N=%d/%s", R, n, path), "transport": "cuda", "mode": path.String(),
					"fragments": n, "payload_bytes": n * R, "table_bytes": size, "p50_ms": per.Seconds() * 1e3, "goodput_gbps": gbs * 8, "ratio": gbs / h2dGBs}
				chose := ""
				if path == HostAuto {
					z, st := cal.Predict(int64(n))
					line["predicted_zero_copy_ms"], line["predicted_staged_ms"] = z.Seconds()*1e3, st.Seconds()*1e3
					c, tz, err := testCtx.hostPath(s, req, int64(n))
					if err != nil {
						b.Fatal(err)
					}
					line["chosen"], line["split_tokens"] = c.String(), tz
					chose = fmt.Sprintf(" (chose %s, %d of %d tokens zero-copy)", c, tz, T)
				}
				jsonLine(line)
				b.Logf("hosttable R=%d N=%d %-9s %9.1f us  %6.1f GB/s  %.3f of h2d%s", R, n, path, per.Seconds()*1e6, gbs, gbs/h2dGBs, chose)
			}
			testCtx.Free(out)
		}
		ta.Close()
		tb.Close()
	}
}

// TestStagedClose: SetHostPath's default applies to HostAuto lookups; a
// context that ran staged and split lookups closes
// cleanly (its pinned slots, events, side stream and workers released;
// it once reset its own held lock and died in Close), and refuses
// lookups afterwards.
func TestStagedClose(t *testing.T) {
	c, err := NewContext(0)
	if err != nil {
		t.Fatal(err)
	}
	r := newRand(t)
	const R, rows, T, K = 200, 20000, 64, 4
	src := mapRows(t, r, rows*R)
	ht, err := c.RegisterHost(src, rows, R)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, T*K)
	for i := range ids {
		ids[i] = r.Int64N(rows)
	}
	idp, err := c.Alloc(int64(8 * T * K))
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Alloc(T * K * R)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CopyIn(idp, idBytes(ids, true)); err != nil {
		t.Fatal(err)
	}
	// The context's default path: zero-copy for every HostAuto lookup,
	// with no calibration made.
	if err := c.SetHostPath(9); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SetHostPath(9): %v", err)
	}
	if err := c.SetHostPath(HostZeroCopy); err != nil {
		t.Fatal(err)
	}
	auto := &Request{Tables: slices.Repeat([]*Table{ht}, K), IDs: idp, IDs64: true, T: T, K: K, Out: out, OutBytes: T * K * R}
	auto.TokenMajor(R)
	if p, _, err := c.hostPath(s, auto, T*K); err != nil || p != HostZeroCopy {
		t.Fatalf("default zero-copy: %v %v", p, err)
	}
	if _, ok := ht.Calibration(); ok {
		t.Fatal("a zero-copy default calibrated the table")
	}
	if err := c.SetHostPath(HostAuto); err != nil {
		t.Fatal(err)
	}
	for _, path := range []HostPath{HostStaged, HostSplit} {
		req := &Request{Tables: slices.Repeat([]*Table{ht}, K), IDs: idp, IDs64: true, T: T, K: K, Out: out, OutBytes: T * K * R, Host: path}
		req.TokenMajor(R)
		if err := c.Lookup(s, req); err != nil {
			t.Fatal(err)
		}
		got, want := make([]byte, T*K*R), make([]byte, T*K*R)
		if err := c.Sync(s); err != nil {
			t.Fatal(err)
		}
		if err := c.CopyOut(got, out); err != nil {
			t.Fatal(err)
		}
		ref(want, slices.Repeat([][]byte{src}, K), R, ids, T, K, 0, K*R, R, nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: wrong rows", path)
		}
	}
	for _, p := range []DevPtr{idp, out} {
		if err := c.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DestroyStream(s); err != nil {
		t.Fatal(err)
	}
	if err := ht.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close after staged lookups: %v", err)
	}
	if err := c.Lookup(0, &Request{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Lookup after Close: %v", err)
	}
}

// BenchmarkHostTableBacking: what the driver and the kernel offer for the
// span problem, at the size of BenchmarkHostTables (one table of
// hostTableGiB, R=264, T=4096 K=24 random rows over all of it): the
// table in transparent huge pages registered whole, the same registered
// in slices of 1 GiB and of 64 MiB, and the table in 4 KiB pages
// (MADV_NOHUGEPAGE), each read zero-copy, and staged for the two
// backings. Rows checked against the CPU lookup. Lines "hostbacking ...".
func BenchmarkHostTableBacking(b *testing.B) {
	size := hostTableGiB() << 30
	const R, K, T = 264, 24, 4096
	rows := size / R
	s, err := testCtx.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	r := newRand(b)
	ids := make([]int64, T*K)
	for i := range ids {
		ids[i] = r.Int64N(rows)
	}
	idp := devBytes(b, idBytes(ids, true))
	// Four id sets in turn when timing: no run finds the last one's rows
	// in L2.
	idSets := append([]DevPtr{idp}, randomIDSets(b, r, 3, T*K, rows)...)
	out, _ := testCtx.Alloc(T * K * R)
	defer testCtx.Free(out)
	for _, huge := range []bool{true, false} {
		buf, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			b.Fatal(err)
		}
		advice := unix.MADV_NOHUGEPAGE
		if huge {
			advice = unix.MADV_HUGEPAGE
		}
		_ = unix.Madvise(buf, advice)
		fillSeeded(buf, 0xbac1)
		b.Logf("hostbacking huge=%v: %s", huge, anonHuge())
		want := make([]byte, T*K*R)
		ref(want, slices.Repeat([][]byte{buf}, K), R, ids, T, K, 0, K*R, R, nil)
		slicesOf := []int64{0}
		if huge {
			slicesOf = []int64{0, 1 << 30, 64 << 20}
		}
		for _, slice := range slicesOf {
			t0 := time.Now()
			var tab *Table
			if slice == 0 {
				tab, err = testCtx.RegisterHost(buf[:rows*R], rows, R)
			} else {
				tab, err = testCtx.registerHostSlices(buf[:rows*R], rows, R, slice)
			}
			if err != nil {
				b.Fatal(err)
			}
			reg := time.Since(t0)
			paths := []HostPath{HostZeroCopy}
			if slice == 0 {
				paths = append(paths, HostStaged)
			}
			for _, path := range paths {
				req := &Request{Tables: slices.Repeat([]*Table{tab}, K), IDs: idp, IDs64: true, T: T, K: K, Out: out, OutBytes: T * K * R, Host: path}
				req.TokenMajor(R)
				if err := testCtx.Lookup(s, req); err != nil {
					b.Fatal(err)
				}
				if err := testCtx.Status(s, K); err != nil {
					b.Fatal(err)
				}
				got := make([]byte, T*K*R)
				if err := testCtx.CopyOut(got, out); err != nil {
					b.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					b.Fatalf("hostbacking huge=%v slice=%d %s: wrong rows", huge, slice, path)
				}
				turn := 0
				// A staged lookup's phases (stagedPhase), from each
				// lookup's start: summed over the timed lookups.
				var phases [6]time.Duration
				var began time.Time
				lookups := 0
				var mu sync.Mutex
				var wfrom, wto time.Duration // workers' first start and last end, from the lookup's start, summed
				var wbusy time.Duration      // their time working, summed
				if path == HostStaged {
					var first, last time.Time
					stagedPhase = func(ph int) {
						phases[ph] += time.Since(began)
						if ph == 4 {
							wfrom, wto = wfrom+first.Sub(began), wto+last.Sub(began)
							first, last = time.Time{}, time.Time{}
						}
					}
					stagedBusy = func(from, to time.Time) {
						mu.Lock()
						wbusy += to.Sub(from)
						if first.IsZero() || from.Before(first) {
							first = from
						}
						if to.After(last) {
							last = to
						}
						mu.Unlock()
					}
					defer func() { stagedPhase, stagedBusy = nil, nil }()
				}
				per := timePer(b, s, 10, func() error {
					turn++
					req.IDs = idSets[turn%4]
					began = time.Now()
					lookups++
					err := testCtx.Lookup(s, req)
					phases[0] += time.Since(began)
					return err
				})
				stagedPhase, stagedBusy = nil, nil
				b.Logf("hostbacking huge=%-5v slices=%-10d %-9s %8.1f us (registered in %v)", huge, slice, path, per.Seconds()*1e6, reg.Round(time.Millisecond))
				if path == HostStaged {
					us := func(d time.Duration) float64 { return d.Seconds() * 1e6 / float64(lookups) }
					b.Logf("hostbacking staged phases, us from a lookup's start (mean of %d): ids back %.1f, workers started %.1f, copies issued %.1f, workers done %.1f, placed %.1f, returned %.1f",
						lookups, us(phases[1]), us(phases[2]), us(phases[3]), us(phases[4]), us(phases[5]), us(phases[0]))
					b.Logf("hostbacking staged workers: first began %.1f us, last ended %.1f us after the lookup's start; busy %.1f worker-us a lookup (%d workers)",
						us(wfrom), us(wto), us(wbusy), testCtx.stg.workers)
				}
				jsonLine(map[string]any{"workload": fmt.Sprintf("cuda-hostbacking/huge=%v/slice=%d/%s", huge, slice, path), "transport": "cuda",
					"mode": path.String(), "fragments": T * K, "payload_bytes": T * K * R, "table_bytes": size, "p50_ms": per.Seconds() * 1e3})
			}
			if err := tab.Close(); err != nil {
				b.Fatal(err)
			}
		}
		if err := unix.Munmap(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// checkVariant runs plan p of req (its kernel forced) on a poisoned
// output and fails unless the output is want.
func checkVariant(b *testing.B, s Stream, req *Request, p *plan, want []byte, what string) {
	b.Helper()
	if err := testCtx.Memset(req.Out, 0x77, int64(len(want)), s); err != nil {
		b.Fatal(err)
	}
	if err := testCtx.enqueue(s, req, p); err != nil {
		b.Fatal(err)
	}
	got := make([]byte, len(want))
	if err := testCtx.Sync(s); err != nil {
		b.Fatal(err)
	}
	if err := testCtx.CopyOut(got, req.Out); err != nil {
		b.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		b.Fatalf("%s: wrong rows", what)
	}
}

// idPlans is p once per id set (the ids' address patched into each
// parameter block), for timing with the sets in turn so that no run
// finds the previous run's rows in L2.
func idPlans(p *plan, idSets []DevPtr) [4]plan {
	var ps [4]plan
	for i := range ps {
		ps[i] = *p
		binary.LittleEndian.PutUint64(ps[i].args[0:], uint64(idSets[i%len(idSets)]))
	}
	return ps
}

// BenchmarkStagedGatherParts: what a staged lookup's CPU gather costs in
// its real surroundings, one change at a time: N=98,304 random rows of
// 264 B from a table of hostTableGiB (huge pages asked for), 15 workers
// (GOMAXPROCS-1) prefetching rowAhead rows ahead, into a Go heap buffer or
// pinned memory, from the table registered with the driver or not; a
// host-to-device copy of the same bytes from pinned memory, alone and
// while the gather runs; the whole staged lookup, K=1 and K=24 (the same
// table in every column). The variants run in turn, 5 rounds, and each
// line is the median over rounds of the medians of 15 runs (this host's
// memory varies from run to run by up to 2x). Lines "stagedparts ...".
func BenchmarkStagedGatherParts(b *testing.B) {
	size := hostTableGiB() << 30
	const R, N = 264, 98304
	buf := hugeTable(b, size, 0x9a27)
	r := newRand(b)
	rows := size / R
	ids := make([]int64, N)
	for i := range ids {
		ids[i] = r.Int64N(rows)
	}
	var src rowSource
	src.k, src.rowBytes, src.host[0], src.rows[0] = 1, R, buf, rows
	workers := max(runtime.GOMAXPROCS(0)-1, 1)
	sids := make([]int32, N)
	heap := make([]byte, N*R)
	pin, err := testCtx.pinned(N * R)
	if err != nil {
		b.Fatal(err)
	}
	defer testCtx.freePinned(pin)
	dev, err := testCtx.Alloc(N * R)
	if err != nil {
		b.Fatal(err)
	}
	defer testCtx.Free(dev)
	copyIn := func() time.Duration {
		var ts []time.Duration
		for range 15 {
			t0 := time.Now()
			if err := testCtx.CopyIn(dev, pin); err != nil {
				b.Fatal(err)
			}
			ts = append(ts, time.Since(t0))
		}
		return median(ts)
	}
	s, err := testCtx.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	idp := devBytes(b, idBytes(ids, true))
	// Four sets of ids, taken in turn: lookups of the same ids back to
	// back would find the rows in the caches the one before left.
	var idps [4]DevPtr
	for j := range idps {
		set := make([]int64, N)
		for i := range set {
			set[i] = r.Int64N(rows)
		}
		idps[j] = devBytes(b, idBytes(set, true))
	}
	out, err := testCtx.Alloc(N * R)
	if err != nil {
		b.Fatal(err)
	}
	defer testCtx.Free(out)
	var tab *Table
	lookup := func(k int, sync bool) func() time.Duration {
		return func() time.Duration {
			req := &Request{Tables: slices.Repeat([]*Table{tab}, k), IDs: idp, IDs64: true, T: N / k, K: k, Out: out, OutBytes: N * R, Host: HostStaged}
			req.TokenMajor(R)
			turn := 0
			return timePer(b, s, 10, func() error {
				turn++
				req.IDs = idps[turn%len(idps)]
				if err := testCtx.Lookup(s, req); err != nil || !sync {
					return err
				}
				return testCtx.Sync(s)
			})
		}
	}
	type variant struct {
		name string
		run  func() time.Duration
	}
	// The ids and staged ids in pinned memory, as a staged lookup keeps
	// them (read back from the device, copied to it).
	pinIDs, err := testCtx.pinned(N * 8)
	if err != nil {
		b.Fatal(err)
	}
	defer testCtx.freePinned(pinIDs)
	pinSids, err := testCtx.pinned(N * 4)
	if err != nil {
		b.Fatal(err)
	}
	defer testCtx.freePinned(pinSids)
	ids2 := unsafe.Slice((*int64)(unsafe.Pointer(&pinIDs[0])), N)
	copy(ids2, ids)
	sids2 := unsafe.Slice((*int32)(unsafe.Pointer(&pinSids[0])), N)
	unreg := []variant{
		{"gather, heap dst, table unregistered", func() time.Duration { return timeRowGather(&src, heap, ids, sids, workers, rowAhead) }},
		{"gather, heap dst, ids in pinned memory", func() time.Duration { return timeRowGather(&src, heap, ids2, sids2, workers, rowAhead) }},
		{"gather, pinned dst, ids in pinned memory", func() time.Duration { return timeRowGather(&src, pin, ids2, sids2, workers, rowAhead) }},
		{"gather, pinned dst, table unregistered", func() time.Duration { return timeRowGather(&src, pin, ids, sids, workers, rowAhead) }},
		{"gather, heap dst, no prefetch", func() time.Duration { return timeRowGather(&src, heap, ids, sids, workers, 0) }},
		{"host-to-device copy from pinned, alone", copyIn},
		{"host-to-device copy while gathering", func() time.Duration {
			var during time.Duration
			done := make(chan struct{})
			go func() {
				defer close(done)
				during = copyIn()
			}()
			for {
				timeRowGather(&src, heap, ids, sids, workers, rowAhead)
				select {
				case <-done:
					return during
				default:
				}
			}
		}},
	}
	reg := []variant{
		{"gather, heap dst, table registered", func() time.Duration { return timeRowGather(&src, heap, ids, sids, workers, rowAhead) }},
		{"gather, pinned dst, table registered", func() time.Duration { return timeRowGather(&src, pin, ids, sids, workers, rowAhead) }},
		{"whole staged lookup K=1, back to back", lookup(1, false)},
		{"whole staged lookup K=1, synchronized each", lookup(1, true)},
		{"whole staged lookup K=24, back to back", lookup(24, false)},
	}
	rounds := func(vs []variant) {
		ts := make([][]time.Duration, len(vs))
		for range 5 {
			for i, v := range vs {
				ts[i] = append(ts[i], v.run())
			}
		}
		for i, v := range vs {
			d := median(ts[i])
			b.Logf("stagedparts %-44s %8.1f us %6.1f GB/s (rounds %v)", v.name, d.Seconds()*1e6, float64(N*R)/d.Seconds()/1e9, ts[i])
		}
	}
	rounds(unreg)
	tab, err = testCtx.RegisterHost(buf[:rows*R], rows, R)
	if err != nil {
		b.Fatal(err)
	}
	defer tab.Close()
	rounds(reg)
	if f := os.Getenv("CUDAGATHER_TRACE"); f != "" {
		// An execution trace of 5 whole lookups (K=1), each synchronized.
		w, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		req := &Request{Tables: []*Table{tab}, IDs: idp, IDs64: true, T: N, K: 1, Out: out, OutBytes: N * R, Host: HostStaged}
		req.TokenMajor(R)
		if err := trace.Start(w); err != nil {
			b.Fatal(err)
		}
		for range 5 {
			trace.Log(context.Background(), "lookup", "start")
			if err := testCtx.Lookup(s, req); err != nil {
				b.Fatal(err)
			}
			trace.Log(context.Background(), "lookup", "returned")
			if err := testCtx.Sync(s); err != nil {
				b.Fatal(err)
			}
			trace.Log(context.Background(), "lookup", "synced")
		}
		trace.Stop()
	}
}

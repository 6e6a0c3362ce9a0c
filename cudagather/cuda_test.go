//go:build cuda

package cudagather

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

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
						size := req.Off + int64(T-1)*req.TStride + int64(K-1)*req.KStride + int64(R) + 16
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
			if err := testCtx.Memset(out, 0x77, int64(n*R), s); err != nil {
				b.Fatal(err)
			}
			if err := testCtx.enqueue(s, req, &p); err != nil {
				b.Fatal(err)
			}
			got := make([]byte, n*R)
			if err := testCtx.Sync(s); err != nil {
				b.Fatal(err)
			}
			if err := testCtx.CopyOut(got, out); err != nil {
				b.Fatal(err)
			}
			if !bytes.Equal(got, wantRows) {
				b.Fatalf("variant %s: wrong rows", v.name)
			}
			for _, mult := range []int64{1} { // x resident blocks
				blocks := int64(testCtx.sms) * int64(testCtx.occ[name]) * mult
				if mult == 0 {
					blocks = (p.n/int64(v.perWarp) + 7) / 8
				}
				// Four id sets in turn, so no run finds the previous run's
				// rows in the 60 MB L2.
				var ps [4]plan
				for i := range ps {
					ps[i] = p
					binary.LittleEndian.PutUint64(ps[i].args[0:], uint64(idSets[i]))
				}
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

//go:build cuda

package cudagather

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// hostFetch is a fetch over CPU tables (one per column, with offsets):
// the rows of every id that is not -1 at its flat index; an id that is
// not a row fails the whole fetch, as a remote lookup's check does.
func hostFetch(tables [][]byte, R int, K int, offsets []int64) func(ctx context.Context, ids32 []int32, ids64 []int64, rows []byte) error {
	return func(ctx context.Context, ids32 []int32, ids64 []int64, rows []byte) error {
		n := max(len(ids32), len(ids64))
		id := func(i int) int64 {
			if ids64 != nil {
				return ids64[i]
			}
			return int64(ids32[i])
		}
		for i := range n {
			v := id(i)
			if v == -1 {
				continue
			}
			v -= offsets[i%K]
			if v < 0 || (v+1)*int64(R) > int64(len(tables[i%K])) {
				return fmt.Errorf("id %d at %d: not a row", id(i), i)
			}
		}
		for i := range n {
			if v := id(i); v != -1 {
				v -= offsets[i%K]
				copy(rows[i*R:(i+1)*R], tables[i%K][v*int64(R):])
			}
		}
		return nil
	}
}

// TestHostLookup runs host lookups eagerly and captured into a graph,
// replayed with new ids each time, in three layouts and both id widths,
// against the CPU reference; then the failures: a fetch that errs, one
// that panics and one that runs past its timeout each leave the output
// as it was, are reported by Status, and the stream and the graph go on
// working; a bad output and unpinned staging are refused up front.
//
// It runs both forms of the hand-over: the proxy (stream memory
// operations; REQUIRE_PROXY=1 fails the test where the probe refuses
// them) on the test context, and the host function on a context whose
// probe is turned off.
func TestHostLookup(t *testing.T) {
	t.Run("proxy", func(t *testing.T) {
		if !testCtx.useProxy() {
			if os.Getenv("REQUIRE_PROXY") == "1" {
				t.Fatal("REQUIRE_PROXY=1: the driver does not capture stream memory operations")
			}
			t.Skip("the driver does not capture stream memory operations: host lookups use host functions")
		}
		testHostLookup(t, testCtx, true)
	})
	t.Run("host-function", func(t *testing.T) {
		hc, err := NewContext(0)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := hc.Close(); err != nil {
				t.Error(err)
			}
		}()
		hc.probe.once.Do(func() {}) // no proxy: every lookup of hc runs its fetch in a host function
		if err := hc.Warmup(0); err != nil {
			t.Fatal(err)
		}
		testHostLookup(t, hc, false)
	})
}

func testHostLookup(t *testing.T, hc *Context, proxied bool) {
	r := newRand(t)
	s, err := hc.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer hc.DestroyStream(s)
	const R, rows, T, K = 264, 3000, 16, 6
	a, b := randBytes(r, rows*R), randBytes(r, rows*R)
	tables := [][]byte{a, b, a, b, b, a}
	offsets := []int64{0, 5000, 0, 5000, 5000, 0}
	newIDs := func() []int64 {
		ids := make([]int64, T*K)
		for i := range ids {
			ids[i] = offsets[i%K] + r.Int64N(rows)
			if r.IntN(7) == 0 {
				ids[i] = -1
			}
		}
		return ids
	}
	for _, id64 := range []bool{false, true} {
		for _, layout := range []string{"token", "head", "padded"} {
			name := fmt.Sprintf("id64=%v/%s", id64, layout)
			var fail atomic.Int32 // 1: the fetch errs, 2: it panics, 3: it sleeps past its timeout
			fetch := hostFetch(tables, R, K, offsets)
			hl, err := hc.NewHostLookup(HostLookupConfig{T: T, K: K, RowBytes: R, IDs64: id64, Timeout: 200 * time.Millisecond,
				Fetch: func(ctx context.Context, ids32 []int32, ids64 []int64, rows []byte) error {
					switch fail.Load() {
					case 1:
						return errors.New("owner gone")
					case 2:
						panic("fetch bug")
					case 3:
						<-ctx.Done()
						return ctx.Err()
					}
					return fetch(ctx, ids32, ids64, rows)
				}})
			if err != nil {
				t.Fatal(err)
			}
			if hl.Proxied() != proxied {
				t.Fatalf("Proxied() = %v, want %v", hl.Proxied(), proxied)
			}
			req := &Request{T: T, K: K}
			size := setLayout(req, layout, R)
			poison := bytes.Repeat([]byte{0xA7}, int(size))
			out := devBytes(t, poison)
			w := 4
			if id64 {
				w = 8
			}
			idBuf := devBytes(t, make([]byte, w*T*K))
			enqueue := func() error {
				return hl.Enqueue(s, idBuf, out, size, req.Off, req.TStride, req.KStride)
			}
			// check writes ids, runs launch, and compares the output with
			// want (the reference over the output before, when ok).
			check := func(what string, ids []int64, launch func() error, ok bool) {
				t.Helper()
				before := make([]byte, size)
				if err := testCtx.CopyOut(before, out); err != nil {
					t.Fatal(err)
				}
				if err := testCtx.CopyIn(idBuf, idBytes(ids, id64)); err != nil {
					t.Fatal(err)
				}
				if err := launch(); err != nil {
					t.Fatalf("%s %s: %v", name, what, err)
				}
				serr := hc.Status(s, K)
				got := make([]byte, size)
				if err := testCtx.CopyOut(got, out); err != nil {
					t.Fatal(err)
				}
				want := bytes.Clone(before)
				if ok {
					if serr != nil {
						t.Fatalf("%s %s: status %v", name, what, serr)
					}
					ref(want, tables, R, ids, T, K, req.Off, req.TStride, req.KStride, offsets)
				} else {
					var he *HostLookupError
					if !errors.As(serr, &he) {
						t.Fatalf("%s %s: status %v, want a HostLookupError", name, what, serr)
					}
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s %s: output differs from the reference (ok %v)", name, what, ok)
				}
			}
			check("eager", newIDs(), enqueue, true)
			g, err := hc.Capture(s, enqueue)
			if err != nil {
				t.Fatalf("%s: capture: %v", name, err)
			}
			launch := func() error { return g.Launch(s) }
			for i := range 3 {
				check(fmt.Sprintf("replay %d", i), newIDs(), launch, true)
			}
			bad := newIDs()
			bad[7] = offsets[7%K] + rows // past the table: the fetch refuses the lookup whole
			check("bad id", bad, launch, false)
			for mode := int32(1); mode <= 3; mode++ {
				fail.Store(mode)
				check(fmt.Sprintf("failure %d", mode), newIDs(), launch, false)
				fail.Store(0)
				check(fmt.Sprintf("after failure %d", mode), newIDs(), launch, true)
			}
			if ran, failed := hl.Fetches(); ran != 11 || failed != 4 {
				t.Fatalf("%s: %d fetches, %d failed; want 11 and 4", name, ran, failed)
			}
			// A bad output enqueues nothing.
			need := req.Off + int64(T-1)*req.TStride + int64(K-1)*req.KStride + int64(R)
			if err := hl.Enqueue(s, idBuf, out, need-1, req.Off, req.TStride, req.KStride); !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s: an output a byte short: %v", name, err)
			}
			if err := hl.Enqueue(s, idBuf+1, out, size, req.Off, req.TStride, req.KStride); !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s: misaligned ids: %v", name, err)
			}
			if err := hc.Sync(s); err != nil {
				t.Fatal(err)
			}
			if ran, _ := hl.Fetches(); ran != 11 {
				t.Fatalf("%s: a refused Enqueue ran a fetch", name)
			}
			if err := hc.Close(); !errors.Is(err, ErrBusy) {
				t.Fatalf("Close with a host lookup open: %v", err)
			}
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			if err := hl.Close(); err != nil {
				t.Fatal(err)
			}
			if err := hl.Enqueue(s, idBuf, out, size, req.Off, req.TStride, req.KStride); !errors.Is(err, ErrClosed) {
				t.Fatalf("Enqueue after Close: %v", err)
			}
		}
	}
	// Staging that is not pinned is refused; a config out of shape too.
	if _, err := hc.NewHostLookup(HostLookupConfig{T: 2, K: 2, RowBytes: 8, Rows: make([]byte, 32),
		Fetch: hostFetch(nil, 8, 2, nil)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("pageable Rows: %v", err)
	}
	for _, cfg := range []HostLookupConfig{
		{T: 0, K: 2, RowBytes: 8}, {T: 2, K: MaxColumns + 1, RowBytes: 8}, {T: 2, K: 2, RowBytes: 0},
		{T: 2, K: 2, RowBytes: 8, Rows: make([]byte, 31)}, {T: 2, K: 2, RowBytes: 8, Timeout: -1},
	} {
		cfg.Fetch = hostFetch(nil, 8, 2, nil)
		if _, err := hc.NewHostLookup(cfg); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%+v: %v", cfg, err)
		}
	}
	if _, err := hc.NewHostLookup(HostLookupConfig{T: 2, K: 2, RowBytes: 8}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil Fetch: %v", err)
	}
}

// TestHostLookupPinnedRows: staging the caller pinned (PinHost) is used
// in place: the fetch writes there, and the placing pass reads it.
func TestHostLookupPinnedRows(t *testing.T) {
	r := newRand(t)
	s, err := testCtx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	const R, rows, T, K = 100, 500, 4, 3
	tab := randBytes(r, rows*R)
	staging := make([]byte, T*K*R)
	unpin, err := testCtx.PinHost(staging)
	if err != nil {
		t.Fatal(err)
	}
	defer unpin()
	offsets := make([]int64, K)
	var seen atomic.Bool
	fetch := hostFetch([][]byte{tab, tab, tab}, R, K, offsets)
	hl, err := testCtx.NewHostLookup(HostLookupConfig{T: T, K: K, RowBytes: R, Rows: staging,
		Fetch: func(ctx context.Context, ids32 []int32, ids64 []int64, rows []byte) error {
			seen.Store(&rows[0] == &staging[0])
			return fetch(ctx, ids32, ids64, rows)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Close()
	ids := make([]int64, T*K)
	for i := range ids {
		ids[i] = r.Int64N(rows)
	}
	idBuf := devBytes(t, idBytes(ids, false))
	out := devBytes(t, make([]byte, T*K*R))
	if err := hl.Enqueue(s, idBuf, out, T*K*R, 0, K*R, R); err != nil {
		t.Fatal(err)
	}
	if err := testCtx.Status(s, K); err != nil {
		t.Fatal(err)
	}
	got, want := make([]byte, T*K*R), make([]byte, T*K*R)
	if err := testCtx.CopyOut(got, out); err != nil {
		t.Fatal(err)
	}
	ref(want, [][]byte{tab, tab, tab}, R, ids, T, K, 0, K*R, R, offsets)
	if !bytes.Equal(got, want) || !seen.Load() {
		t.Fatalf("pinned staging: bytes equal %v, fetch wrote the caller's staging %v", bytes.Equal(got, want), seen.Load())
	}
}

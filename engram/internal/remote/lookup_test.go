package remote

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
)

// layout places a [T,K,R] output: the offset of row (0,0), the strides and
// the output's size.
type layout struct {
	name string
	at   func(t, k, r int) (off, ts, ks, size int)
}

var layouts = []layout{
	{"token-major", func(t, k, r int) (int, int, int, int) { return 0, k * r, r, t * k * r }},
	{"head-major", func(t, k, r int) (int, int, int, int) { return 0, r, t * r, k * t * r }},
	{"token-major-padded", func(t, k, r int) (int, int, int, int) {
		return 24, k*r + 40, r, 24 + t*(k*r+40) + 16
	}},
	{"head-major-gaps", func(t, k, r int) (int, int, int, int) {
		ks := t*(r+8) + 16
		return 8, r + 8, ks, 8 + k*ks
	}},
}

// pattern chooses each column's table and offset; ops is the number of
// operations the lookup must become (0: not asserted).
type pattern struct {
	name    string
	columns func(r *rand.Rand, k int) ([]string, []int64)
	ops     func(k int) int
}

var patterns = []pattern{
	{"one-table", func(_ *rand.Rand, k int) ([]string, []int64) {
		return repeat("emb", k), nil
	}, func(int) int { return 1 }},
	{"one-table-offset", func(_ *rand.Rand, k int) ([]string, []int64) {
		offs := make([]int64, k)
		for i := range offs {
			offs[i] = 1 << 20
		}
		return repeat("emb", k), offs
	}, func(int) int { return 1 }},
	{"two-tables-alternating", func(_ *rand.Rand, k int) ([]string, []int64) {
		names := make([]string, k)
		for i := range names {
			names[i] = []string{"emb", "ngram.l3"}[i%2]
		}
		return names, nil
	}, func(int) int { return 2 }},
	{"uneven", func(_ *rand.Rand, k int) ([]string, []int64) {
		// emb at 0,1,2 and 4..11 (two evenly spaced runs), tiny at 3,
		// ngram.l3 at 12..23.
		names := make([]string, k)
		for i := range names {
			switch {
			case i == 3:
				names[i] = "tiny"
			case i < 12:
				names[i] = "emb"
			default:
				names[i] = "ngram.l3"
			}
		}
		return names, nil
	}, func(int) int { return 4 }},
	{"per-column-offsets", func(_ *rand.Rand, k int) ([]string, []int64) {
		offs := make([]int64, k)
		for i := range offs {
			offs[i] = int64(i) * 100
		}
		return repeat("emb", k), offs
	}, func(k int) int { return k }},
	{"mixed", func(r *rand.Rand, k int) ([]string, []int64) {
		names, offs := make([]string, k), make([]int64, k)
		for i := range names {
			names[i] = []string{"emb", "ngram.l3", "tiny"}[r.IntN(3)]
			offs[i] = []int64{0, 500}[r.IntN(2)]
		}
		return names, offs
	}, nil},
}

// requireSameBytes compares two outputs, reporting the first differing
// window (cmp on whole megabyte slices is slow).
func requireSameBytes(t *testing.T, want, got []byte) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	require.Equal(t, len(want), len(got), "output length")
	i := 0
	for want[i] == got[i] {
		i++
	}
	lo, hi := max(0, i-16), min(len(want), i+48)
	t.Fatalf("output differs from the reference first at byte %d (-want +got): %s", i, cmp.Diff(want[lo:hi], got[lo:hi]))
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// randomIDs draws ids for the columns: rows of each column's table plus
// its offset, about one in skipEvery -1 (0: none).
func randomIDs[I int32 | int64](r *rand.Rand, e *env, names []string, offs []int64, t, skipEvery int) []I {
	k := len(names)
	ids := make([]I, t*k)
	for i := range ids {
		col := i % k
		if skipEvery > 0 && r.IntN(skipEvery) == 0 {
			ids[i] = -1
			continue
		}
		id := r.Int64N(e.tables[names[col]].NumRows)
		if offs != nil {
			id += offs[col]
		}
		ids[i] = I(id)
	}
	return ids
}

// checkLookup runs one lookup of pattern p in layout l (about one id in
// skipEvery -1) and compares the whole output (poison included) with the
// naive reference.
func checkLookup[I int32 | int64](t *testing.T, r *rand.Rand, e *env, p pattern, l layout, tokens, k, skipEvery int) {
	t.Helper()
	names, offs := p.columns(r, k)
	rb := e.tables[names[0]].RowBytes
	off, ts, ks, size := l.at(tokens, k, rb)
	q := withIDs(&lookup.Request{Tables: names, Offsets: offs, T: tokens, K: k,
		Out: e.output(t, r, size), Off: off, TStride: ts, KStride: ks}, randomIDs[I](r, e, names, offs, tokens, skipEvery))
	want := reference(e.tables, q)
	before := e.cli.Stats()
	require.NoError(t, Lookup(testContext(t), e.cli, q))
	after := e.cli.Stats()
	requireSameBytes(t, want, q.Out)
	ops := after.Ops - before.Ops
	if p.ops != nil {
		require.Equal(t, uint64(p.ops(k)), ops, "operations of the lookup")
	}
	require.LessOrEqual(t, ops, uint64(k))
	require.Equal(t, before.Lookups+1, after.Lookups)
	t.Logf("%d ops: direct %d, gather %d, fallbacks %d", ops, after.Direct-before.Direct,
		after.Gather-before.Gather, after.Fallbacks-before.Fallbacks)
}

func TestLookupMatchesReference(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRand(t)
			e := newEnv(t, r, envConfig{backend: be, outputBytes: 32 << 20})
			for _, p := range patterns {
				for _, l := range layouts {
					for _, tokens := range []int{1, 3, 16} {
						name := fmt.Sprintf("%s/%s/T=%d", p.name, l.name, tokens)
						t.Run(name+"/int32", func(t *testing.T) { checkLookup[int32](t, r, e, p, l, tokens, 24, 7) })
						t.Run(name+"/int64", func(t *testing.T) { checkLookup[int64](t, r, e, p, l, tokens, 24, 7) })
					}
				}
			}
		})
	}
}

// TestLookupLarge checks lookups of 98,304 rows (T=4096, K=24). On a fresh
// tcp connection (so no direct operation has refined the request rate the
// cost model starts from testLink with), a one-table lookup is gathered by
// the owner straight into the output; shm copies through its mapping. Runs
// of few columns may go either way.
func TestLookupLarge(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRand(t)
			e := newEnv(t, r, envConfig{backend: be, outputBytes: 32 << 20})
			for _, p := range []pattern{patterns[0], patterns[3], patterns[5]} {
				for _, l := range layouts[:2] {
					t.Run(fmt.Sprintf("%s/%s", p.name, l.name), func(t *testing.T) {
						before := e.cli.Stats()
						checkLookup[int32](t, r, e, p, l, 4096, 24, 7)
						if e.cli.Exposed() && p.name == "one-table" {
							require.Equal(t, before.Gather+1, e.cli.Stats().Gather, "a large one-table lookup should gather")
						}
					})
				}
			}
		})
	}
}

// TestLookupForcedModes runs the same lookups with every mode forced: the
// bytes must not depend on how they moved.
func TestLookupForcedModes(t *testing.T) {
	for _, mode := range []engine.Mode{engine.ModeDirect, engine.ModeGather, engine.ModeHybrid} {
		t.Run(mode.String(), func(t *testing.T) {
			r := newRand(t)
			e := newEnv(t, r, envConfig{backend: tcpBackend, mode: mode, outputBytes: 16 << 20})
			for _, p := range patterns {
				for _, tokens := range []int{1, 700} {
					t.Run(fmt.Sprintf("%s/T=%d", p.name, tokens), func(t *testing.T) {
						// No -1 ids: an operation that carries no bytes
						// completes at once, whatever the mode.
						checkLookup[int64](t, r, e, p, layouts[1], tokens, 24, 0)
					})
				}
			}
			st := e.cli.Stats()
			require.Zero(t, st.Fallbacks, "forced %v fell back", mode)
			if mode == engine.ModeDirect {
				require.Zero(t, st.Gather)
			} else {
				require.Zero(t, st.Direct)
			}
		})
	}
}

// TestLookupSkipsAndShapes covers the edges: every id -1, empty shapes,
// K = 1 and T = 1, one column per table and the narrow table.
func TestLookupSkipsAndShapes(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRand(t)
			e := newEnv(t, r, envConfig{backend: be})
			ctx := testContext(t)

			t.Run("all-skipped", func(t *testing.T) {
				ids := make([]int32, 5*4)
				for i := range ids {
					ids[i] = -1
				}
				out := e.output(t, r, 5*4*264)
				want := append([]byte(nil), out...)
				q := &lookup.Request{Tables: repeat("emb", 4), IDs32: ids, T: 5, K: 4, Out: out, TStride: 4 * 264, KStride: 264}
				require.NoError(t, Lookup(ctx, e.cli, q))
				require.Equal(t, want, out)
			})
			t.Run("empty", func(t *testing.T) {
				before := e.cli.Stats()
				require.NoError(t, Lookup(ctx, e.cli, &lookup.Request{Tables: repeat("emb", 3), T: 0, K: 3}))
				require.NoError(t, Lookup(ctx, e.cli, &lookup.Request{T: 9, K: 0}))
				require.Equal(t, before.Ops, e.cli.Stats().Ops)
			})
			t.Run("narrow-K1", func(t *testing.T) {
				p := pattern{columns: func(*rand.Rand, int) ([]string, []int64) { return []string{"narrow"}, nil }}
				for _, l := range layouts {
					checkLookup[int32](t, r, e, p, l, 33, 1, 7)
				}
			})
			t.Run("tiny-T1", func(t *testing.T) {
				p := pattern{columns: func(_ *rand.Rand, k int) ([]string, []int64) { return repeat("tiny", k), nil },
					ops: func(int) int { return 1 }}
				checkLookup[int64](t, r, e, p, layouts[0], 1, 24, 7)
			})
			t.Run("zero-strides-T1-K1", func(t *testing.T) {
				out := e.output(t, r, 300)
				q := &lookup.Request{Tables: []string{"emb"}, IDs32: []int32{5999}, T: 1, K: 1, Out: out, Off: 36}
				want := reference(e.tables, q)
				require.NoError(t, Lookup(ctx, e.cli, q))
				require.Equal(t, want, out)
			})
			t.Run("sub-slice-of-output", func(t *testing.T) {
				// Out may be any part of a leased buffer.
				buf := e.output(t, r, 10*264)
				q := &lookup.Request{Tables: repeat("ngram.l3", 2), IDs32: []int32{3000, 0, 17, -1}, T: 2, K: 2,
					Out: buf[264*3 : 264*8], TStride: 2 * 264, KStride: 264}
				want := append([]byte(nil), buf...)
				copy(want[264*3:], reference(e.tables, q))
				require.NoError(t, Lookup(ctx, e.cli, q))
				require.Equal(t, want, buf)
			})
		})
	}
}

// TestLookupConcurrent runs lookups from several goroutines at once on one
// client, each into its own output.
func TestLookupConcurrent(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRand(t)
			e := newEnv(t, r, envConfig{backend: be, outputBytes: 32 << 20})
			const workers, rounds = 4, 25
			type job struct {
				q    *lookup.Request
				want []byte
			}
			jobs := make([][]job, workers)
			for w := range jobs {
				for i := range rounds {
					p := patterns[(w+i)%len(patterns)]
					names, offs := p.columns(r, 24)
					tokens := 1 + r.IntN(16)
					off, ts, ks, size := layouts[i%len(layouts)].at(tokens, 24, 264)
					q := &lookup.Request{Tables: names, Offsets: offs, IDs32: randomIDs[int32](r, e, names, offs, tokens, 5),
						T: tokens, K: 24, Out: e.output(t, r, size), Off: off, TStride: ts, KStride: ks}
					jobs[w] = append(jobs[w], job{q, reference(e.tables, q)})
				}
			}
			ctx := testContext(t)
			var wg sync.WaitGroup
			errs := make([]error, workers)
			for w := range workers {
				wg.Go(func() {
					for _, j := range jobs[w] {
						if err := Lookup(ctx, e.cli, j.q); err != nil {
							errs[w] = err
							return
						}
					}
				})
			}
			wg.Wait()
			for w := range workers {
				require.NoError(t, errs[w])
				for i, j := range jobs[w] {
					require.True(t, bytes.Equal(j.want, j.q.Out), "worker %d lookup %d differs", w, i)
				}
			}
		})
	}
}

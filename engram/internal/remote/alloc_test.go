package remote

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
)

// TestLookupAllocs checks steady-state allocations of whole lookups, both
// sides in this process (the owner's handlers are counted too): a lookup
// that is one operation allocates nothing; one of several operations at
// most one object per operation submitted before the last (the engine
// starts each gather on a goroutine). Under -race the detector allocates
// on its own, so only the bound on growth with the row count is checked.
func TestLookupAllocs(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRand(t)
			e := newEnv(t, r, envConfig{backend: be, outputBytes: 64 << 20})
			for _, tc := range []struct {
				p      pattern
				l      layout
				tokens int
			}{
				{patterns[0], layouts[0], 1},
				{patterns[0], layouts[0], 16},
				{patterns[0], layouts[1], 16},
				{patterns[0], layouts[0], 1024},
				{patterns[0], layouts[1], 4096},
				{patterns[1], layouts[2], 16},
				{patterns[2], layouts[0], 16},
				{patterns[2], layouts[0], 1024},
				{patterns[3], layouts[1], 700},
				{patterns[4], layouts[0], 16},
			} {
				t.Run(fmt.Sprintf("%s/%s/T=%d", tc.p.name, tc.l.name, tc.tokens), func(t *testing.T) {
					names, offs := tc.p.columns(r, 24)
					off, ts, ks, size := tc.l.at(tc.tokens, 24, 264)
					q := &lookup.Request{Tables: names, Offsets: offs, IDs32: randomIDs[int32](r, e, names, offs, tc.tokens, 9),
						T: tc.tokens, K: 24, Out: e.output(t, r, size), Off: off, TStride: ts, KStride: ks}
					ctx := context.Background()
					// Warm the state, the engine and the transports (their
					// buffers grow over the first calls).
					warm := 30
					if tc.tokens > 1000 {
						warm = 10
					}
					for range warm {
						require.NoError(t, Lookup(ctx, e.cli, q))
					}
					// The least of three measurements (see verbs TestAllocs:
					// a busy machine can make the transport grow a buffer
					// now and then; a per-lookup allocation shows in all
					// three).
					before := e.cli.Stats()
					allocs := math.Inf(1)
					for range 3 {
						allocs = min(allocs, testing.AllocsPerRun(20, func() {
							if err := Lookup(ctx, e.cli, q); err != nil {
								t.Fatal(err)
							}
						}))
					}
					st := e.cli.Stats()
					ops := (st.Ops - before.Ops) / 63
					t.Logf("%.1f allocs per lookup of %d ops (direct %d, gather %d per 63)", allocs, ops,
						st.Direct-before.Direct, st.Gather-before.Gather)
					if raceBuild() {
						require.LessOrEqual(t, allocs, float64(8*ops+8))
						return
					}
					require.LessOrEqual(t, allocs, float64(ops-1), "allocations beyond one per submitted operation")
				})
			}
		})
	}
}

package verbs_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

// TestAllocs checks that steady-state operations allocate nothing per
// fragment, and that a direct operation on shm allocates nothing at all
// (the engine reuses its per-operation state; shm completes inside Post).
// Gather's allocations come from the transport's per-call machinery (both
// sides run in this process), so only their independence of the fragment
// count is asserted.
func TestAllocs(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRand(t)
			f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes})
			allocs := func(mode verbs.Mode, n int) float64 {
				op := f.op(verbs.OpRead, rowsPlan(r, localBytes, n, 264, 0, 0), mode)
				op.SpanBytes = make([]uint64, 0, 1)
				ctx := context.Background()
				for range 3 { // warm the states and the transport's buffers
					_, err := f.eng.Do(ctx, op)
					require.NoError(t, err)
				}
				return testing.AllocsPerRun(20, func() {
					res, err := f.eng.Do(ctx, op)
					if err != nil || res.Mode != mode {
						t.Fatalf("mode %v: %v (%v)", res.Mode, err, res.FallbackErr)
					}
				})
			}
			for _, mode := range []verbs.Mode{verbs.ModeDirect, verbs.ModeGather} {
				small, large := allocs(mode, 300), allocs(mode, 3000)
				t.Logf("%v: %.1f allocs/op at 300 rows, %.1f at 3000", mode, small, large)
				require.LessOrEqual(t, large, small+1, "allocations grow with the fragment count")
				if mode == verbs.ModeDirect && be.name == "shm" {
					require.Zero(t, large)
				}
			}
		})
	}
}

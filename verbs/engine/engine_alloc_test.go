package engine_test

import (
	"context"
	"math"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

// TestAllocs checks that steady-state operations, direct and gather, on
// both backends, under a context that can end, allocate nothing at all
// once warm: the engine reuses its
// per-operation state and the transports their per-call state (both sides
// run in this process, so the owner's handler is counted too). Under -race
// the detector allocates on its own, so only the independence of the
// fragment count is asserted there.
func TestAllocs(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes})
			// A context that can end puts the operation on the abort
			// fence's watch list: that must not allocate either.
			cancellable, cancel := context.WithCancel(context.Background())
			defer cancel()
			allocs := func(mode engine.Mode, n int) float64 {
				op := f.op(verbs.OpRead, rowsPlan(r, localBytes, n, 264, 0, 0), mode)
				op.SpanBytes = make([]uint64, 0, 1)
				ctx := cancellable
				for range 3 { // warm the states and the transport's buffers
					_, err := f.eng.Do(ctx, op)
					require.NoError(t, err)
				}
				// The least of three measurements: a path that allocates
				// per operation allocates in all three, while a machine
				// busy with other test packages can make the transport
				// grow a buffer once in a while (a new batch when all of a
				// lane's recycled ones are queued), which is not per
				// operation.
				least := math.Inf(1)
				for range 3 {
					least = min(least, testing.AllocsPerRun(20, func() {
						res, err := f.eng.Do(ctx, op)
						if err != nil || res.Mode != mode {
							t.Fatalf("mode %v: %v (%v)", res.Mode, err, res.FallbackErr)
						}
					}))
				}
				return least
			}
			for _, mode := range []engine.Mode{engine.ModeDirect, engine.ModeGather} {
				small, large := allocs(mode, 300), allocs(mode, 3000)
				t.Logf("%v: %.1f allocs/op at 300 rows, %.1f at 3000", mode, small, large)
				require.LessOrEqual(t, large, small+1, "allocations grow with the fragment count")
				if !raceBuild() {
					require.Zero(t, large, "%v allocates per operation", mode)
				}
			}
		})
	}
}

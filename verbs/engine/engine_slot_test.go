package engine_test

import (
	"bytes"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

// TestGatherSlotReuseWhilePosting is the regression test for a staging
// slot handed to the next chunk while its own WRITEs were still being
// posted: a chunk with more destination runs than the owner's queue depth
// waits for queue space mid-post, its first WRITEs complete meanwhile, and
// the slot must not count as sent until all of them are posted. One slot,
// one lane and a destination fragmented into many runs per chunk make the
// reuse likely on every operation; the destination is compared byte for
// byte each time.
func TestGatherSlotReuseWhilePosting(t *testing.T) {
	r := verbstest.NewRand(t)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			const tableBytes = 8 << 20
			f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: 4 << 20, lanes: 1,
				service: func(c *gather.Config) { c.MaxSlots = 1 }})
			for i := range 8 {
				// ~1,500 fragments of 40-64 bytes with gaps: a 64 KiB chunk
				// holds over a thousand destination runs, far more than
				// the peer queue depth (256).
				p := mixedPlan(r, tableBytes, 1500, 64, 6, 96<<10)
				before := append([]byte(nil), f.local.Bytes()...)
				want := verbstest.Expect(p, f.table.Bytes(), 0, before, 0)
				res, err := f.eng.Do(verbstest.Context(t), f.op(verbs.OpRead, p, engine.ModeGather))
				require.NoError(t, err)
				require.Equal(t, engine.ModeGather, res.Mode, "op %d fell back: %v %v", i, res.Fallback, res.FallbackErr)
				if !bytes.Equal(want, f.local.Bytes()) {
					for j := range want {
						if want[j] != f.local.Bytes()[j] {
							t.Fatalf("op %d: destination differs first at byte %d", i, j)
						}
					}
				}
			}
			require.Zero(t, f.ownerStaging.Pool().Stats().InUse, "owner staging still leased")
		})
	}
}

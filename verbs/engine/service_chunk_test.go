package engine_test

import (
	"testing"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/planfmt"
)

// TestServiceChunkIsLeaseClass sends a command whose chunk size is not a
// power of two: the service must size its slots by the lease class that
// holds such a chunk, so the staging it holds stays within its command
// budget (taking the requested size at face value leased three 128 KiB
// classes, 384 KiB, against a 256 KiB budget).
func TestServiceChunkIsLeaseClass(t *testing.T) {
	r := verbstest.NewRand(t)
	const budget = 256 << 10
	f := newFixture(t, r, fixtureConfig{backend: backends[1], tableBytes: 1 << 20, localBytes: 1 << 20,
		service: func(c *gather.Config) { c.CommandBudget = budget; c.MaxSlots = 8 }})
	const rows = 2000
	p := rowsPlan(r, 1<<20, rows, 264, 0, 0)
	cmd := planfmt.Command{OpID: 1, Dir: planfmt.Read,
		Src:   planfmt.Window{Key: uint64(f.table.Key()), Len: p.SrcExtent},
		Dst:   planfmt.Window{Key: uint64(f.local.Key()), Len: p.DstExtent},
		Chunk: 64<<10 + 1, Pipeline: 8, Plan: *p}
	want := verbstest.Expect(p, f.table.Bytes(), 0, f.local.Bytes(), 0)
	_, err := f.conn.Call(verbstest.Context(t), gatherwire.MethodGather, encode(t, cmd), nil)
	require.NoError(t, err)
	require.Equal(t, want, f.local.Bytes())
	st := f.ownerStaging.Pool().Stats()
	require.Zero(t, st.InUse)
	require.LessOrEqual(t, st.Peak, budget, "staging peak over the command budget")
}

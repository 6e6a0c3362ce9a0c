package engine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
)

// TestGatherWriteStagingBound: a WRITE gather holds at most P leases of C
// bytes (Trace.Slots x Trace.ChunkBytes) of the requester's staging at
// once, as a READ gather does of the owner's, whatever the payload's
// number of chunks (not a power of two) and whatever the pool's smallest
// slot (larger than the model's chunk), and leaks no lease. Issue 17 found
// one lease of C x P, rounded up by the pool: 2 MiB held for P x C = 512 KiB.
func TestGatherWriteStagingBound(t *testing.T) {
	for _, be := range backends {
		if !be.exposeRegistered {
			continue // shm cannot expose a registered staging arena: WRITEs run direct
		}
		for _, minSlot := range []int{64 << 10, 256 << 10} {
			t.Run(fmt.Sprintf("%s/minslot=%dK", be.name, minSlot>>10), func(t *testing.T) {
				r := verbstest.NewRand(t)
				f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes,
					reqStaging: true, lanes: 2,
					reqPool: bufferpool.Config{Budget: 4 << 20, MinSlot: minSlot, NoHugePages: true}})
				var bound int64
				for i := range 12 {
					// 2,000 to 14,000 rows of 264 B: 0.5 to 3.5 MiB, so the
					// payload's chunk count takes many values.
					n := 2000 + r.IntN(12000)
					p := rowsPlan(r, localBytes, n, 264, 0, 0)
					res := f.run(t, verbs.OpWrite, p, engine.ModeGather)
					require.Equal(t, engine.ModeGather, res.Mode, "op %d: fallback %v: %v", i, res.Fallback, res.FallbackErr)
					pc := res.Trace.ChunkBytes * int64(res.Trace.Slots)
					require.Positive(t, pc)
					require.LessOrEqual(t, res.Trace.StagingPeak, pc, "op %d: %d rows, P %d x C %d", i, n, res.Trace.Slots, res.Trace.ChunkBytes)
					bound = max(bound, pc)
				}
				ps := f.reqStaging.Pool().Stats()
				require.LessOrEqual(t, int64(ps.Peak), bound, "the requester pool's peak")
				require.Zero(t, ps.InUse, "requester staging still leased")
				require.Zero(t, f.ownerStaging.Pool().Stats().InUse, "owner staging still leased")
			})
		}
	}
}

// TestGatherStagedFragmentedDestination: a READ whose destination is as
// fragmented as its source (shuffled slots with gaps; for rows, one row a
// token with padding between tokens, or two a token with 64-bit ids;
// some ids -1) gathers through the
// engine's staging, a call per chunk (a rows chunk sent as its carrying
// ids in the rows form): the owner answers each inline (the chunk's bytes
// in the reply; chunks no larger than the inline limit) or, with inline
// replies off, WRITEs the chunk as one run into a lease of C; the engine
// scatters it. Forced gather and ModeAuto (which may pick direct on this
// machine) both leave the right bytes, poison between the slots and in
// the -1 rows untouched; the staging stays within P x C and nothing
// leaks. Its chunks and calls in flight are the staged model's
// (costmodel.DecideStaged).
func TestGatherStagedFragmentedDestination(t *testing.T) {
	for _, be := range backends {
		if !be.exposeRegistered {
			continue // shm cannot expose a registered staging arena
		}
		for _, inline := range []int64{0, -1} {
			t.Run(fmt.Sprintf("%s/inline=%d", be.name, inline), func(t *testing.T) {
				testGatherStaged(t, be, inline)
			})
		}
	}
}

func testGatherStaged(t *testing.T, be backend, inlineMax int64) {
	r := verbstest.NewRand(t)
	f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes,
		reqStaging: true, lanes: 2, engine: engine.Config{InlineMax: inlineMax}})
	var bound int64
	for i := range 8 {
		n := 2000 + r.IntN(5000) // above the inline reply's 256 KiB: staged, not inline
		p := fragmentedPlan(r, tableBytes, n, 200, 56)
		switch i % 4 {
		case 1:
			p = stridedPlan(r, tableBytes, n, 1, 200, 56)
		case 3: // two columns, 64-bit ids
			p = stridedPlan(r, tableBytes, n/2, 2, 200, 56)
			for _, id := range p.Rows.IDs32 {
				p.Rows.IDs64 = append(p.Rows.IDs64, int64(id))
			}
			p.Rows.IDs32 = nil
		}
		for _, mode := range []engine.Mode{engine.ModeGather, engine.ModeAuto} {
			inlined := f.svc.Stats().Inline
			res := f.run(t, verbs.OpRead, p, mode)
			inlined = f.svc.Stats().Inline - inlined
			if mode == engine.ModeGather {
				require.Equal(t, engine.ModeGather, res.Mode, "op %d: fallback %v: %v", i, res.Fallback, res.FallbackErr)
				require.True(t, res.Trace.Staged, "op %d: %d fragments, not staged (inline %v)", i, n, res.Trace.Inline)
			}
			if res.Trace.Staged {
				require.False(t, res.Trace.Inline, "op %d", i)
				if inlineMax < 0 {
					require.Zero(t, inlined, "op %d: inline replies are off", i)
				} else {
					// Every call answered inline, its chunk within the limit.
					require.Equal(t, uint64(res.Trace.Waves), inlined, "op %d", i)
					require.LessOrEqual(t, res.Trace.ChunkBytes, int64(engine.DefaultInlineMax), "op %d", i)
				}
				pc := res.Trace.ChunkBytes * int64(res.Trace.Slots)
				require.LessOrEqual(t, res.Trace.StagingPeak, pc, "op %d", i)
				c := uint64(res.Trace.ChunkBytes)
				if p.Form == planfmt.FormRows {
					c -= c % p.Rows.RowSize // a rows chunk holds whole rows
				}
				require.Equal(t, (uint64(res.Bytes)+c-1)/c, uint64(res.Trace.Waves))
				bound = max(bound, pc)
				// Shaped by the staged model: its calls in
				// flight and its chunk (rounded down to a power
				// of two, at least the pool's smallest lease),
				// not the one-command pipeline's.
				_, ok := res.Decision.Staged()
				require.True(t, ok, "op %d: a staged READ decided by DecideStaged", i)
				require.LessOrEqual(t, res.Trace.Slots, max(res.Decision.Gather.P, 1), "op %d", i)
				minSlot := int64(f.reqStaging.Pool().Stats().MinSlot)
				require.LessOrEqual(t, res.Trace.ChunkBytes, max(res.Decision.Gather.C, minSlot), "op %d", i)
			}
		}
	}
	ps := f.reqStaging.Pool().Stats()
	require.LessOrEqual(t, int64(ps.Peak), bound)
	require.Zero(t, ps.InUse, "requester staging still leased")
	require.Zero(t, f.ownerStaging.Pool().Stats().InUse, "owner staging still leased")
}

// TestDirectLargeSpanPieces: a direct span longer than a piece is posted
// as pieces (so that it spreads over the connection's lanes and the
// transport's workers instead of riding one, as the cost model's S/B_net
// assumes), and lands whole.
func TestDirectLargeSpanPieces(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes, lanes: 4})
			for _, n := range []uint64{1 << 20, 1<<20 + 1, 1843200} {
				src := uint64(r.IntN(tableBytes - int(n)))
				p := &planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: tableBytes, DstExtent: n,
					Ranges: []planfmt.Range{{Src: src, Dst: 0, Len: n}}}
				res := f.run(t, verbs.OpRead, p, engine.ModeDirect)
				if res.Trace.Mapped == 0 { // a mapped (shm) direct is one copy, no requests
					require.Equal(t, int((n+(1<<20)-1)>>20), res.Trace.DirectRequests, "%d bytes", n)
				}
			}
		})
	}
}

// TestGatherChunkedRead: with Config.ChunkedRead a READ gather goes as a
// command per chunk (Trace.Waves chunks of at most C), over every plan
// form of the matrix, and lands exactly what one command would (poison
// between fragments untouched); the owner's staging is all returned.
func TestGatherChunkedRead(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes, lanes: 2,
				engine: engine.Config{ChunkedRead: true, InlineMax: -1}})
			split := 0 // gathers that went as more than one command
			for _, tp := range testPlans(r) {
				for _, mode := range []engine.Mode{engine.ModeGather, engine.ModeAuto} {
					res := f.run(t, verbs.OpRead, tp.plan, mode)
					if res.Mode != engine.ModeGather || res.Trace.Inline {
						continue
					}
					if res.Trace.Waves > 1 {
						split++
					}
					c := uint64(res.Trace.ChunkBytes)
					require.Positive(t, c, tp.name)
					if tp.plan.Form == planfmt.FormRanges || tp.plan.Rows.Layout.Kind == planfmt.LayoutContiguous {
						require.GreaterOrEqual(t, uint64(res.Trace.Waves), (res.Bytes+c-1)/c, "%s %v: %d bytes in chunks of %d", tp.name, mode, res.Bytes, c)
					}
				}
			}
			require.Positive(t, split, "no plan of the matrix went as more than one command")
			require.Zero(t, f.ownerStaging.Pool().Stats().InUse, "owner staging still leased")
		})
	}
}

// TestStagedCallCostMeasured: a staged READ's calls feed the Conn's
// per-call cost beyond their round trip, packing and bytes, which the next
// staged decisions price as T_chunk_fixed in place of the configured one.
func TestStagedCallCostMeasured(t *testing.T) {
	be := backends[1]
	r := verbstest.NewRand(t)
	f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes, reqStaging: true, lanes: 2})
	p := fragmentedPlan(r, tableBytes, 6000, 200, 56)
	var first, last time.Duration
	for i := range 5 {
		res := f.run(t, verbs.OpRead, p, engine.ModeGather)
		require.True(t, res.Trace.Staged, "op %d not staged", i)
		_, ok := res.Decision.Staged()
		require.True(t, ok)
		if i == 0 {
			first = res.Decision.Params().TChunkFixed
		}
		last = res.Decision.Params().TChunkFixed
	}
	require.Equal(t, 10*time.Microsecond, first, "nothing measured before the first staged calls: the default")
	require.Positive(t, last)
	require.NotEqual(t, first, last, "the measured per-call cost replaced the configured one")
}

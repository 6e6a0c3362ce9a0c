package engine_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

// TestAdaptiveChoice checks what ModeAuto picks under fixed link
// parameters (small requests cost 1 us each, bulk 3 GB/s, 30 us RTT) and
// the fixed test calibration. On tcp: gather for many small rows, direct
// for a few large ranges, hybrid for a mix of both. On shm the Conn maps
// the owner's table, so direct is the requester's own copy, priced as the
// local gather it is (no per-request cost): direct for all three, which
// the gather path (the same packing plus a transfer) cannot beat.
func TestAdaptiveChoice(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			mapped := be.name == "shm"
			pick := func(unmapped engine.Mode) engine.Mode {
				if mapped {
					return engine.ModeDirect
				}
				return unmapped
			}
			for _, tc := range []struct {
				name string
				plan *planfmt.Plan
				want engine.Mode
			}{
				{"many-small", rowsPlan(r, tableBytes, 6000, 264, 0, 0), pick(engine.ModeGather)},
				{"few-large", mixedPlan(r, tableBytes, 0, 0, 6, 256<<10), engine.ModeDirect},
				// Small spans of 285-300 B share one size class.
				{"mixed", mixedPlan(r, tableBytes, 3000, 300, 4, 128<<10), pick(engine.ModeHybrid)},
				// One owner's part of a lookup split over three (the rows
				// of the others -1): ~128 rows whose destinations are
				// runs of one or two rows. Small enough for an inline
				// reply, which the requester copies into the runs: no
				// WRITE per run, so gather still wins.
				{"fragmented-inline", maskedPlan(r, 384, 3), pick(engine.ModeGather)},
			} {
				t.Run(tc.name, func(t *testing.T) {
					// A fresh connection: no moving measurements yet, so the
					// decision rests on the fixed link and calibration alone.
					f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes})
					res := f.run(t, verbs.OpRead, tc.plan, engine.ModeAuto)
					require.Equal(t, tc.want, res.Chosen, "decision:\n%v\nsplit: %v", res.Decision, res.Split)
					require.Equal(t, tc.want, res.Mode)
					require.Equal(t, engine.FallbackNone, res.Fallback)
					switch tc.want {
					case engine.ModeHybrid:
						require.Equal(t, 4, res.Trace.DirectRequests, "the large ranges go direct")
						require.Positive(t, res.Trace.Chunks)
						require.NotEmpty(t, res.Split.String())
					case engine.ModeGather:
						if tc.name == "fragmented-inline" {
							require.True(t, res.Trace.Inline, "the fragmented destination's bytes came in the reply")
						}
						require.Zero(t, res.Trace.DirectRequests)
						require.Positive(t, res.Trace.Window)
						require.Positive(t, res.Trace.WindowGoodput())
						require.Contains(t, res.Decision.String(), "gather")
					case engine.ModeDirect:
						if !mapped {
							require.Equal(t, int(res.Fragments), res.Trace.DirectRequests)
							require.Zero(t, res.Trace.Mapped)
							require.Zero(t, res.Trace.Chunks)
							break
						}
						require.Zero(t, res.Trace.DirectRequests, "mapped: copies, no work requests")
						require.Equal(t, res.Bytes, res.Trace.Mapped)
						require.Positive(t, res.Trace.Window)
						require.Zero(t, res.Trace.Chunks)
						if tc.plan.Form == planfmt.FormRows {
							// The gather candidate packs the same rows and
							// then transfers them: never ahead of direct.
							require.Less(t, res.Decision.Direct.Total, res.Decision.Gather.Total, "decision:\n%v", res.Decision)
						}
					}
					st := f.eng.Stats()
					require.Equal(t, uint64(1), st.Ops)
					require.Equal(t, tc.want == engine.ModeGather, st.Gather == 1)
					require.Equal(t, tc.want == engine.ModeHybrid, st.Hybrid == 1)
					require.Equal(t, tc.want == engine.ModeDirect, st.Direct == 1)
					require.Zero(t, st.FallbackTotal)
					require.Zero(t, st.Failed)
				})
			}
		})
	}
}

// TestForcedHybrid checks a forced hybrid on a ranges plan whose split the
// cost model would not make: spans up to HybridThreshold are gathered.
func TestForcedHybrid(t *testing.T) {
	r := verbstest.NewRand(t)
	f := newFixture(t, r, fixtureConfig{backend: backends[1], tableBytes: tableBytes, localBytes: localBytes,
		link: verbs.LinkParams{Bandwidth: 3e9, PostRate: 50e6, RTT: 30e3}})
	// Few small spans: what gathering them could save (their copies,
	// spread over the owner's pack workers) stays inside the margin.
	p := mixedPlan(r, tableBytes, 40, 264, 3, 64<<10)
	auto := f.run(t, verbs.OpRead, p, engine.ModeAuto)
	require.Equal(t, engine.ModeDirect, auto.Mode, "cheap small requests: direct\n%v\n%v", auto.Decision, auto.Split)
	res := f.run(t, verbs.OpRead, p, engine.ModeHybrid)
	require.Equal(t, engine.ModeHybrid, res.Mode, "fallback %v: %v", res.Fallback, res.FallbackErr)
	require.Equal(t, 3, res.Trace.DirectRequests)
}

// TestModelFedByGathers: READ gathers on a Conn feed its moving model, from
// the second one on (the first warms both sides up): the control latency
// without the command's bytes, and, for plans of at least 16,384 spans,
// the planning and decoding cost per span, which the next decision's
// parameters then carry.
func TestModelFedByGathers(t *testing.T) {
	r := verbstest.NewRand(t)
	f := newFixture(t, r, fixtureConfig{backend: backends[1], tableBytes: tableBytes, localBytes: localBytes})
	_, ok := f.eng.Measured(f.conn)
	require.False(t, ok, "nothing measured before the first gather")
	const rows = 20_000
	p := rowsPlan(r, tableBytes, rows, 64, 0, 0)
	var slowest time.Duration // the longest round trip of the calls fed so far
	for i := range 3 {
		before, _ := f.eng.Measured(f.conn)
		res := f.run(t, verbs.OpRead, p, engine.ModeGather)
		require.Equal(t, engine.ModeGather, res.Mode, "fallback %v: %v", res.Fallback, res.FallbackErr)
		m, ok := f.eng.Measured(f.conn)
		require.True(t, ok)
		if i == 0 {
			require.Zero(t, m.ControlSamples+m.PlanSamples+m.DecodeSamples, "the first gather is not fed")
			continue
		}
		require.Equal(t, uint64(i), m.ControlSamples)
		require.Equal(t, uint64(i), m.PlanSamples)
		require.Equal(t, uint64(i), m.DecodeSamples)
		require.Positive(t, m.PlanPerSpan)
		require.Positive(t, m.DecodePerSpan)
		require.Positive(t, m.Control)
		// Each sample excludes the command's bytes at the link's rate, so
		// it is below its call's round trip; the moving figure is a
		// weighted mean of the samples, so it stays below the slowest of
		// the fed calls (not necessarily below this one's).
		slowest = max(slowest, res.Trace.Call)
		require.Less(t, m.Control, slowest)
		if i == 2 {
			// Decided before its own samples: on the figures measured so far.
			require.Equal(t, before.PlanPerSpan, res.Decision.Params().TPlanPerSpan, "the decision used the measured plan cost")
			require.Equal(t, before.DecodePerSpan, res.Decision.Params().TDecodePerSpan)
		}
	}
}

// TestDirectFeedsBandwidth: direct operations of large requests feed the
// Conn's bandwidth, which the next decisions price bytes at instead of the
// connect probe's. The link here claims 1 MB/s; loopback moves 2 MiB
// direct reads far faster, and from the second operation on the decision
// carries the measured rate. Many small requests (a request rate, not a
// bandwidth) leave it alone.
func TestDirectFeedsBandwidth(t *testing.T) {
	r := verbstest.NewRand(t)
	const claimed = 1e6
	f := newFixture(t, r, fixtureConfig{backend: backends[1], tableBytes: tableBytes, localBytes: localBytes,
		link: verbs.LinkParams{Bandwidth: claimed, PostRate: 1e6, RTT: 30 * time.Microsecond}})
	small := rowsPlan(r, tableBytes, 4096, 64, 0, 0)
	f.run(t, verbs.OpRead, small, engine.ModeDirect)
	res := f.run(t, verbs.OpRead, small, engine.ModeAuto)
	require.Equal(t, claimed, res.Decision.Params().BNet, "small requests say nothing about the bandwidth")
	const n = 4
	large := &planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: tableBytes, DstExtent: n * 512 << 10}
	for i := range n {
		large.Ranges = append(large.Ranges, planfmt.Range{Src: uint64(r.IntN(tableBytes - 512<<10)), Dst: uint64(i) * 512 << 10, Len: 512 << 10})
	}
	var seen []float64
	for range 3 {
		res := f.run(t, verbs.OpRead, large, engine.ModeDirect)
		require.Equal(t, engine.ModeDirect, res.Mode)
		auto := f.run(t, verbs.OpRead, small, engine.ModeAuto)
		seen = append(seen, auto.Decision.Params().BNet)
	}
	t.Logf("B_net after each large direct read: %v", seen)
	for _, b := range seen {
		require.Greater(t, b, 10*claimed, "decided with the measured bandwidth")
	}
}

// TestDirectFeedsItsFront: a direct operation of many requests feeds its
// time outside the window per request (its planning, posting and
// completing), which the next decisions price direct with (T_direct adds
// N*TDirectPerRequest), as a gather's decision prices its front. Before
// any direct operation there is none; the figure is a share of what the
// operation itself took beyond its window, never more.
func TestDirectFeedsItsFront(t *testing.T) {
	r := verbstest.NewRand(t)
	f := newFixture(t, r, fixtureConfig{backend: backends[1], tableBytes: tableBytes, localBytes: localBytes})
	const rows = 4096
	small := rowsPlan(r, tableBytes, rows, 64, 0, 0)
	first := f.run(t, verbs.OpRead, small, engine.ModeAuto)
	require.Zero(t, first.Decision.Params().TDirectPerRequest, "nothing measured before the first direct operation")
	var most time.Duration // the largest front per request of the direct operations so far
	for i := range 3 {
		res := f.run(t, verbs.OpRead, small, engine.ModeDirect)
		require.Equal(t, engine.ModeDirect, res.Mode)
		n := res.Trace.DirectRequests // rows, less any adjacent ones coalesced
		require.GreaterOrEqual(t, n, 256)
		// Submit to Wait: its own time (planning, launch to completion)
		// and no less.
		require.Greater(t, res.Trace.Total, res.Trace.Window)
		most = max(most, (res.Trace.Total-res.Trace.Window)/time.Duration(n))
		auto := f.run(t, verbs.OpRead, small, engine.ModeAuto)
		got := auto.Decision.Params().TDirectPerRequest
		require.Positive(t, got, "after direct operation %d", i)
		require.LessOrEqual(t, got, most, "a moving mean of the operations' own fronts")
		// The direct candidate carries it: its total is the window's
		// terms plus N*TDirectPerRequest.
		p := auto.Decision.Params()
		p.TDirectPerRequest = 0
		g := costmodel.Geometry{S: int64(auto.Bytes), N: int64(auto.Fragments), M: int64(auto.Spans)}
		require.InDelta(t, float64(costmodel.TDirect(p, g)+time.Duration(g.N)*got), float64(auto.Decision.Direct.Total), 1e3)
	}
}

// TestGatherOverlapsPackingAndWindow: the owner posts a chunk as soon as it
// is packed and packs the next while it is in flight, so for a gather of
// many chunks its first post (OwnerFill, from receiving the command)
// comes before its packing is done (Decode + Pack), and the bulk window
// (first post to last completion) is open over the later chunks' packing.
// An owner that packed the whole plan before its first post would have
// OwnerFill >= Decode + Pack and fail. (Orderings of one run's own
// durations, not speeds.)
func TestGatherOverlapsPackingAndWindow(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes,
				service: func(c *gather.Config) { c.MaxChunk = 64 << 10 }})
			p := rowsPlan(r, tableBytes, 8000, 256, 0, 0) // 2 MB: 32 chunks of 64 KiB
			for range 3 {
				res := f.run(t, verbs.OpRead, p, engine.ModeGather)
				require.Equal(t, engine.ModeGather, res.Mode, "fallback %v: %v", res.Fallback, res.FallbackErr)
				tr := res.Trace
				require.GreaterOrEqual(t, tr.Chunks, 16, "trace %v", tr)
				require.Less(t, tr.OwnerFill, tr.Decode+tr.Pack, "the first chunk went out before the packing ended: %v", tr)
				require.Greater(t, tr.Window, tr.Pack/2, "the window spans the packing of the later chunks: %v", tr)
			}
		})
	}
}

// maskedPlan is a rows plan of n random 264-byte rows with all but one in
// every keep of them -1 (at random), so the carrying rows' destinations
// are short runs: one owner's part of a plan split over keep owners.
func maskedPlan(r *rand.Rand, n, keep int) *planfmt.Plan {
	p := rowsPlan(r, tableBytes, n, 264, 0, 0)
	carrying := 0
	for i := range p.Rows.IDs32 {
		if r.IntN(keep) != 0 {
			p.Rows.IDs32[i] = -1
		} else {
			carrying++
		}
	}
	if carrying == 0 {
		p.Rows.IDs32[0] = 0
	}
	return p
}

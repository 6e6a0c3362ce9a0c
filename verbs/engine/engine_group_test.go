package engine_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/faultproxy"
	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
	"github.com/scatterkit/scatterkit/verbs/staging"
)

// shardOwner is one owner of a logical table's shard: its own transport,
// region (the shard's bytes), segment, gather service and staging, and the
// requester's connection to it (through a faultproxy on tcp).
type shardOwner struct {
	tr      verbs.Transport
	table   *verbs.Region
	seg     verbs.Segment
	staging *staging.Staging
	svc     *gather.Service
	px      *faultproxy.Proxy
	conn    verbs.Conn
	info    verbs.RegionInfo
}

// groupFixture is a logical table cut over several owners and one
// requester (transport, exposed destination, engine).
type groupFixture struct {
	logical []byte
	cuts    []uint64
	owners  []*shardOwner
	req     verbs.Transport
	local   *verbs.Region
	eng     *engine.Engine
}

func newGroupFixture(t *testing.T, r *rand.Rand, be backend, cuts []uint64, localBytes int) *groupFixture {
	t.Helper()
	g := &groupFixture{cuts: cuts, logical: make([]byte, cuts[len(cuts)-1]), req: be.new()}
	verbstest.Fill(r, g.logical)
	var err error
	g.local, err = g.req.Alloc(localBytes, verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, g.req.Close()) })
	for i := range len(cuts) - 1 {
		o := &shardOwner{tr: be.new()}
		t.Cleanup(func() { require.NoError(t, o.tr.Close()) })
		o.table, err = o.tr.Alloc(int(cuts[i+1]-cuts[i]), verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
		require.NoError(t, err)
		copy(o.table.Bytes(), g.logical[cuts[i]:cuts[i+1]])
		exports := []verbs.Export{{Name: "table", Region: o.table}}
		o.seg, err = o.tr.Listen(be.addr(), exports, verbs.ListenOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, o.seg.Close()) })
		o.staging, err = staging.New(o.tr, bufferpool.Config{Budget: 4 << 20, MinSlot: 64 << 10, NoHugePages: true}, verbs.AccessLocal)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, o.staging.Close(), "owner %d staging leaked", i) })
		o.svc, err = gather.NewService(gather.Config{Segment: o.seg, Exports: exports, Staging: o.staging,
			Calibration: &testCalibration, PackWorkers: 2, ParallelMin: 128 << 10})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, o.svc.Close()) })
		addr := o.seg.Addr()
		if be.name == "tcp" {
			o.px, err = faultproxy.New(addr, faultproxy.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, o.px.Close()) })
			addr = o.px.Addr()
		}
		o.conn, err = g.req.Connect(verbstest.Context(t), addr, verbs.ConnectOptions{Link: manySmallLink,
			Expose: []verbs.Export{{Name: "dst", Region: g.local}}})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, o.conn.Close()) })
		var ok bool
		o.info, ok = verbs.FindRegion(o.conn.Remote(), "table")
		require.True(t, ok)
		g.owners = append(g.owners, o)
	}
	g.eng, err = engine.New(engine.Config{Calibration: &testCalibration})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, g.eng.Close()) })
	return g
}

// parts cuts p over the owners (sp keeps the shards' storage).
func (g *groupFixture) parts(t *testing.T, sp *planfmt.Splitter, dir verbs.Op, p *planfmt.Plan, mode engine.Mode) []engine.ScatterOp {
	t.Helper()
	split := sp.Split // a READ's source is the owners' table
	if dir == verbs.OpWrite {
		split = sp.SplitDst // a WRITE's destination is
	}
	shards, err := split(p, g.cuts)
	require.NoError(t, err)
	parts := make([]engine.ScatterOp, len(shards))
	for i := range shards {
		o := g.owners[i]
		parts[i] = engine.ScatterOp{Conn: o.conn, Dir: dir, Remote: o.info, Local: g.local, Plan: &shards[i].Plan, Mode: mode}
	}
	return parts
}

// randomCuts cuts tableBytes into n shards of uneven sizes, on multiples
// of align (a row size for rows plans).
func randomCuts(r *rand.Rand, tableBytes uint64, n int, align uint64) []uint64 {
	units := tableBytes / align
	set := map[uint64]bool{}
	for len(set) < n-1 {
		set[1+r.Uint64N(units-1)] = true
	}
	cuts := []uint64{0, tableBytes}
	for c := range set {
		cuts = append(cuts, c*align)
	}
	slices.Sort(cuts)
	return cuts
}

// TestGroupReadsAcrossOwners reads plans whose source is a table cut over
// three owners as one group, in every mode, and checks the bytes against
// the same plan applied to the whole table, the span counts against the
// plan's, and that no owner keeps a lease.
func TestGroupReadsAcrossOwners(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			const size = 264
			tableBytes := uint64(size * 30_000)
			g := newGroupFixture(t, r, be, randomCuts(r, tableBytes, 3, size), 16<<20)
			var sp planfmt.Splitter
			var norm planfmt.Normalized
			plans := map[string]*planfmt.Plan{
				"rows":     rowsPlan(r, int(tableBytes), 20_000, size, 9, 64),
				"strided":  stridedPlan(r, int(tableBytes), 256, 24, size, 40),
				"mixed":    mixedPlan(r, int(tableBytes), 3_000, 264, 6, 256<<10),
				"one-span": {Form: planfmt.FormRanges, SrcExtent: tableBytes, DstExtent: tableBytes, Ranges: []planfmt.Range{{Src: 0, Dst: 0, Len: tableBytes}}},
			}
			plans["rows"].CompletionEnds = []uint32{5_000, 12_000, 20_000}
			for name, p := range plans {
				for _, mode := range []engine.Mode{engine.ModeAuto, engine.ModeDirect, engine.ModeGather} {
					verbstest.Fill(r, g.local.Bytes())
					want := verbstest.Expect(p, g.logical, 0, g.local.Bytes(), 0)
					res, err := g.eng.DoGroup(verbstest.Context(t), g.parts(t, &sp, verbs.OpRead, p, mode))
					require.NoError(t, err, "%s %v", name, mode)
					require.True(t, bytes.Equal(want, g.local.Bytes()), "%s %v: bytes differ from the plan over the whole table", name, mode)
					require.NoError(t, planfmt.Normalize(&norm, p))
					require.Equal(t, norm.Summary().Bytes, res.Bytes)
					require.Len(t, res.Parts, 3)
					require.Len(t, res.SpanBytes, len(norm.Completions()))
					for j, c := range norm.Completions() {
						require.Equal(t, c.Bytes, res.SpanBytes[j], "%s %v span %d", name, mode, j)
					}
					if mode == engine.ModeGather {
						for i, pr := range res.Parts {
							if pr.Bytes > 0 {
								require.Equal(t, engine.ModeGather, pr.Mode, "%s part %d: fallback %v %v", name, i, pr.Fallback, pr.FallbackErr)
							}
						}
					}
				}
			}
			for i, o := range g.owners {
				require.Eventually(t, func() bool { return o.staging.Pool().Stats().Leases == 0 }, 5*time.Second, time.Millisecond, "owner %d", i)
			}
		})
	}
}

// TestGroupWritesAcrossOwners writes a ranges plan's local bytes into a
// table cut over three owners and reads each owner's shard back.
func TestGroupWritesAcrossOwners(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			tableBytes := uint64(8 << 20)
			g := newGroupFixture(t, r, be, randomCuts(r, tableBytes, 3, 1), 16<<20)
			var sp planfmt.Splitter
			// A WRITE plan's source is the local region and its
			// destination the owners' table: ranges from random local
			// offsets into ordered table slots with gaps.
			q := mixedPlan(r, 16<<20, 2_000, 200, 4, 128<<10)
			require.Less(t, q.DstExtent, tableBytes)
			q.DstExtent = tableBytes
			for _, mode := range []engine.Mode{engine.ModeDirect, engine.ModeGather} {
				verbstest.Fill(r, g.local.Bytes())
				want := bytes.Clone(g.logical)
				for _, rg := range q.Ranges {
					copy(want[rg.Dst:rg.Dst+rg.Len], g.local.Bytes()[rg.Src:rg.Src+rg.Len])
				}
				p := q
				_, err := g.eng.DoGroup(verbstest.Context(t), g.parts(t, &sp, verbs.OpWrite, p, mode))
				require.NoError(t, err, "%v", mode)
				for i, o := range g.owners {
					require.True(t, bytes.Equal(want[g.cuts[i]:g.cuts[i+1]], o.table.Bytes()), "%v: owner %d's shard", mode, i)
				}
				copy(g.logical, want)
			}
		})
	}
}

// TestGroupInvalidStartsNothing: one invalid part refuses the whole group
// before any part moves a byte, with an error naming the part.
func TestGroupInvalidStartsNothing(t *testing.T) {
	r := verbstest.NewRand(t)
	tableBytes := uint64(264 * 10_000)
	g := newGroupFixture(t, r, backends[1], randomCuts(r, tableBytes, 3, 264), 8<<20)
	var sp planfmt.Splitter
	parts := g.parts(t, &sp, verbs.OpRead, rowsPlan(r, int(tableBytes), 5_000, 264, 0, 0), engine.ModeGather)
	before := bytes.Clone(g.local.Bytes())

	bad := slices.Clone(parts)
	bad[2].Local = nil
	_, err := g.eng.SubmitGroup(verbstest.Context(t), bad)
	var ie *engine.InvalidOpError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "parts[2].Local", ie.Field)

	bad = slices.Clone(parts)
	wrong := *bad[1].Plan
	wrong.Rows.TableRows++ // past the shard's extent
	bad[1].Plan = &wrong
	_, err = g.eng.SubmitGroup(verbstest.Context(t), bad)
	require.ErrorIs(t, err, planfmt.ErrBounds)
	require.Contains(t, err.Error(), "part 1")

	_, err = g.eng.SubmitGroup(verbstest.Context(t), nil)
	require.ErrorAs(t, err, &ie)

	require.Zero(t, g.eng.Stats().Ops, "no part ran")
	for i, o := range g.owners {
		require.Zero(t, o.svc.Stats().Reads, "owner %d served a command", i)
	}
	require.True(t, bytes.Equal(before, g.local.Bytes()))
}

// TestGroupFailsWhole: an owner whose connection is reset mid-operation,
// or that stalls past the group's deadline, fails the whole group with an
// error naming its part and only its part; the other owners' parts run to
// their end, no owner keeps a lease, and the connections to the others
// still work.
func TestGroupFailsWhole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault faultproxy.Fault
	}{
		{"reset", faultproxy.Fault{Kind: faultproxy.Reset, After: 64 << 10}},
		{"stall", faultproxy.Fault{Kind: faultproxy.Stall}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			const size = 264
			tableBytes := uint64(size * 40_000)
			g := newGroupFixture(t, r, backends[1], randomCuts(r, tableBytes, 3, size), 32<<20)
			var sp planfmt.Splitter
			p := rowsPlan(r, int(tableBytes), 60_000, size, 0, 0)
			for _, o := range g.owners { // the owners' gather capabilities, before the fault
				_, err := g.eng.Prepare(verbstest.Context(t), o.conn)
				require.NoError(t, err)
			}
			parts := g.parts(t, &sp, verbs.OpRead, p, engine.ModeAuto)
			// The fault must strike inside the victim's own traffic: a
			// random cut can leave an owner a shard of a few rows, whose
			// whole part moves less than a fixed threshold (or nothing).
			// Every payload byte of a READ comes down through its proxy.
			payload := make([]int64, len(parts))
			var candidates []int
			for v := range parts {
				for i := range parts[v].Plan.Rows.Len() {
					if parts[v].Plan.Rows.ID(i) >= 0 {
						payload[v] += size
					}
				}
				if payload[v] > 0 {
					candidates = append(candidates, v)
				}
			}
			victim := candidates[r.IntN(len(candidates))]
			fault := tc.fault
			if fault.Kind == faultproxy.Reset {
				fault.After = max(1, min(fault.After, payload[victim]/2))
			}
			require.NoError(t, g.owners[victim].px.Set(fault))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := g.eng.DoGroup(ctx, parts)
			var ge *engine.GroupError
			require.ErrorAs(t, err, &ge)
			require.Equal(t, []int{victim}, ge.Failed, "only the faulty owner's part failed: %v", err)
			require.Equal(t, victim, ge.Part)
			var oe *engine.OpError
			require.ErrorAs(t, err, &oe)
			g.owners[victim].px.Heal()
			for i, o := range g.owners {
				require.Eventually(t, func() bool { return o.staging.Pool().Stats().Leases == 0 }, 10*time.Second, time.Millisecond, "owner %d", i)
				if i == victim {
					continue
				}
				// The other owners' connections were not fenced: they serve.
				one := planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: o.info.Len, DstExtent: 1 << 20,
					Ranges: []planfmt.Range{{Src: 0, Dst: 0, Len: 4096}}}
				_, err := g.eng.Do(verbstest.Context(t), &engine.ScatterOp{Conn: o.conn, Dir: verbs.OpRead, Remote: o.info, Local: g.local, Plan: &one})
				require.NoError(t, err, "owner %d after the group failed", i)
				require.True(t, bytes.Equal(g.logical[g.cuts[i]:g.cuts[i]+4096], g.local.Bytes()[:4096]))
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Logf("the stalled part ended by the group's deadline: %v", err)
			}
		})
	}
}

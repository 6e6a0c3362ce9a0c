package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/shm"
)

var shmBackend = backends[0]

// headMajorPlan is a [K,T,R] plan: all tokens of column 0, then column 1.
func headMajorPlan(r *rand.Rand, tableBytes, tokens, k int, size uint64) *planfmt.Plan {
	p := rowsPlan(r, tableBytes, tokens*k, size, 11, 0)
	p.Rows.Layout = planfmt.Layout{Kind: planfmt.LayoutStrided, Cols: uint64(k), RowStride: size, ColStride: uint64(tokens) * size}
	p.DstExtent = uint64(tokens*k) * size
	return p
}

// mappedPlans adds layouts and sizes that take the mapped path's other
// branches: head-major and wide grids, and ranges large enough to be
// split over the copy workers.
func mappedPlans(r *rand.Rand) []struct {
	name string
	plan *planfmt.Plan
} {
	ps := testPlans(r)
	return append(ps, []struct {
		name string
		plan *planfmt.Plan
	}{
		{"rows-head-major", headMajorPlan(r, localBytes, 500, 6, 264)},
		{"rows-wide-grid", stridedPlan(r, localBytes, 3, 700, 128, 24)},
		{"rows-int64", func() *planfmt.Plan {
			p := rowsPlan(r, localBytes, 2000, 512, 6, 64)
			for _, id := range p.Rows.IDs32 {
				p.Rows.IDs64 = append(p.Rows.IDs64, int64(id))
			}
			p.Rows.IDs32 = nil
			return p
		}()},
		{"ranges-large", mixedPlan(r, localBytes, 300, 264, 12, 100<<10)},
	}...)
}

// TestMappedDirect runs direct READs and WRITEs on shm, where the Conn
// maps the owner's table: every byte matches the reference (poison
// outside the plan untouched, -1 rows skipped), no work request is
// posted, and the copy is the window. With one copy worker and with two.
func TestMappedDirect(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			for _, dir := range []verbs.Op{verbs.OpRead, verbs.OpWrite} {
				t.Run(dir.String(), func(t *testing.T) {
					r := verbstest.NewRand(t)
					f := newFixture(t, r, fixtureConfig{backend: shmBackend, tableBytes: tableBytes, localBytes: localBytes,
						engine: engine.Config{CopyWorkers: workers}})
					_, ok := f.conn.(verbs.Mapper)
					require.True(t, ok, "the shm Conn maps the owner's regions")
					for _, tp := range mappedPlans(r) {
						t.Run(tp.name, func(t *testing.T) {
							for range 2 { // fresh and reused operation state
								res := f.run(t, dir, tp.plan, engine.ModeDirect)
								require.Equal(t, engine.ModeDirect, res.Mode)
								require.Equal(t, engine.FallbackNone, res.Fallback)
								require.Zero(t, res.Trace.DirectRequests)
								require.Equal(t, res.Bytes, res.Trace.Mapped)
								require.Positive(t, res.Trace.Window)
							}
						})
					}
					st := f.eng.Stats()
					require.Zero(t, st.Failed)
					require.Equal(t, st.Ops, st.Direct)
				})
			}
		})
	}
}

// TestMappedHybridAndFallback checks the other direct parts on shm: a
// forced hybrid copies its large spans through the mapping while the
// owner gathers the small ones, and a gather that cannot run falls back
// to mapped copies.
func TestMappedHybridAndFallback(t *testing.T) {
	r := verbstest.NewRand(t)
	t.Run("hybrid", func(t *testing.T) {
		f := newFixture(t, r, fixtureConfig{backend: shmBackend, tableBytes: tableBytes, localBytes: localBytes})
		p := mixedPlan(r, localBytes, 800, 264, 3, 64<<10)
		res := f.run(t, verbs.OpRead, p, engine.ModeHybrid)
		require.Equal(t, engine.ModeHybrid, res.Mode, "fallback %v: %v", res.Fallback, res.FallbackErr)
		require.Zero(t, res.Trace.DirectRequests)
		require.Equal(t, uint64(3*64<<10), res.Trace.Mapped, "the large ranges are copied through the mapping")
		require.Positive(t, res.Trace.Chunks)
	})
	t.Run("not-exposed", func(t *testing.T) {
		f := newFixture(t, r, fixtureConfig{backend: shmBackend, tableBytes: tableBytes, localBytes: localBytes, noExpose: true})
		p := rowsPlan(r, localBytes, 2000, 264, 8, 0)
		res := f.run(t, verbs.OpRead, p, engine.ModeGather)
		require.Equal(t, engine.ModeDirect, res.Mode)
		require.Equal(t, engine.FallbackNotExposed, res.Fallback)
		require.Equal(t, res.Bytes, res.Trace.Mapped)
		require.Zero(t, res.Trace.DirectRequests)
	})
	t.Run("refused", func(t *testing.T) {
		// The owner's service limits plans to 100 fragments: it refuses
		// the command after the requester chose gather, and the hybrid's
		// gathered spans go through the mapping instead.
		f := newFixture(t, r, fixtureConfig{backend: shmBackend, tableBytes: tableBytes, localBytes: localBytes,
			service: func(c *gather.Config) { c.Limits.MaxFragments = 100 }})
		p := mixedPlan(r, localBytes, 800, 264, 3, 64<<10)
		res := f.run(t, verbs.OpRead, p, engine.ModeHybrid)
		require.Equal(t, engine.ModeDirect, res.Mode)
		require.Equal(t, engine.FallbackRefused, res.Fallback, "%v", res.FallbackErr)
		require.Equal(t, res.Bytes, res.Trace.Mapped)
		require.Zero(t, res.Trace.DirectRequests)
	})
	t.Run("post-on-mapped", func(t *testing.T) {
		f := newFixture(t, r, fixtureConfig{backend: shmBackend, tableBytes: tableBytes, localBytes: localBytes,
			engine: engine.Config{PostOnMapped: true}})
		p := rowsPlan(r, localBytes, 500, 264, 0, 0)
		res := f.run(t, verbs.OpRead, p, engine.ModeDirect)
		require.Zero(t, res.Trace.Mapped)
		// One request per coalesced span: random rows that happen to be
		// adjacent in the table and the destination merge.
		require.LessOrEqual(t, res.Spans, uint64(500))
		require.Equal(t, int(res.Spans), res.Trace.DirectRequests)
	})
}

// roFixture is an owner exporting one region read-only ("ro") and one
// read-write ("rw"), a requester region and an engine on shm.
type roFixture struct {
	ro, rw   *verbs.Region
	local    *verbs.Region
	conn     verbs.Conn
	roInfo   verbs.RegionInfo
	rwInfo   verbs.RegionInfo
	eng      *engine.Engine
	reqTrans verbs.Transport
}

func newROFixture(t *testing.T, r *rand.Rand) *roFixture {
	t.Helper()
	owner, req := shm.New(shm.Config{}), shm.New(shm.Config{})
	t.Cleanup(func() {
		require.NoError(t, owner.Close())
		require.NoError(t, req.Close())
	})
	f := &roFixture{reqTrans: req}
	var err error
	f.ro, err = owner.Alloc(1<<20, verbs.AccessRemoteRead)
	require.NoError(t, err)
	f.rw, err = owner.Alloc(1<<20, verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	verbstest.Fill(r, f.ro.Bytes())
	verbstest.Fill(r, f.rw.Bytes())
	seg, err := owner.Listen(shmBackend.addr(), []verbs.Export{{Name: "ro", Region: f.ro}, {Name: "rw", Region: f.rw}}, verbs.ListenOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, seg.Close()) })
	f.local, err = req.Alloc(1<<20, verbs.AccessLocal)
	require.NoError(t, err)
	verbstest.Fill(r, f.local.Bytes())
	f.conn, err = req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{Link: manySmallLink})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.conn.Close()) })
	f.roInfo, _ = verbs.FindRegion(f.conn.Remote(), "ro")
	f.rwInfo, _ = verbs.FindRegion(f.conn.Remote(), "rw")
	f.eng, err = engine.New(engine.Config{Calibration: &testCalibration})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.eng.Close()) })
	return f
}

// TestMappedAccess checks that the mapping grants only what the owner
// granted and is bounded by what is really mapped: a WRITE to a region
// exported read-only fails with ErrAccess even when the caller's
// RegionInfo claims write access, a READ past the mapped length fails
// with ErrBounds even when the caller's RegionInfo claims more, an
// unknown key fails with ErrBadKey; each fails before any byte moves.
func TestMappedAccess(t *testing.T) {
	r := verbstest.NewRand(t)
	f := newROFixture(t, r)
	m := f.conn.(verbs.Mapper)

	_, _, err := m.HoldMapped(f.local, f.roInfo.Key, verbs.AccessRemoteWrite)
	require.ErrorIs(t, err, verbs.ErrAccess, "a read-only region is never handed out for writing")
	local, remote, err := m.HoldMapped(f.local, f.roInfo.Key, verbs.AccessRemoteRead)
	require.NoError(t, err)
	require.Len(t, remote, int(f.roInfo.Len))
	require.True(t, bytes.Equal(f.ro.Bytes(), remote))
	require.Len(t, local, f.local.Len())
	m.ReleaseMapped()

	plan := rowsPlan(r, 1<<19, 1000, 264, 0, 0)
	ro0, rw0, local0 := bytes.Clone(f.ro.Bytes()), bytes.Clone(f.rw.Bytes()), bytes.Clone(f.local.Bytes())
	forged := f.roInfo
	forged.Access |= verbs.AccessRemoteWrite
	for _, tc := range []struct {
		name   string
		dir    verbs.Op
		remote verbs.RegionInfo
		off    uint64
		want   error
	}{
		{"write-read-only", verbs.OpWrite, forged, 0, verbs.ErrAccess},
		{"read-past-mapping", verbs.OpRead, verbs.RegionInfo{Name: "rw", Key: f.rwInfo.Key, Len: 4 << 20, Access: f.rwInfo.Access}, 1 << 20, verbs.ErrBounds},
		{"write-past-mapping", verbs.OpWrite, verbs.RegionInfo{Name: "rw", Key: f.rwInfo.Key, Len: 4 << 20, Access: f.rwInfo.Access}, 1<<20 - 1000, verbs.ErrBounds},
		{"unknown-key", verbs.OpRead, verbs.RegionInfo{Name: "x", Key: f.roInfo.Key ^ 1, Len: 1 << 20, Access: verbs.AccessRemoteRead}, 0, verbs.ErrBadKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []engine.Mode{engine.ModeDirect, engine.ModeAuto} {
				_, err := f.eng.Do(verbstest.Context(t), &engine.ScatterOp{Conn: f.conn, Dir: tc.dir, Remote: tc.remote,
					RemoteOff: tc.off, Local: f.local, Plan: plan, Mode: mode})
				var oe *engine.OpError
				require.ErrorAs(t, err, &oe)
				require.ErrorIs(t, err, tc.want)
				require.True(t, bytes.Equal(ro0, f.ro.Bytes()), "read-only region changed")
				require.True(t, bytes.Equal(rw0, f.rw.Bytes()), "read-write region changed")
				require.True(t, bytes.Equal(local0, f.local.Bytes()), "local region changed")
			}
		})
	}
	// A local region of another transport is not registered where the
	// Conn's transport can check it.
	other := shm.New(shm.Config{})
	defer func() { require.NoError(t, other.Close()) }()
	alien, err := other.Alloc(1<<20, verbs.AccessLocal)
	require.NoError(t, err)
	_, _, err = m.HoldMapped(alien, f.roInfo.Key, verbs.AccessRemoteRead)
	require.ErrorIs(t, err, verbs.ErrBadKey)
	// The engine still works: the failures held nothing.
	res, err := f.eng.Do(verbstest.Context(t), &engine.ScatterOp{Conn: f.conn, Dir: verbs.OpWrite, Remote: f.rwInfo,
		Local: f.local, Plan: plan, Mode: engine.ModeDirect})
	require.NoError(t, err)
	require.Equal(t, res.Bytes, res.Trace.Mapped)
	require.True(t, bytes.Equal(verbstest.Expect(plan, f.local.Bytes(), 0, rw0, 0), f.rw.Bytes()))
}

// TestMappedAllocs checks that a steady-state mapped direct operation
// allocates nothing: rows (contiguous and strided, READ and WRITE) and
// ranges large enough to be split over the copy workers.
func TestMappedAllocs(t *testing.T) {
	r := verbstest.NewRand(t)
	f := newFixture(t, r, fixtureConfig{backend: shmBackend, tableBytes: tableBytes, localBytes: localBytes,
		engine: engine.Config{CopyWorkers: 2}})
	for _, tc := range []struct {
		name string
		dir  verbs.Op
		plan *planfmt.Plan
		mode engine.Mode
	}{
		{"read-rows", verbs.OpRead, rowsPlan(r, localBytes, 6000, 264, 0, 0), engine.ModeDirect},
		{"read-rows-auto", verbs.OpRead, rowsPlan(r, localBytes, 6000, 264, 0, 0), engine.ModeAuto},
		{"write-strided", verbs.OpWrite, stridedPlan(r, localBytes, 1000, 4, 264, 8), engine.ModeDirect},
		{"read-ranges-large", verbs.OpRead, mixedPlan(r, localBytes, 300, 264, 12, 100<<10), engine.ModeDirect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := f.op(tc.dir, tc.plan, tc.mode)
			op.SpanBytes = make([]uint64, 0, 1)
			ctx := context.Background()
			for range 3 {
				_, err := f.eng.Do(ctx, op)
				require.NoError(t, err)
			}
			n := testing.AllocsPerRun(20, func() {
				res, err := f.eng.Do(ctx, op)
				if err != nil || res.Trace.Mapped != res.Bytes {
					t.Fatalf("%v: mapped %d of %d B", err, res.Trace.Mapped, res.Bytes)
				}
			})
			require.Zero(t, n)
		})
	}
}

// ExampleMapper shows an owner's table read through the mapping of a shm
// connection: the engine copies the rows itself, posting no work request.
func ExampleMapper() {
	owner, req := shm.New(shm.Config{}), shm.New(shm.Config{})
	defer owner.Close()
	defer req.Close()
	table, _ := owner.Alloc(64*264, verbs.AccessRemoteRead)
	for i := range table.Bytes() {
		table.Bytes()[i] = byte(i/264 + 1) // row r holds r+1
	}
	seg, _ := owner.Listen(fmt.Sprintf("@scatterkit-example-mapper-%d", shmAddrs.Add(1)),
		[]verbs.Export{{Name: "table", Region: table}}, verbs.ListenOptions{})
	defer seg.Close()
	dst, _ := req.Alloc(3*264, verbs.AccessLocal)
	conn, _ := req.Connect(context.Background(), seg.Addr(), verbs.ConnectOptions{
		Link: verbs.LinkParams{Bandwidth: 5e9, PostRate: 3e6, RTT: 20e3}})
	defer conn.Close()
	eng, _ := engine.New(engine.Config{Calibration: &testCalibration})
	defer eng.Close()

	_, mapped := conn.(verbs.Mapper)
	info, _ := verbs.FindRegion(conn.Remote(), "table")
	plan := &planfmt.Plan{Form: planfmt.FormRows, SrcExtent: info.Len, DstExtent: 3 * 264,
		Rows: planfmt.Rows{RowSize: 264, TableRows: 64, IDs32: []int32{7, 42, 3}}}
	res, err := eng.Do(context.Background(), &engine.ScatterOp{Conn: conn, Dir: verbs.OpRead, Remote: info,
		Local: dst, Plan: plan, Mode: engine.ModeDirect})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("mapped conn:", mapped)
	fmt.Println("rows:", dst.Bytes()[0], dst.Bytes()[264], dst.Bytes()[528])
	fmt.Println("copied through the mapping:", res.Trace.Mapped, "B; work requests:", res.Trace.DirectRequests)
	// Output:
	// mapped conn: true
	// rows: 8 43 4
	// copied through the mapping: 792 B; work requests: 0
}

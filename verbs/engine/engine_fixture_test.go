package engine_test

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/faultproxy"
	"github.com/scatterkit/scatterkit/verbs/shm"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

var shmAddrs atomic.Uint64

type backend struct {
	name string
	new  func() verbs.Transport
	addr func() string
	// exposeRegistered: Register'ed memory (a staging arena) may be exposed.
	exposeRegistered bool
}

var backends = []backend{
	{name: "shm", new: func() verbs.Transport { return shm.New(shm.Config{}) },
		addr: func() string {
			return fmt.Sprintf("@scatterkit-engine-test-%d-%d", time.Now().UnixNano(), shmAddrs.Add(1))
		}},
	{name: "tcp", new: func() verbs.Transport { return tcp.New(tcp.Config{}) },
		addr: func() string { return "127.0.0.1:0" }, exposeRegistered: true},
}

// testCalibration is a fixed packing calibration, so decisions do not
// depend on the machine.
var testCalibration = costmodel.Calibration{BMem: 5e9, RCopy: 8e6}

// manySmallLink makes small requests expensive: gather wins for many
// small fragments, direct for a few large ones.
var manySmallLink = verbs.LinkParams{Bandwidth: 3e9, PostRate: 1e6, RTT: 30 * time.Microsecond}

type fixtureConfig struct {
	backend    backend
	tableBytes int  // owner export "table" (remote read and write)
	localBytes int  // requester region "dst" (local, exposed unless noExpose)
	noExpose   bool // do not expose the local region
	noService  bool // no gather service on the owner
	ownerPool  bufferpool.Config
	service    func(*gather.Config)
	link       verbs.LinkParams // zero: manySmallLink
	engine     engine.Config
	reqStaging bool              // requester staging for WRITE gather (exposed where the backend allows)
	reqPool    bufferpool.Config // its pool (zero: 4 MiB, 64 KiB slots)
	lanes      int
	proxy      bool // tcp only: connect through a faultproxy (fixture.px)
}

// fixture is an owner (segment, export, gather service) and a requester
// (region, connection, engine), all closed at cleanup.
type fixture struct {
	owner, req   verbs.Transport
	seg          verbs.Segment
	table        *verbs.Region
	tableInfo    verbs.RegionInfo
	ownerStaging *staging.Staging
	svc          *gather.Service
	local        *verbs.Region
	reqStaging   *staging.Staging
	px           *faultproxy.Proxy // with fixtureConfig.proxy
	conn         verbs.Conn
	eng          *engine.Engine
}

func newFixture(t testing.TB, r *rand.Rand, cfg fixtureConfig) *fixture {
	t.Helper()
	f := &fixture{owner: cfg.backend.new(), req: cfg.backend.new()}
	t.Cleanup(func() {
		require.NoError(t, f.owner.Close())
		require.NoError(t, f.req.Close())
	})
	var err error
	f.table, err = f.owner.Alloc(cfg.tableBytes, verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	verbstest.Fill(r, f.table.Bytes())
	exports := []verbs.Export{{Name: "table", Region: f.table}}
	f.seg, err = f.owner.Listen(cfg.backend.addr(), exports, verbs.ListenOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.seg.Close()) })
	if !cfg.noService {
		pc := cfg.ownerPool
		if pc.Budget == 0 {
			pc = bufferpool.Config{Budget: 4 << 20, MinSlot: 64 << 10, NoHugePages: true}
		}
		f.ownerStaging, err = staging.New(f.owner, pc, verbs.AccessLocal)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, f.ownerStaging.Close(), "owner staging leaked") })
		sc := gather.Config{Segment: f.seg, Exports: exports, Staging: f.ownerStaging,
			Calibration: &testCalibration, PackWorkers: 2, ParallelMin: 128 << 10}
		if cfg.service != nil {
			cfg.service(&sc)
		}
		f.svc, err = gather.NewService(sc)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, f.svc.Close()) })
	}
	f.local, err = f.req.Alloc(cfg.localBytes, verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	verbstest.Fill(r, f.local.Bytes())
	opts := verbs.ConnectOptions{Link: cfg.link, Lanes: cfg.lanes}
	if opts.Link == (verbs.LinkParams{}) {
		opts.Link = manySmallLink
	}
	if !cfg.noExpose {
		opts.Expose = append(opts.Expose, verbs.Export{Name: "dst", Region: f.local})
	}
	ecfg := cfg.engine
	if ecfg.Calibration == nil {
		// Mapped direct (shm) is priced with the local calibration.
		ecfg.Calibration = &testCalibration
	}
	if cfg.reqStaging {
		rp := cfg.reqPool
		if rp.Budget == 0 {
			rp = bufferpool.Config{Budget: 4 << 20, MinSlot: 64 << 10, NoHugePages: true}
		}
		f.reqStaging, err = staging.New(f.req, rp, verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
		require.NoError(t, err)
		if cfg.backend.exposeRegistered {
			opts.Expose = append(opts.Expose, f.reqStaging.Export("staging"))
		}
		ecfg.Staging = f.reqStaging
	}
	addr := f.seg.Addr()
	if cfg.proxy {
		f.px, err = faultproxy.New(addr, faultproxy.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, f.px.Close()) })
		addr = f.px.Addr()
	}
	f.conn, err = f.req.Connect(verbstest.Context(t), addr, opts)
	require.NoError(t, err)
	if f.reqStaging != nil {
		// Registered after the connection so it closes first (exposure pin).
		t.Cleanup(func() { require.NoError(t, f.reqStaging.Close(), "requester staging leaked") })
	}
	t.Cleanup(func() { require.NoError(t, f.conn.Close()) })
	var ok bool
	f.tableInfo, ok = verbs.FindRegion(f.conn.Remote(), "table")
	require.True(t, ok)
	f.eng, err = engine.New(ecfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.eng.Close()) })
	return f
}

// op returns a ScatterOp of this fixture.
func (f *fixture) op(dir verbs.Op, p *planfmt.Plan, mode engine.Mode) *engine.ScatterOp {
	return &engine.ScatterOp{Conn: f.conn, Dir: dir, Remote: f.tableInfo, Local: f.local, Plan: p, Mode: mode}
}

// rowsPlan is a fixed-row plan of n random rows of size r from a table of
// tableBytes, about one id in skipEvery -1 (0: none), landing contiguously
// at dstBase.
func rowsPlan(r *rand.Rand, tableBytes, n int, size uint64, skipEvery int, dstBase uint64) *planfmt.Plan {
	rows := uint64(tableBytes) / size
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(int(rows)))
		if skipEvery > 0 && r.IntN(skipEvery) == 0 {
			ids[i] = -1
		}
	}
	return &planfmt.Plan{Form: planfmt.FormRows, SrcExtent: uint64(tableBytes), DstExtent: dstBase + uint64(n)*size,
		Rows: planfmt.Rows{RowSize: size, TableRows: rows, IDs32: ids, DstBase: dstBase}}
}

// stridedPlan is a [T,K,R] token-major plan with padding between tokens.
func stridedPlan(r *rand.Rand, tableBytes, tokens, k int, size, pad uint64) *planfmt.Plan {
	p := rowsPlan(r, tableBytes, tokens*k, size, 7, 0)
	p.Rows.Layout = planfmt.Layout{Kind: planfmt.LayoutStrided, Cols: uint64(k), RowStride: uint64(k)*size + pad, ColStride: size}
	p.DstExtent = uint64(tokens) * (uint64(k)*size + pad)
	return p
}

// mixedPlan is a ranges plan of small random fragments and a few large
// ones, destinations in order with gaps (so poison sits between them).
func mixedPlan(r *rand.Rand, srcBytes, small int, smallLen uint64, large int, largeLen uint64) *planfmt.Plan {
	var rs []planfmt.Range
	var dst uint64
	add := func(n uint64) {
		rs = append(rs, planfmt.Range{Src: uint64(r.IntN(srcBytes - int(n))), Dst: dst, Len: n})
		dst += n + uint64(r.IntN(3))*8
	}
	li := make(map[int]bool)
	for len(li) < large {
		li[r.IntN(small+large)] = true
	}
	for i := range small + large {
		if li[i] {
			add(largeLen)
		} else {
			add(smallLen - uint64(r.IntN(16)))
		}
	}
	return &planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: uint64(srcBytes), DstExtent: dst, Ranges: rs}
}

// fragmentedPlan is a ranges plan of n fragments of about size bytes from
// random sources, landing in shuffled slots of size+gap bytes: as many
// destination runs as fragments.
func fragmentedPlan(r *rand.Rand, srcBytes, n int, size, gap uint64) *planfmt.Plan {
	slots := r.Perm(n)
	rs := make([]planfmt.Range, n)
	for i := range rs {
		l := size - uint64(r.IntN(int(size/4)+1))
		rs[i] = planfmt.Range{Src: uint64(r.IntN(srcBytes - int(l))), Dst: uint64(slots[i]) * (size + gap), Len: l}
	}
	return &planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: uint64(srcBytes), DstExtent: uint64(n) * (size + gap), Ranges: rs}
}

// sum adds the completion span byte counts.
func sum(xs []uint64) uint64 {
	var s uint64
	for _, x := range xs {
		s += x
	}
	return s
}

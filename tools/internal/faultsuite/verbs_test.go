package faultsuite_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// verbsKind is one of the four verbs rows.
type verbsKind struct {
	dir  verbs.Op
	mode engine.Mode
}

var (
	verbsDirectRead  = verbsKind{verbs.OpRead, engine.ModeDirect}
	verbsDirectWrite = verbsKind{verbs.OpWrite, engine.ModeDirect}
	verbsGatherRead  = verbsKind{verbs.OpRead, engine.ModeGather}
	verbsGatherWrite = verbsKind{verbs.OpWrite, engine.ModeGather}
)

// Geometry of the verbs rows: the owner's table is srcBytes of READ
// source followed by windows of windowBytes, one per operation, that
// WRITEs land in (and READs land in on the requester), so bytes of a
// failed operation that arrive late never meet another operation's check.
const (
	srcBytes    = 8 << 20
	windowBytes = 3 << 20
	lanes       = 4
)

// verbsRig is an owner (segment, export, gather service, staging) and the
// requester's transport, memory and staging.
type verbsRig struct {
	kind         verbsKind
	owner, req   verbs.Transport
	table        *verbs.Region // srcBytes + windows*windowBytes
	seg          verbs.Segment
	ownerStaging *staging.Staging
	svc          *gather.Service
	local        *verbs.Region // READ: windows; WRITE: srcBytes of source
	reqStaging   *staging.Staging
	windows      int
	next         int
}

func startVerbs(kind verbsKind) func(t *testing.T, r *rand.Rand) rig {
	return func(t *testing.T, r *rand.Rand) rig {
		t.Helper()
		g := &verbsRig{kind: kind, owner: tcp.New(tcp.Config{}), req: tcp.New(tcp.Config{})}
		g.windows = trials() + 2 // the probe, the trials, the health check
		var err error
		g.table, err = g.owner.Alloc(srcBytes+g.windows*windowBytes, verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
		require.NoError(t, err)
		fill(r, g.table.Bytes())
		exports := []verbs.Export{{Name: "table", Region: g.table}}
		g.seg, err = g.owner.Listen("127.0.0.1:0", exports, verbs.ListenOptions{})
		require.NoError(t, err)
		g.ownerStaging, err = staging.New(g.owner, bufferpool.Config{Budget: 8 << 20, MinSlot: 64 << 10, NoHugePages: true}, verbs.AccessLocal)
		require.NoError(t, err)
		g.svc, err = gather.NewService(gather.Config{Segment: g.seg, Exports: exports, Staging: g.ownerStaging,
			Calibration: &testCalibration, PackWorkers: 2})
		require.NoError(t, err)
		localBytes := g.windows * windowBytes
		if kind.dir == verbs.OpWrite {
			localBytes = srcBytes
		}
		g.local, err = g.req.Alloc(localBytes, verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
		require.NoError(t, err)
		if kind.dir == verbs.OpWrite {
			g.reqStaging, err = staging.New(g.req, bufferpool.Config{Budget: 8 << 20, MinSlot: 64 << 10, NoHugePages: true},
				verbs.AccessLocal|verbs.AccessRemoteRead)
			require.NoError(t, err)
		}
		return g
	}
}

func (g *verbsRig) addr() string { return g.seg.Addr() }

// mixedPlan is a ranges plan of a few thousand small fragments and two or
// three large ones at random places of a source of srcLen bytes, their
// destinations in order with small gaps (so untouched bytes sit between
// them).
func mixedPlan(r *rand.Rand, srcLen uint64) *planfmt.Plan {
	small, large := 2000+r.IntN(2000), 2+r.IntN(2)
	isLarge := make(map[int]bool)
	for len(isLarge) < large {
		isLarge[r.IntN(small+large)] = true
	}
	rs := make([]planfmt.Range, 0, small+large)
	var dst uint64
	for i := range small + large {
		n := uint64(48 + r.IntN(217))
		if isLarge[i] {
			n = uint64(128<<10 + r.IntN(384<<10))
		}
		rs = append(rs, planfmt.Range{Src: r.Uint64N(srcLen - n), Dst: dst, Len: n})
		dst += n + uint64(r.IntN(3))*8
	}
	return &planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: srcLen, DstExtent: dst, Ranges: rs}
}

// apply copies p's fragments from src into a copy of dst.
func apply(p *planfmt.Plan, src, dst []byte) []byte {
	want := append([]byte(nil), dst...)
	for _, rg := range p.Ranges {
		copy(want[rg.Dst:rg.Dst+rg.Len], src[rg.Src:rg.Src+rg.Len])
	}
	return want
}

func (g *verbsRig) run(r *rand.Rand, addr string, h *hooks) (opErr, checkErr error) {
	slot := g.next
	g.next++
	if slot >= g.windows {
		return nil, fmt.Errorf("faultsuite: window %d of %d: more operations than the rig was sized for", slot, g.windows)
	}
	win := uint64(srcBytes + slot*windowBytes) // the owner's window (WRITE)
	p := mixedPlan(r, srcBytes)
	if p.DstExtent > windowBytes {
		return nil, fmt.Errorf("faultsuite: plan of %d bytes exceeds a window", p.DstExtent)
	}
	op := &engine.ScatterOp{Dir: g.kind.dir, Plan: p, Mode: g.kind.mode, Local: g.local}
	var dst, want []byte
	if g.kind.dir == verbs.OpRead {
		op.LocalOff = uint64(slot * windowBytes)
		dst = g.local.Bytes()[op.LocalOff : op.LocalOff+p.DstExtent]
		fill(r, dst) // poison
		want = apply(p, g.table.Bytes()[:srcBytes], dst)
	} else {
		op.RemoteOff = win
		fill(r, g.local.Bytes()) // a fresh source
		dst = g.table.Bytes()[win : win+p.DstExtent]
		fill(r, dst) // poison (nothing else touches this window)
		want = apply(p, g.local.Bytes(), dst)
	}

	setup, cancel := context.WithTimeout(context.Background(), SetupWait)
	defer cancel()
	opts := verbs.ConnectOptions{Lanes: lanes, Link: testLink, Expose: []verbs.Export{{Name: "dst", Region: g.local}}}
	ecfg := engine.Config{Calibration: &testCalibration}
	if g.reqStaging != nil {
		opts.Expose = append(opts.Expose, g.reqStaging.Export("staging"))
		ecfg.Staging = g.reqStaging
	}
	conn, err := g.req.Connect(setup, addr, opts)
	if err != nil {
		return nil, fmt.Errorf("faultsuite: connect %s: %w", addr, err)
	}
	eng, err := engine.New(ecfg)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("faultsuite: engine: %w", err), conn.Close())
	}
	defer func() {
		checkErr = errors.Join(checkErr, eng.Close(), conn.Close())
	}()
	if _, err := eng.Prepare(setup, conn); err != nil {
		return nil, fmt.Errorf("faultsuite: gather info: %w", err)
	}
	tbl, ok := verbs.FindRegion(conn.Remote(), "table")
	if !ok {
		return nil, errors.New("faultsuite: no table export")
	}
	op.Conn, op.Remote = conn, tbl

	ctx, end := h.begin()
	res, err := eng.Do(ctx, op)
	end()
	if err != nil {
		return err, nil
	}
	if res.Mode != g.kind.mode && res.Fallback == engine.FallbackNone {
		return nil, fmt.Errorf("faultsuite: ran %v, forced %v, no fallback", res.Mode, g.kind.mode)
	}
	return nil, diffBytes(fmt.Sprintf("%v %v destination (ran %v, fallback %v)", g.kind.mode, g.kind.dir, res.Mode, res.Fallback), dst, want)
}

func (g *verbsRig) held() string {
	if st := g.ownerStaging.Pool().Stats(); st.Leases > 0 {
		return fmt.Sprintf("owner staging: %d leases (%d bytes) held", st.Leases, st.InUse)
	}
	return ""
}

func (g *verbsRig) settle(wait time.Duration) error {
	return settleLeases(wait, func() string {
		s := ""
		if n := g.ownerStaging.Pool().Stats().Leases; n > 0 {
			s = fmt.Sprintf("owner staging: %d leases (%d bytes) held", n, g.ownerStaging.Pool().Stats().InUse)
		}
		if g.reqStaging != nil {
			if n := g.reqStaging.Pool().Stats().Leases; n > 0 {
				s += fmt.Sprintf(" requester staging: %d leases held", n)
			}
		}
		return s
	})
}

func (g *verbsRig) close() error {
	st := g.svc.Stats()
	errs := []error{g.svc.Close(), g.seg.Close(), g.ownerStaging.Close()}
	if g.reqStaging != nil {
		errs = append(errs, g.reqStaging.Close())
	}
	errs = append(errs, g.req.Close(), g.owner.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("verbs owner (service: %d reads, %d writes, %d refused, %d exhausted, %d aborted): %w",
			st.Reads, st.Writes, st.Refused, st.Exhausted, st.Aborted, err)
	}
	return nil
}

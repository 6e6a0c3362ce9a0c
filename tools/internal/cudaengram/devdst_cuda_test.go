//go:build cuda

package cudaengram

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/cudagather"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/staging"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// TestScatterIntoDevice reads plans from an owner over tcp into device
// memory (Engine.DoDevice through a pinned bounce region into a
// cudagather.DeviceBuffer) in every mode and checks the device bytes,
// read back, against the plan applied on the host: -1 rows and the bytes
// between destinations keep the device's earlier contents.
func TestScatterIntoDevice(t *testing.T) {
	c := newContext(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const tableBytes = 16 << 20
	const window, depth = 1 << 20, 3
	o := newScatterOwner(t, ctx, c, r, tableBytes, window*depth)
	table, bounce, conn, info, eng := o.table, o.bounce, o.conn, o.info, o.eng

	const R = 264
	ids := make([]int32, 30_000)
	for i := range ids {
		ids[i] = int32(r.IntN(tableBytes / R))
		if r.IntN(20) == 0 {
			ids[i] = -1
		}
	}
	plans := map[string]*planfmt.Plan{
		"rows": {Form: planfmt.FormRows, SrcExtent: tableBytes, DstExtent: uint64(len(ids)) * R,
			Rows: planfmt.Rows{RowSize: R, TableRows: tableBytes / R, IDs32: ids}},
		"head-major": {Form: planfmt.FormRows, SrcExtent: tableBytes, DstExtent: uint64(len(ids)) * R,
			Rows: planfmt.Rows{RowSize: R, TableRows: tableBytes / R, IDs32: ids,
				Layout: planfmt.Layout{Kind: planfmt.LayoutStrided, Cols: 24, RowStride: R, ColStride: uint64(len(ids)/24) * R}}},
	}
	for name, p := range plans {
		for _, mode := range []engine.Mode{engine.ModeDirect, engine.ModeGather, engine.ModeAuto} {
			n := int64(p.DstExtent)
			buf, err := c.NewDeviceBuffer(n, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Memset(buf.Ptr(), 0xab, n, 0); err != nil {
				t.Fatal(err)
			}
			if err := c.Sync(0); err != nil {
				t.Fatal(err)
			}
			want := bytes.Repeat([]byte{0xab}, int(n))
			for i, id := range ids {
				if id < 0 {
					continue
				}
				at := uint64(i) * R
				if p.Rows.Layout.Kind == planfmt.LayoutStrided {
					tk, col := uint64(i)/24, uint64(i)%24
					at = tk*R + col*p.Rows.Layout.ColStride
				}
				copy(want[at:at+R], table.Bytes()[uint64(id)*R:uint64(id+1)*R])
			}
			res, err := eng.DoDevice(ctx, &engine.DeviceOp{
				Op:     engine.ScatterOp{Conn: conn, Dir: verbs.OpRead, Remote: info, Local: bounce, Plan: p, Mode: mode},
				Device: buf, Window: window, Depth: depth})
			if err != nil {
				t.Fatalf("%s %v: %v", name, mode, err)
			}
			got := make([]byte, n)
			if err := c.CopyOut(got, buf.Ptr()); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want, got) {
				t.Fatalf("%s %v: device bytes differ from the host path's", name, mode)
			}
			t.Logf("%s %v: %d pieces, %d B, chose %v, copy wait %v, total %v", name, mode, res.Pieces, res.Bytes, res.Chosen,
				res.CopyWait, res.Trace.Total)
			if err := buf.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// scatterOwner is an owner of a random table over tcp with a gather
// service, and a requester connected to it with a pinned bounce region
// exposed, an engine, and the table's region info.
type scatterOwner struct {
	table, bounce *verbs.Region
	conn          verbs.Conn
	info          verbs.RegionInfo
	eng           *engine.Engine
	reqT          verbs.Transport
}

func newScatterOwner(tb testing.TB, ctx context.Context, c *cudagather.Context, r *rand.Rand, tableBytes, bounceBytes int) *scatterOwner {
	tb.Helper()
	ownerT, reqT := tcp.New(tcp.Config{}), tcp.New(tcp.Config{})
	tb.Cleanup(func() { ownerT.Close() })
	tb.Cleanup(func() { reqT.Close() })
	table, err := ownerT.Alloc(tableBytes, verbs.AccessRemoteRead)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range table.Bytes() {
		table.Bytes()[i] = byte(r.Uint32())
	}
	exports := []verbs.Export{{Name: "table", Region: table}}
	seg, err := ownerT.Listen("127.0.0.1:0", exports, verbs.ListenOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { seg.Close() })
	st, err := staging.New(ownerT, bufferpool.Config{Budget: 8 << 20, MinSlot: 64 << 10, NoHugePages: true}, verbs.AccessLocal)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	svc, err := gather.NewService(gather.Config{Segment: seg, Exports: exports, Staging: st})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { svc.Close() })
	bounce, err := reqT.Alloc(bounceBytes, verbs.AccessLocal|verbs.AccessRemoteWrite)
	if err != nil {
		tb.Fatal(err)
	}
	unpin, err := c.PinHost(bounce.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := unpin(); err != nil {
			tb.Error(err)
		}
	})
	conn, err := reqT.Connect(ctx, seg.Addr(), verbs.ConnectOptions{Expose: []verbs.Export{{Name: "bounce", Region: bounce}}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	info, _ := verbs.FindRegion(conn.Remote(), "table")
	eng, err := engine.New(engine.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { eng.Close() })
	return &scatterOwner{table: table, bounce: bounce, conn: conn, info: info, eng: eng, reqT: reqT}
}

// BenchmarkScatterIntoDevice measures issue 21's scatter goal: many-small
// (98,304 random 264-byte rows of a 256 MiB table) read over tcp into
// device memory (Engine.DoDevice, the default window and depth) against
// the same READ into registered host memory, alternating in the same
// repetitions, adaptive mode; it logs the medians, the goodputs and the
// ratio (goal >= 0.9), and the device path's pieces and copy wait.
func BenchmarkScatterIntoDevice(b *testing.B) {
	c := newContext(b)
	r := rand.New(rand.NewPCG(rand.Uint64(), 5))
	ctx := context.Background()
	const tableBytes, R, N = 256 << 20, 264, 98_304
	window, depth := uint64(engine.DefaultDeviceWindow), engine.DefaultDeviceDepth
	hostOff := window * uint64(depth)
	o := newScatterOwner(b, ctx, c, r, tableBytes, int(hostOff)+N*R)
	s, err := c.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer c.DestroyStream(s)
	buf, err := c.NewDeviceBuffer(N*R, s)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	ids := make([]int32, N)
	p := &planfmt.Plan{Form: planfmt.FormRows, SrcExtent: tableBytes, DstExtent: N * R,
		Rows: planfmt.Rows{RowSize: R, TableRows: tableBytes / R, IDs32: ids}}
	const reps = 40
	var dev, host []time.Duration
	var pieces int
	var wait time.Duration
	for i := range reps + 5 {
		for j := range ids {
			ids[j] = int32(r.IntN(tableBytes / R))
		}
		t0 := time.Now()
		res, err := o.eng.DoDevice(ctx, &engine.DeviceOp{
			Op:     engine.ScatterOp{Conn: o.conn, Dir: verbs.OpRead, Remote: o.info, Local: o.bounce, Plan: p},
			Device: buf})
		if err != nil {
			b.Fatal(err)
		}
		d1 := time.Since(t0)
		t0 = time.Now()
		if _, err := o.eng.Do(ctx, &engine.ScatterOp{Conn: o.conn, Dir: verbs.OpRead, Remote: o.info, Local: o.bounce, LocalOff: hostOff, Plan: p}); err != nil {
			b.Fatal(err)
		}
		d2 := time.Since(t0)
		if i >= 5 {
			dev, host = append(dev, d1), append(host, d2)
			pieces, wait = res.Pieces, wait+res.CopyWait
		}
	}
	slices.Sort(dev)
	slices.Sort(host)
	m1, m2 := dev[reps/2], host[reps/2]
	gbps := func(d time.Duration) float64 { return float64(N*R) * 8 / d.Seconds() / 1e9 }
	b.Logf("scatter-device many-small N=%d R=%d tcp: into device p50 %v (%.1f Gbit/s, %d pieces, copy wait %v a READ), into host p50 %v (%.1f Gbit/s): ratio %.3f (goal >= 0.9)",
		N, R, m1, gbps(m1), pieces, wait/reps, m2, gbps(m2), float64(m2)/float64(m1))
	b.ReportMetric(0, "ns/op")
}

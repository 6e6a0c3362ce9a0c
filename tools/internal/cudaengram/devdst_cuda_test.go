//go:build cuda

package cudaengram

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
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
	c, err := cudagather.NewContext(0)
	if err != nil {
		if os.Getenv("REQUIRE_CUDA") == "1" {
			t.Fatalf("REQUIRE_CUDA=1: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ownerT, reqT := tcp.New(tcp.Config{}), tcp.New(tcp.Config{})
	defer ownerT.Close()
	defer reqT.Close()
	const tableBytes = 16 << 20
	table, err := ownerT.Alloc(tableBytes, verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	for i := range table.Bytes() {
		table.Bytes()[i] = byte(r.Uint32())
	}
	exports := []verbs.Export{{Name: "table", Region: table}}
	seg, err := ownerT.Listen("127.0.0.1:0", exports, verbs.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	st, err := staging.New(ownerT, bufferpool.Config{Budget: 8 << 20, MinSlot: 64 << 10, NoHugePages: true}, verbs.AccessLocal)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := gather.NewService(gather.Config{Segment: seg, Exports: exports, Staging: st})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	const window, depth = 1 << 20, 3
	bounce, err := reqT.Alloc(window*depth, verbs.AccessLocal|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	unpin, err := c.PinHost(bounce.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unpin(); err != nil {
			t.Error(err)
		}
	}()
	conn, err := reqT.Connect(ctx, seg.Addr(), verbs.ConnectOptions{Expose: []verbs.Export{{Name: "bounce", Region: bounce}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	info, _ := verbs.FindRegion(conn.Remote(), "table")
	eng, err := engine.New(engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

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

package engine_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// A gather READ: the owner serves a table with a gather service; the
// requester exposes its destination and reads four rows (one skipped) in
// one operation. The owner packs the rows into staging and writes them to
// the destination in bulk.
func ExampleEngine_Do() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const rowBytes = 264

	// Owner: a table of 1,000 rows, its segment, staging and gather service.
	owner := tcp.New(tcp.Config{})
	defer owner.Close()
	table, err := owner.Alloc(1000*rowBytes, verbs.AccessRemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	for _, row := range []int{3, 42, 977} {
		copy(table.Bytes()[row*rowBytes:], fmt.Sprintf("row %d", row))
	}
	exports := []verbs.Export{{Name: "table", Region: table}}
	seg, err := owner.Listen("127.0.0.1:0", exports, verbs.ListenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer seg.Close()
	staging, err := staging.New(owner, bufferpool.Config{Budget: 1 << 20}, verbs.AccessLocal)
	if err != nil {
		log.Fatal(err)
	}
	defer staging.Close()
	svc, err := gather.NewService(gather.Config{Segment: seg, Exports: exports, Staging: staging,
		Calibration: &costmodel.Calibration{BMem: 5e9, RCopy: 5e6}}) // nil would measure
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()

	// Requester: a destination exposed on the connection, so the owner
	// may write into it.
	req := tcp.New(tcp.Config{})
	defer req.Close()
	dst, err := req.Alloc(4*rowBytes, verbs.AccessLocal|verbs.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := req.Connect(ctx, seg.Addr(), verbs.ConnectOptions{Expose: []verbs.Export{{Name: "out", Region: dst}}})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	eng, err := engine.New(engine.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	remote, _ := verbs.FindRegion(conn.Remote(), "table")
	plan := &planfmt.Plan{Form: planfmt.FormRows, SrcExtent: remote.Len, DstExtent: 4 * rowBytes,
		Rows: planfmt.Rows{RowSize: rowBytes, TableRows: 1000, IDs32: []int32{977, 3, -1, 42}}}
	res, err := eng.Do(ctx, &engine.ScatterOp{Conn: conn, Dir: verbs.OpRead, Remote: remote, Local: dst,
		Plan: plan, Mode: engine.ModeGather})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v: %d bytes in %d fragments, %d gather chunk(s)\n", res.Mode, res.Bytes, res.Fragments, res.Trace.Chunks)
	for i := range 4 {
		fmt.Printf("slot %d: %q\n", i, string(dst.Bytes()[i*rowBytes:i*rowBytes+7]))
	}
	// Output:
	// gather: 792 bytes in 3 fragments, 1 gather chunk(s)
	// slot 0: "row 977"
	// slot 1: "row 3\x00\x00"
	// slot 2: "\x00\x00\x00\x00\x00\x00\x00"
	// slot 3: "row 42\x00"
}

package verbs_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// Register memory, export it as a segment, connect, post a batch of
// READs and wait for their completions.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The owner exports a table of 264-byte rows.
	owner := tcp.New(tcp.Config{})
	defer owner.Close()
	table, err := owner.Alloc(1<<20, verbs.AccessRemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	copy(table.Bytes()[7*264:], "row seven")
	copy(table.Bytes()[3*264:], "row three")
	seg, err := owner.Listen("127.0.0.1:0", []verbs.Export{{Name: "table", Region: table}}, verbs.ListenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer seg.Close()

	// The requester registers its destination and connects.
	req := tcp.New(tcp.Config{})
	defer req.Close()
	dst, err := req.Register(make([]byte, 2*264), verbs.AccessLocal)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := req.Connect(ctx, seg.Addr(), verbs.ConnectOptions{Lanes: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	tbl, _ := verbs.FindRegion(conn.Remote(), "table")

	// One batch: rows 7 and 3 into consecutive destination slots.
	wrs := []verbs.WorkRequest{
		{ID: 1, Op: verbs.OpRead, Len: 264, LocalKey: dst.Key(), LocalOff: 0, RemoteKey: tbl.Key, RemoteOff: 7 * 264},
		{ID: 2, Op: verbs.OpRead, Len: 264, LocalKey: dst.Key(), LocalOff: 264, RemoteKey: tbl.Key, RemoteOff: 3 * 264},
	}
	if _, err := conn.Post(wrs); err != nil {
		log.Fatal(err)
	}
	cs := make([]verbs.Completion, len(wrs))
	for done := 0; done < len(wrs); {
		n, err := conn.Wait(ctx, cs[done:], len(wrs)-done)
		if err != nil {
			log.Fatal(err)
		}
		done += n
	}
	for _, c := range cs {
		if c.Err != nil {
			log.Fatal(c.Err)
		}
	}
	fmt.Println(string(dst.Bytes()[:9]), "/", string(dst.Bytes()[264:273]))
	// Output: row seven / row three
}

// A control call whose handler WRITEs into a region the requester
// exposed: the bytes are in place when Call returns. This is the shape of
// an owner-side gather service.
func Example_call() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	owner := tcp.New(tcp.Config{})
	defer owner.Close()
	staging, _ := owner.Alloc(4096, verbs.AccessLocal)
	table, _ := owner.Alloc(4096, verbs.AccessRemoteRead)
	seg, err := owner.Listen("127.0.0.1:0", []verbs.Export{{Name: "table", Region: table}}, verbs.ListenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer seg.Close()
	const methodGather = 1
	seg.Handle(methodGather, verbs.HandlerFunc(func(ctx context.Context, p verbs.Peer, req, resp []byte) ([]byte, error) {
		out, ok := verbs.FindRegion(p.Remote(), "out")
		if !ok {
			return nil, errors.New("no output region exposed")
		}
		n := copy(staging.Bytes(), "packed: "+string(req)) // pack
		wr := verbs.WorkRequest{ID: 1, Op: verbs.OpWrite, Len: uint32(n), LocalKey: staging.Key(), RemoteKey: out.Key}
		if _, err := p.Post([]verbs.WorkRequest{wr}); err != nil {
			return nil, err
		}
		cs := make([]verbs.Completion, 1)
		if _, err := p.Wait(ctx, cs, 1); err != nil {
			return nil, err
		}
		if cs[0].Err != nil {
			return nil, cs[0].Err
		}
		return fmt.Appendf(resp, "%d", n), nil
	}))

	req := tcp.New(tcp.Config{})
	defer req.Close()
	out, _ := req.Alloc(4096, verbs.AccessRemoteWrite|verbs.AccessLocal)
	conn, err := req.Connect(ctx, seg.Addr(), verbs.ConnectOptions{Expose: []verbs.Export{{Name: "out", Region: out}}})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	resp, err := conn.Call(ctx, methodGather, []byte("rows 1,5,9"), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s bytes: %s\n", resp, out.Bytes()[:18])
	// Output: 18 bytes: packed: rows 1,5,9
}

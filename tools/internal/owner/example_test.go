package owner_test

import (
	"context"
	"fmt"
	"log"

	"github.com/scatterkit/scatterkit/tools/internal/owner"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// Serve 4 MiB of generated data, find it by name, and read a row of it.
func Example() {
	ctx := context.Background()
	dir := discovery.NewMemory()
	defer dir.Close()
	o, err := owner.Start(ctx, owner.Config{Transport: owner.TransportTCP, Size: 4 << 20, Seed: 9,
		StagingBytes: 1 << 20, Directory: dir, Name: "example/table"})
	if err != nil {
		log.Fatal(err)
	}
	rec, err := dir.Lookup(ctx, "example/table")
	if err != nil {
		log.Fatal(err)
	}

	req := tcp.New(tcp.Config{})
	dst, _ := req.Alloc(264, verbs.AccessLocal)
	conn, err := req.Connect(ctx, rec.Addr, verbs.ConnectOptions{})
	if err != nil {
		log.Fatal(err)
	}
	table, _ := verbs.FindRegion(conn.Remote(), "table")
	wr := []verbs.WorkRequest{{ID: 1, Op: verbs.OpRead, Len: 264, LocalKey: dst.Key(), RemoteKey: table.Key, RemoteOff: 264 * 1000}}
	if _, err := conn.Post(wr); err != nil {
		log.Fatal(err)
	}
	cs := make([]verbs.Completion, 1)
	if _, err := conn.Wait(ctx, cs, 1); err != nil || cs[0].Err != nil {
		log.Fatal(err, cs[0].Err)
	}
	fmt.Println("row 1000 matches the seed's stream:", pattern.Check(dst.Bytes(), 9, 264*1000) == -1)

	conn.Close()
	req.Close()
	rep, err := o.Close()
	fmt.Println("leaked leases:", rep.LeakedLeases, err)
	// Output:
	// row 1000 matches the seed's stream: true
	// leaked leases: 0 <nil>
}

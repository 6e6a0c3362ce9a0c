//go:build linux

package shm_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/shm"
)

// Exports must be Alloc'ed (memfd) so the requester can map them; a READ
// is then a validated copy made inside Post.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := fmt.Sprintf("@scatterkit-example-%d", os.Getpid())

	owner := shm.New(shm.Config{})
	defer owner.Close()
	table, err := owner.Alloc(1<<20, verbs.AccessRemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	copy(table.Bytes()[4096:], "hello from the owner")
	seg, err := owner.Listen(addr, []verbs.Export{{Name: "table", Region: table}}, verbs.ListenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer seg.Close()

	req := shm.New(shm.Config{})
	defer req.Close()
	dst, err := req.Register(make([]byte, 64), verbs.AccessLocal) // local side only: Register is fine
	if err != nil {
		log.Fatal(err)
	}
	conn, err := req.Connect(ctx, addr, verbs.ConnectOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	tbl, _ := verbs.FindRegion(conn.Remote(), "table")
	n, err := conn.Post([]verbs.WorkRequest{{ID: 42, Op: verbs.OpRead, Len: 20, LocalKey: dst.Key(), RemoteKey: tbl.Key, RemoteOff: 4096}})
	if err != nil {
		log.Fatal(err)
	}
	cs := make([]verbs.Completion, 1)
	if _, err := conn.Poll(cs); err != nil { // already complete: shm copies inside Post
		log.Fatal(err)
	}
	fmt.Println(n, cs[0].ID, cs[0].Status, string(dst.Bytes()[:20]))
	// Output: 1 42 ok hello from the owner
}

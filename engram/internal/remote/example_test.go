package remote_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/scatterkit/scatterkit/verbs/gather"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/engram/internal/lookup"
	"github.com/scatterkit/scatterkit/engram/internal/remote"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// An owner serves two tables of 8-byte rows; a client looks up a [T=2,
// K=3] id array (two columns from one table, one from the other, with an
// offset and a skipped id) into a token-major output leased from its
// registered arena.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The owner: rows "emb-0000", "emb-0001", ... and "ngr-0000", ...
	rows := func(prefix string, n int) []byte {
		var b []byte
		for i := range n {
			b = fmt.Appendf(b, "%s-%04d", prefix, i)
		}
		return b
	}
	ownerTr := tcp.New(tcp.Config{})
	defer ownerTr.Close()
	srv, err := remote.Serve(remote.ServerConfig{Transport: ownerTr, Addr: "127.0.0.1:0", Namespace: "demo",
		Tables: []remote.Table{
			{Name: "emb", NumRows: 100, RowBytes: 8, Rows: rows("emb", 100)},
			{Name: "ngram", NumRows: 50, RowBytes: 8, Rows: rows("ngr", 50)},
		},
		StagingBytes: 1 << 20,
		Gather:       gather.Config{Calibration: &costmodel.Calibration{BMem: 5e9, RCopy: 5e6}}})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	// The client.
	reqTr := tcp.New(tcp.Config{})
	defer reqTr.Close()
	cli, err := remote.Dial(ctx, remote.ClientConfig{Transport: reqTr, Addr: srv.Addr(), Namespace: "demo", OutputBytes: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	const T, K, R = 2, 3, 8
	out, err := cli.NewOutput(T * K * R)
	if err != nil {
		log.Fatal(err)
	}
	defer out.Release()
	copy(out.Bytes(), "........................................................")

	req := &lookup.Request{
		Tables:  []string{"emb", "ngram", "emb"},
		Offsets: []int64{0, 1000, 0}, // ngram ids are global: 1000 + row
		IDs32:   []int32{7, 1003, 42, 99, 1049, -1},
		T:       T, K: K,
		Out: out.Bytes(), TStride: K * R, KStride: R, // token-major [T,K,R]
	}
	if err := remote.Lookup(ctx, cli, req); err != nil {
		log.Fatal(err)
	}
	for t := range T {
		fmt.Printf("token %d: %s\n", t, out.Bytes()[t*K*R:(t+1)*K*R])
	}
	fmt.Println("operations:", cli.Stats().Ops)
	// Output:
	// token 0: emb-0007ngr-0003emb-0042
	// token 1: emb-0099ngr-0049........
	// operations: 2
}

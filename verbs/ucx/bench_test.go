//go:build ucx

package ucx_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
)

// BenchmarkLarge moves 64 x 512 KiB per operation from the requester over
// UCX_TLS=tcp: READs (gets) and WRITEs (puts, flushed) posted in one
// batch, and WRITEs posted one at a time with 8 in flight (each Post
// flushed on its own), as the gather service posts its chunks: the two
// directions of a gather's bulk.
func BenchmarkLarge(b *testing.B) {
	for _, tc := range []struct {
		name  string
		op    verbs.Op
		each  bool
		depth int
	}{{"read", verbs.OpRead, false, 0}, {"write", verbs.OpWrite, false, 0},
		{"write-each", verbs.OpWrite, true, 8}, {"write-each-1", verbs.OpWrite, true, 1}, {"read-each-1", verbs.OpRead, true, 1}} {
		b.Run(tc.name, func(b *testing.B) {
			be := backend(&testing.T{}, "tcp")
			b.Setenv("UCX_TLS", "tcp")
			b.Setenv("UCX_NET_DEVICES", "lo")
			r := verbstest.NewRand(b)
			const count, size = 64, 512 << 10
			p, _ := be.NewPair(b, r, verbstest.PairConfig{Exports: []verbstest.RegionSpec{{Name: "table", Size: 64 << 20, Access: verbs.AccessRemoteRead | verbs.AccessRemoteWrite}}})
			local, err := p.Req.Alloc(count*size, verbs.AccessLocal)
			require.NoError(b, err)
			key := verbstest.RemoteKey(b, p.Conn, "table")
			wrs := make([]verbs.WorkRequest, count)
			for i := range wrs {
				wrs[i] = verbs.WorkRequest{ID: uint64(i), Op: tc.op, Len: size, LocalKey: local.Key(),
					LocalOff: uint64(i) * size, RemoteKey: key, RemoteOff: uint64(i) * size}
			}
			cs := make([]verbs.Completion, count)
			ctx := context.Background()
			b.SetBytes(count * size)
			b.ResetTimer()
			for range b.N {
				if !tc.each {
					if _, err := verbstest.Drive(ctx, p.Conn, wrs, cs); err != nil {
						b.Fatal(err)
					}
					continue
				}
				posted, done := 0, 0
				for done < count {
					for posted < count && posted-done < tc.depth {
						n, err := p.Conn.Post(wrs[posted : posted+1])
						require.NoError(b, err)
						posted += n
					}
					n, err := p.Conn.Wait(ctx, cs, 1)
					require.NoError(b, err)
					done += n
				}
			}
		})
	}
}

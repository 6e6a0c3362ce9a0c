//go:build ucx

package ucx_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
)

// BenchmarkLarge moves 64 x 512 KiB per operation from the requester with
// READs (gets) and with WRITEs (puts, flushed), over UCX_TLS=tcp: the two
// directions of a gather's bulk.
func BenchmarkLarge(b *testing.B) {
	for _, op := range []verbs.Op{verbs.OpRead, verbs.OpWrite} {
		name := map[verbs.Op]string{verbs.OpRead: "read", verbs.OpWrite: "write"}[op]
		b.Run(name, func(b *testing.B) {
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
				wrs[i] = verbs.WorkRequest{ID: uint64(i), Op: op, Len: size, LocalKey: local.Key(),
					LocalOff: uint64(i) * size, RemoteKey: key, RemoteOff: uint64(i) * size}
			}
			cs := make([]verbs.Completion, count)
			b.SetBytes(count * size)
			b.ResetTimer()
			for range b.N {
				if _, err := verbstest.Drive(context.Background(), p.Conn, wrs, cs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package verbstest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

// The RFC's workloads.
const (
	SmallRows  = 98304
	SmallBytes = 264
	LargeCount = 64
	LargeBytes = 512 << 10
	tableBytes = 64 << 20
)

// BenchRead measures count READs of size bytes from random offsets of a
// 64 MiB owner table into one contiguous local buffer, all posted in
// batches as the queue depth allows, per operation.
func BenchRead(b *testing.B, be Backend, opts verbs.ConnectOptions, count int, size uint32) {
	r := NewRand(b)
	p, _ := be.NewPair(b, r, PairConfig{Exports: []RegionSpec{{"table", tableBytes, verbs.AccessRemoteRead}}, Connect: opts})
	local, err := p.Req.Alloc(count*int(size), verbs.AccessLocal)
	require.NoError(b, err)
	key := RemoteKey(b, p.Conn, "table")
	rows := tableBytes / int(size)
	wrs := make([]verbs.WorkRequest, count)
	for i := range wrs {
		wrs[i] = verbs.WorkRequest{ID: uint64(i), Op: verbs.OpRead, Len: size, LocalKey: local.Key(),
			LocalOff: uint64(i) * uint64(size), RemoteKey: key, RemoteOff: uint64(r.IntN(rows)) * uint64(size)}
	}
	cs := make([]verbs.Completion, 4096)
	ctx := context.Background()
	run := func() {
		posted, done := 0, 0
		for done < count {
			if posted < count {
				n, _ := p.Conn.Post(wrs[posted:])
				posted += n
			}
			n, err := p.Conn.Wait(ctx, cs, 1)
			if err != nil {
				b.Fatal(err)
			}
			for _, c := range cs[:n] {
				if c.Err != nil {
					b.Fatal(c.Err)
				}
			}
			done += n
		}
	}
	run() // warm: page faults, socket buffers
	b.SetBytes(int64(count) * int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(count)*float64(b.N)/b.Elapsed().Seconds(), "frags/s")
	b.ReportMetric(float64(count)*float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	lp := p.Conn.LinkParams()
	b.ReportMetric(lp.Bandwidth/1e9, "probe-GB/s")
}

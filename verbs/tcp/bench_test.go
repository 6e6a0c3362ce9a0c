package tcp_test

import (
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// BenchmarkReadSmall is the RFC's many-small workload: 98,304 READs of
// 264 B from random rows, posted in batches.
func BenchmarkReadSmall(b *testing.B) {
	for _, lanes := range []int{1, 4} {
		for _, depth := range []int{4096, 16384} {
			b.Run(fmt.Sprintf("lanes=%d/depth=%d", lanes, depth), func(b *testing.B) {
				verbstest.BenchRead(b, backend, verbs.ConnectOptions{Lanes: lanes, QueueDepth: depth}, verbstest.SmallRows, verbstest.SmallBytes)
			})
		}
	}
}

// BenchmarkReadSmallVariants compares design choices on the small
// workload: Post writing on its own goroutine (direct) versus waking the
// lane writer, and row payloads copied next to their headers (inline)
// versus handed to writev straight from the table (inline=-1).
func BenchmarkReadSmallVariants(b *testing.B) {
	opts := verbs.ConnectOptions{Lanes: 4, QueueDepth: 16384}
	for _, tc := range []struct {
		name   string
		cfg    tcp.Config
		direct bool
	}{
		{"default", tcp.Config{}, false},
		{"direct", tcp.Config{}, true},
		{"inline=-1", tcp.Config{InlineMax: -1}, false},
		{"sockbuf=4MiB", tcp.Config{SocketBuffer: 4 << 20}, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			old := tcp.SetDirectPost(tc.direct)
			defer tcp.SetDirectPost(old)
			be := backend
			be.New = func() verbs.Transport { return tcp.New(tc.cfg) }
			verbstest.BenchRead(b, be, opts, verbstest.SmallRows, verbstest.SmallBytes)
		})
	}
}

// BenchmarkReadLarge is the RFC's direct control: 64 READs of 512 KiB.
func BenchmarkReadLarge(b *testing.B) {
	for _, lanes := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			verbstest.BenchRead(b, backend, verbs.ConnectOptions{Lanes: lanes}, verbstest.LargeCount, verbstest.LargeBytes)
		})
	}
}

// BenchmarkCeilingLoopback is the machine's ceiling for the transport:
// 32 MiB through one loopback TCP connection in 1 MiB writes, read into a
// 1 MiB buffer. Quote the READ benchmarks as ratios to it.
func BenchmarkCeilingLoopback(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	defer ln.Close()
	const total, chunk = 32 << 20, 1 << 20
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		buf := make([]byte, chunk)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				done <- nil
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(b, err)
	src := make([]byte, chunk)
	for i := range src {
		src[i] = byte(i) | 1
	}
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		for range total / chunk {
			if _, err := c.Write(src); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	c.Close()
	require.NoError(b, <-done)
}

// BenchmarkCeilingGather is the owner-side copy every direct small READ
// pays, without any transport: 98,304 random 264 B rows of a 64 MiB table
// copied into one buffer.
func BenchmarkCeilingGather(b *testing.B) {
	r := verbstest.NewRand(b)
	table := make([]byte, 64<<20)
	verbstest.Fill(r, table)
	dst := make([]byte, verbstest.SmallRows*verbstest.SmallBytes)
	offs := make([]int, verbstest.SmallRows)
	for i := range offs {
		offs[i] = r.IntN(len(table)/verbstest.SmallBytes) * verbstest.SmallBytes
	}
	b.SetBytes(int64(len(dst)))
	b.ReportAllocs()
	for b.Loop() {
		for i, o := range offs {
			copy(dst[i*verbstest.SmallBytes:(i+1)*verbstest.SmallBytes], table[o:o+verbstest.SmallBytes])
		}
	}
	b.ReportMetric(float64(len(dst))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

// BenchmarkCall is a warm control-call round trip: a no-op handler, and
// one that WRITEs four 264 B rows through its Peer before replying.
func BenchmarkCall(b *testing.B) { verbstest.BenchCall(b, backend) }

package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/discovery/etcd"
)

// These run against the embedded single-member server of TestMain on
// loopback: they measure the client path and one raft round, not a real
// cluster. Discovery moves no payload, so they report operations per second
// instead of bytes (no b.SetBytes).

func benchDir(b *testing.B) *etcd.Directory {
	b.Helper()
	cli := newClient(b)
	d, err := etcd.New(cli, etcd.WithPrefix(freshPrefix()), etcd.WithTTL(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func BenchmarkLookup(b *testing.B) {
	d := benchDir(b)
	ctx := context.Background()
	for i := range 64 {
		if _, err := d.Publish(ctx, discovery.Record{Name: fmt.Sprintf("seg/%d", i), Transport: "tcp", Addr: fmt.Sprintf("10.0.0.%d:7000", i+1)}); err != nil {
			b.Fatal(err)
		}
	}
	names := make([]string, 64)
	for i := range names {
		names[i] = fmt.Sprintf("seg/%d", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := d.Lookup(ctx, names[i%64]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
}

func BenchmarkPublishClose(b *testing.B) {
	d := benchDir(b)
	ctx := context.Background()
	r := discovery.Record{Name: "seg/bench", Transport: "tcp", Addr: "10.0.0.1:7000", Attrs: map[string]string{"rkey": "0x2a"}}
	b.ReportAllocs()
	for b.Loop() {
		reg, err := d.Publish(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		if err := reg.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "publications/s")
}

//go:build linux

package shm_test

import (
	"fmt"
	"testing"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
	"github.com/scatterkit/scatterkit/verbs/shm"
)

// BenchmarkReadSmall is the RFC's many-small workload: 98,304 READs of
// 264 B from random rows, posted in batches.
func BenchmarkReadSmall(b *testing.B) {
	for _, depth := range []int{4096, 16384} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			verbstest.BenchRead(b, backend, verbs.ConnectOptions{QueueDepth: depth}, verbstest.SmallRows, verbstest.SmallBytes)
		})
	}
}

// BenchmarkReadLarge is the RFC's direct control: 64 READs of 512 KiB,
// copied by 1 to 8 workers per Post batch.
func BenchmarkReadLarge(b *testing.B) {
	for _, workers := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			be := backend
			be.New = func() verbs.Transport { return shm.New(shm.Config{CopyWorkers: workers}) }
			verbstest.BenchRead(b, be, verbs.ConnectOptions{}, verbstest.LargeCount, verbstest.LargeBytes)
		})
	}
}

// BenchmarkCall is a warm control-call round trip: a no-op handler, and
// one that WRITEs four 264 B rows through its Peer before replying.
func BenchmarkCall(b *testing.B) { verbstest.BenchCall(b, backend) }

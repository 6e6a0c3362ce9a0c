package report

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBucketEdges(t *testing.T) {
	for i := range Buckets {
		if i >= 4 && i < 8 {
			continue
		}
		lo, hi := Lower(i), Upper(i)
		require.Less(t, lo, hi, "bucket %d", i)
		require.Equal(t, i, BucketOf(lo), "lower edge of %d", i)
		require.Equal(t, i, BucketOf(hi-1), "last value of %d", i)
		if i < Buckets-1 {
			next := i + 1
			if next == 4 {
				next = 8
			}
			require.Equal(t, hi, Lower(next), "bucket %d meets %d", i, next)
		}
	}
	require.Equal(t, Buckets-1, BucketOf(^uint64(0)))
}

func TestBucketOfRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for range 100000 {
		ns := r.Uint64() >> r.IntN(64)
		i := BucketOf(ns)
		require.True(t, Lower(i) <= ns && (ns < Upper(i) || i == Buckets-1), "ns %d bucket %d [%d,%d)", ns, i, Lower(i), Upper(i))
		if ns >= 8 {
			require.Equal(t, Log2Bucket(ns), i/SubBuckets)
		}
	}
}

package stage

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStageNames(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range All() {
		n := s.String()
		require.NotEqual(t, "stage?", n, "stage %d has no name", s)
		require.False(t, seen[n], "duplicate name %q", n)
		seen[n] = true
	}
	require.Equal(t, "stage?", Stage(0).String())
	require.Equal(t, "stage?", Stage(99).String())
}

func TestChunkID(t *testing.T) {
	require.Equal(t, uint64(7)<<24|3, ChunkID(7, 3))
	require.NotEqual(t, ChunkID(7, 3), ChunkID(7, 4))
	require.NotEqual(t, ChunkID(7, 3), ChunkID(8, 3))
}

func TestChunkSample(t *testing.T) {
	for n := 1; n <= 1000; n++ {
		total, marked := 0, 0
		for k := range n {
			m, w := ChunkSample(k, n)
			if k == 0 {
				require.True(t, m, "n=%d: the first chunk is always marked", n)
			}
			if m {
				require.Positive(t, w)
				total += w
				marked++
			} else {
				require.Zero(t, w)
			}
		}
		require.Equal(t, n, total, "n=%d: the weights stand for every chunk", n)
		require.LessOrEqual(t, marked, MaxMarkedChunks, "n=%d", n)
		if n <= MaxMarkedChunks {
			require.Equal(t, n, marked)
		}
		m, _ := ChunkSample(n, n)
		require.False(t, m)
		m, _ = ChunkSample(-1, n)
		require.False(t, m)
	}
}

func TestWeighted(t *testing.T) {
	require.Equal(t, uint64(Pack)|1<<32, weighted(Pack, 0))
	require.Equal(t, uint64(Pack)|1<<32, weighted(Pack, 1))
	require.Equal(t, uint64(Post)|7<<32, weighted(Post, 7))
}

func BenchmarkMarkerPair(b *testing.B) {
	b.ReportAllocs()
	var id uint64
	for b.Loop() {
		id++
		Begin(id, Pack)
		End(id, Pack, 264)
	}
}

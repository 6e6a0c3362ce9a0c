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

func BenchmarkMarkerPair(b *testing.B) {
	b.ReportAllocs()
	var id uint64
	for b.Loop() {
		id++
		Begin(id, Pack)
		End(id, Pack, 264)
	}
}

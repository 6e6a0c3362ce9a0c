package gatherwire

import (
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChunkShape(t *testing.T) {
	for _, c := range []struct {
		want, row, lo, hi, got int64
	}{
		{want: 64 << 10, lo: 4 << 10, hi: 1 << 20, got: 64 << 10},
		{want: 3000, lo: 4 << 10, hi: 1 << 20, got: 4 << 10},                // at least the smallest class
		{want: 5000, lo: 1 << 10, hi: 1 << 20, got: 8 << 10},                // rounded up to a class
		{want: 8 << 20, lo: 4 << 10, hi: 3 << 20, got: 2 << 20},             // at most the largest power of two within maxChunk
		{want: 4 << 10, row: 9000, lo: 4 << 10, hi: 1 << 20, got: 16 << 10}, // at least one row
		{want: 0, lo: 4 << 10, hi: 1 << 20, got: 4 << 10},
	} {
		got, err := ChunkShape(c.want, c.row, c.lo, c.hi)
		require.NoError(t, err, "%+v", c)
		require.Equal(t, c.got, got, "%+v", c)
	}
	_, err := ChunkShape(4<<10, 3<<20, 4<<10, 3<<20)
	require.ErrorContains(t, err, "exceeds the largest chunk")
	_, err = ChunkShape(4<<10, 0, 4<<10, 0)
	require.Error(t, err)

	// Whatever is asked: a power of two within the bounds, holding a row,
	// and a shape the other side reproduces unchanged.
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		lo := int64(1) << r.IntN(16)
		hi := lo + r.Int64N(64<<20)
		row := int64(0)
		if r.IntN(2) == 0 {
			row = 1 + r.Int64N(hi)
		}
		want := r.Int64N(128 << 20)
		got, err := ChunkShape(want, row, lo, hi)
		if row > int64(1)<<(bits.Len64(uint64(hi))-1) {
			require.Error(t, err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, 1, bits.OnesCount64(uint64(got)), "chunk %d not a power of two", got)
		require.LessOrEqual(t, got, hi)
		require.GreaterOrEqual(t, got, max(row, lo))
		again, err := ChunkShape(got, row, lo, hi)
		require.NoError(t, err)
		require.Equal(t, got, again, "the owner would run a different chunk than the requester shaped")
	}
}

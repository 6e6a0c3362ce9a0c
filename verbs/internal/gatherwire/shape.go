package gatherwire

import (
	"fmt"
	"math/bits"
)

// ChunkShape is the chunk rule both sides of a gather command apply, the
// requester when it shapes the command and the owner when it validates
// it, so the two always agree on the chunk a command runs with.
//
// A chunk is exactly the staging lease that holds it: a power of two (a
// pool class), at least minChunk, at least one row of a fixed-row plan
// (rowSize; 0 for a ranges plan), and at most the largest power of two
// within maxChunk. want is the chunk asked for; it is clamped into those
// bounds and rounded up to a power of two, so slots x chunk is exactly the
// staging a command may hold, whatever was asked. ChunkShape fails (with
// an error wrapping nothing: the caller classifies it) when a row does not
// fit the largest chunk.
func ChunkShape(want, rowSize, minChunk, maxChunk int64) (int64, error) {
	if maxChunk < 1 {
		return 0, fmt.Errorf("no chunk fits: largest chunk %d", maxChunk)
	}
	top := int64(1) << (bits.Len64(uint64(maxChunk)) - 1)
	if rowSize > top {
		return 0, fmt.Errorf("row of %d bytes exceeds the largest chunk %d", rowSize, top)
	}
	c := max(min(want, top), minChunk, rowSize, 1)
	return min(int64(1)<<bits.Len64(uint64(c-1)), top), nil
}

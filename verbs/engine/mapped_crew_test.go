package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/planfmt"
)

// TestSpanCrew checks split span copies against a serial reference for
// every width up to the crew's size: spans cut at chunk edges, tiny spans
// and empty gaps between destinations (poison there stays).
func TestSpanCrew(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed>>7|1))
	src := make([]byte, 8<<20)
	for i := range src {
		src[i] = byte(r.Uint32()) | 1
	}
	c := newSpanCrew(4)
	defer c.close()
	for _, k := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			var spans []planfmt.Range
			var stream []uint64
			var dst, total uint64
			for range 400 {
				n := uint64(1 + r.IntN(300))
				if r.IntN(20) == 0 {
					n = uint64(1 + r.IntN(200<<10)) // crosses chunk edges
				}
				spans = append(spans, planfmt.Range{Src: uint64(r.IntN(len(src) - int(n))), Dst: dst, Len: n})
				stream = append(stream, total)
				total += n
				dst += n + uint64(r.IntN(3))
			}
			got := make([]byte, dst)
			for i := range got {
				got[i] = 0xEE
			}
			want := bytes.Clone(got)
			copySerial(want, src, spans)
			c.copy(k, got, src, spans, stream, total)
			require.True(t, bytes.Equal(want, got))
		})
	}
	// Closed: copies still complete, on the caller.
	c.close()
	c.close()
	spans := []planfmt.Range{{Src: 5, Dst: 0, Len: 1 << 20}}
	got := make([]byte, 1<<20)
	c.copy(4, got, src, spans, []uint64{0}, 1<<20)
	require.True(t, bytes.Equal(src[5:5+1<<20], got))
}

// TestSpanCrewWays checks the split threshold: small copies stay on the
// caller, large ones use at most the crew's goroutines.
func TestSpanCrewWays(t *testing.T) {
	var none *spanCrew
	require.Equal(t, 1, none.ways(1<<20, 1<<30))
	c := newSpanCrew(2)
	require.Equal(t, 1, c.ways(10, 4096), "a few microseconds of copying is not worth a fork/join")
	k := c.ways(1000, 64<<20)
	require.GreaterOrEqual(t, k, 1)
	require.LessOrEqual(t, k, 2)
}

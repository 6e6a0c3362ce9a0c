package packstream

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/scatterkit/scatterkit/planfmt"
)

// TestRangePackSplitMatchesSerial: a RangeCursor with Workers packs every
// chunk byte for byte as the serial cursor does (chunks cut inside ranges,
// pieces cut inside ranges, zero-length ranges, a short last chunk), and
// leaves the cursor where the serial one stands.
func TestRangePackSplitMatchesSerial(t *testing.T) {
	w := pack.NewWorkers(4)
	t.Cleanup(w.Close)
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 8<<20)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	for round := range 60 {
		var rs []planfmt.Range
		var total uint64
		for total < uint64(1+r.IntN(3<<20)) {
			var l uint64
			switch r.IntN(10) {
			case 0:
				l = 0
			case 1:
				l = uint64(1 + r.IntN(300<<10)) // larger than a piece
			default:
				l = uint64(1 + r.IntN(600))
			}
			s := r.Uint64N(uint64(len(src)) - l + 1)
			rs = append(rs, planfmt.Range{Src: s, Len: l})
			total += l
		}
		chunk := 128<<10 + r.IntN(1<<20)
		var ser, par RangeCursor
		ser.Init(rs)
		par.Workers, par.ParallelMin = w, 128<<10
		par.Init(rs)
		a, b := make([]byte, chunk), make([]byte, chunk)
		chunks := 0
		for !ser.Done() {
			na := ser.PackInto(a, src)
			nb := par.PackInto(b, src)
			require.Equal(t, na, nb, "round %d chunk %d", round, chunks)
			require.True(t, bytes.Equal(a[:na], b[:nb]), "round %d chunk %d: bytes differ", round, chunks)
			require.Equal(t, ser.i, par.i, "round %d chunk %d", round, chunks)
			require.Equal(t, ser.off, par.off, "round %d chunk %d", round, chunks)
			chunks++
		}
		require.True(t, par.Done(), "round %d", round)
	}
}

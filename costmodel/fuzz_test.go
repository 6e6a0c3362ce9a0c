package costmodel

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzDecide checks that Decide never panics, reports invalid input as an
// error with a direct decision, and otherwise keeps every invariant of
// checkDecision (staging bound, margin rule, candidate totals equal to the
// exported formulas, durations never negative). Seeds are in
// testdata/fuzz/FuzzDecide.
func FuzzDecide(f *testing.F) {
	f.Fuzz(func(t *testing.T,
		bnet, rpost float64, q int, l int64,
		bmem, rcopy float64,
		plan, planSpan, decode, decodeSpan, control, chunk int64,
		eps, margin float64, budget int64, maxP int, maxChunk int64, steps int,
		s, n, m int64,
	) {
		p := Params{
			BNet: bnet, RPost: rpost, Q: q, L: time.Duration(l),
			BMem: bmem, RCopy: rcopy,
			TPlan: time.Duration(plan), TPlanPerSpan: time.Duration(planSpan),
			TDecode: time.Duration(decode), TDecodePerSpan: time.Duration(decodeSpan),
			TControl: time.Duration(control), TChunkFixed: time.Duration(chunk),
			Epsilon: eps, Margin: margin, StagingBudget: budget, MaxP: maxP,
			MaxChunk: maxChunk, ChunkSteps: steps,
		}
		g := Geometry{S: s, N: n, M: m}
		d := Decide(p, g)
		if p.Validate() != nil || g.Validate() != nil {
			require.Error(t, d.Err)
			require.Equal(t, ModeDirect, d.Mode)
			require.NotEmpty(t, d.String())
			return
		}
		checkDecision(t, p, g, d)
		require.NotEmpty(t, d.String())
		// T_direct is monotonic in N and S.
		if g.S < 1<<62 {
			more := Geometry{S: g.S + 1, N: g.N + 1, M: g.M + 1}
			require.GreaterOrEqual(t, TDirect(p, more), d.Direct.Total)
		}
	})
}

// FuzzSplit decodes runs from bytes (7 bytes each: fragments uint16, mean
// fragment size uint32, gatherable flag) and checks Split's invariants
// against fixed one-sided link parameters with a fuzzed queue depth and
// margin. Seeds are in testdata/fuzz/FuzzSplit.
func FuzzSplit(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, q uint16, marginPct uint8) {
		p := rdmaLike()
		p.Q = int(q) + 1
		p.Margin = float64(marginPct) / 100
		runs := make([]Run, 0, len(data)/7)
		for len(data) >= 7 && len(runs) < 256 {
			n := int64(binary.LittleEndian.Uint16(data)) + 1
			mean := int64(binary.LittleEndian.Uint32(data[2:])) + 1
			runs = append(runs, Run{
				Geometry:   Geometry{S: n * mean, N: n, M: max(n/int64(data[6]|1), 1)},
				Gatherable: data[6]&1 == 1,
			})
			data = data[7:]
		}
		modes := make([]Mode, len(runs))
		s := Split(p, runs, modes)
		checkSplit(t, p, runs, modes, s)
		require.NotEmpty(t, s.String())
	})
}

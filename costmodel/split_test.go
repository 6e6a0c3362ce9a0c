package costmodel

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// mixedRuns is a reshard-like operation: 64 large ranges and one run of
// 32,768 small fragments, all gatherable.
func mixedRuns() []Run {
	runs := make([]Run, 0, 65)
	for range 64 {
		runs = append(runs, Run{Geometry: Geometry{S: 512 << 10, N: 1, M: 1}, Gatherable: true})
	}
	return append(runs, Run{Geometry: Geometry{S: 32_768 * 264, N: 32_768, M: 32_768}, Gatherable: true})
}

func TestSplitMixedKeepsLargeDirect(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"round-trip bound link", tcpLike()},
		{"one-sided link", rdmaLike()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := mixedRuns()
			modes := make([]Mode, len(runs))
			s := Split(tc.p, runs, modes)
			require.NoError(t, s.Err)
			t.Log(s.String())
			require.Equal(t, ModeHybrid, s.Mode)
			for i, r := range runs {
				want := ModeDirect
				if r.S/r.N < 4096 {
					want = ModeGather
				}
				require.Equal(t, want, modes[i], "run %d (%d B in %d)", i, r.S, r.N)
			}
			require.GreaterOrEqual(t, s.Threshold, int64(264))
			require.Less(t, s.Threshold, int64(512<<10))
			require.Equal(t, Geometry{S: 32_768 * 264, N: 32_768, M: 32_768}, s.Gather)
			require.Equal(t, Geometry{S: 64 * 512 << 10, N: 64, M: 64}, s.Direct)

			// The chosen split beats both pure plans under the model.
			require.Less(t, s.Predicted, s.AllDirect)
			require.LessOrEqual(t, s.Predicted, s.AllGather)
			require.Equal(t, THybrid(tc.p, s.Direct, s.Gather, s.Pipeline.C, s.Pipeline.P), s.Predicted)
			require.LessOrEqual(t, int64(s.Pipeline.P)*s.Pipeline.C, tc.p.StagingBudget)
			require.Equal(t, 2, s.Splits)
		})
	}
}

func TestSplitPureCases(t *testing.T) {
	p := tcpLike()
	large := Run{Geometry: Geometry{S: 512 << 10, N: 1, M: 1}, Gatherable: true}
	small := Run{Geometry: Geometry{S: 98_304 * 264, N: 98_304, M: 98_304}, Gatherable: true}
	tests := []struct {
		name      string
		runs      []Run
		wantMode  Mode
		wantModes []Mode
	}{
		{"all large", []Run{large, large, large}, ModeDirect, []Mode{ModeDirect, ModeDirect, ModeDirect}},
		{"all small", []Run{small, small}, ModeGather, []Mode{ModeGather, ModeGather}},
		{"small but not gatherable", []Run{{Geometry: small.Geometry}}, ModeDirect, []Mode{ModeDirect}},
		{"small gatherable, small not", []Run{small, {Geometry: small.Geometry}}, ModeHybrid, []Mode{ModeGather, ModeDirect}},
		{"no runs", nil, ModeDirect, []Mode{}},
		// An empty run carries nothing: it is reported direct, and the
		// operation is all gather.
		{"empty run", []Run{{Gatherable: true}, small}, ModeGather, []Mode{ModeDirect, ModeGather}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			modes := make([]Mode, len(tc.runs))
			for i := range modes {
				modes[i] = Mode(7) // overwritten
			}
			s := Split(p, tc.runs, modes)
			require.NoError(t, s.Err)
			require.Equal(t, tc.wantMode, s.Mode, "%s", s.String())
			require.Equal(t, tc.wantModes, modes)
			if s.Mode == ModeDirect {
				require.Equal(t, s.AllDirect, s.Predicted)
				require.Zero(t, s.Threshold)
				require.Zero(t, s.Gather)
			}
		})
	}
}

func TestSplitMatchesDecideForOneRun(t *testing.T) {
	r := newRand(t)
	for range 300 {
		p, g := randomParams(r), randomGeometry(r)
		modes := make([]Mode, 1)
		s := Split(p, []Run{{Geometry: g, Gatherable: true}}, modes)
		require.NoError(t, s.Err)
		d := Decide(p, g)
		// One run: all-gather is Decide's best gather, all-direct its direct.
		require.Equal(t, d.Direct.Total, s.AllDirect)
		require.Equal(t, d.Gather.Total, s.AllGather)
		require.Equal(t, d.Mode, s.Mode)
		require.Equal(t, d.Mode, modes[0])
		require.Equal(t, d.Chosen.Total, s.Predicted)
	}
}

func TestSplitInvariantsRandom(t *testing.T) {
	r := newRand(t)
	runs := make([]Run, 0, 64)
	modes := make([]Mode, 64)
	for range 300 {
		p := randomParams(r)
		runs = runs[:0]
		for range 1 + r.IntN(64) {
			runs = append(runs, Run{Geometry: randomGeometry(r), Gatherable: r.IntN(4) != 0})
		}
		s := Split(p, runs, modes)
		checkSplit(t, p, runs, modes[:len(runs)], s)
	}
}

func checkSplit(t testing.TB, p Params, runs []Run, modes []Mode, s SplitDecision) {
	t.Helper()
	require.NoError(t, s.Err)
	var direct, gather Geometry
	for i, r := range runs {
		switch modes[i] {
		case ModeGather:
			require.True(t, r.Gatherable, "run %d gathered but not gatherable", i)
			require.LessOrEqual(t, r.S/r.N, s.Threshold)
			gather, _ = gather.add(r.Geometry)
		case ModeDirect:
			if r.Gatherable && r.N > 0 && s.Mode != ModeDirect {
				require.Greater(t, r.S/r.N, s.Threshold, "run %d below the threshold stayed direct", i)
			}
			direct, _ = direct.add(r.Geometry)
		default:
			t.Fatalf("run %d: mode %v", i, modes[i])
		}
	}
	require.Equal(t, direct, s.Direct)
	require.Equal(t, gather, s.Gather)
	total, _ := direct.add(gather)
	require.Equal(t, TDirect(p, total), s.AllDirect)
	if s.Mode == ModeDirect {
		require.Zero(t, gather.N)
		require.Equal(t, s.AllDirect, s.Predicted)
		return
	}
	require.NotZero(t, gather.N)
	require.True(t, float64(s.Predicted)*(1+p.Margin) < float64(s.AllDirect), "margin rule")
	require.LessOrEqual(t, s.Predicted, s.AllGather)
	require.LessOrEqual(t, int64(s.Pipeline.P)*s.Pipeline.C, p.StagingBudget)
	require.Equal(t, THybrid(p, direct, gather, s.Pipeline.C, s.Pipeline.P), s.Predicted)
	if direct.N == 0 {
		require.Equal(t, ModeGather, s.Mode)
	} else {
		require.Equal(t, ModeHybrid, s.Mode)
	}
}

func TestSplitInvalidInput(t *testing.T) {
	p := tcpLike()
	good := Run{Geometry: Geometry{S: 100, N: 10, M: 10}, Gatherable: true}
	tests := []struct {
		name  string
		p     Params
		runs  []Run
		modes int
		field string
		err   error
	}{
		{"bad params", Params{}, []Run{good}, 1, "Params.BNet", ErrInvalidParams},
		{"short modes", p, []Run{good, good}, 1, "modes", ErrShortBuffer},
		{"bad run", p, []Run{good, {Geometry: Geometry{S: 5, N: 10, M: 10}}}, 2, "runs[1].S", ErrInvalidGeometry},
		{"overflow", p, []Run{
			{Geometry: Geometry{S: math.MaxInt64 - 1, N: 1, M: 1}},
			{Geometry: Geometry{S: 2, N: 1, M: 1}},
		}, 2, "runs[1].S", ErrInvalidGeometry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			modes := make([]Mode, tc.modes)
			for i := range modes {
				modes[i] = Mode(7)
			}
			s := Split(tc.p, tc.runs, modes)
			require.ErrorIs(t, s.Err, tc.err)
			var fe *FieldError
			require.True(t, errors.As(s.Err, &fe))
			require.Equal(t, tc.field, fe.Field)
			require.Equal(t, ModeDirect, s.Mode)
			for _, m := range modes {
				require.Equal(t, Mode(7), m, "modes untouched on error")
			}
			require.Contains(t, s.String(), "fallback")
		})
	}
}

func TestSplitZeroAlloc(t *testing.T) {
	p := rdmaLike()
	runs := mixedRuns()
	modes := make([]Mode, len(runs))
	var s SplitDecision
	allocs := testing.AllocsPerRun(50, func() { s = Split(p, runs, modes) })
	require.Zero(t, allocs)
	require.Equal(t, ModeHybrid, s.Mode)
}

func TestSplitString(t *testing.T) {
	runs := mixedRuns()
	modes := make([]Mode, len(runs))
	s := Split(tcpLike(), runs, modes)
	out := s.String()
	require.Contains(t, out, "hybrid: predicted ")
	require.Contains(t, out, "gather runs with S/N <= 511B (8.25MiB in 32768 fragments")
	require.Contains(t, out, "direct 32MiB in 64 fragments")
}

package costmodel

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stagedHand is a machine whose T_stag is easy to work by hand: every rate
// a round number, no fixed costs but the round trip and the control call.
func stagedHand() (Params, Geometry, Staged) {
	p := Params{
		BNet: 1e9, RPost: 1e12, Q: 1 << 20, L: 10 * time.Microsecond,
		BMem: 1e9, RCopy: 1e6, TControl: 100 * time.Microsecond,
		Epsilon: 1, StagingBudget: 64 << 20, MaxP: 4,
	}
	return p, Geometry{S: 4_000_000, N: 4000, M: 4000}, Staged{BMem: 2e9, RCopy: 2e6, Runs: 4000}
}

func TestTStagedByHand(t *testing.T) {
	p, g, s := stagedHand()
	// C = 1 MB, 2 calls in flight: K = 4, each chunk split over the 4
	// workers (ParallelMin 0), 4 of them busy.
	// pack1 = 1 ms + 1000 spans/1M = 2 ms; post1 = 0.5 ms + 1000/2M = 1 ms;
	// T_pack = 8 ms/4 = 2 ms; T_post = 4 ms/2 = 2 ms;
	// T_bulk = 10 us + 4 ms.
	// pipeline = 2*2/4 + 4.01 + 1 + 1 = 7.01 ms;
	// T_call = 10 us + 2/4 + 1 + 1 = 2.51 ms, two in a row: 5.02 ms.
	require.Equal(t, 100*time.Microsecond+7010*time.Microsecond, TStaged(p, g, s, 1_000_000, 2))
	// One call at a time: the slot, 4 x 2.51 ms, is the longer.
	require.Equal(t, 100*time.Microsecond+4*2510*time.Microsecond, TStaged(p, g, s, 1_000_000, 1))
	// The owner packs chunks under ParallelMin on one worker each: pack1
	// is not split, and 2 calls keep 2 workers busy.
	// T_pack = 8/2 = 4 ms; pipeline = 2*2/2 + 4.01 + 1 + 1 = 8.01 ms;
	// T_call = 10 us + 2 + 1 + 1 = 4.01 ms, twice: 8.02 ms.
	p.ParallelMin = 2_000_000
	require.Equal(t, 100*time.Microsecond+8020*time.Microsecond, TStaged(p, g, s, 1_000_000, 2))
	require.Equal(t, Forever, TStaged(p, g, s, 0, 2))
	require.Equal(t, Forever, TStaged(p, g, s, 1000, 0))
	require.Equal(t, Forever, TStaged(p, g, Staged{}, 1000, 1))
}

// checkStaged asserts the invariants of every DecideStaged decision.
func checkStaged(t testing.TB, p Params, g Geometry, s Staged, d Decision) {
	t.Helper()
	require.NoError(t, d.Err)
	got, ok := d.Staged()
	require.True(t, ok)
	require.Equal(t, s, got)
	require.Equal(t, TDirect(p, g), d.Direct.Total)
	cands := d.AppendCandidates(nil)
	require.Equal(t, d.Evaluated, len(cands))
	best := Forever
	// Bounds no candidate can beat: the link carries every byte, and the
	// requester scatters every byte on at most P goroutines.
	m := newStagedModel(&p, g, s)
	for _, c := range cands[1:] {
		require.Equal(t, ModeGather, c.Mode)
		require.GreaterOrEqual(t, c.C, int64(1))
		require.LessOrEqual(t, c.C, g.S)
		require.LessOrEqual(t, int64(c.P)*c.C, p.StagingBudget)
		require.LessOrEqual(t, c.P, p.MaxP)
		require.LessOrEqual(t, int64(c.P), c.K)
		require.Equal(t, Chunks(g.S, c.C), c.K)
		require.Equal(t, TStaged(p, g, s, c.C, c.P), c.Total)
		if !c.Clamped {
			require.GreaterOrEqual(t, c.C, d.CMin)
		}
		floor := duration(m.front + max(m.sNet, (float64(g.S)*m.postMem+m.postCopy)/float64(c.P)))
		require.GreaterOrEqual(t, c.Total, floor-1, "%+v", c) // -1: rounding
		best = min(best, c.Total)
	}
	require.Equal(t, best, d.Gather.Total)
	if gatherWins(d.Gather.Total, d.Direct.Total, p.Margin) {
		require.Equal(t, ModeGather, d.Mode)
		require.Equal(t, d.Gather, d.Chosen)
	} else {
		require.Equal(t, ModeDirect, d.Mode)
		require.Equal(t, d.Direct, d.Chosen)
	}
}

func randomStaged(r *rand.Rand, g Geometry) Staged {
	return Staged{BMem: logUniform(r, 1e8, 1e11), RCopy: logUniform(r, 1e5, 1e8), Runs: max(1, g.N/int64(1+r.IntN(64)))}
}

func TestDecideStagedInvariantsRandom(t *testing.T) {
	r := newRand(t)
	for range 2000 {
		p, g := randomParams(r), randomGeometry(r)
		s := randomStaged(r, g)
		checkStaged(t, p, g, s, DecideStaged(p, g, s))
	}
}

// A staged READ's calls carry their chunk through packing, the link and
// the scatter one after the other: a few large chunks all in flight at
// once pack together, then cross the link together, then scatter
// together, with nothing overlapped. The decision takes chunks small
// enough for the stages of different chunks to overlap, on every shape of
// machine below, and predicts no more than the one-command shape the
// engine used before (the gather's C and the owner's slots); on the
// 16-core host, a quarter less.
func TestDecideStagedPipelinesTheCalls(t *testing.T) {
	frag := Geometry{S: 49_152 * 200, N: 49_152, M: 49_152}
	host := Params{ // the 16-core host's tcp loopback, as measured
		BNet: 5.7e9, RPost: 1.9e6, Q: 4096, L: 70 * time.Microsecond,
		BMem: 4.8e9, RCopy: 60e6, TPlan: 5 * time.Microsecond, TPlanPerSpan: 3 * time.Nanosecond,
		TDecode: 5 * time.Microsecond, TDecodePerSpan: 3 * time.Nanosecond,
		TControl: 130 * time.Microsecond, TChunkFixed: 10 * time.Microsecond,
		Epsilon: 0.05, Margin: 0.1, StagingBudget: 8 << 20, MaxP: 8, ParallelMin: 512 << 10,
	}
	vm := host // 2 cores: two workers, a slower link
	vm.BNet, vm.MaxP, vm.L = 1.2e9, 2, 40*time.Microsecond
	rdma := rdmaLike()
	rdma.RequestsOverlap, rdma.ParallelMin = true, 512<<10
	local := Staged{BMem: 6e9, RCopy: 25e6, Runs: frag.N}
	for _, tc := range []struct {
		name string
		p    Params
	}{{"16-core tcp", host}, {"2-core tcp", vm}, {"one-sided link", rdma}} {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideStaged(tc.p, frag, local)
			checkStaged(t, tc.p, frag, local, d)
			one := Decide(tc.p, frag).Gather
			slots := int(min(int64(tc.p.MaxP), tc.p.StagingBudget/one.C))
			before := TStaged(tc.p, frag, local, one.C, slots)
			t.Logf("%s\nbefore: C=%d P=%d: %v", d.String(), one.C, slots, before)
			require.Equal(t, ModeGather, d.Mode)
			// The search's chunk sizes are spaced in octaves: within 5%
			// of the old shape where it was already good (2 cores: small
			// chunks, two calls), well below it where it was not.
			require.LessOrEqual(t, float64(d.Gather.Total), 1.05*float64(before))
			require.GreaterOrEqual(t, d.Gather.K, int64(2*d.Gather.P), "at least two rounds of calls")
			if tc.name == "16-core tcp" {
				require.Less(t, float64(d.Gather.Total), 0.8*float64(before))
			}
		})
	}
}

func TestDecideStagedInvalid(t *testing.T) {
	p, g, s := stagedHand()
	for _, tc := range []struct {
		s     Staged
		field string
	}{
		{Staged{BMem: 0, RCopy: 1, Runs: 1}, "Staged.BMem"},
		{Staged{BMem: 1, RCopy: -1, Runs: 1}, "Staged.RCopy"},
		{Staged{BMem: 1, RCopy: 1, Runs: -1}, "Staged.Runs"},
	} {
		d := DecideStaged(p, g, tc.s)
		require.ErrorIs(t, d.Err, ErrInvalidParams)
		var fe *FieldError
		require.True(t, errors.As(d.Err, &fe))
		require.Equal(t, tc.field, fe.Field)
		require.Equal(t, ModeDirect, d.Mode)
	}
	bad := p
	bad.BNet = 0
	require.ErrorIs(t, DecideStaged(bad, g, s).Err, ErrInvalidParams)
	require.ErrorIs(t, DecideStaged(p, Geometry{S: -1}, s).Err, ErrInvalidGeometry)
	// The empty operation has no gather candidate.
	d := DecideStaged(p, Geometry{}, s)
	require.NoError(t, d.Err)
	require.Equal(t, ModeDirect, d.Mode)
	require.Zero(t, d.Gather.C)
}

func TestDecideStagedExplainAndAllocs(t *testing.T) {
	p, g, s := stagedHand()
	p.RPost = 1e5 // 40 ms of direct requests: gather wins
	var d Decision
	require.Zero(t, testing.AllocsPerRun(100, func() { d = DecideStaged(p, g, s) }))
	out := d.String()
	t.Log("\n" + out)
	require.Contains(t, out, "staged    a command per chunk; scatter B_mem=2GB/s R_copy=2M/s into 4000 runs")
	require.Contains(t, out, "*gather")
	_, ok := Decide(p, g).Staged()
	require.False(t, ok)
	require.NotContains(t, Decide(p, g).String(), "staged")
}

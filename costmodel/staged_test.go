package costmodel

import (
	"cmp"
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
	// Two requester goroutines for four calls: the scatter of all the
	// chunks takes T_post = 4 ms/2 = 2 ms however many calls; the owner
	// packs on MaxP = 4 workers at most. 4 calls of 1 MB, ParallelMin
	// 2 MB: pipeline = 4*2/4 + max(8/4, 4.01, 2) + 1 + 1 = 8.01 ms;
	// T_call 4.01 ms once.
	s.Workers = 2
	require.Equal(t, 100*time.Microsecond+8010*time.Microsecond, TStaged(p, g, s, 1_000_000, 4))
	// One goroutine: T_post = 4 ms, and the pipeline 2 + 4.01 + 2 = 8.01
	// still (T_bulk is the slower stage).
	s.Workers = 1
	require.Equal(t, 100*time.Microsecond+8010*time.Microsecond, TStaged(p, g, s, 1_000_000, 4))
	p.BNet = 1e10 // T_bulk 0.41 ms: the one scatterer is the slower stage
	// pipeline = 2 + max(2, 0.41, 4) + 0.1 + 1 = 7.1 ms.
	require.Equal(t, 100*time.Microsecond+7100*time.Microsecond, TStaged(p, g, s, 1_000_000, 4))
	p.BNet, s.Workers = 1e9, 0
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
	// Bounds no candidate can beat: the link carries every byte, the
	// owner packs every byte on at most MaxP workers, and the requester
	// scatters every byte on at most P goroutines (Workers, if fewer).
	m := newStagedModel(&p, g, s)
	for _, c := range cands[1:] {
		require.Equal(t, ModeGather, c.Mode)
		require.GreaterOrEqual(t, c.C, int64(1))
		require.LessOrEqual(t, c.C, g.S)
		require.LessOrEqual(t, int64(c.P)*c.C, p.StagingBudget)
		require.LessOrEqual(t, c.P, cmp.Or(s.MaxCalls, p.MaxP))
		require.LessOrEqual(t, int64(c.P), c.K)
		require.Equal(t, Chunks(g.S, c.C), c.K)
		require.Equal(t, TStaged(p, g, s, c.C, c.P), c.Total)
		if !c.Clamped {
			require.GreaterOrEqual(t, c.C, d.CMin)
		}
		scatter := c.P
		if s.Workers > 0 {
			scatter = min(scatter, s.Workers)
		}
		floor := duration(m.front + max(m.sNet, (float64(g.S)*m.postMem+m.postCopy)/float64(scatter), m.pack(p.MaxP)))
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
	return Staged{BMem: logUniform(r, 1e8, 1e11), RCopy: logUniform(r, 1e5, 1e8), Runs: max(1, g.N/int64(1+r.IntN(64))),
		MaxCalls: r.IntN(3) * r.IntN(33), Workers: r.IntN(2) * r.IntN(17)}
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

// Calls wait on the round trip as well as on the owner's packing: on a
// link whose round trip is long against a chunk's packing, more calls in
// flight than the owner's workers (Staged.MaxCalls) finish sooner, and
// the search takes them; the owner's packing is priced at MaxP workers
// whatever the calls, so where the packing is the slower stage it does
// not.
func TestDecideStagedCallsPastTheWorkers(t *testing.T) {
	frag := Geometry{S: 49_152 * 200, N: 49_152, M: 49_152}
	p := Params{
		BNet: 10e9, RPost: 1.9e6, Q: 4096, L: 300 * time.Microsecond,
		BMem: 4.8e9, RCopy: 60e6, TControl: 130 * time.Microsecond,
		Epsilon: 0.05, Margin: 0.1, StagingBudget: 64 << 20, MaxP: 8, ParallelMin: 512 << 10, MaxChunk: 256 << 10,
	}
	s := Staged{BMem: 6e9, RCopy: 25e6, Runs: frag.N, Workers: 16}
	eight := DecideStaged(p, frag, s)
	checkStaged(t, p, frag, s, eight)
	s.MaxCalls = 16
	sixteen := DecideStaged(p, frag, s)
	checkStaged(t, p, frag, s, sixteen)
	t.Logf("MaxCalls 8: %v\nMaxCalls 16: %v", eight.Gather, sixteen.Gather)
	require.Equal(t, 16, sixteen.Gather.P)
	require.Less(t, float64(sixteen.Gather.Total), 0.8*float64(eight.Gather.Total))
	// A round trip of 5 us and an owner packing at 300 MB/s a worker:
	// its 8 workers are the slower stage, T_pack = 4.2 ms. Eight calls
	// leave them idle while each call's chunk crosses the link and is
	// scattered; sixteen keep them busy, down to the packing's floor and
	// never below it.
	p.BMem, p.L = 0.3e9, 5*time.Microsecond
	s.MaxCalls = 0
	eight = DecideStaged(p, frag, s)
	s.MaxCalls = 16
	sixteen = DecideStaged(p, frag, s)
	checkStaged(t, p, frag, s, sixteen)
	floor := p.TControl + time.Duration(float64(frag.S)/p.BMem/8*1e9+float64(frag.M)/p.RCopy/8*1e9)
	t.Logf("floor %v: MaxCalls 8: %v, 16: %v", floor, eight.Gather, sixteen.Gather)
	require.Greater(t, float64(eight.Gather.Total), 1.15*float64(floor))
	require.Less(t, float64(sixteen.Gather.Total), 1.05*float64(floor))
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
		{Staged{BMem: 1, RCopy: 1, Runs: 1, MaxCalls: -1}, "Staged.MaxCalls"},
		{Staged{BMem: 1, RCopy: 1, Runs: 1, MaxCalls: MaxPipelineWidth + 1}, "Staged.MaxCalls"},
		{Staged{BMem: 1, RCopy: 1, Runs: 1, Workers: -1}, "Staged.Workers"},
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
	require.Contains(t, out, "staged    a command per chunk; scatter B_mem=2GB/s R_copy=2M/s into 4000 runs on one per call; calls in flight <= 4")
	s.MaxCalls, s.Workers = 8, 2
	require.Contains(t, DecideStaged(p, g, s).String(), "into 4000 runs on 2; calls in flight <= 8")
	require.Contains(t, out, "*gather")
	_, ok := Decide(p, g).Staged()
	require.False(t, ok)
	require.NotContains(t, Decide(p, g).String(), "staged")
}

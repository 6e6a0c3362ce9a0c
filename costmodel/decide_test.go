package costmodel

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDecideByHand(t *testing.T) {
	p := handParams() // MaxP 2, ChunkSteps 2, budget 1e6 B, C_min 40000 B
	g := Geometry{S: 1_000_000, N: 1000, M: 500}
	d := Decide(p, g)
	require.NoError(t, d.Err)

	// T_direct = 2.51ms (TestTDirectByHand). Gather candidates, front 220us:
	//  P=1, C in {C_min = 40000, C_max = min(1e6/1, 1e6) = 1e6}
	//   C=40000: K=25, pack 550us, bulk 1010us -> 220+20+1010+40  = 1290us
	//   C=1e6:   K=1,  pack 550us, bulk 1010us -> 220+500+1010+1000 = 2730us
	//  P=2, C in {40000, C_max = 1e6/2 = 500000}
	//   C=40000:  K=25, pack 275us, bulk 1010us -> 1290us (ties P=1, more staging)
	//   C=500000: K=2,  pack 275us, bulk 1010us -> 220+250+1010+500 = 1980us
	want := []Candidate{
		{Mode: ModeDirect, K: 1000, Total: 2510 * time.Microsecond},
		{Mode: ModeGather, C: 40_000, P: 1, K: 25, Pack: 550 * time.Microsecond, Bulk: 1010 * time.Microsecond, Total: 1290 * time.Microsecond},
		{Mode: ModeGather, C: 1_000_000, P: 1, K: 1, Pack: 550 * time.Microsecond, Bulk: 1010 * time.Microsecond, Total: 2730 * time.Microsecond},
		{Mode: ModeGather, C: 40_000, P: 2, K: 25, Pack: 275 * time.Microsecond, Bulk: 1010 * time.Microsecond, Total: 1290 * time.Microsecond},
		{Mode: ModeGather, C: 500_000, P: 2, K: 2, Pack: 275 * time.Microsecond, Bulk: 1010 * time.Microsecond, Total: 1980 * time.Microsecond},
	}
	require.Equal(t, want, d.AppendCandidates(nil))
	require.Equal(t, len(want), d.Evaluated)
	require.Equal(t, int64(40_000), d.CMin)

	// 1290us * 1.1 = 1419us < 2510us: gather, P=1 (the tie goes to less staging).
	require.Equal(t, ModeGather, d.Mode)
	require.Equal(t, want[1], d.Chosen)
	require.Equal(t, want[1], d.Gather)
	require.Equal(t, want[0], d.Direct)
	require.Equal(t, 1290*time.Microsecond, d.Predicted())

	// Margin 1: 1290us * 2 = 2580us >= 2510us: direct.
	p.Margin = 1
	d = Decide(p, g)
	require.Equal(t, ModeDirect, d.Mode)
	require.Equal(t, want[0], d.Chosen)
	require.Equal(t, want[1], d.Gather, "the best gather candidate is still reported")
}

func TestDecideClampsWhenCMinExceedsCMax(t *testing.T) {
	p := handParams()
	p.StagingBudget = 30_000 // below C_min = 40000
	g := Geometry{S: 1_000_000, N: 1000, M: 500}
	d := Decide(p, g)
	require.NoError(t, d.Err)
	cands := d.AppendCandidates(nil)
	// P=1: C_max = 30000 < C_min: one clamped candidate, C = 30000, K = 34.
	// P=2: C_max = 15000: one clamped candidate, K = 67.
	require.Len(t, cands, 3)
	require.Equal(t, Candidate{Mode: ModeGather, C: 30_000, P: 1, K: 34, Clamped: true,
		Pack: TPack(p, g, 1), Bulk: TBulk(p, g.S, 34), Total: TGather(p, g, 30_000, 1)}, cands[1])
	require.Equal(t, int64(15_000), cands[2].C)
	require.True(t, cands[2].Clamped)

	// Small payload: S < C_min, the whole payload is one chunk and P=2 is
	// skipped (one chunk cannot feed two workers).
	small := Geometry{S: 10_000, N: 100, M: 100}
	d = Decide(handParams(), small)
	cands = d.AppendCandidates(nil)
	require.Len(t, cands, 2)
	require.Equal(t, int64(10_000), cands[1].C)
	require.Equal(t, int64(1), cands[1].K)
	require.Equal(t, 1, cands[1].P)
}

func TestDecideWithoutGatherCandidates(t *testing.T) {
	tests := []struct {
		name string
		p    func(*Params)
		g    Geometry
	}{
		{"empty operation", func(*Params) {}, Geometry{}},
		{"no staging", func(p *Params) { p.StagingBudget = 0 }, Geometry{S: 1_000_000, N: 10_000, M: 10_000}},
		{"budget below one byte per worker", func(p *Params) { p.StagingBudget = 1; p.MaxP = 1 }, Geometry{S: 10, N: 10, M: 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := handParams()
			tc.p(&p)
			d := Decide(p, tc.g)
			require.NoError(t, d.Err)
			if tc.name == "budget below one byte per worker" {
				// 1 byte chunks are legal, just slow: there is a candidate.
				require.Equal(t, int64(1), d.Gather.C)
				return
			}
			require.Equal(t, ModeDirect, d.Mode)
			require.Equal(t, Forever, d.Gather.Total)
			require.Zero(t, d.Gather.C)
			require.Equal(t, 1, d.Evaluated)
			require.Equal(t, d.Direct, d.Chosen)
			require.Contains(t, d.String(), "no gather candidate")
		})
	}
}

func TestDecideInvalidInput(t *testing.T) {
	good := handParams()
	geom := Geometry{S: 1000, N: 10, M: 5}
	tests := []struct {
		name  string
		p     func(*Params)
		g     Geometry
		field string
		err   error
	}{
		{"zero link", func(p *Params) { p.BNet = 0 }, geom, "Params.BNet", ErrInvalidParams},
		{"NaN link", func(p *Params) { p.BNet = math.NaN() }, geom, "Params.BNet", ErrInvalidParams},
		{"infinite post rate", func(p *Params) { p.RPost = math.Inf(1) }, geom, "Params.RPost", ErrInvalidParams},
		{"queue depth 0", func(p *Params) { p.Q = 0 }, geom, "Params.Q", ErrInvalidParams},
		{"negative RTT", func(p *Params) { p.L = -time.Microsecond }, geom, "Params.L", ErrInvalidParams},
		{"negative pack bandwidth", func(p *Params) { p.BMem = -1 }, geom, "Params.BMem", ErrInvalidParams},
		{"zero copy rate", func(p *Params) { p.RCopy = 0 }, geom, "Params.RCopy", ErrInvalidParams},
		{"negative plan", func(p *Params) { p.TPlan = -1 }, geom, "Params.TPlan", ErrInvalidParams},
		{"negative plan per span", func(p *Params) { p.TPlanPerSpan = -1 }, geom, "Params.TPlanPerSpan", ErrInvalidParams},
		{"negative decode", func(p *Params) { p.TDecode = -1 }, geom, "Params.TDecode", ErrInvalidParams},
		{"negative decode per span", func(p *Params) { p.TDecodePerSpan = -1 }, geom, "Params.TDecodePerSpan", ErrInvalidParams},
		{"negative control", func(p *Params) { p.TControl = -1 }, geom, "Params.TControl", ErrInvalidParams},
		{"negative chunk cost", func(p *Params) { p.TChunkFixed = -1 }, geom, "Params.TChunkFixed", ErrInvalidParams},
		{"epsilon 0", func(p *Params) { p.Epsilon = 0 }, geom, "Params.Epsilon", ErrInvalidParams},
		{"epsilon above 1", func(p *Params) { p.Epsilon = 1.5 }, geom, "Params.Epsilon", ErrInvalidParams},
		{"negative margin", func(p *Params) { p.Margin = -0.1 }, geom, "Params.Margin", ErrInvalidParams},
		{"NaN margin", func(p *Params) { p.Margin = math.NaN() }, geom, "Params.Margin", ErrInvalidParams},
		{"negative budget", func(p *Params) { p.StagingBudget = -1 }, geom, "Params.StagingBudget", ErrInvalidParams},
		{"MaxP 0", func(p *Params) { p.MaxP = 0 }, geom, "Params.MaxP", ErrInvalidParams},
		{"MaxP too wide", func(p *Params) { p.MaxP = MaxPipelineWidth + 1 }, geom, "Params.MaxP", ErrInvalidParams},
		{"negative max chunk", func(p *Params) { p.MaxChunk = -1 }, geom, "Params.MaxChunk", ErrInvalidParams},
		{"too many steps", func(p *Params) { p.ChunkSteps = MaxChunkSteps + 1 }, geom, "Params.ChunkSteps", ErrInvalidParams},
		{"negative bytes", func(*Params) {}, Geometry{S: -1}, "Geometry.S", ErrInvalidGeometry},
		{"negative fragments", func(*Params) {}, Geometry{N: -1}, "Geometry.N", ErrInvalidGeometry},
		{"negative spans", func(*Params) {}, Geometry{M: -1}, "Geometry.M", ErrInvalidGeometry},
		{"more spans than fragments", func(*Params) {}, Geometry{S: 100, N: 5, M: 6}, "Geometry.M", ErrInvalidGeometry},
		{"fragments without spans", func(*Params) {}, Geometry{S: 100, N: 5}, "Geometry.M", ErrInvalidGeometry},
		{"fewer bytes than fragments", func(*Params) {}, Geometry{S: 4, N: 5, M: 5}, "Geometry.S", ErrInvalidGeometry},
		{"bytes without fragments", func(*Params) {}, Geometry{S: 4}, "Geometry.N", ErrInvalidGeometry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := good
			tc.p(&p)
			d := Decide(p, tc.g)
			require.ErrorIs(t, d.Err, tc.err)
			var fe *FieldError
			require.True(t, errors.As(d.Err, &fe))
			require.Equal(t, tc.field, fe.Field)
			require.Contains(t, d.Err.Error(), tc.field)
			require.Equal(t, ModeDirect, d.Mode)
			require.Equal(t, d.Direct, d.Chosen)
			require.Equal(t, []Candidate{d.Direct}, d.AppendCandidates(nil))
			require.Contains(t, d.String(), "choice    direct (fallback)")
		})
	}
	require.NoError(t, good.Validate())
	require.NoError(t, Geometry{}.Validate())
}

// checkDecision asserts the invariants every decision keeps.
func checkDecision(t testing.TB, p Params, g Geometry, d Decision) {
	t.Helper()
	require.NoError(t, d.Err)
	require.Equal(t, TDirect(p, g), d.Direct.Total)
	require.GreaterOrEqual(t, d.Direct.Total, time.Duration(0))
	cands := d.AppendCandidates(nil)
	require.Equal(t, d.Evaluated, len(cands))
	require.Equal(t, d.Direct, cands[0])
	best := Candidate{Total: Forever}
	for _, c := range cands[1:] {
		require.Equal(t, ModeGather, c.Mode)
		require.GreaterOrEqual(t, c.C, int64(1))
		require.LessOrEqual(t, c.C, g.S, "C <= S")
		require.LessOrEqual(t, int64(c.P)*c.C, p.StagingBudget, "P*C within the staging budget")
		require.GreaterOrEqual(t, c.P, 1)
		require.LessOrEqual(t, c.P, p.MaxP)
		require.Equal(t, Chunks(g.S, c.C), c.K)
		require.LessOrEqual(t, int64(c.P), c.K, "no more workers than chunks")
		if p.MaxChunk > 0 {
			require.LessOrEqual(t, c.C, p.MaxChunk)
		}
		if !c.Clamped {
			require.GreaterOrEqual(t, c.C, max(d.CMin, 1), "C >= C_min unless clamped")
		}
		require.Equal(t, TGather(p, g, c.C, c.P), c.Total, "candidate total is T_gather")
		require.Equal(t, TPack(p, g, c.P), c.Pack)
		require.Equal(t, TBulk(p, g.S, c.K), c.Bulk)
		require.GreaterOrEqual(t, c.Total, time.Duration(0))
		if c.Total < best.Total {
			best = c
		}
	}
	require.Equal(t, best.Total, d.Gather.Total, "best gather candidate")
	gatherOK := d.Gather.Total != Forever &&
		float64(d.Gather.Total)*(1+p.Margin) < float64(d.Direct.Total)
	if gatherOK {
		require.Equal(t, ModeGather, d.Mode)
		require.Equal(t, d.Gather, d.Chosen)
	} else {
		require.Equal(t, ModeDirect, d.Mode, "gather only when T_gather*(1+Margin) < T_direct")
		require.Equal(t, d.Direct, d.Chosen)
	}
}

func TestDecideInvariantsRandom(t *testing.T) {
	r := newRand(t)
	for range 2000 {
		p, g := randomParams(r), randomGeometry(r)
		checkDecision(t, p, g, Decide(p, g))
	}
}

func TestTDirectMonotonic(t *testing.T) {
	r := newRand(t)
	for range 2000 {
		p, g := randomParams(r), randomGeometry(r)
		base := TDirect(p, g)
		more := g
		more.N += 1 + r.Int64N(g.N+1)
		more.S += more.N - g.N // keep S >= N
		require.GreaterOrEqual(t, TDirect(p, more), base, "more fragments: %+v -> %+v", g, more)
		bigger := g
		bigger.S += 1 + r.Int64N(g.S)
		require.GreaterOrEqual(t, TDirect(p, bigger), base, "more bytes: %+v -> %+v", g, bigger)
	}
}

// tcpLike is a link whose per-fragment requests are round-trip bound:
// 3 GB/s, 150k requests/s, shallow queue.
func tcpLike() Params {
	return Params{
		BNet: 3e9, RPost: 150e3, Q: 16, L: 25 * time.Microsecond,
		BMem: 9e9, RCopy: 4e6,
		TPlan: 20 * time.Microsecond, TPlanPerSpan: 4 * time.Nanosecond,
		TDecode: 20 * time.Microsecond, TDecodePerSpan: 4 * time.Nanosecond,
		TControl: 50 * time.Microsecond, TChunkFixed: 5 * time.Microsecond,
		Epsilon: 0.05, Margin: 0.1, StagingBudget: 64 << 20, MaxP: 4,
	}
}

// rdmaLike is a one-sided link: 10.5 GB/s, 4M requests/s, deep queue,
// short round trips.
func rdmaLike() Params {
	return Params{
		BNet: 10.5e9, RPost: 4e6, Q: 256, L: 8 * time.Microsecond,
		BMem: 9e9, RCopy: 4e6,
		TPlan: 20 * time.Microsecond, TPlanPerSpan: 4 * time.Nanosecond,
		TDecode: 20 * time.Microsecond, TDecodePerSpan: 4 * time.Nanosecond,
		TControl: 30 * time.Microsecond, TChunkFixed: 2 * time.Microsecond,
		Epsilon: 0.05, Margin: 0.1, StagingBudget: 64 << 20, MaxP: 8,
	}
}

func TestDecideScenarios(t *testing.T) {
	fewLarge := Geometry{S: 64 * 512 << 10, N: 64, M: 64}
	manySmall := Geometry{S: 98_304 * 264, N: 98_304, M: 98_304}
	manyTiny := Geometry{S: 131_072 * 64, N: 131_072, M: 131_072}
	oneRow := Geometry{S: 264, N: 1, M: 1}
	tests := []struct {
		name string
		p    Params
		g    Geometry
		want Mode
	}{
		{"round-trip bound link, few large", tcpLike(), fewLarge, ModeDirect},
		{"round-trip bound link, many small", tcpLike(), manySmall, ModeGather},
		{"round-trip bound link, many tiny", tcpLike(), manyTiny, ModeGather},
		{"round-trip bound link, one row", tcpLike(), oneRow, ModeDirect},
		{"one-sided link, few large", rdmaLike(), fewLarge, ModeDirect},
		{"one-sided link, many small", rdmaLike(), manySmall, ModeGather},
		{"one-sided link, one row", rdmaLike(), oneRow, ModeDirect},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.p, tc.g)
			checkDecision(t, tc.p, tc.g, d)
			require.Equal(t, tc.want, d.Mode, "%s", d.String())
			t.Logf("%s: %s predicted %v (direct %v, best gather %v P=%d C=%d)",
				tc.name, d.Mode, d.Predicted(), d.Direct.Total, d.Gather.Total, d.Gather.P, d.Gather.C)
		})
	}
}

func TestDecideZeroAlloc(t *testing.T) {
	p := rdmaLike()
	g := Geometry{S: 98_304 * 264, N: 98_304, M: 98_304}
	var d Decision
	allocs := testing.AllocsPerRun(100, func() { d = Decide(p, g) })
	require.Zero(t, allocs)
	require.Equal(t, ModeGather, d.Mode)
	cands := make([]Candidate, 0, 64)
	allocs = testing.AllocsPerRun(100, func() { cands = d.AppendCandidates(cands[:0]) })
	require.Zero(t, allocs)
}

func TestExplain(t *testing.T) {
	d := Decide(handParams(), Geometry{S: 1_000_000, N: 1000, M: 500})
	out := d.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"geometry  S=976.562KiB N=1000 M=500",
		"B_net=1GB/s R_post=1M/s Q=4 L=10µs",
		"C_min=39.062KiB",
		"direct",
		"*gather  1  39.062KiB   25    550µs   1.01ms  1.29ms",
		"choice    gather P=1 C=39.062KiB: best gather 1.29ms x (1+0.1) = 1.419ms < direct 2.51ms",
	} {
		require.Contains(t, out, want)
	}
	require.Equal(t, out, string(d.AppendExplain(nil)))
}

func TestModeString(t *testing.T) {
	require.Equal(t, "direct", ModeDirect.String())
	require.Equal(t, "gather", ModeGather.String())
	require.Equal(t, "hybrid", ModeHybrid.String())
	require.Equal(t, "mode(9)", Mode(9).String())
}

func TestAppendUnits(t *testing.T) {
	require.Equal(t, "264B", string(appendBytes(nil, 264)))
	require.Equal(t, "64KiB", string(appendBytes(nil, 64<<10)))
	require.Equal(t, "1.5MiB", string(appendBytes(nil, 3<<19)))
	require.Equal(t, "8EiB", string(appendBytes(nil, math.MaxInt64)))
	require.Equal(t, "3GB/s", string(appendSI(nil, 3e9, "B/s")))
	require.Equal(t, "150k/s", string(appendSI(nil, 150e3, "/s")))
	require.Equal(t, "0.5/s", string(appendSI(nil, 0.5, "/s")))
	require.Equal(t, "forever", string(appendDuration(nil, Forever)))
}

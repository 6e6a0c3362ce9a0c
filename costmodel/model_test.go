package costmodel

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// handParams are round numbers so every formula can be worked by hand.
func handParams() Params {
	return Params{
		BNet:           1e9, // 1 GB/s
		RPost:          1e6, // 1 M requests/s
		Q:              4,
		L:              10 * time.Microsecond,
		BMem:           2e9, // 2 GB/s per worker
		RCopy:          1e7, // 10 M spans/s per worker
		TPlan:          100 * time.Microsecond,
		TPlanPerSpan:   100 * time.Nanosecond,
		TControl:       30 * time.Microsecond,
		TDecode:        20 * time.Microsecond,
		TDecodePerSpan: 40 * time.Nanosecond,
		TChunkFixed:    2 * time.Microsecond,
		Epsilon:        0.05,
		Margin:         0.1,
		StagingBudget:  1_000_000,
		MaxP:           2,
		ChunkSteps:     2,
	}
}

func TestTDirectByHand(t *testing.T) {
	p := handParams()
	tests := []struct {
		name string
		g    Geometry
		want time.Duration
	}{
		// 10us + max(1e6/1e9 = 1ms + 1000/1e6 = 1ms, ceil(1000/4)=250 * 10us = 2.5ms) = 2.51ms
		{"round trips bound", Geometry{S: 1_000_000, N: 1000, M: 500}, 2510 * time.Microsecond},
		// 10us + max(8e6/1e9 = 8ms + 1000/1e6 = 1ms, 250*10us = 2.5ms) = 9.01ms
		{"link and posts", Geometry{S: 8_000_000, N: 1000, M: 1000}, 9010 * time.Microsecond},
		// with Q = 4000 (set below): 10us + max(1ms + 3000/1e6 = 3ms, 1*10us) = 4.01ms
		{"post rate", Geometry{S: 1_000_000, N: 3000, M: 3000}, 4010 * time.Microsecond},
		// empty: 10us + max(0 + 0, 0) = 10us
		{"empty", Geometry{}, 10 * time.Microsecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := p
			if tc.name == "post rate" {
				q.Q = 4000
			}
			require.Equal(t, tc.want, TDirect(q, tc.g))
		})
	}
}

// TestTDirectPerRequestByHand: T_direct adds N*TDirectPerRequest to the
// window's terms, and Validate refuses a negative one.
func TestTDirectPerRequestByHand(t *testing.T) {
	p := handParams()
	p.TDirectPerRequest = 50 * time.Nanosecond
	// 1000 * 50ns = 50us + 10us + max(8ms + 1ms, 2.5ms) = 9.06ms
	require.Equal(t, 9060*time.Microsecond, TDirect(p, Geometry{S: 8_000_000, N: 1000, M: 1000}))
	// With RequestsOverlap: 50us + 10us + max(8ms, 1ms, 2.5ms) = 8.06ms
	p.RequestsOverlap = true
	require.Equal(t, 8060*time.Microsecond, TDirect(p, Geometry{S: 8_000_000, N: 1000, M: 1000}))
	p.TDirectPerRequest = -time.Nanosecond
	require.ErrorContains(t, p.Validate(), "TDirectPerRequest")
}

func TestTPackByHand(t *testing.T) {
	p := handParams()
	g := Geometry{S: 1_000_000, N: 1000, M: 500}
	// P=1: 1e6/(1*2e9) = 500us + 500/(1*1e7) = 50us -> 550us
	require.Equal(t, 550*time.Microsecond, TPack(p, g, 1))
	// P=2: 1e6/(2*2e9) = 250us + 500/(2*1e7) = 25us -> 275us
	require.Equal(t, 275*time.Microsecond, TPack(p, g, 2))
	// P=0 divides by zero: saturates instead of panicking.
	require.Equal(t, Forever, TPack(p, g, 0))
}

func TestTBulkByHand(t *testing.T) {
	p := handParams()
	// K=4: 10us + max(1e6/1e9 = 1ms, 4/1e6 = 4us, ceil(4/4)=1 * 10us) = 1.01ms
	require.Equal(t, 1010*time.Microsecond, TBulk(p, 1_000_000, 4))
	// K=100_000 (tiny chunks): 10us + max(1ms, 100ms, 25000*10us = 250ms) = 250.01ms
	require.Equal(t, 250010*time.Microsecond, TBulk(p, 1_000_000, 100_000))
}

func TestChunks(t *testing.T) {
	tests := []struct{ s, c, want int64 }{
		{1_000_000, 250_000, 4}, // exact
		{1_000_000, 262_144, 4}, // 3.81 -> 4
		{1, 1 << 20, 1},         // one short chunk
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64 - 1, 2}, // no overflow in the rounding
		{100, 0, 0},                           // no chunk size
		{0, 100, 0},                           // no bytes
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, Chunks(tc.s, tc.c), "Chunks(%d, %d)", tc.s, tc.c)
	}
}

func TestTFrontAndTGatherByHand(t *testing.T) {
	p := handParams()
	g := Geometry{S: 1_000_000, N: 1000, M: 500}
	// T_plan = 100us + 500*100ns = 150us; T_control = 30us;
	// T_decode = 20us + 500*40ns = 40us; front = 220us.
	require.Equal(t, 220*time.Microsecond, TFront(p, g))

	tests := []struct {
		name string
		c    int64
		w    int
		want time.Duration
	}{
		// K = 4, T_pack(2) = 275us, T_bulk = 1.01ms (link bound)
		// 220 + 250000/2e9 = 125 + max(275, 1010) + 250000/1e9 = 250 -> 1605us
		{"link bound", 250_000, 2, 1605 * time.Microsecond},
		// K = 25, T_pack(1) = 550us, T_bulk = 10 + max(1000, 25, ceil(25/4)=7*10) = 1010us
		// 220 + 40000/2e9 = 20 + 1010 + 40000/1e9 = 40 -> 1290us
		{"C_min chunks", 40_000, 1, 1290 * time.Microsecond},
		// K = 1: 220 + 1e6/2e9 = 500 + max(550, 1010) + 1e6/1e9 = 1000 -> 2730us
		{"one chunk", 1_000_000, 1, 2730 * time.Microsecond},
		{"no chunk size", 0, 1, Forever},
		{"no workers", 1000, 0, Forever},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, TGather(p, g, tc.c, tc.w))
		})
	}

	// A pack-bound case: slow packing, 1 worker.
	// T_pack = 1e6/1e8 = 10ms + 500/1e5 = 5ms = 15ms > T_bulk 1.01ms
	// 220us + 250000/1e8 = 2.5ms + 15ms + 250us -> 17.97ms
	slow := p
	slow.BMem, slow.RCopy = 1e8, 1e5
	require.Equal(t, 17970*time.Microsecond, TGather(slow, g, 250_000, 1))
}

func TestCMinCMaxByHand(t *testing.T) {
	p := handParams()
	// max(1e9 * 10us = 10000 B, 1e9 * 2us / 0.05 = 40000 B) = 40000
	require.Equal(t, int64(40_000), CMin(p))
	q := p
	q.L = 100 * time.Microsecond
	// max(1e9 * 100us = 100000, 40000) = 100000: the bandwidth-delay product wins
	require.Equal(t, int64(100_000), CMin(q))
	q.L, q.TChunkFixed = 0, 0
	require.Equal(t, int64(0), CMin(q))

	g := Geometry{S: 1_000_000, N: 1000, M: 500}
	require.Equal(t, int64(1_000_000), CMax(p, g, 1)) // min(1e6/1, 1e6)
	require.Equal(t, int64(500_000), CMax(p, g, 2))   // min(1e6/2, 1e6)
	require.Equal(t, int64(1000), CMax(p, Geometry{S: 1000, N: 1, M: 1}, 2))
	q = p
	q.MaxChunk = 64 << 10
	require.Equal(t, int64(64<<10), CMax(q, g, 2))
	require.Equal(t, int64(0), CMax(p, g, 0))
}

func TestTHybridByHand(t *testing.T) {
	p := handParams()
	p.Q = 1000
	d := Geometry{S: 8_000_000, N: 8, M: 8}           // 8 large ranges
	g := Geometry{S: 1_000_000, N: 10_000, M: 10_000} // 100 B fragments
	// T_direct(D) = 10us + max(8ms + 8us, 1*10us) = 8.018ms
	// T_gather(G), C = 500000, P = 2: K = 2;
	//   front = 100 + 10000*0.1 = 1000 + 30 + 20 + 10000*0.04 = 400 -> 1550us
	//   T_pack = 1e6/4e9 = 250us + 10000/2e7 = 500us -> 750us
	//   T_bulk = 10 + max(1000, 2, 10) = 1010us
	//   1550 + 250 + 1010 + 500 = 3310us
	// link: 10us + max(9e6/1e9 = 9ms + 8/1e6 = 8us, ceil(10/1000)*10us) = 9.018ms
	// T_hybrid = max(8.018ms, 3.31ms, 9.018ms) = 9.018ms
	require.Equal(t, 3310*time.Microsecond, TGather(p, g, 500_000, 2))
	require.Equal(t, 9018*time.Microsecond, THybrid(p, d, g, 500_000, 2))
	// Empty parts reduce to the other part.
	require.Equal(t, TDirect(p, d), THybrid(p, d, Geometry{}, 500_000, 2))
	require.Equal(t, TGather(p, g, 500_000, 2), THybrid(p, Geometry{}, g, 500_000, 2))
	require.Equal(t, Forever, THybrid(p, d, g, 0, 2))
}

func TestDurationSaturates(t *testing.T) {
	tests := []struct {
		sec  float64
		want time.Duration
	}{
		{0.00251, 2510 * time.Microsecond},
		{0, 0},
		{-1, 0},
		{math.NaN(), Forever},
		{math.Inf(1), Forever},
		{1e10, Forever}, // 317 years
		{9.2e9, time.Duration(9.2e18)},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, duration(tc.sec), "duration(%g)", tc.sec)
	}
	// Absurd but valid parameters saturate rather than overflow.
	p := handParams()
	p.BNet = 1e-3
	require.Equal(t, Forever, TDirect(p, Geometry{S: math.MaxInt64, N: 1, M: 1}))
}

func TestBytesUp(t *testing.T) {
	require.Equal(t, int64(40_000), bytesUp(40_000.000000001)) // float noise is not a byte
	require.Equal(t, int64(40_001), bytesUp(40_000.5))
	require.Equal(t, int64(1), bytesUp(0.2))
	require.Equal(t, int64(0), bytesUp(math.NaN()))
	require.Equal(t, int64(math.MaxInt64), bytesUp(math.Inf(1)))
}

func TestParseCacheSize(t *testing.T) {
	for in, want := range map[string]int64{
		"32768K": 32 << 20, "1M": 1 << 20, "2G": 2 << 30, "512": 512,
		"": 0, "K": 0, "-4K": 0, "12Q": 0, "99999999999999999999K": 0,
	} {
		require.Equal(t, want, parseCacheSize(in), "parseCacheSize(%q)", in)
	}
}

package costmodel

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// newRand returns a generator from a fresh seed and logs the seed, so a
// failure can be replayed.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	t.Logf("seed %#x", seed)
	return rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
}

// logUniform draws from [lo, hi) evenly in log space.
func logUniform(r *rand.Rand, lo, hi float64) float64 {
	return lo * math.Pow(hi/lo, r.Float64())
}

func randomDuration(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return time.Duration(logUniform(r, float64(lo), float64(hi)))
}

// randomParams covers links from 10 MB/s to 100 GB/s, post rates from 10k
// to 100M per second, and the policy ranges an engine would configure.
func randomParams(r *rand.Rand) Params {
	return Params{
		BNet:           logUniform(r, 1e7, 1e11),
		RPost:          logUniform(r, 1e4, 1e8),
		Q:              1 + r.IntN(4096),
		L:              randomDuration(r, 500*time.Nanosecond, 10*time.Millisecond),
		BMem:           logUniform(r, 1e8, 1e11),
		RCopy:          logUniform(r, 1e5, 1e8),
		TPlan:          randomDuration(r, time.Nanosecond, time.Millisecond),
		TPlanPerSpan:   randomDuration(r, time.Nanosecond, 100*time.Nanosecond),
		TDecode:        randomDuration(r, time.Nanosecond, time.Millisecond),
		TDecodePerSpan: randomDuration(r, time.Nanosecond, 100*time.Nanosecond),
		TControl:       randomDuration(r, time.Microsecond, 10*time.Millisecond),
		TChunkFixed:    randomDuration(r, 10*time.Nanosecond, 100*time.Microsecond),
		Epsilon:        logUniform(r, 0.001, 1),
		Margin:         r.Float64() * 0.5,
		StagingBudget:  int64(logUniform(r, 1, 1<<34)),
		MaxP:           1 + r.IntN(64),
		MaxChunk:       int64(r.IntN(2)) * int64(logUniform(r, 4096, 1<<30)),
		ChunkSteps:     r.IntN(MaxChunkSteps + 1),
	}
}

// randomGeometry draws N from 1 to 10M fragments of 1 B to 4 MiB mean,
// with a random share coalesced.
func randomGeometry(r *rand.Rand) Geometry {
	n := int64(logUniform(r, 1, 1e7))
	mean := logUniform(r, 1, 4<<20)
	s := max(int64(float64(n)*mean), n)
	m := 1 + r.Int64N(n)
	return Geometry{S: s, N: n, M: m}
}

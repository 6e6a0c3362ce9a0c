package bufferpool

import (
	"errors"
	"flag"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

var seedFlag = flag.Uint64("seed", 0, "seed for random inputs (0 picks one from the clock)")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newRand returns a generator from a logged seed; rerun a failure with -seed.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return newRandSeed(seed)
}

// newTestPool creates a pool (skipping where the arena is not supported)
// and checks at cleanup that the test released every lease: Close must
// succeed, so a leaked lease fails the test that leaked it.
func newTestPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	p, err := New(cfg)
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("arena not supported here: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		err := p.Close()
		if errors.Is(err, ErrClosed) {
			return // the test closed it itself
		}
		require.NoError(t, err, "leases leaked by the test")
	})
	return p
}

// fill writes non-zero pseudo-random bytes derived from key into b.
func fill(b []byte, key uint64) {
	x := key*0x9e3779b97f4a7c15 | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x>>24) | 1
	}
}

// filled reports whether b holds exactly what fill(b, key) wrote.
func filled(b []byte, key uint64) bool {
	x := key*0x9e3779b97f4a7c15 | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if b[i] != byte(x>>24)|1 {
			return false
		}
	}
	return true
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func newRandSeed(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

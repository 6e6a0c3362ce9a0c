package owner

import (
	"context"
	"flag"
	"math/rand/v2"
	"testing"
	"time"

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
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

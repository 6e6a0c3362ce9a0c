package bench

import (
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/scatterkit/scatterkit/tools/internal/owner"
)

// ownerEnv makes this test binary run owner mode instead of the tests, so
// -owner process and netns can be tested without building scatterbench.
const ownerEnv = "SCATTERBENCH_TEST_OWNER"

var seedFlag = flag.Uint64("seed", 0, "seed for random inputs (0 picks one from the clock)")

func TestMain(m *testing.M) {
	if os.Getenv(ownerEnv) == "1" && len(os.Args) > 1 && os.Args[1] == EngramOwnerMode {
		os.Exit(EngramOwnerMain(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if os.Getenv(ownerEnv) == "1" {
		os.Exit(owner.Main(context.Background(), "owner", os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// testSeed returns a logged seed; rerun a failure with -seed.
func testSeed(t testing.TB) uint64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) & (1<<53 - 1)
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return seed
}

func newRand(t testing.TB) *rand.Rand {
	s := testSeed(t)
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// selfOwner makes c start this test binary as its process owner.
func selfOwner(t testing.TB, c *Config) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c.ownerCommand = []string{exe}
	c.ownerEnv = []string{ownerEnv + "=1"}
}

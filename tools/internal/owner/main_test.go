package owner

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var seedFlag = flag.Uint64("seed", 0, "seed for random inputs (0 picks one from the clock)")

// daemonEnv names the environment variable that makes the test binary run
// Main as a scatterd daemon instead of the tests: it holds Main's
// arguments as a JSON array of strings (memory_attack_test.go starts the
// owner this way so that its memory is its own process's).
const daemonEnv = "SCATTERD_TEST_DAEMON"

func TestMain(m *testing.M) {
	if args := os.Getenv(daemonEnv); args != "" {
		os.Exit(runDaemon(args))
	}
	goleak.VerifyTestMain(m)
}

// runDaemon runs Main with the JSON array of arguments js, on this
// process's standard streams, and returns its exit status.
func runDaemon(js string) int {
	var args []string
	if err := json.Unmarshal([]byte(js), &args); err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", daemonEnv, js, err)
		return 2
	}
	return Main(context.Background(), "scatterd", args, os.Stdin, os.Stdout, os.Stderr)
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

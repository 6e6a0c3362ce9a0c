package snapshot

import (
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

var seedFlag = flag.Uint64("seed", 0, "seed for random inputs (0 picks one from the clock)")

// childEnv names the environment variable that makes the test binary act
// as a child process for the crash, sharing and pinning tests.
const childEnv = "SNAPSHOT_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
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

func newRandSeed(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
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

// makeRows returns the rows of spec derived from key.
func makeRows(spec Spec, key uint64) []byte {
	b := make([]byte, spec.Size())
	fill(b, key)
	return b
}

// entries returns every name in dir, hidden ones included.
func entries(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// newDir makes a fresh empty directory under the test's temp dir.
func newDir(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.Mkdir(dir, 0o755))
	return dir
}

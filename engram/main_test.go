package engram

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// childEnv names the environment variable that makes the test binary act
// as a child process (clean_linux_test.go).
const childEnv = "ENGRAM_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	goleak.VerifyTestMain(m)
}

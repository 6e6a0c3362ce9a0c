package reshard

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when goroutines they started are
// still running afterwards: transports, engines or gather services left
// open, an operation nobody waited for.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

package tcp_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var backend = verbstest.Backend{
	Name:             "tcp",
	New:              func() verbs.Transport { return tcp.New(tcp.Config{}) },
	Addr:             func(testing.TB) string { return "127.0.0.1:0" },
	ExposeRegistered: true,
}

func TestConformance(t *testing.T) {
	verbstest.Run(t, backend)
}

// TestConformanceUnchecked runs the suite on connections whose two sides
// agreed to drop the frames' checksums (Config.NoChecksums).
func TestConformanceUnchecked(t *testing.T) {
	b := backend
	b.Name = "tcp-unchecked"
	b.New = func() verbs.Transport { return tcp.New(tcp.Config{NoChecksums: true}) }
	verbstest.Run(t, b)
}

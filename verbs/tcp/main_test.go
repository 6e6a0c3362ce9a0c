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

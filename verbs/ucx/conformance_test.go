//go:build ucx

package ucx_test

import (
	"testing"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
	"github.com/scatterkit/scatterkit/verbs/ucx"
)

// backend is the UCX transport for the shared suite, over the UCX
// transports tls (UCX_TLS) on loopback.
func backend(t *testing.T, tls string) verbstest.Backend {
	t.Setenv("UCX_TLS", tls)
	t.Setenv("UCX_NET_DEVICES", "lo")
	return verbstest.Backend{
		Name: "ucx-" + tls,
		New: func() verbs.Transport {
			tr, err := ucx.New(ucx.Config{})
			if err != nil {
				t.Fatalf("ucx.New: %v", err)
			}
			return tr
		},
		Addr:             func(testing.TB) string { return "127.0.0.1:0" },
		ExposeRegistered: true,
	}
}

// TestConformanceTCP runs the suite with UCX's one-sided operations over
// its tcp transport.
func TestConformanceTCP(t *testing.T) { verbstest.Run(t, backend(t, "tcp")) }

// TestConformanceSHM runs it over UCX's shared-memory transports (posix
// for the messages, cma for the one-sided copies).
func TestConformanceSHM(t *testing.T) { verbstest.Run(t, backend(t, "posix,cma")) }

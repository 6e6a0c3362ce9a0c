package etcd_test

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/scatterkit/scatterkit/verbs/discovery/etcd/etcdtest"
)

// server is the etcd server shared by the tests of this binary (a fresh key
// prefix per test). It starts on first use, so that runs that need none (the
// fuzz target) start none, and stops in TestMain.
var server struct {
	once     sync.Once
	s        *etcdtest.Server
	endpoint string
	err      error
}

// serverEndpoint returns the client address of the shared server, starting
// it on first use.
func serverEndpoint(t testing.TB) string {
	t.Helper()
	server.once.Do(func() {
		start := time.Now()
		server.s, server.err = etcdtest.Start()
		if server.err != nil {
			return
		}
		server.endpoint = server.s.Endpoint()
		t.Logf("embedded etcd at %s ready in %v", server.endpoint, time.Since(start).Round(time.Millisecond))
	})
	if server.err != nil {
		t.Fatalf("start embedded etcd: %v", server.err)
	}
	return server.endpoint
}

func TestMain(m *testing.M) {
	code := m.Run()
	if server.s != nil {
		server.s.Close()
	}
	if code == 0 {
		if err := goleak.Find(leakOptions...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakOptions lists goroutines allowed to outlive the tests. None: once the
// clients and the server are closed, etcd 3.7 leaves no goroutine behind.
var leakOptions []goleak.Option

package etcd_test

import (
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// server is the etcd server shared by the tests of this binary (a fresh key
// prefix per test). It starts on first use, so that runs that need none (the
// fuzz target) start none, and stops in TestMain.
var server struct {
	once     sync.Once
	e        *embed.Etcd
	dir      string
	endpoint string
	err      error
}

// serverEndpoint returns the client address of the shared server, starting
// it on first use.
func serverEndpoint(t testing.TB) string {
	t.Helper()
	server.once.Do(func() {
		start := time.Now()
		server.dir, server.err = os.MkdirTemp("", "discovery-etcd-*")
		if server.err != nil {
			return
		}
		server.e, server.err = startEtcd(server.dir)
		if server.err != nil {
			return
		}
		server.endpoint = server.e.Clients[0].Addr().String()
		t.Logf("embedded etcd at %s ready in %v", server.endpoint, time.Since(start).Round(time.Millisecond))
	})
	if server.err != nil {
		t.Fatalf("start embedded etcd: %v", server.err)
	}
	return server.endpoint
}

func TestMain(m *testing.M) {
	code := m.Run()
	if server.e != nil {
		server.e.Close()
	}
	if server.dir != "" {
		os.RemoveAll(server.dir)
	}
	if code == 0 {
		if err := goleak.Find(leakOptions...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startEtcd starts a single-member etcd on loopback with ports chosen by the
// kernel (port 0), a data folder under dir, fast ticks and no logs.
func startEtcd(dir string) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "discovery-test"
	cfg.Dir = dir
	loop := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{loop}
	cfg.AdvertiseClientUrls = []url.URL{loop}
	cfg.ListenPeerUrls = []url.URL{loop}
	cfg.AdvertisePeerUrls = []url.URL{loop}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.UnsafeNoFsync = true // a test server: nothing to keep
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd not ready in 30 s")
	}
}

// leakOptions lists goroutines allowed to outlive the tests. None: once the
// clients and the server are closed, etcd 3.7 leaves no goroutine behind.
var leakOptions []goleak.Option

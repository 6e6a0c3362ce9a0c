// Package etcdtest starts a real single-member etcd server on loopback for
// tests: this module's own, and those of programs that wire the etcd
// directory (tools' scatterd and engramctl tests). It embeds the server
// (go.etcd.io/etcd/server/v3/embed), so a test needs no etcd binary.
package etcdtest

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is a running embedded etcd.
type Server struct {
	e   *embed.Etcd
	dir string
}

// Start starts a single-member etcd on 127.0.0.1 with ports chosen by the
// kernel, its data in a fresh folder under os.TempDir (removed by Close),
// fast ticks (elections in 100 ms, so leases expire on time in a test), no
// fsync and no logs. It waits up to 30 s for the server to be ready.
func Start() (*Server, error) {
	dir, err := os.MkdirTemp("", "etcdtest-*")
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
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
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{e: e, dir: dir}
	select {
	case <-e.Server.ReadyNotify():
		return s, nil
	case err := <-e.Err():
		s.Close()
		return nil, err
	case <-time.After(30 * time.Second):
		s.Close()
		return nil, errors.New("etcdtest: server not ready in 30 s")
	}
}

// Endpoint returns the client address, host:port.
func (s *Server) Endpoint() string { return s.e.Clients[0].Addr().String() }

// URI returns an etcd:// directory URI of the server with the given key
// prefix (see etcd.ParseURI), for example URI("/t1/", "ttl=2s").
func (s *Server) URI(prefix, query string) string {
	u := fmt.Sprintf("etcd://%s%s", s.Endpoint(), prefix)
	if query != "" {
		u += "?" + query
	}
	return u
}

// Close stops the server and removes its data.
func (s *Server) Close() {
	s.e.Close()
	os.RemoveAll(s.dir)
}

package engram

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
	"github.com/scatterkit/scatterkit/engram/internal/remote"
	"github.com/scatterkit/scatterkit/engram/snapshot"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// openRemote connects to the owner and checks that it serves every table
// of the store with the same spec.
func (s *Store) openRemote(ctx context.Context, rc *RemoteConfig) error {
	given := 0
	for _, set := range []bool{rc.Addr != "", len(rc.Shards) > 0, rc.Directory != nil} {
		if set {
			given++
		}
	}
	if rc.Transport == nil || given != 1 {
		return fmt.Errorf("%w: a remote store needs a Transport and exactly one of Addr, Shards and Directory", ErrConfig)
	}
	from := rc.Shards
	if rc.Directory != nil {
		var err error
		if from, err = shardsFromDirectory(ctx, rc.Directory, s.ns, rc.Transport.Name(), s.names); err != nil {
			return err
		}
		for _, name := range s.names {
			if !slices.ContainsFunc(from, func(sh RemoteShard) bool { return sh.Table == name }) {
				return &TableError{Table: name, Op: "open", Err: fmt.Errorf("%w: no record of it under %q", ErrUnknownTable, DirectoryPrefix(s.ns))}
			}
		}
	}
	shards := make([]remote.Shard, len(from))
	for i, sh := range from {
		shards[i] = remote.Shard{Table: sh.Table, Served: sh.Served, Lo: sh.Lo, Hi: sh.Hi, Addrs: sh.Addrs}
	}
	where := rc.Addr
	if where == "" {
		where = fmt.Sprintf("of %d shards", len(shards))
	}
	c, err := remote.Dial(ctx, remote.ClientConfig{
		Transport:    rc.Transport,
		Addr:         rc.Addr,
		Shards:       shards,
		Namespace:    s.ns,
		OutputBytes:  rc.BufferBytes,
		Engine:       rc.Engine,
		Connect:      rc.Connect,
		Mode:         rc.Mode,
		DeviceWindow: rc.DeviceWindow,
	})
	if err != nil {
		var ce *remote.ConfigError
		if errors.As(err, &ce) { // a bad RemoteConfig (its shards): the store's config error
			if rc.Directory != nil { // the shards are what the directory holds now
				return fmt.Errorf("%w: remote: the directory's records under %q: %w", ErrConfig, DirectoryPrefix(s.ns), err)
			}
			return fmt.Errorf("%w: remote: %w", ErrConfig, err)
		}
		return fmt.Errorf("engram: remote owner %s: %w", where, err)
	}
	for _, name := range s.names {
		t := s.tables[name]
		got, ok := c.Spec(name)
		if !ok {
			c.Close()
			return &TableError{Table: name, Op: "open", Err: fmt.Errorf("%w: the owner %s does not serve it", ErrUnknownTable, where)}
		}
		if got.NumRows != t.spec.NumRows || got.RowBytes != t.spec.RowBytes {
			c.Close()
			return &TableError{Table: name, Op: "open", Err: &snapshot.SpecMismatchError{
				Want: snapshot.Spec{Name: name, NumRows: t.spec.NumRows, RowBytes: t.spec.RowBytes},
				Got:  snapshot.Spec{Name: name, NumRows: got.NumRows, RowBytes: got.RowBytes},
			}}
		}
		t.remote = true
	}
	s.remote = c
	return nil
}

// remoteTables is a remote store's tables as the lookup check resolves
// them (lookup.Tables): those the store opened, with the owner's specs
// (checked equal at Open) and its client's output arena. Its methods run
// under the store's lock.
type remoteTables Store

func (v *remoteTables) Column(name string) (lookup.Column, error) {
	if _, ok := v.tables[name]; !ok { // the owner may serve more than the store opened
		return lookup.Column{}, &TableError{Table: name, Op: "lookup", Err: ErrUnknownTable}
	}
	return v.remote.Column(name)
}

func (v *remoteTables) Arena() []byte { return v.remote.Arena() }

// Ping measures one control round trip to a remote store's owner (an
// empty call): the latency floor of a remote lookup.
func (s *Store) Ping(ctx context.Context) (time.Duration, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	if s.remote == nil {
		return 0, fmt.Errorf("%w: Ping needs a remote store", ErrConfig)
	}
	return s.remote.Ping(ctx)
}

func (s *Store) newRemoteBuffer(n int) (*Buffer, error) {
	o, err := s.remote.NewOutput(n)
	if err != nil {
		return nil, fmt.Errorf("engram: buffer of %d bytes: %w", n, err)
	}
	return &Buffer{b: o.Bytes(), release: func() { o.Release() }}, nil
}

// ServeConfig configures Store.Serve.
type ServeConfig struct {
	// Transport serves the segment (verbs/tcp across hosts). The server
	// does not close it.
	Transport verbs.Transport
	// Addr is where to listen ("127.0.0.1:0" for tcp).
	Addr string
	// StagingBytes is the gather service's staging (default 64 MiB).
	StagingBytes int64
	// Listen tunes the segment.
	Listen verbs.ListenOptions
	// Directory, when set, receives a record per served table while the
	// server runs (see DirectoryPrefix), so remote stores find it by
	// namespace (RemoteConfig.Directory).
	Directory discovery.Directory
	// Shards names the served tables that are row ranges of a larger
	// table (served name -> where its rows lie), for their records.
	Shards map[string]ShardOf
}

// Server serves a local store's populated tables to remote stores.
type Server struct {
	s    *Store
	srv  *remote.Server
	regs []discovery.Registration // its directory records
	once sync.Once
	err  error
}

// Serve exports the store's populated tables, read-only, to remote stores
// (Config.Remote) over cfg.Transport: requesters read rows and nothing
// else; every request and gather command is checked against the tables'
// registered memory. The tables stay mapped while the server runs: Remove
// refuses a served table, and Close closes the server first.
func (s *Store) Serve(cfg ServeConfig) (*Server, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.remote != nil {
		return nil, fmt.Errorf("%w: a remote store cannot serve its owner's tables", ErrConfig)
	}
	var tables []remote.Table
	for _, name := range s.names {
		if t := s.tables[name]; t.rows != nil {
			tables = append(tables, remote.Table{Name: name, NumRows: t.spec.NumRows, RowBytes: t.spec.RowBytes, Rows: t.rows})
		}
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("%w: no populated table to serve", ErrNotPopulated)
	}
	srv, err := remote.Serve(remote.ServerConfig{Transport: cfg.Transport, Addr: cfg.Addr, Namespace: s.ns,
		Tables: tables, StagingBytes: cfg.StagingBytes, Listen: cfg.Listen})
	if err != nil {
		return nil, fmt.Errorf("engram: serve: %w", err)
	}
	sv := &Server{s: s, srv: srv}
	if cfg.Directory != nil {
		if err := sv.publish(context.Background(), cfg.Directory, cfg.Transport.Name(), cfg.Shards); err != nil {
			return nil, errors.Join(err, srv.Close())
		}
	}
	s.servers = append(s.servers, sv)
	return sv, nil
}

// Addr returns the address remote stores connect to.
func (sv *Server) Addr() string { return sv.srv.Addr() }

// Tables returns the names of the served tables.
func (sv *Server) Tables() []string {
	var out []string
	for _, t := range sv.srv.Specs() {
		out = append(out, t.Name)
	}
	return out
}

// Close stops serving (closing the connections of remote stores). It is
// idempotent.
func (sv *Server) Close() error {
	sv.s.mu.Lock()
	defer sv.s.mu.Unlock()
	return sv.closeLocked()
}

func (sv *Server) closeLocked() error {
	sv.once.Do(func() {
		sv.err = errors.Join(sv.withdraw(), sv.srv.Close())
		for i, x := range sv.s.servers {
			if x == sv {
				sv.s.servers = append(sv.s.servers[:i], sv.s.servers[i+1:]...)
				break
			}
		}
	})
	return sv.err
}

// serving reports whether an open server exports the named table.
func (s *Store) serving(name string) bool {
	for _, sv := range s.servers {
		for _, t := range sv.srv.Specs() {
			if t.Name == name {
				return true
			}
		}
	}
	return false
}

package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/verbs"
)

// Control methods of an Engram owner (see # Format). They sit next to the
// gather service's methods (0x4701, 0x4702) on the owner's segment.
const (
	// MethodTables answers an empty request with the owner's table list.
	MethodTables uint16 = 0x4501
	// MethodPing answers an empty request with an empty reply: one round
	// trip of the control path, the RTT a lookup's latency is measured
	// against.
	MethodPing uint16 = 0x4502
)

// DefaultStagingBytes is the owner's gather staging when
// ServerConfig.StagingBytes is zero.
const DefaultStagingBytes = 64 << 20

// minStagingBytes is one staging slot of the default pool.
const minStagingBytes = bufferpool.DefaultMinSlot

// ServerConfig configures Serve.
type ServerConfig struct {
	// Transport registers the tables and serves the segment. The Server
	// does not close it.
	Transport verbs.Transport
	// Addr is the backend-specific address to listen at ("127.0.0.1:0"
	// for tcp, an "@abstract" name for shm).
	Addr string
	// Namespace names the table set; clients must ask for the same one.
	Namespace string
	// Tables are served read-only, exported under ExportName(Namespace,
	// Name). Their Rows must stay valid and unchanged until Close.
	Tables []Table
	// StagingBytes is the gather service's staging pool (default 64 MiB,
	// at least 64 KiB).
	StagingBytes int64
	// Listen configures the segment.
	Listen verbs.ListenOptions
	// Gather is a template for the gather service: its Segment, Exports
	// and Staging are set by Serve; the rest (calibration, workers,
	// limits) is used as given, zero fields taking verbs' defaults. A nil
	// Calibration runs verbs' startup calibration (about 50 ms).
	Gather gather.Config
}

// Server is an Engram owner: it serves its tables to remote lookups. Its
// methods are safe for concurrent use.
type Server struct {
	tr        verbs.Transport
	namespace string
	specs     []TableSpec
	copied    bool
	addr      string
	reply     []byte // the encoded table list, MethodTables' answer

	mu      sync.Mutex
	regions []*verbs.Region // table registrations, nil once deregistered
	seg     verbs.Segment
	staging *staging.Staging
	svc     *gather.Service
}

// Serve registers cfg's tables, listens and starts answering lookups.
// On error everything it created is released.
func Serve(cfg ServerConfig) (s *Server, err error) {
	if err := checkServerConfig(&cfg); err != nil {
		return nil, err
	}
	list := TableList{Namespace: cfg.Namespace, Tables: make([]TableSpec, len(cfg.Tables))}
	for i, t := range cfg.Tables {
		list.Tables[i] = t.Spec()
	}
	reply, err := AppendTables(nil, &list)
	if err != nil {
		return nil, err
	}
	s = &Server{tr: cfg.Transport, namespace: cfg.Namespace, specs: list.Tables, reply: reply}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
			s = nil
		}
	}()
	exports, err := s.register(cfg.Tables, false)
	if err != nil {
		return s, err
	}
	seg, err := cfg.Transport.Listen(cfg.Addr, exports, cfg.Listen)
	if errors.Is(err, verbs.ErrNotSupported) {
		// The backend cannot share caller memory (shm): serve copies in
		// memory it allocates.
		if err = s.deregister(); err != nil {
			return s, err
		}
		if exports, err = s.register(cfg.Tables, true); err != nil {
			return s, err
		}
		s.copied = true
		seg, err = cfg.Transport.Listen(cfg.Addr, exports, cfg.Listen)
	}
	if err != nil {
		return s, fmt.Errorf("engram: listen: %w", err)
	}
	s.seg = seg
	staging, err := staging.New(cfg.Transport, bufferpool.Config{Budget: int(cfg.StagingBytes), Prefault: true}, verbs.AccessLocal)
	if err != nil {
		return s, fmt.Errorf("engram: staging: %w", err)
	}
	s.staging = staging
	sc := cfg.Gather
	sc.Segment, sc.Exports, sc.Staging = s.seg, exports, s.staging
	svc, err := gather.NewService(sc)
	if err != nil {
		return s, fmt.Errorf("engram: gather service: %w", err)
	}
	s.svc = svc
	s.addr = s.seg.Addr()
	s.seg.Handle(MethodTables, verbs.HandlerFunc(s.serveTables))
	s.seg.Handle(MethodPing, verbs.HandlerFunc(servePing))
	return s, nil
}

func checkServerConfig(cfg *ServerConfig) error {
	bad := func(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }
	switch {
	case cfg.Transport == nil:
		return bad("Transport", "nil")
	case cfg.Addr == "":
		return bad("Addr", "empty")
	case cfg.StagingBytes < 0:
		return bad("StagingBytes", fmt.Sprintf("%d: negative", cfg.StagingBytes))
	case cfg.StagingBytes > 0 && cfg.StagingBytes < minStagingBytes:
		return bad("StagingBytes", fmt.Sprintf("%d: at least %d (one staging slot)", cfg.StagingBytes, minStagingBytes))
	case int64(int(cfg.StagingBytes)) != cfg.StagingBytes:
		return bad("StagingBytes", fmt.Sprintf("%d: larger than this platform's address space", cfg.StagingBytes))
	}
	if cfg.StagingBytes == 0 {
		cfg.StagingBytes = DefaultStagingBytes
	}
	if r := checkName(cfg.Namespace, MaxNamespaceLen); r != "" {
		return bad("Namespace", r)
	}
	if len(cfg.Tables) == 0 || len(cfg.Tables) > MaxTables {
		return bad("Tables", fmt.Sprintf("%d tables: must lie in [1, %d]", len(cfg.Tables), MaxTables))
	}
	for i, t := range cfg.Tables {
		if f, r := checkSpec(t.Spec()); r != "" {
			return bad(fmt.Sprintf("Tables[%d].%s", i, f), r)
		}
		if int64(len(t.Rows)) != t.Spec().Bytes() {
			return bad(fmt.Sprintf("Tables[%d].Rows", i), fmt.Sprintf("%d bytes, want %d rows of %d = %d",
				len(t.Rows), t.NumRows, t.RowBytes, t.Spec().Bytes()))
		}
		for j := range i {
			if cfg.Tables[j].Name == t.Name {
				return bad(fmt.Sprintf("Tables[%d].Name", i), fmt.Sprintf("%q repeats Tables[%d]", t.Name, j))
			}
		}
	}
	return nil
}

// register registers every table for remote READ only: the caller's
// memory as is, or (copy) a transport-allocated copy of it.
func (s *Server) register(tables []Table, copyRows bool) ([]verbs.Export, error) {
	exports := make([]verbs.Export, 0, len(tables))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tables {
		var r *verbs.Region
		var err error
		if copyRows {
			if r, err = s.tr.Alloc(len(t.Rows), verbs.AccessRemoteRead); err == nil {
				copy(r.Bytes(), t.Rows)
			}
		} else {
			r, err = s.tr.Register(t.Rows, verbs.AccessRemoteRead)
		}
		if err != nil {
			return nil, fmt.Errorf("engram: register table %q: %w", t.Name, err)
		}
		s.regions = append(s.regions, r)
		exports = append(exports, verbs.Export{Name: ExportName(s.namespace, t.Name), Region: r})
	}
	return exports, nil
}

// deregister forgets the table registrations; a failed one stays listed
// so a later Close retries it.
func (s *Server) deregister() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	kept := s.regions[:0]
	for _, r := range s.regions {
		if err := s.tr.Deregister(r); err != nil && !errors.Is(err, verbs.ErrClosed) {
			errs = append(errs, fmt.Errorf("engram: deregister table: %w", err))
			kept = append(kept, r)
		}
	}
	clear(s.regions[len(kept):])
	s.regions = kept
	return errors.Join(errs...)
}

// serveTables answers MethodTables.
func (s *Server) serveTables(_ context.Context, _ verbs.Peer, req, resp []byte) ([]byte, error) {
	if len(req) != 0 {
		return nil, fmt.Errorf("engram: tables request of %d bytes, want none", len(req))
	}
	return append(resp, s.reply...), nil
}

// servePing answers MethodPing.
func servePing(_ context.Context, _ verbs.Peer, req, resp []byte) ([]byte, error) {
	if len(req) != 0 {
		return nil, fmt.Errorf("engram: ping request of %d bytes, want none", len(req))
	}
	return resp, nil
}

// Addr returns the address clients dial.
func (s *Server) Addr() string { return s.addr }

// Namespace returns the namespace served.
func (s *Server) Namespace() string { return s.namespace }

// Specs returns the tables served, in configuration order.
func (s *Server) Specs() []TableSpec { return append([]TableSpec(nil), s.specs...) }

// Copied reports whether the tables are served from copies (a backend that
// cannot export caller memory, such as shm) rather than from the caller's
// Rows.
func (s *Server) Copied() bool { return s.copied }

// Stats returns the gather service's counters.
func (s *Server) Stats() gather.Stats {
	s.mu.Lock()
	svc := s.svc
	s.mu.Unlock()
	if svc == nil {
		return gather.Stats{}
	}
	return svc.Stats()
}

// Close stops the gather service, closes the segment (ending every client
// connection), releases the staging and deregisters the tables. It is
// idempotent; a step that failed is retried by the next Close.
func (s *Server) Close() error {
	s.mu.Lock()
	var errs []error
	// The segment first: every connection ends, so no gather command
	// waits on a peer (a stuck requester cannot hold Close).
	if s.seg != nil {
		if err := s.seg.Close(); err != nil {
			errs = append(errs, fmt.Errorf("engram: segment: %w", err))
		} else {
			s.seg = nil
		}
	}
	if s.svc != nil {
		if err := s.svc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("engram: gather service: %w", err))
		} else {
			s.svc = nil
		}
	}
	if s.staging != nil {
		if err := s.staging.Close(); err != nil {
			errs = append(errs, fmt.Errorf("engram: staging: %w", err))
		} else {
			s.staging = nil
		}
	}
	s.mu.Unlock()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return s.deregister()
}

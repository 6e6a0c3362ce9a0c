package engram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
	"github.com/scatterkit/scatterkit/engram/internal/remote"
	"github.com/scatterkit/scatterkit/engram/snapshot"
	"github.com/scatterkit/scatterkit/verbs"
)

// Pin says how a local store holds its tables in memory.
type Pin uint8

const (
	// PinBestEffort (the default) reads every page of each table when it
	// is opened and locks it in memory (mlock) when the process may; when
	// it may not (no CAP_IPC_LOCK, RLIMIT_MEMLOCK too small), the pages
	// stay populated but unlocked, and Store.Stats reports the table as
	// not locked.
	PinBestEffort Pin = iota
	// PinRequired fails Open and Populate when a table cannot be locked.
	PinRequired
	// PinNone maps tables without reading them ahead: pages come in on
	// first use (first lookups are slower).
	PinNone
)

func (p Pin) snapshotMode() snapshot.PinMode {
	switch p {
	case PinRequired:
		return snapshot.PinRequired
	case PinNone:
		return snapshot.PinNone
	}
	return snapshot.PinBestEffort
}

// Config configures Open. Set exactly one of Dir and Remote.
type Config struct {
	// Tables selects the tables of the namespace this store serves, by
	// name. Names and the namespace use letters, digits, '.', '_' and
	// '-' and do not start with '.'.
	Tables map[string]TableSpec
	// Namespace groups tables: a local store keeps them in Dir/Namespace.
	Namespace string
	// Dir is the local directory holding namespaces.
	Dir string
	// Remote opens the tables of a remote owner instead (see Serve).
	Remote *RemoteConfig

	// Pin is how local tables are held in memory (default PinBestEffort).
	Pin Pin
	// SkipRowChecksums opens existing snapshots checking their header and
	// size only, not every row block's checksum (faster to open a huge
	// table; corruption inside the rows then goes unnoticed).
	SkipRowChecksums bool
	// Workers is how many goroutines, the caller included, a large CPU
	// lookup uses (default GOMAXPROCS, at most 8).
	Workers int
}

// RemoteConfig reaches tables a remote owner serves (Serve).
type RemoteConfig struct {
	// Transport is the requester's transport (e.g. verbs/tcp).
	Transport verbs.Transport
	// Addr is the owner's segment address: one owner serves every table
	// whole. Set either Addr or Shards.
	Addr string
	// Shards spread the tables over several owners by row ranges, with
	// replicas: see RemoteShard. Every table of the store must be tiled by
	// its shards from row 0, without gaps or overlaps.
	Shards []RemoteShard
	// Directory, set instead of Addr and Shards, places the tables from
	// the records their owners' servers publish (ServeConfig.Directory):
	// every served table or shard of them under DirectoryPrefix(namespace)
	// over this store's transport, each record of one shard a replica.
	Directory discovery.Directory
	// BufferBytes is the size of the registered memory Store.NewBuffer
	// hands out, into which the owner writes lookup rows (default 64 MiB).
	BufferBytes int64
	// Engine runs the scatter operations; nil makes one for the store.
	Engine *engine.Engine
	// Connect tunes the connection (lanes, queue depth, link parameters).
	Connect verbs.ConnectOptions
	// Mode forces the transfer mode of every lookup's operations (for
	// comparisons); the zero value, engine.ModeAuto, lets the engine's cost
	// model decide.
	Mode engine.Mode
	// DeviceWindow bounds the device bytes one piece of a LookupDevice
	// covers: each operation's bounce in the buffer memory is up to
	// engine.DefaultDeviceDepth windows (default
	// engine.DefaultDeviceWindow, at least 4 KiB).
	DeviceWindow int64
}

// RemoteShard places rows [Lo, Hi) of table Table on the owners at Addrs.
// Each of them serves those rows as its table Served (Hi-Lo rows; row r of
// it is row Lo+r of Table; Served defaults to Table and must differ from
// it on an owner that holds several shards of one table). The addresses
// are replicas, tried in order: a lookup reads the shard from the first
// one that has not failed, and when one fails a transfer, the lookup reads
// that shard's rows from the next without the caller noticing. When none
// is left the lookup fails whole with a *ShardError naming the shard.
type RemoteShard struct {
	Table  string
	Served string
	Lo, Hi int64
	Addrs  []string
}

// Store is an Engram store: a namespace of immutable byte tables, local
// (snapshot files mapped from a directory) or served by a remote owner.
// All methods are safe for concurrent use; Lookup calls run in parallel
// with each other and wait only for Remove and Close.
type Store struct {
	mu     sync.RWMutex
	closed bool

	ns     string
	dir    string // Dir/Namespace, local stores only
	names  []string
	tables map[string]*table

	openOpts snapshot.OpenOptions
	eng      *lookup.Engine
	scratch  sync.Pool // *lookupScratch

	remote  *remote.Client
	unpin   func() error // PinBuffers' release
	servers []*Server
	devices []*DeviceTables
}

type table struct {
	name   string
	spec   TableSpec
	snap   *snapshot.Table // nil while not populated (local)
	rows   []byte
	remote bool // served by the remote owner
}

type lookupScratch struct {
	cols []lookup.Column
}

// Open opens a store. A local store creates Dir/Namespace when it does
// not exist, removes the temporary files that creators killed midway left
// there (snapshot.CleanTemp: only files no live process holds), maps every
// selected table that has a snapshot there (validating it against its
// spec and pinning it as Config.Pin says), and leaves the others to
// Populate. Removing those files is best effort: one that cannot be
// removed (a read-only directory) is never taken for a table, and the next
// Open tries again. A remote store connects to the owner and
// checks that it serves every selected table with the same spec.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if len(cfg.Tables) == 0 {
		return nil, fmt.Errorf("%w: no tables", ErrConfig)
	}
	if (cfg.Dir == "") == (cfg.Remote == nil) {
		return nil, fmt.Errorf("%w: set exactly one of Dir and Remote", ErrConfig)
	}
	if err := snapshot.ValidName(cfg.Namespace); err != nil {
		return nil, fmt.Errorf("%w: namespace: %w", ErrConfig, err)
	}
	if cfg.Pin > PinNone {
		return nil, fmt.Errorf("%w: pin mode %d", ErrConfig, cfg.Pin)
	}
	s := &Store{
		ns:       cfg.Namespace,
		tables:   make(map[string]*table, len(cfg.Tables)),
		openOpts: snapshot.OpenOptions{Pin: cfg.Pin.snapshotMode(), SkipRowChecksums: cfg.SkipRowChecksums},
	}
	for name, spec := range cfg.Tables {
		if err := snapshot.ValidName(name); err != nil {
			return nil, fmt.Errorf("%w: table name: %w", ErrConfig, err)
		}
		if err := spec.check(name); err != nil {
			return nil, err
		}
		s.names = append(s.names, name)
		s.tables[name] = &table{name: name, spec: spec}
	}
	slices.Sort(s.names)
	s.scratch.New = func() any { return new(lookupScratch) }

	if cfg.Remote != nil {
		if err := s.openRemote(ctx, cfg.Remote); err != nil {
			return nil, err
		}
		return s, nil
	}
	s.dir = filepath.Join(cfg.Dir, cfg.Namespace)
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("engram: namespace directory: %w", err)
	}
	_, _ = snapshot.CleanTemp(s.dir) // best effort, see above
	for _, name := range s.names {
		t := s.tables[name]
		if err := s.mapTable(t); err != nil && !errors.Is(err, snapshot.ErrNotExist) {
			s.closeTables()
			return nil, &TableError{Table: name, Op: "open", Err: err}
		}
	}
	s.eng = lookup.NewEngine(cfg.Workers)
	return s, nil
}

// mapTable maps t's snapshot, checked against t's spec.
func (s *Store) mapTable(t *table) error {
	want := snapshot.Spec{Name: t.name, NumRows: t.spec.NumRows, RowBytes: t.spec.RowBytes}
	snap, err := snapshot.Open(s.dir, t.name, &want, &s.openOpts)
	if err != nil {
		return err
	}
	t.snap, t.rows = snap, snap.Rows
	return nil
}

func (s *Store) closeTables() {
	for _, t := range s.tables {
		if t.snap != nil {
			t.snap.Close()
			t.snap, t.rows = nil, nil
		}
	}
}

// Namespace returns the store's namespace.
func (s *Store) Namespace() string { return s.ns }

// Tables returns the names of the store's tables, sorted.
func (s *Store) Tables() []string { return slices.Clone(s.names) }

// TableSpec returns the spec of the named table.
func (s *Store) TableSpec(name string) (TableSpec, error) {
	t, ok := s.tables[name]
	if !ok {
		return TableSpec{}, &TableError{Table: name, Op: "spec", Err: ErrUnknownTable}
	}
	return t.spec, nil
}

// Populated reports whether the named table holds rows.
func (s *Store) Populated(name string) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return false, ErrClosed
	}
	t, ok := s.tables[name]
	if !ok {
		return false, &TableError{Table: name, Op: "query", Err: ErrUnknownTable}
	}
	return t.rows != nil || t.remote, nil
}

// Populate copies rows (NumRows x RowBytes bytes, row after row) into a
// new snapshot of the named table and maps it. It is create-only: a table
// that already holds rows, here or in another process sharing the
// directory, fails with ErrExists and keeps its rows. The snapshot is
// published atomically: a crash leaves no table or a whole one.
func (s *Store) Populate(name string, rows []byte) error {
	return s.populate(name, func(spec snapshot.Spec) error {
		if int64(len(rows)) != spec.Size() {
			return fmt.Errorf("%w: %d bytes, want %d", ErrRowsSize, len(rows), spec.Size())
		}
		return snapshot.Create(s.dir, spec, rows, nil)
	})
}

// PopulateFrom is Populate with the rows read from src (exactly NumRows x
// RowBytes bytes, streamed in bounded chunks).
func (s *Store) PopulateFrom(name string, src io.Reader) error {
	return s.populate(name, func(spec snapshot.Spec) error {
		return snapshot.CreateFrom(s.dir, spec, src, nil)
	})
}

func (s *Store) populate(name string, create func(snapshot.Spec) error) error {
	s.mu.RLock()
	closed, remote := s.closed, s.remote != nil
	t, ok := s.tables[name]
	populated := ok && t.rows != nil
	s.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case remote:
		return &TableError{Table: name, Op: "populate", Err: ErrReadOnly}
	case !ok:
		return &TableError{Table: name, Op: "populate", Err: ErrUnknownTable}
	case populated:
		return &TableError{Table: name, Op: "populate", Err: ErrExists}
	}
	spec := snapshot.Spec{Name: name, NumRows: t.spec.NumRows, RowBytes: t.spec.RowBytes}
	if err := create(spec); err != nil {
		if errors.Is(err, snapshot.ErrExists) {
			err = fmt.Errorf("%w: %w", ErrExists, err)
		}
		return &TableError{Table: name, Op: "populate", Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if t.rows != nil { // another Populate of this store won the race
		return &TableError{Table: name, Op: "populate", Err: ErrExists}
	}
	if err := s.mapTable(t); err != nil {
		return &TableError{Table: name, Op: "open", Err: err}
	}
	return nil
}

// Remove deletes the named table's snapshot and unmaps it, after the
// lookups in flight have finished. The table stays declared: Populate may
// create it again. Other processes that have it mapped keep their mapping.
func (s *Store) Remove(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.remote != nil {
		return &TableError{Table: name, Op: "remove", Err: ErrReadOnly}
	}
	t, ok := s.tables[name]
	if !ok {
		return &TableError{Table: name, Op: "remove", Err: ErrUnknownTable}
	}
	if s.serving(name) || s.mapped(name) {
		return &TableError{Table: name, Op: "remove", Err: ErrServed}
	}
	if err := snapshot.Remove(s.dir, name, nil); err != nil {
		if errors.Is(err, snapshot.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrNotPopulated, err)
		}
		return &TableError{Table: name, Op: "remove", Err: err}
	}
	if t.snap != nil {
		t.snap.Close()
		t.snap, t.rows = nil, nil
	}
	return nil
}

// Stats describes the store's tables and, for a remote store, what its
// lookups did.
type Stats struct {
	Tables []TableStats
	Remote *RemoteStats
}

// RemoteStats counts a remote store's lookups and the scatter operations
// they ran.
type RemoteStats struct {
	// Lookups counts successful lookups; Failed those that returned an
	// error.
	Lookups, Failed uint64
	// Ops counts scatter operations; Direct, Gather and Hybrid the
	// successful ones by the mode they ran in; Fallbacks those whose
	// planned gather ran direct.
	Ops, Direct, Gather, Hybrid, Fallbacks uint64
	// Bytes is the payload the operations moved.
	Bytes uint64
}

// TableStats describes one table.
type TableStats struct {
	Name      string
	Spec      TableSpec
	Populated bool
	Locked    bool   // pinned with mlock (local stores)
	Path      string // snapshot file (local stores)
}

// Stats returns the state of every table, sorted by name.
func (s *Store) Stats() (Stats, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return Stats{}, ErrClosed
	}
	var st Stats
	for _, name := range s.names {
		t := s.tables[name]
		ts := TableStats{Name: name, Spec: t.spec, Populated: t.rows != nil || t.remote}
		if t.snap != nil {
			ts.Locked, ts.Path = t.snap.Locked, t.snap.Path
		}
		st.Tables = append(st.Tables, ts)
	}
	if s.remote != nil {
		rs := s.remote.Stats()
		st.Remote = &RemoteStats{Lookups: rs.Lookups, Failed: rs.Failed, Ops: rs.Ops, Direct: rs.Direct,
			Gather: rs.Gather, Hybrid: rs.Hybrid, Fallbacks: rs.Fallbacks, Bytes: rs.Bytes}
	}
	return st, nil
}

// Close unmaps every table (waiting for lookups in flight), stops the
// lookup workers and, for a remote store, closes the connection. Buffers
// from NewBuffer must not be used afterwards. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	for len(s.servers) > 0 {
		err = errors.Join(err, s.servers[0].closeLocked())
	}
	for len(s.devices) > 0 {
		err = errors.Join(err, s.devices[0].closeLocked())
	}
	s.closeTables()
	if s.eng != nil {
		s.eng.Close()
	}
	if s.remote != nil {
		err = errors.Join(err, s.releasePin(), s.remote.Close())
	}
	return err
}

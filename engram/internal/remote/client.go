package remote

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/verbs"
)

// DefaultOutputBytes is the client's output arena when
// ClientConfig.OutputBytes is zero.
const DefaultOutputBytes = 64 << 20

// OutputAlign is the granularity of the output arena: every Output starts
// at a multiple of it and occupies at least this many bytes.
const OutputAlign = 4096

// outputExport is the name the output arena is exposed under.
const outputExport = "engram:output"

// DefaultLanes is the tcp lanes of the connection when
// ClientConfig.Connect.Lanes is zero: one, not verbs' default of 4. A
// lookup is latency-bound; on one lane a batch of requests is one write
// and its answers one read, where four lanes pay four round trips of
// goroutine hand-offs (measured about twice as slow for 24 to 96 direct
// rows on loopback). Set Lanes for bandwidth-bound use.
const DefaultLanes = 1

// keepStates bounds the idle per-lookup states a client keeps.
const keepStates = 8

// ClientConfig configures Dial.
type ClientConfig struct {
	// Transport registers the output arena and connects. The Client does
	// not close it.
	Transport verbs.Transport
	// Addr is the owner's address (Server.Addr): one owner serves every
	// table whole. Set either Addr or Shards.
	Addr string
	// Shards spread tables over several owners by row ranges: the
	// client's tables are the ones the shards name, each tiled by its
	// shards from row 0 without gaps or overlaps. Every address of a
	// shard serves its rows as a table of the same name and Hi-Lo rows.
	Shards []Shard
	// Namespace must equal the owner's.
	Namespace string
	// OutputBytes is the registered output arena that Outputs are leased
	// from (default 64 MiB, at least OutputAlign).
	OutputBytes int64
	// Engine runs the lookups' scatter operations; nil makes the Client
	// its own (closed by Close). A shared engine must outlive the Client.
	Engine *engine.Engine
	// Connect configures the connection; the output arena is added to
	// its Expose list. Lanes zero means DefaultLanes.
	Connect verbs.ConnectOptions
	// Mode forces the engine's mode for every operation; the zero value,
	// engine.ModeAuto, lets the cost model decide.
	Mode engine.Mode
	// DeviceWindow bounds the destination bytes one piece of a device
	// lookup (RunDevice) covers, and so its bounce: Depth windows a part
	// (default engine.DefaultDeviceWindow; at least OutputAlign).
	DeviceWindow int64
}

// Shard places rows [Lo, Hi) of table Table on the owners at Addrs: each
// serves those rows as its table Served (Hi-Lo rows, row r of it is row
// Lo+r of the table; Served defaults to Table, and must differ from it
// for an owner that holds several shards of one table). The addresses are replicas: a lookup reads the
// shard from the first one that has not failed, and a replica that fails
// a lookup's transfer is not used again by this Client (its rows are read
// from the next one within the same lookup).
type Shard struct {
	Table  string
	Served string
	Lo, Hi int64
	Addrs  []string
}

// owner is one connected owner.
type owner struct {
	addr    string
	conn    verbs.Conn
	exposed bool
}

// replica is a shard's table on one owner.
type replica struct {
	owner int
	info  verbs.RegionInfo
}

// placement is one shard of a table: its rows and replicas, and the
// replica lookups read it from (the first that has not failed).
type placement struct {
	lo, hi   int64
	replicas []replica
	live     atomic.Int32
}

// tableLayout is where a table's rows live: one placement per shard, cut at
// byte offsets cuts (cuts[i] = shard i's first row times the row size).
type tableLayout struct {
	cuts   []uint64
	shards []*placement
}

// Client looks rows up from one owner, or from the owners of a sharded
// table set. Its methods are safe for concurrent
// use: each lookup takes its own reusable state from a small free list, so
// concurrent lookups share no lock beyond a read lock that Close waits on.
type Client struct {
	namespace string
	mode      engine.Mode
	devWindow uint64 // DeviceWindow
	specs     []TableSpec
	index     map[string]int
	remote    []verbs.RegionInfo // per table, as the owner exports it (one owner)
	exposed   bool               // every owner has the arena exposed
	ownEngine bool
	engine    *engine.Engine
	conn      verbs.Conn // the one owner's (not sharded)
	owners    []*owner
	layouts   []tableLayout // per table
	sharded   bool
	staging   *staging.Staging
	local     *verbs.Region // the arena's registration
	arena     []byte

	states chan *lookupState

	mu     sync.RWMutex // lookups hold it for reading, Close for writing
	closed bool

	stats struct {
		lookups, failed, ops, direct, gather, hybrid, fallbacks, bytes atomic.Uint64
	}
}

// Stats counts what a Client did.
type Stats struct {
	// Lookups counts successful lookups; Failed those that returned an
	// error (validation included).
	Lookups, Failed uint64
	// Ops counts scatter operations that ran (successful or not); Direct,
	// Gather and Hybrid the successful ones by the mode they ran in.
	Ops, Direct, Gather, Hybrid uint64
	// Fallbacks counts operations whose planned gather ran direct.
	Fallbacks uint64
	// Bytes is the payload of successful operations.
	Bytes uint64
}

// Dial connects to the owner at cfg.Addr: it creates and exposes the output
// arena, fetches the table list and checks it against the owner's exports.
// On error everything it created is released.
func Dial(ctx context.Context, cfg ClientConfig) (c *Client, err error) {
	if err := checkClientConfig(&cfg); err != nil {
		return nil, err
	}
	c = &Client{namespace: cfg.Namespace, mode: cfg.Mode, states: make(chan *lookupState, keepStates),
		devWindow: uint64(cfg.DeviceWindow)}
	if c.devWindow == 0 {
		c.devWindow = engine.DefaultDeviceWindow
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
			c = nil
		}
	}()
	staging, err := staging.New(cfg.Transport,
		bufferpool.Config{Budget: int(cfg.OutputBytes), MinSlot: OutputAlign, Prefault: true},
		verbs.AccessLocal|verbs.AccessRemoteWrite)
	if err != nil {
		return c, fmt.Errorf("engram: output arena: %w", err)
	}
	c.staging = staging
	c.local = c.staging.Region()
	c.arena = c.local.Bytes()
	if len(cfg.Shards) == 0 {
		o, list, err := c.dialOwner(ctx, &cfg, cfg.Addr)
		if err != nil {
			return c, err
		}
		c.conn, c.exposed = o.conn, o.exposed
		if err := c.bind(list.Tables); err != nil {
			return c, err
		}
		c.layouts = make([]tableLayout, len(c.specs))
		for i, sp := range c.specs {
			pl := &placement{lo: 0, hi: sp.NumRows, replicas: []replica{{owner: 0, info: c.remote[i]}}}
			c.layouts[i] = tableLayout{cuts: []uint64{0, uint64(sp.Bytes())}, shards: []*placement{pl}}
		}
	} else if err := c.dialShards(ctx, &cfg); err != nil {
		return c, err
	}
	if cfg.Engine != nil {
		c.engine = cfg.Engine
	} else {
		eng, err := engine.New(engine.Config{})
		if err != nil {
			return c, fmt.Errorf("engram: engine: %w", err)
		}
		c.engine, c.ownEngine = eng, true
	}
	// Ask for the gather capability now, so the first lookup does not.
	for _, o := range c.owners {
		if _, err := c.engine.Prepare(ctx, o.conn); err != nil && !errors.Is(err, verbs.ErrNotSupported) {
			return c, fmt.Errorf("engram: gather capability of %s: %w", o.addr, err)
		}
	}
	return c, nil
}

// dialOwner connects to the owner at addr, exposing the output arena
// where the backend can, and fetches its table list (its namespace
// checked). The owner joins c.owners, so Close closes it.
func (c *Client) dialOwner(ctx context.Context, cfg *ClientConfig, addr string) (*owner, *TableList, error) {
	opts := cfg.Connect
	if opts.Lanes == 0 {
		opts.Lanes = DefaultLanes
	}
	opts.Expose = append(append([]verbs.Export(nil), cfg.Connect.Expose...), c.staging.Export(outputExport))
	o := &owner{addr: addr, exposed: true}
	conn, err := cfg.Transport.Connect(ctx, addr, opts)
	if errors.Is(err, verbs.ErrNotSupported) {
		// The backend cannot expose registered memory (shm): connect
		// without it; the engine then copies through its mapping.
		opts.Expose, o.exposed = cfg.Connect.Expose, false
		conn, err = cfg.Transport.Connect(ctx, addr, opts)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("engram: connect %s: %w", addr, err)
	}
	o.conn = conn
	c.owners = append(c.owners, o)
	resp, err := conn.Call(ctx, MethodTables, nil, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("engram: table list of %s: %w", addr, err)
	}
	list := new(TableList)
	if err := DecodeTables(list, resp); err != nil {
		return nil, nil, err
	}
	if list.Namespace != cfg.Namespace {
		return nil, nil, &NamespaceError{Want: cfg.Namespace, Got: list.Namespace}
	}
	return o, list, nil
}

// dialShards connects to every owner the shards name (once each) and
// builds the tables' layouts from the shards and the owners' lists.
func (c *Client) dialShards(ctx context.Context, cfg *ClientConfig) error {
	c.sharded = true
	c.exposed = true
	c.index = map[string]int{}
	ownerOf := map[string]int{}
	lists := map[int]*TableList{}
	for _, sh := range cfg.Shards {
		ti, ok := c.index[sh.Table]
		if !ok {
			ti = len(c.specs)
			c.index[sh.Table] = ti
			c.specs = append(c.specs, TableSpec{Name: sh.Table})
			c.layouts = append(c.layouts, tableLayout{})
		}
		pl := &placement{lo: sh.Lo, hi: sh.Hi}
		served := cmp.Or(sh.Served, sh.Table)
		for _, addr := range sh.Addrs {
			oi, ok := ownerOf[addr]
			if !ok {
				o, list, err := c.dialOwner(ctx, cfg, addr)
				if err != nil {
					return err
				}
				oi = len(c.owners) - 1
				ownerOf[addr], lists[oi] = oi, list
				c.exposed = c.exposed && o.exposed
			}
			var got *TableSpec
			for i := range lists[oi].Tables {
				if lists[oi].Tables[i].Name == served {
					got = &lists[oi].Tables[i]
				}
			}
			spec := &c.specs[ti]
			switch {
			case got == nil:
				return &MismatchError{Table: sh.Table, Reason: fmt.Sprintf("the owner at %s does not serve its shard [%d, %d) as %q", addr, sh.Lo, sh.Hi, served)}
			case got.NumRows != sh.Hi-sh.Lo:
				return &MismatchError{Table: sh.Table, Reason: fmt.Sprintf("the owner at %s serves %d rows, its shard [%d, %d) holds %d",
					addr, got.NumRows, sh.Lo, sh.Hi, sh.Hi-sh.Lo)}
			case spec.RowBytes != 0 && got.RowBytes != spec.RowBytes:
				return &MismatchError{Table: sh.Table, Reason: fmt.Sprintf("the owner at %s serves rows of %d bytes, another shard's owner %d",
					addr, got.RowBytes, spec.RowBytes)}
			}
			spec.RowBytes = got.RowBytes
			info, err := bindExport(c.owners[oi].conn, c.namespace, *got)
			if err != nil {
				return err
			}
			pl.replicas = append(pl.replicas, replica{owner: oi, info: info})
		}
		c.layouts[ti].shards = append(c.layouts[ti].shards, pl)
	}
	for ti := range c.specs {
		lay := &c.layouts[ti]
		spec := &c.specs[ti]
		slices.SortFunc(lay.shards, func(a, b *placement) int { return cmp.Compare(a.lo, b.lo) })
		var next int64
		for _, pl := range lay.shards {
			if pl.lo != next {
				return &ConfigError{Field: "Shards", Reason: fmt.Sprintf("table %q: rows [%d, %d) are not covered by exactly one shard", spec.Name, min(next, pl.lo), max(next, pl.lo))}
			}
			lay.cuts = append(lay.cuts, uint64(pl.lo)*uint64(spec.RowBytes))
			next = pl.hi
		}
		spec.NumRows = next
		lay.cuts = append(lay.cuts, uint64(next)*uint64(spec.RowBytes))
	}
	return nil
}

func checkClientConfig(cfg *ClientConfig) error {
	bad := func(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }
	switch {
	case cfg.Transport == nil:
		return bad("Transport", "nil")
	case cfg.Addr == "" && len(cfg.Shards) == 0:
		return bad("Addr", "empty (and no Shards)")
	case cfg.Addr != "" && len(cfg.Shards) > 0:
		return bad("Shards", "set with Addr: one or the other")
	case cfg.OutputBytes < 0:
		return bad("OutputBytes", fmt.Sprintf("%d: negative", cfg.OutputBytes))
	case cfg.DeviceWindow < 0 || (cfg.DeviceWindow > 0 && cfg.DeviceWindow < OutputAlign):
		return bad("DeviceWindow", fmt.Sprintf("%d: 0 (the default) or at least %d", cfg.DeviceWindow, OutputAlign))
	case cfg.OutputBytes > 0 && cfg.OutputBytes < OutputAlign:
		return bad("OutputBytes", fmt.Sprintf("%d: at least %d", cfg.OutputBytes, OutputAlign))
	case int64(int(cfg.OutputBytes)) != cfg.OutputBytes:
		return bad("OutputBytes", fmt.Sprintf("%d: larger than this platform's address space", cfg.OutputBytes))
	case cfg.Mode > engine.ModeHybrid:
		return bad("Mode", cfg.Mode.String())
	}
	if r := checkName(cfg.Namespace, MaxNamespaceLen); r != "" {
		return bad("Namespace", r)
	}
	for i, sh := range cfg.Shards {
		field := fmt.Sprintf("Shards[%d]", i)
		if r := checkName(sh.Table, MaxNameLen); r != "" {
			return bad(field+".Table", r)
		}
		if sh.Served != "" {
			if r := checkName(sh.Served, MaxNameLen); r != "" {
				return bad(field+".Served", r)
			}
		}
		switch {
		case sh.Lo < 0 || sh.Hi <= sh.Lo:
			return bad(field, fmt.Sprintf("rows [%d, %d): need 0 <= Lo < Hi", sh.Lo, sh.Hi))
		case len(sh.Addrs) == 0:
			return bad(field+".Addrs", "empty")
		}
		for j, a := range sh.Addrs {
			if a == "" || slices.Contains(sh.Addrs[:j], a) {
				return bad(fmt.Sprintf("%s.Addrs[%d]", field, j), fmt.Sprintf("%q: empty or repeated", a))
			}
		}
	}
	if cfg.OutputBytes == 0 {
		cfg.OutputBytes = DefaultOutputBytes
	}
	return nil
}

// bind finds each table's export on the one owner and checks it against
// the spec.
func (c *Client) bind(specs []TableSpec) error {
	c.specs = specs
	c.index = make(map[string]int, len(specs))
	c.remote = make([]verbs.RegionInfo, len(specs))
	for i, s := range specs {
		info, err := bindExport(c.conn, c.namespace, s)
		if err != nil {
			return err
		}
		c.index[s.Name] = i
		c.remote[i] = info
	}
	return nil
}

// bindExport finds table s's export on conn and checks it against s.
func bindExport(conn verbs.Conn, namespace string, s TableSpec) (verbs.RegionInfo, error) {
	info, ok := verbs.FindRegion(conn.Remote(), ExportName(namespace, s.Name))
	switch {
	case !ok:
		return info, &MismatchError{Table: s.Name, Reason: fmt.Sprintf("no export named %q", ExportName(namespace, s.Name))}
	case !info.Access.Has(verbs.AccessRemoteRead):
		return info, &MismatchError{Table: s.Name, Reason: fmt.Sprintf("export access %v lacks remote read", info.Access)}
	case info.Len != uint64(s.Bytes()):
		return info, &MismatchError{Table: s.Name, Reason: fmt.Sprintf("export of %d bytes, spec says %d rows of %d = %d",
			info.Len, s.NumRows, s.RowBytes, s.Bytes())}
	}
	return info, nil
}

// Namespace returns the owner's namespace.
func (c *Client) Namespace() string { return c.namespace }

// Specs returns the owner's tables, in the owner's order.
func (c *Client) Specs() []TableSpec { return append([]TableSpec(nil), c.specs...) }

// Spec returns the spec of the table named name.
func (c *Client) Spec(name string) (TableSpec, bool) {
	i, ok := c.index[name]
	if !ok {
		return TableSpec{}, false
	}
	return c.specs[i], true
}

// Exposed reports whether the output arena is exposed to the owner, so
// lookups may be gathered (false on backends that cannot expose registered
// memory, such as shm, where lookups copy through the mapping).
func (c *Client) Exposed() bool { return c.exposed }

// Output is a buffer leased from the client's registered output arena:
// lookups write into it directly. Release it once; a released Output must
// not be used as a lookup's output again.
type Output struct {
	lease bufferpool.Lease
}

// Bytes returns the buffer (nil once released).
func (o Output) Bytes() []byte { return o.lease.Bytes() }

// Release returns the buffer to the arena. It succeeds once; later calls
// return an error.
func (o Output) Release() error {
	if err := o.lease.Release(); err != nil {
		return fmt.Errorf("engram: release output: %w", err)
	}
	return nil
}

// NewOutput leases n bytes of the output arena without waiting. It fails
// with ErrExhausted when no block that large is free.
func (c *Client) NewOutput(n int) (Output, error) {
	if n <= 0 {
		return Output{}, &ArgError{Field: "n", Reason: fmt.Sprintf("%d: must be positive", n)}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return Output{}, fmt.Errorf("engram: new output: %w", ErrClosed)
	}
	l, err := c.staging.Pool().TryAcquire(n)
	if err != nil {
		return Output{}, fmt.Errorf("engram: output of %d bytes: %w (%w)", n, ErrExhausted, err)
	}
	return Output{lease: l}, nil
}

// Ping makes one empty control call to each owner (MethodPing) and
// returns the longest round trip.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, fmt.Errorf("engram: ping: %w", ErrClosed)
	}
	var worst time.Duration
	for _, o := range c.owners {
		t0 := time.Now()
		if _, err := o.conn.Call(ctx, MethodPing, nil, nil); err != nil {
			return 0, fmt.Errorf("engram: ping %s: %w", o.addr, err)
		}
		worst = max(worst, time.Since(t0))
	}
	return worst, nil
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	s := &c.stats
	return Stats{Lookups: s.lookups.Load(), Failed: s.failed.Load(), Ops: s.ops.Load(),
		Direct: s.direct.Load(), Gather: s.gather.Load(), Hybrid: s.hybrid.Load(),
		Fallbacks: s.fallbacks.Load(), Bytes: s.bytes.Load()}
}

// Close waits for lookups in progress, closes its own engine and the
// connection, and releases the output arena. With Outputs still leased
// the arena stays (their memory stays valid) and Close returns the leak;
// release them and call Close again. Close is otherwise idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	if c.ownEngine && c.engine != nil {
		if err := c.engine.Close(); err != nil {
			errs = append(errs, fmt.Errorf("engram: engine: %w", err))
		}
	}
	c.engine = nil
	for _, o := range c.owners {
		if err := o.conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("engram: connection to %s: %w", o.addr, err))
		}
	}
	c.owners, c.conn = nil, nil
	if c.staging != nil {
		if err := c.staging.Close(); err != nil {
			errs = append(errs, fmt.Errorf("engram: output arena: %w", err))
		} else {
			c.staging = nil
		}
	}
	return errors.Join(errs...)
}

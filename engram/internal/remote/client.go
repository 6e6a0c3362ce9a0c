package remote

import (
	"context"
	"errors"
	"fmt"
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
	// Addr is the owner's address (Server.Addr).
	Addr string
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
}

// Client looks rows up from one owner. Its methods are safe for concurrent
// use: each lookup takes its own reusable state from a small free list, so
// concurrent lookups share no lock beyond a read lock that Close waits on.
type Client struct {
	namespace string
	mode      engine.Mode
	specs     []TableSpec
	index     map[string]int
	remote    []verbs.RegionInfo // per table, as the owner exports it
	exposed   bool
	ownEngine bool
	engine    *engine.Engine
	conn      verbs.Conn
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
	c = &Client{namespace: cfg.Namespace, mode: cfg.Mode, states: make(chan *lookupState, keepStates)}
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
	opts := cfg.Connect
	if opts.Lanes == 0 {
		opts.Lanes = DefaultLanes
	}
	opts.Expose = append(append([]verbs.Export(nil), cfg.Connect.Expose...), c.staging.Export(outputExport))
	c.exposed = true
	conn, err := cfg.Transport.Connect(ctx, cfg.Addr, opts)
	if errors.Is(err, verbs.ErrNotSupported) {
		// The backend cannot expose registered memory (shm): connect
		// without it; the engine then copies through its mapping.
		opts.Expose, c.exposed = cfg.Connect.Expose, false
		conn, err = cfg.Transport.Connect(ctx, cfg.Addr, opts)
	}
	if err != nil {
		return c, fmt.Errorf("engram: connect %s: %w", cfg.Addr, err)
	}
	c.conn = conn
	resp, err := c.conn.Call(ctx, MethodTables, nil, nil)
	if err != nil {
		return c, fmt.Errorf("engram: table list: %w", err)
	}
	var list TableList
	if err := DecodeTables(&list, resp); err != nil {
		return c, err
	}
	if list.Namespace != cfg.Namespace {
		return c, &NamespaceError{Want: cfg.Namespace, Got: list.Namespace}
	}
	if err := c.bind(list.Tables); err != nil {
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
	if _, err := c.engine.Prepare(ctx, c.conn); err != nil && !errors.Is(err, verbs.ErrNotSupported) {
		return c, fmt.Errorf("engram: gather capability: %w", err)
	}
	return c, nil
}

func checkClientConfig(cfg *ClientConfig) error {
	bad := func(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }
	switch {
	case cfg.Transport == nil:
		return bad("Transport", "nil")
	case cfg.Addr == "":
		return bad("Addr", "empty")
	case cfg.OutputBytes < 0:
		return bad("OutputBytes", fmt.Sprintf("%d: negative", cfg.OutputBytes))
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
	if cfg.OutputBytes == 0 {
		cfg.OutputBytes = DefaultOutputBytes
	}
	return nil
}

// bind finds each table's export and checks it against the spec.
func (c *Client) bind(specs []TableSpec) error {
	exports := c.conn.Remote()
	c.specs = specs
	c.index = make(map[string]int, len(specs))
	c.remote = make([]verbs.RegionInfo, len(specs))
	for i, s := range specs {
		info, ok := verbs.FindRegion(exports, ExportName(c.namespace, s.Name))
		switch {
		case !ok:
			return &MismatchError{Table: s.Name, Reason: fmt.Sprintf("no export named %q", ExportName(c.namespace, s.Name))}
		case !info.Access.Has(verbs.AccessRemoteRead):
			return &MismatchError{Table: s.Name, Reason: fmt.Sprintf("export access %v lacks remote read", info.Access)}
		case info.Len != uint64(s.Bytes()):
			return &MismatchError{Table: s.Name, Reason: fmt.Sprintf("export of %d bytes, spec says %d rows of %d = %d",
				info.Len, s.NumRows, s.RowBytes, s.Bytes())}
		}
		c.index[s.Name] = i
		c.remote[i] = info
	}
	return nil
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

// Ping makes one empty control call to the owner (MethodPing) and returns
// its round trip.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, fmt.Errorf("engram: ping: %w", ErrClosed)
	}
	t0 := time.Now()
	if _, err := c.conn.Call(ctx, MethodPing, nil, nil); err != nil {
		return 0, fmt.Errorf("engram: ping: %w", err)
	}
	return time.Since(t0), nil
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
	if c.conn != nil {
		if err := c.conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("engram: connection: %w", err))
		}
		c.conn = nil
	}
	if c.staging != nil {
		if err := c.staging.Close(); err != nil {
			errs = append(errs, fmt.Errorf("engram: output arena: %w", err))
		} else {
			c.staging = nil
		}
	}
	return errors.Join(errs...)
}

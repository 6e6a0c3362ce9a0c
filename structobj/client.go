package structobj

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/structobj/internal/proto"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// Defaults of ClientConfig fields left zero.
const (
	DefaultChunkBytes  = 4 << 20
	DefaultInFlight    = 4
	DefaultStagingWait = 5 * time.Millisecond
	// DefaultSmallBytes is ClientConfig.SmallBytes's default: below it a
	// pooled client PUTs and GETs whole objects inline, in one round
	// trip instead of three (reserve or open, the transfer, commit or
	// close); on loopback tcp the two cost the same near 0.5 MiB.
	DefaultSmallBytes = 256 << 10
	// MinChunkBytes is the smallest ChunkBytes (and half the smallest
	// PoolBytes) a client accepts.
	MinChunkBytes = 4 << 10
	// MaxInFlight caps ClientConfig.InFlight.
	MaxInFlight = 256
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Transport connects to owners and registers the client's memory. The
	// client does not close it.
	Transport verbs.Transport
	// Engine runs the client's scatter operations; nil makes one (with
	// the zero engine.Config: no WRITE gather) that Close closes. An
	// engine given here may be shared; the client does not close it.
	Engine *engine.Engine
	// Directory, when set, resolves a key to its owner (the record
	// "structobj/<Namespace>/<key>" its owner published) for calls made
	// with an empty address.
	Directory discovery.Directory
	// Namespace is the middle of the record names (default "default"), as
	// the owners' OwnerConfig.Namespace.
	Namespace string
	// PoolBytes is the size of the client's registered staging pool: the
	// memory of Buffers (NewBuffer) and of the leases through which
	// unregistered memory is staged, chunk by chunk. 0 means no pool:
	// every PUT and GET then takes a fallback path (inline calls, or
	// caller memory registered for the call).
	PoolBytes int
	// ChunkBytes is the size of one staged chunk (default 4 MiB, at least
	// MinChunkBytes, lowered to half of PoolBytes).
	ChunkBytes int
	// InFlight is how many staged chunks of one operation may be in
	// flight at once (default 4, at most MaxInFlight): chunk i+1 is
	// filled while chunk i transfers. The pool may hold fewer.
	InFlight int
	// StagingWait is how long an operation waits for its first pool
	// lease before it takes a fallback path, and NewBuffer for its
	// buffer (default 5 ms).
	StagingWait time.Duration
	// SmallBytes: a PUT whose payload and manifest, or a whole-payload
	// GET whose payload, fit in SmallBytes (and in the owner's inline
	// limit) moves inline even when the pool could take it: one control
	// round trip beats three for small objects (default
	// DefaultSmallBytes; negative: never, every pooled operation takes
	// the pool).
	SmallBytes int
	// Limits bound the manifests the client encodes for PUT and decodes
	// from GET (zero fields take DefaultLimits). An owner's smaller limits
	// are applied too, before anything is sent.
	Limits Limits
	// Link, when set, is given to every connection (see
	// verbs.ConnectOptions.Link); fields left zero are measured when a
	// connection opens.
	Link verbs.LinkParams
}

// Path says how an operation moved an object's bytes.
type Path uint8

// Paths of PUT and GET.
const (
	// PathPool: one-sided scatter transfers between the owner's region
	// and the client's pool, straight from or into Buffers, or staged
	// through pool leases chunk by chunk. The fast path.
	PathPool Path = iota + 1
	// PathInline: the bytes travelled inside control calls (PutInline,
	// GetInline).
	PathInline
	// PathRegistered: one-sided transfers from or into caller memory
	// registered with the transport for the call.
	PathRegistered
)

// String returns "pool", "inline" or "registered".
func (p Path) String() string {
	switch p {
	case PathPool:
		return "pool"
	case PathInline:
		return "inline"
	case PathRegistered:
		return "registered"
	}
	return fmt.Sprintf("Path(%d)", uint8(p))
}

// PathStats counts operations by Path.
type PathStats struct {
	Pool, Inline, Registered uint64
}

// ClientStats counts what a Client did since NewClient.
type ClientStats struct {
	// Puts and Gets count successful operations by path (each request of
	// GetMany counts as one Get); PutsFailed and GetsFailed the failed
	// ones.
	Puts, Gets             PathStats
	PutsFailed, GetsFailed uint64
	// Fallbacks counts operations that wanted the pool and took a
	// fallback path because no lease was free within StagingWait.
	Fallbacks uint64
	// StagedBytes are the bytes copied through pool leases (into them for
	// PUT, out of them for GET) in Chunks staged chunks. DirectBytes moved
	// straight from or into Buffers, RegisteredBytes from or into caller
	// memory registered for the call, InlineBytes inside control calls.
	StagedBytes, Chunks                       uint64
	DirectBytes, RegisteredBytes, InlineBytes uint64
	// Gathered counts READ operations the engine ran as owner-side gather
	// (wholly or in part).
	Gathered uint64
	// Conns is the number of owner connections open.
	Conns int
	// Pool is the staging pool's state (zero without a pool).
	Pool bufferpool.Stats
}

// Client stores and fetches Structured Objects on owners (see Owner).
//
// A PUT reserves space on the owner, WRITEs the object's parts there as
// scatter operations, each buffer separately (never concatenated into one
// payload), and commits the manifest: the object becomes visible whole,
// or not at all. Parts that lie in the client's pool (Buffers) are written
// straight from it; other memory is copied chunk by chunk into pool leases
// and written from those, InFlight chunks at a time. A GET opens the key
// (a hold on its current version), READs the selected members or byte
// ranges with one scatter READ into the destinations (straight into
// Buffers, through pool leases into other memory) and closes the hold,
// bounded by the owner's hold TTL. Without the fast path (no pool, the
// pool exhausted for StagingWait) the client falls back to the inline
// calls when the bytes fit the owner's inline limit, and otherwise to
// one-sided transfers from or into caller memory registered for the call;
// the bytes stored or read are the same on every path.
//
// Each owner gets one connection, opened on first use, with the pool's
// arena exposed where the backend allows it, so the owner's gather
// service may pack a GET into it. On shm a registered arena cannot be
// exposed: READs into the pool then run direct, the engine copying through
// the owner's mapping (one copy, where a gather would add one). A
// connection that ends (an owner evicts the connection of a reservation
// past its TTL, see the package doc) fails every call then in flight on
// it; the client drops it, and the next call to that owner connects
// again: callers need not reconnect.
//
// A Client is safe for concurrent use.
type Client struct {
	cfg      ClientConfig
	lim      Limits
	wlim     proto.Limits
	prefix   string // RecordPrefix + namespace + "/"
	trName   string // cfg.Transport.Name() ("": records of any transport)
	eng      *engine.Engine
	ownEng   bool
	stage    *staging.Staging
	arena    uintptr // start of the pool's arena
	arenaLen uint64
	chunk    uint64
	zero     *verbs.Region // zeros, the source of the payload's gaps

	mu        sync.Mutex
	closed    bool
	conns     map[string]*ownerConn
	active    sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	poolDone  bool

	stats clientCounters

	// hookChunk, when set (tests), runs after each staged chunk is
	// submitted, with the chunk's number (1, 2, ...).
	hookChunk func(n int)
	// hookReserved, when set (tests), runs when a PUT's Reserve has been
	// answered, before its first WRITE, with the reservation's id and
	// region offset.
	hookReserved func(id, off uint64)
}

// clientCounters are the counters of ClientStats; putOK and getOK are
// indexed by Path - PathPool.
type clientCounters struct {
	putOK, getOK                            [3]atomic.Uint64
	putFailed, getFailed, fallbacks         atomic.Uint64
	staged, chunks, direct, registered, inl atomic.Uint64
	gathered                                atomic.Uint64
}

// ownerConn is the connection to one owner and what its Info said.
type ownerConn struct {
	addr   string
	ready  chan struct{} // closed once dialled
	err    error         // of the dial
	conn   verbs.Conn
	region verbs.RegionInfo
	info   proto.InfoReply
}

const (
	// poolExportName names the pool's arena where it is exposed.
	poolExportName = "structobj-client-pool"
	// zeroBytes is the size of the zero region.
	zeroBytes = 64 << 10
	// cleanupTimeout bounds Abort and Close calls made after a failure or
	// with the caller's context ended.
	cleanupTimeout = 5 * time.Second
)

// NewClient checks cfg, registers the pool (if any) and returns a client.
// It connects to no owner yet.
func NewClient(cfg ClientConfig) (c *Client, err error) {
	bad := func(field, format string, args ...any) (*Client, error) {
		return nil, &ClientConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case cfg.Transport == nil:
		return bad("Transport", "nil")
	case cfg.PoolBytes < 0 || cfg.PoolBytes > 1<<46:
		return bad("PoolBytes", "%d, want 0 (no pool) up to 2^46", cfg.PoolBytes)
	case cfg.ChunkBytes < 0 || (cfg.ChunkBytes > 0 && cfg.ChunkBytes < MinChunkBytes):
		return bad("ChunkBytes", "%d, want 0 (default) or at least %d", cfg.ChunkBytes, MinChunkBytes)
	case cfg.InFlight < 0 || cfg.InFlight > MaxInFlight:
		return bad("InFlight", "%d, want 0 (default) up to %d", cfg.InFlight, MaxInFlight)
	case cfg.StagingWait < 0:
		return bad("StagingWait", "negative")
	}
	cfg.Namespace = cmp.Or(cfg.Namespace, DefaultNamespace)
	if err := discovery.ValidateName(RecordPrefix + cfg.Namespace); err != nil {
		return bad("Namespace", "%q: %v", cfg.Namespace, err)
	}
	cfg.ChunkBytes = cmp.Or(cfg.ChunkBytes, DefaultChunkBytes)
	cfg.InFlight = cmp.Or(cfg.InFlight, DefaultInFlight)
	cfg.StagingWait = cmp.Or(cfg.StagingWait, DefaultStagingWait)
	cfg.SmallBytes = cmp.Or(cfg.SmallBytes, DefaultSmallBytes)
	if cfg.PoolBytes > 0 {
		if cfg.PoolBytes/2 < MinChunkBytes {
			return bad("PoolBytes", "%d, want at least %d", cfg.PoolBytes, 2*MinChunkBytes)
		}
		cfg.ChunkBytes = min(cfg.ChunkBytes, cfg.PoolBytes/2)
	}
	c = &Client{
		cfg:    cfg,
		lim:    cfg.Limits.withDefaults(),
		wlim:   proto.Limits{Manifest: MaxManifestBytes, Inline: MaxInlineLimit},
		prefix: RecordPrefix + cfg.Namespace + "/",
		trName: cfg.Transport.Name(),
		chunk:  uint64(cfg.ChunkBytes),
		conns:  make(map[string]*ownerConn),
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.release())
			c = nil
		}
	}()
	if c.zero, err = cfg.Transport.Register(make([]byte, zeroBytes), verbs.AccessLocal); err != nil {
		return c, fmt.Errorf("structobj: client: register zeros: %w", err)
	}
	if cfg.PoolBytes > 0 {
		pc := bufferpool.Config{Budget: cfg.PoolBytes, MinSlot: minSlot(cfg.ChunkBytes)}
		st, err := staging.New(cfg.Transport, pc, verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
		if err != nil {
			return c, fmt.Errorf("structobj: client pool: %w", err)
		}
		c.stage = st
		arena := st.Pool().Arena()
		c.arena, c.arenaLen = uintptr(unsafe.Pointer(unsafe.SliceData(arena))), uint64(len(arena))
	}
	c.eng = cfg.Engine
	if c.eng == nil {
		if c.eng, err = engine.New(engine.Config{}); err != nil {
			return c, fmt.Errorf("structobj: client engine: %w", err)
		}
		c.ownEng = true
	}
	return c, nil
}

// minSlot is the pool's smallest size class for chunks of chunk bytes: a
// power of two up to 64 KiB, no larger than the chunk, at least a page.
func minSlot(chunk int) int {
	s := 64 << 10
	for s > chunk {
		s /= 2
	}
	return max(s, os.Getpagesize())
}

// release frees what NewClient made (also for a partly made client).
func (c *Client) release() error {
	var errs []error
	if c.ownEng && c.eng != nil {
		errs = append(errs, c.eng.Close())
	}
	if c.stage != nil && !c.poolDone {
		if err := c.stage.Close(); err != nil {
			errs = append(errs, fmt.Errorf("structobj: client pool: %w", err))
		} else {
			c.poolDone = true
		}
	}
	if c.zero != nil {
		if err := c.cfg.Transport.Deregister(c.zero); err != nil && !errors.Is(err, verbs.ErrClosed) {
			errs = append(errs, fmt.Errorf("structobj: client: deregister zeros: %w", err))
		}
		c.zero = nil
	}
	return errors.Join(errs...)
}

// Close closes the connections the client opened (calls still running
// fail), waits for its calls to return, closes its engine if it made it,
// and closes the pool. Buffers still held are reported as a
// *bufferpool.LeakError (and their memory stays valid): release them and
// call Close again. Close is otherwise idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		conns := c.conns
		c.conns = make(map[string]*ownerConn)
		c.mu.Unlock()
		var errs []error
		for _, oc := range conns {
			select {
			case <-oc.ready:
				if oc.conn != nil {
					errs = append(errs, oc.conn.Close())
				}
			default: // its dial closes it when it sees the client closed
			}
		}
		c.active.Wait()
		if c.ownEng {
			errs = append(errs, c.eng.Close())
		}
		if err := c.cfg.Transport.Deregister(c.zero); err != nil && !errors.Is(err, verbs.ErrClosed) {
			errs = append(errs, fmt.Errorf("structobj: client: deregister zeros: %w", err))
		}
		c.closeErr = errors.Join(errs...)
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stage == nil || c.poolDone {
		return c.closeErr
	}
	err := c.stage.Close()
	if err == nil {
		c.poolDone = true
		return c.closeErr
	}
	return errors.Join(c.closeErr, fmt.Errorf("structobj: client pool: %w", err))
}

// enter registers a running call; false once the client is closed.
func (c *Client) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.active.Add(1)
	return true
}

// Stats returns the client's counters.
func (c *Client) Stats() ClientStats {
	s := &c.stats
	out := ClientStats{
		Puts:       PathStats{s.putOK[0].Load(), s.putOK[1].Load(), s.putOK[2].Load()},
		Gets:       PathStats{s.getOK[0].Load(), s.getOK[1].Load(), s.getOK[2].Load()},
		PutsFailed: s.putFailed.Load(), GetsFailed: s.getFailed.Load(), Fallbacks: s.fallbacks.Load(),
		StagedBytes: s.staged.Load(), Chunks: s.chunks.Load(), DirectBytes: s.direct.Load(),
		RegisteredBytes: s.registered.Load(), InlineBytes: s.inl.Load(), Gathered: s.gathered.Load(),
	}
	c.mu.Lock()
	for _, oc := range c.conns {
		select {
		case <-oc.ready:
			if oc.err == nil {
				out.Conns++
			}
		default:
		}
	}
	c.mu.Unlock()
	if c.stage != nil {
		out.Pool = c.stage.Pool().Stats()
	}
	return out
}

// count records the outcome of one PUT or GET.
func (c *Client) count(ok *[3]atomic.Uint64, failed *atomic.Uint64, p Path, err error) {
	if err != nil {
		failed.Add(1)
		return
	}
	if p >= PathPool && p <= PathRegistered {
		ok[p-PathPool].Add(1)
	}
}

// Buffer is registered memory from the client's pool: a PUT writes the
// parts that lie in Buffers straight from them, and a GET reads into
// destinations that lie in Buffers straight, with no staging copy (and,
// where the pool is exposed, possibly packed there by the owner). Release
// it when done; Close reports Buffers still held.
type Buffer struct {
	lease bufferpool.Lease
}

// NewBuffer leases n bytes of the pool, waiting at most StagingWait for
// them (an error wrapping bufferpool.ErrExhausted after that; more than
// the pool's largest size class fails with bufferpool.ErrTooLarge). The
// memory is not zeroed. Without a pool it fails with ErrNoPool.
func (c *Client) NewBuffer(n int) (*Buffer, error) {
	if c.stage == nil {
		return nil, ErrNoPool
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClientClosed
	}
	if n <= 0 {
		return nil, fmt.Errorf("structobj: buffer of %d bytes: %w", n, bufferpool.ErrInvalidSize)
	}
	l, err := c.stage.Pool().AcquireTimeout(n, c.cfg.StagingWait)
	if err != nil {
		return nil, fmt.Errorf("structobj: buffer of %d bytes: %w", n, err)
	}
	return &Buffer{lease: l}, nil
}

// Bytes returns the buffer's memory (nil once released).
func (b *Buffer) Bytes() []byte { return b.lease.Bytes() }

// Release gives the buffer back to the pool. It succeeds once; later
// calls return an error wrapping bufferpool.ErrDoubleRelease.
func (b *Buffer) Release() error { return b.lease.Release() }

// inArena returns b's offset in the pool's arena, and whether all of b
// lies in it.
func (c *Client) inArena(b []byte) (uint64, bool) {
	if c.stage == nil || len(b) == 0 {
		return 0, false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < c.arena {
		return 0, false
	}
	off := uint64(p - c.arena)
	return off, off <= c.arenaLen && uint64(len(b)) <= c.arenaLen-off
}

// checkKey refuses, before anything is sent, a key the owner would
// refuse.
func (c *Client) checkKey(key string) error {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return fmt.Errorf("structobj: key of %d bytes, want 1..%d: %w", len(key), MaxKeyLen, ErrRefused)
	}
	if err := discovery.ValidateName(c.prefix + key); err != nil {
		return fmt.Errorf("structobj: key %q: %w: %w", key, ErrRefused, err)
	}
	return nil
}

// resolve returns addr, or with addr empty the address the Directory's
// record of key names.
func (c *Client) resolve(ctx context.Context, addr, key string) (string, error) {
	if addr != "" {
		return addr, nil
	}
	if c.cfg.Directory == nil {
		return "", fmt.Errorf("structobj: key %q: no owner address and no Directory: %w", key, ErrClientConfig)
	}
	rec, err := c.cfg.Directory.Lookup(ctx, c.prefix+key)
	switch {
	case errors.Is(err, discovery.ErrNotFound):
		return "", fmt.Errorf("structobj: key %q: no record (a new key needs its owner's address): %w: %w", key, ErrNotFound, err)
	case err != nil:
		return "", fmt.Errorf("structobj: key %q: lookup: %w", key, err)
	case c.trName != "" && rec.Transport != c.trName:
		return "", fmt.Errorf("structobj: key %q: served over %q, the client's transport is %q: %w",
			key, rec.Transport, c.trName, verbs.ErrNotSupported)
	}
	return rec.Addr, nil
}

// conn returns the connection to addr, opening it on first use.
func (c *Client) conn(ctx context.Context, addr string) (*ownerConn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClientClosed
	}
	oc := c.conns[addr]
	if oc == nil {
		oc = &ownerConn{addr: addr, ready: make(chan struct{})}
		c.conns[addr] = oc
		c.mu.Unlock()
		oc.err = c.dial(ctx, oc)
		if oc.err != nil {
			c.mu.Lock()
			if c.conns[addr] == oc {
				delete(c.conns, addr)
			}
			c.mu.Unlock()
		}
		close(oc.ready)
		return oc, oc.err
	}
	c.mu.Unlock()
	select {
	case <-oc.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return oc, oc.err
}

// dial connects to oc.addr (exposing the pool where the backend allows)
// and asks for the owner's Info.
func (c *Client) dial(ctx context.Context, oc *ownerConn) error {
	opts := verbs.ConnectOptions{Link: c.cfg.Link}
	if c.stage != nil {
		opts.Expose = []verbs.Export{c.stage.Export(poolExportName)}
	}
	conn, err := c.cfg.Transport.Connect(ctx, oc.addr, opts)
	if err != nil && opts.Expose != nil && errors.Is(err, verbs.ErrNotSupported) {
		// shm cannot expose registered memory: READs into the pool run
		// direct.
		opts.Expose = nil
		conn, err = c.cfg.Transport.Connect(ctx, oc.addr, opts)
	}
	if err != nil {
		return fmt.Errorf("structobj: connect %s: %w", oc.addr, err)
	}
	oc.conn = conn
	fail := func(err error) error {
		oc.conn = nil
		return errors.Join(err, conn.Close())
	}
	resp, err := conn.Call(ctx, MethodInfo, (&proto.EmptyRequest{Method: MethodInfo}).Append(nil), nil)
	if err == nil {
		err = oc.info.Decode(resp, &c.wlim)
	}
	if err != nil {
		return fail(fmt.Errorf("structobj: info from %s: %w", oc.addr, decodeCallError(err)))
	}
	var ok bool
	if oc.region, ok = verbs.FindRegion(conn.Remote(), oc.info.Region); !ok {
		return fail(fmt.Errorf("structobj: %s exports no region %q: %w", oc.addr, oc.info.Region, verbs.ErrBadKey))
	}
	// The gather capability (and on shm the engine's calibration) ahead
	// of the first READ; an owner without a gather service is fine.
	_, _ = c.eng.Prepare(ctx, conn)
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return fail(ErrClientClosed)
	}
	return nil
}

// evict drops a connection that ended, so the next call reconnects.
func (c *Client) evict(oc *ownerConn) {
	c.mu.Lock()
	mine := c.conns[oc.addr] == oc
	if mine {
		delete(c.conns, oc.addr)
	}
	c.mu.Unlock()
	if mine {
		_ = oc.conn.Close() // it ended already; Close only releases
	}
}

// call makes one control call and maps an owner's error to its
// *OwnerError.
func (c *Client) call(ctx context.Context, oc *ownerConn, method uint16, req []byte) ([]byte, error) {
	resp, err := oc.conn.Call(ctx, method, req, nil)
	if err != nil {
		if errors.Is(err, verbs.ErrClosed) {
			c.evict(oc)
		}
		return nil, decodeCallError(err)
	}
	return resp, nil
}

// do makes a call of req and decodes its reply into rep.
func (c *Client) do(ctx context.Context, oc *ownerConn, method uint16, req, rep proto.Message) error {
	resp, err := c.call(ctx, oc, method, req.Append(nil))
	if err != nil {
		return err
	}
	return rep.Decode(resp, &c.wlim)
}

// cleanupContext is for calls that must run after a failure, even when
// ctx has ended.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

// ttlDeadline is when an operation under a reservation or hold of ttl,
// asked for at sent, must be done: the TTL less a margin for the calls
// that end it.
func ttlDeadline(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - min(ttl/8, 2*time.Second))
}

// Delete removes key from its owner (addr, or the Directory's record when
// addr is empty) and returns the version deleted. Readers holding the
// object finish reading it.
func (c *Client) Delete(ctx context.Context, addr, key string) (uint64, error) {
	if !c.enter() {
		return 0, ErrClientClosed
	}
	defer c.active.Done()
	v, err := c.delete(ctx, addr, key)
	if err != nil {
		return 0, fmt.Errorf("structobj: delete %q: %w", key, err)
	}
	return v, nil
}

func (c *Client) delete(ctx context.Context, addr, key string) (uint64, error) {
	if err := c.checkKey(key); err != nil {
		return 0, err
	}
	addr, err := c.resolve(ctx, addr, key)
	if err != nil {
		return 0, err
	}
	oc, err := c.conn(ctx, addr)
	if err != nil {
		return 0, err
	}
	rep := proto.VersionReply{Method: MethodDelete}
	err = c.do(ctx, oc, MethodDelete, &proto.KeyRequest{Method: MethodDelete, Key: []byte(key)}, &rep)
	return rep.Version, err
}

// small reports whether n bytes go inline on a pooled client (see
// ClientConfig.SmallBytes).
func (c *Client) small(oc *ownerConn, n uint64) bool {
	return c.cfg.SmallBytes > 0 && n <= uint64(c.cfg.SmallBytes) && oc.info.MaxInline > 0 && n <= oc.info.MaxInline
}

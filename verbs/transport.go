package verbs

import "context"

// Transport is a verbs-style transport: it registers memory under keys,
// serves segments of exported regions to peers and connects to peers'
// segments. All methods are safe for concurrent use.
type Transport interface {
	// Name is the backend's name, "shm" or "tcp": the name discovery
	// records, reports and verbs/transports.New use for it.
	Name() string
	// Register makes caller-owned memory usable in work requests with the
	// given access. The caller keeps owning buf: it must stay valid until
	// Deregister. Some backends cannot share such memory with peers (shm
	// exports and exposures need Alloc).
	Register(buf []byte, access Access) (*Region, error)
	// Alloc returns a region of size bytes owned by the transport (on shm
	// a memfd mapping that can be shared with peers). Its bytes are valid
	// until Deregister.
	Alloc(size int, access Access) (*Region, error)
	// Deregister forgets r (and frees Alloc'ed memory). It fails with
	// ErrInUse while an open segment exports r or an open connection
	// exposes it, and with ErrBadKey for a region this transport does not
	// hold. Deregistering a region that outstanding work requests still
	// name is a caller error: wait for their completions first.
	Deregister(r *Region) error
	// Listen serves the exports as a segment at addr (a backend-specific
	// address; see Segment.Addr for the bound one). Peers that connect see
	// exactly these regions, by name, and nothing else of this transport.
	Listen(addr string, exports []Export, opts ListenOptions) (Segment, error)
	// Connect opens a connection to the segment at addr. It returns once
	// the handshake is done and LinkParams have been measured (or taken
	// from opts.Link).
	Connect(ctx context.Context, addr string, opts ConnectOptions) (Conn, error)
	// Close closes every segment and connection of the transport and
	// deregisters every region. Further calls fail with ErrClosed.
	Close() error
}

// Queue posts one-sided work requests toward the other side of a
// connection and returns their completions. It is embedded by Conn (the
// requester's side) and Peer (the owner's side, inside a handler).
//
// All methods are safe for concurrent use; concurrent Posts are
// serialized, and a completion is returned by exactly one Poll or Wait.
// Completions may arrive in any order.
type Queue interface {
	// Post posts as many of wrs as the free queue depth allows, in order,
	// and returns how many. It never blocks on the network. When none fit
	// it returns 0 and ErrQueueFull itself (not wrapped, so polling a full
	// queue costs no allocation). The local side of every request to be
	// posted is validated first: if one is invalid, Post posts nothing and
	// returns a [*PostError]. Remote-side failures (key, access, bounds)
	// arrive as completions. Post does not keep wrs: the slice may be
	// reused at once.
	Post(wrs []WorkRequest) (int, error)
	// Poll copies available completions into out and returns how many,
	// without blocking. After the connection ended and every completion
	// has been returned, it returns 0 and an error wrapping ErrClosed.
	Poll(out []Completion) (int, error)
	// Wait blocks until at least min completions are available (min is
	// clamped to [1, len(out)]) and returns up to len(out) of them. If the
	// connection ends first it returns what is left (possibly fewer than
	// min) and then ErrClosed; if ctx ends first it returns 0 and
	// ctx.Err(), leaving completions queued. len(out) must be at least 1.
	Wait(ctx context.Context, out []Completion, min int) (int, error)
	// Remote describes the regions on the other side that RemoteKey may
	// name. The returned slice must not be modified.
	Remote() []RegionInfo
	// LinkParams describes the connection (measured at connect).
	LinkParams() LinkParams
}

// Conn is the requester's connection to a segment. Close it when done.
type Conn interface {
	Queue
	// Call sends req to the handler registered for method on the owner and
	// waits for its response, which is appended to resp[:0] (so a resp with
	// enough capacity avoids an allocation) and returned. req may be reused
	// once Call returns. Every work request the handler posted toward this
	// connection has completed before the response is sent, so data the
	// handler WROTE into exposed regions is in place when Call returns.
	// A handler error comes back as a [*CallError].
	Call(ctx context.Context, method uint16, req, resp []byte) ([]byte, error)
	// Close ends the connection. Work requests still outstanding complete
	// with StatusClosed; Poll and Wait return them, then ErrClosed. Close
	// waits for the connection's goroutines and is idempotent.
	Close() error
}

// Mapper is an optional interface of a [Conn] whose backend has the
// owner's exported regions mapped into this process (verbs/shm does; tcp
// does not). Through such a Conn a one-sided READ or WRITE is a copy the
// requester makes itself, so the transfer engine (verbs/engine) runs the direct part of an
// operation as local copies through the mapping instead of posting one
// work request per span (see "Mapped direct" in verbs/engine's package doc).
//
// HoldMapped resolves remote, the key of a region the owner exported
// (as listed by Remote), to its mapping, and local, a region registered
// with the Conn's transport with [AccessLocal], to its memory. need is
// the remote access the copies will use: [AccessRemoteRead] to copy out of
// the owner's region, [AccessRemoteWrite] to copy into it. The mapper
// grants only what the owner granted: a region exported without remote
// write is mapped read-only, and asking for AccessRemoteWrite on it fails
// with an error wrapping [ErrAccess], so a read-only region is never
// handed out for writing. Other failures wrap [ErrBadKey] (a remote key
// the Conn does not map, a local region not registered with its
// transport), ErrAccess (a local region without AccessLocal) or
// [ErrClosed] (the connection ended).
//
// On success remoteMem is the whole mapped region (its length is the
// mapped length: bounds are checked against it, not against a
// caller-supplied RegionInfo) and localMem the local region's bytes. Both
// stay valid until ReleaseMapped: until then the Conn does not unmap the
// owner's regions and the transport does not deregister local. Every
// successful HoldMapped must be followed by exactly one ReleaseMapped, as
// soon as the copies are done (one operation): Close, Register and
// Deregister on the Conn's transport wait for it. Holds may overlap (from
// many goroutines) and may be released on another goroutine than the
// one that took them; a holder must not call Post, Poll or Wait on the
// Conn before releasing.
type Mapper interface {
	HoldMapped(local *Region, remote Key, need Access) (localMem, remoteMem []byte, err error)
	ReleaseMapped()
}

// Peer is the owner's view of the requester that made a control call. It
// posts work requests toward the regions that requester exposed
// (Remote), using this side's registered regions as the local side. A
// Peer is valid only while its handler runs: when the handler returns, the
// transport waits for the Peer's outstanding work requests to complete
// before it sends the response, then closes the Peer (unpolled
// completions are dropped).
type Peer interface {
	Queue
	// ConnID identifies the requester's connection for the segment's
	// lifetime (the same value for every call on one connection).
	ConnID() uint64
}

// Handler serves one control method on a segment. Handlers run
// concurrently: each call has its own goroutine and Peer, so a slow call
// blocks neither other calls nor direct traffic.
type Handler interface {
	// ServeCall handles req (valid only during the call) and returns the
	// response. resp is an empty buffer the handler may append to and
	// return. The returned response belongs to the transport once
	// ServeCall returns (it is copied out and, when the handler grew resp,
	// kept as a later call's resp): never return memory the handler goes
	// on using. ctx ends when the connection or segment closes. A returned
	// error is sent to the caller as a [*CallError] with its text.
	ServeCall(ctx context.Context, p Peer, req, resp []byte) ([]byte, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, p Peer, req, resp []byte) ([]byte, error)

// ServeCall calls f.
func (f HandlerFunc) ServeCall(ctx context.Context, p Peer, req, resp []byte) ([]byte, error) {
	return f(ctx, p, req, resp)
}

// Segment is the owner's handle on a served set of exported regions.
// Its methods are safe for concurrent use.
type Segment interface {
	// Addr returns the address peers connect to (with the bound port).
	Addr() string
	// Regions describes the exported regions as peers see them.
	Regions() []RegionInfo
	// Handle registers h for method, replacing any earlier handler; a nil
	// h removes it. Calls to a method without a handler fail with
	// ErrNotSupported.
	Handle(method uint16, h Handler)
	// Evict ends the connection connID (a [Peer.ConnID]) as a failure
	// would: its handlers' contexts end and its requests in flight
	// complete with ErrClosed. It returns a channel that is closed once
	// nothing the connection sent, or may still send, can reach this
	// side's memory: the connection's handlers have returned (what they
	// copy is the connection's too), and on tcp every lane has stopped (a
	// WRITE already read has landed, the rest die with the sockets) and
	// the send path references no local memory; on shm the requester has
	// let go of its mappings (it shuts its end of the socket only after
	// unmapping; a process that dies lets go too). Memory a connection may write (a
	// reservation's space) or that its requests still reference (a
	// staging slot) can be reused once the channel is closed, and not
	// before. For a connection that is not open (never was, or is already
	// fenced) the channel is already closed. Evict never blocks, so a
	// handler of that very connection may call it, but must not wait for
	// the channel, which waits for that handler.
	Evict(connID uint64) <-chan struct{}
	// Close stops accepting, closes every connection (cancelling handler
	// contexts and waiting for handlers to return) and releases the
	// exports. It is idempotent.
	Close() error
}

// Defaults for options left zero.
const (
	DefaultQueueDepth     = 4096 // ConnectOptions.QueueDepth
	DefaultLanes          = 4    // ConnectOptions.Lanes
	DefaultPeerQueueDepth = 256  // ListenOptions.QueueDepth
	DefaultMaxCalls       = 64   // ListenOptions.MaxCalls
	DefaultMaxSessions    = 1024 // ListenOptions.MaxSessions
	DefaultMaxSegLanes    = 1024 // ListenOptions.MaxSegmentLanes
	DefaultMaxHandshakes  = 64   // ListenOptions.MaxHandshakes
	DefaultMaxCallBytes   = 256 << 20
	DefaultMaxConnCall    = 64 << 20 // ListenOptions.MaxConnCallBytes
	MaxQueueDepth         = 1 << 20
	MaxLanes              = 64
)

// ConnectOptions configures Transport.Connect. The zero value is usable.
type ConnectOptions struct {
	// Expose lists regions of this transport that the owner's handlers may
	// target (Peer.Remote); the owner may READ or WRITE them as their
	// access allows. They stay pinned (Deregister fails) until the
	// connection closes.
	Expose []Export
	// Lanes is the number of parallel streams (tcp connections); 0 means
	// DefaultLanes. Backends without streams ignore it.
	Lanes int
	// QueueDepth bounds work requests posted and not yet polled; 0 means
	// DefaultQueueDepth.
	QueueDepth int
	// Link overrides measured link parameters: non-zero fields are used as
	// given, and when Bandwidth, PostRate and RTT are all set nothing is
	// measured. QueueDepth here is ignored (use the field above).
	Link LinkParams
}

// ListenOptions configures Transport.Listen. The zero value is usable.
type ListenOptions struct {
	// QueueDepth is each Peer's queue depth; 0 means DefaultPeerQueueDepth.
	QueueDepth int
	// MaxCalls bounds the handler calls running at once per connection; a
	// connection that has MaxCalls calls running has its next call wait
	// (without holding up its other traffic). A connection with more than
	// 16 x MaxCalls calls outstanding is closed as a protocol violation.
	// 0 means DefaultMaxCalls.
	MaxCalls int
	// MaxSessions bounds the connections the segment serves at once,
	// evicted ones not yet fenced included (0: DefaultMaxSessions). A
	// requester beyond it is refused (its Connect fails with
	// ErrNotAdmitted) until one ends. MaxLanes bounds the lanes (tcp
	// connections) of one connection (0: the package's MaxLanes, 64); a
	// requester asking more is refused. MaxSegmentLanes bounds the lanes
	// of all its connections together (0: DefaultMaxSegLanes), and a
	// requester whose lanes would pass it is refused too. On tcp a lane
	// holds its read buffer (tcp.Config.ReadBuffer, 256 KiB), at most 8
	// MiB of responses waiting to be written (past that its reader waits)
	// and up to 16 recycled send batches: size the bound to the memory
	// the owner may spend on peers (an shm connection is one lane, and
	// MaxSessions bounds them). MaxHandshakes bounds the handshakes in
	// progress (0: DefaultMaxHandshakes): past it the segment stops
	// accepting until one ends (each ends within the transport's
	// handshake timeout), so connections that never say HELLO hold no
	// more than that.
	MaxSessions, MaxLanes, MaxSegmentLanes, MaxHandshakes int
	// MaxCallBytes bounds the bytes of call requests the segment holds at
	// once, waiting or running, over all its connections (0:
	// DefaultMaxCallBytes, 256 MiB), and MaxConnCallBytes those of one
	// connection (0: DefaultMaxConnCall, 64 MiB). A CALL that would pass
	// either is answered at once with a [*CallError] (StatusHandler,
	// "busy") without running its handler, and its request is dropped as
	// it is read, so no peer makes the owner buffer more than that.
	MaxCallBytes, MaxConnCallBytes int64
	// Admit decides which peers are served and what they may do (see
	// [AdmitFunc]). Nil means the backend's default: shm admits only this
	// process's effective user ([OwnUIDPolicy]); tcp admits every peer
	// that reaches the address with full access (bind to an address only
	// trusted peers reach, or set Admit, e.g. a [NetPolicy]); ucx admits
	// only peers of this host ([LoopbackPolicy]: UCX parses a peer's worker
	// address unvalidated). A peer granted read only sees the exports
	// without remote write (tcp, ucx), or not at all where the backend
	// cannot keep a writable region read-only for one peer (shm withholds
	// exports that have remote write from it).
	Admit AdmitFunc
	// OnError, when set, receives errors that end a peer's connection
	// abnormally (a [*ProtocolError], a failed handshake, an I/O error). It
	// may be called from several goroutines at once and must not block.
	OnError func(error)
}

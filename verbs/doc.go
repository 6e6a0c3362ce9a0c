// Package verbs is scatterkit's transfer layer: a verbs-style transport
// (registered memory named by keys, one-sided READ and WRITE work requests,
// completion queues with a queue depth, control calls) with backends for
// the same host (package verbs/shm) and across hosts (package verbs/tcp).
// The adaptive scatter executor and the owner-side gather service are
// built on exactly these interfaces.
//
// # Model
//
// A [Transport] registers memory: [Transport.Register] wraps caller-owned
// memory, [Transport.Alloc] returns transport-owned memory (on shm a memfd
// a peer can map). Either way the result is a [Region] with an
// unguessable, never-zero [Key] and an [Access] set.
//
// An owner serves a segment, a named set of exported regions, with
// [Transport.Listen] and gets a [Segment] handle. A requester opens a
// [Conn] to it with [Transport.Connect], if the segment admits it
// (ListenOptions.Admit decides who may connect and whether to read only
// or to write too; see [AdmitFunc]). [Queue.Remote] lists the exported
// regions (name, key, length, access). The requester then posts
// [WorkRequest] batches. Each names a local region of its own transport
// (LocalKey, LocalOff) and a remote region (RemoteKey, RemoteOff).
// [Queue.Post] posts as many as the free queue depth allows. Each request
// ends in exactly one [Completion], returned by [Queue.Poll] (non-blocking)
// or [Queue.Wait]. Completions may arrive in any order; match them by ID.
//
// The queue depth counts requests posted and not yet polled, so
// completions never overflow: a caller that does not poll cannot post.
// Post reports [ErrQueueFull] when nothing fits.
//
// Control calls carry what one-sided operations cannot, such as a gather
// command. The owner registers a [Handler] per method with
// [Segment.Handle]. The requester calls it with [Conn.Call]. The handler
// gets a [Peer]: a Queue toward the regions the requester exposed through
// ConnectOptions.Expose, so the owner can WRITE packed data straight into
// the requester's destination. Every request a handler posted has
// completed before its reply is sent, so data a handler wrote is in place
// when Call returns.
//
// # Validation and errors
//
// Everything from the other side is validated: key, access and bounds of
// every request (overflow included), against the regions this side
// exported or exposed, and nothing else. A bad local side fails the whole
// Post with a [*PostError] before anything is posted. A bad remote side
// fails only that request, whose completion carries a [*RemoteError]
// (StatusBadKey, StatusAccess or StatusBounds); the connection goes on. A
// malformed frame or handshake closes that connection with a
// [*ProtocolError], reported to ListenOptions.OnError on the owner. When a
// connection ends, whether closed, the owner gone or a protocol error,
// every outstanding request completes with StatusClosed; Poll and Wait
// return those completions, then an error wrapping [ErrClosed]. Sentinels
// are listed in one var block; test for them with [errors.Is].
//
// # Concurrency
//
// Every method of every interface here is safe for concurrent use.
// Concurrent Posts on one queue are serialized per batch. Each completion
// is returned by exactly one Poll or Wait. Handlers run concurrently, one
// goroutine per call (bounded by ListenOptions.MaxCalls per connection),
// so a slow call blocks neither other calls nor direct traffic. Nothing in
// the hot path costs a syscall, a goroutine, a lock or an allocation per
// work request: locks, wake-ups and syscalls are taken per batch.
//
// # Buffer ownership
//
//   - WorkRequest slices: Post copies what it needs; reuse the slice as
//     soon as Post returns.
//   - Region memory: the local range of a WRITE must not change, and the
//     local range of a READ must not be read, until the request's
//     completion has been polled. Remote memory is written by peers at any
//     time its access allows. Ordering between peers is the application's
//     job (for example, a Call after the writes).
//   - Call: req may be reused when Call returns. The response is appended
//     to resp[:0] and returned, so a buffer with enough capacity avoids an
//     allocation.
//   - Handlers: req is valid only during the call. The handler appends its
//     response to the resp buffer it is given (or returns any slice); the
//     transport copies it before the handler's buffer is reused.
//   - Regions stay registered until Deregister. Deregister fails with
//     [ErrInUse] while an open segment exports the region or an open
//     connection exposes it.
//
// # Link parameters
//
// [Queue.LinkParams] describes a connection to the cost model: bulk
// bandwidth, small-request post rate, queue depth and round trip. Backends
// measure at connect the fields ConnectOptions.Link leaves zero, in a few
// milliseconds: the median of 5 pings, the best of two 4 MiB READ passes
// from a hidden probe region of the owner, and the best of two 1,024 x
// 64 B READ passes. The owner's Peer sees the requester's figures.
//
// # Scatter executor
//
// An [Engine] runs one scatter operation ([ScatterOp]: a Conn, a direction,
// the owner's region, the caller's [Region] and a [planfmt.Plan]) under
// one completion. [Engine.Submit] normalizes the plan once, decides once and
// starts the transfers, returning an [Operation]; [Operation.Wait] returns
// the [Result]. [Engine.Do] is both in one call. Many goroutines may submit
// at once.
//
// Deciding: ModeAuto asks the owner's gather service for its capability
// once per Conn ([Engine.Prepare] does it ahead of time) and feeds
// costmodel the Conn's [LinkParams], the owner's packing calibration
// (B_mem, R_copy, refined by moving measurements of the owner's reported
// pack and control times) and the request rate direct operations achieved
// on the Conn. A fixed-row plan, or a ranges plan whose spans share one
// power-of-two size class, goes to costmodel.Decide (direct or gather); a
// ranges plan of several classes goes to costmodel.Split, which may send
// the classes of large spans direct and gather the small ones (hybrid).
// ModeDirect, ModeGather and ModeHybrid force a mode.
//
// Direct: one WorkRequest per coalesced span (split above 4 GiB), except
// on a mapped Conn (below). The
// engine owns the completion queue of every Conn it runs on: a per-Conn
// driver goroutine polls completions in batches, routes them to their
// operation by request ID (slot and generation, no per-request state) and
// posts waiting requests as the queue frees, so the queue stays full.
// Requests, completions and operation states are reused: a steady-state
// direct operation allocates nothing.
//
// Mapped direct: a Conn that implements [Mapper] (shm) has the owner's
// exported regions mapped into this process, so a one-sided READ or WRITE
// is a memcpy the requester performs. On such a Conn every direct part (a
// direct operation, the direct spans of a hybrid, a gather's fallback)
// is run by the engine as local copies under one [Mapper.HoldMapped]
// instead of work requests: a fixed-row plan through bufferpool/pack's
// unchecked gather loops from the source extent's table into the
// destination extent, contiguous or strided ([T,K] as one 1-D layout per
// line of the longer dimension), split over the engine's pack.Workers
// with pack's threshold; a ranges plan as one copy per coalesced span,
// split by bytes over the engine's copy crew for large operations. Both
// use EngineConfig.CopyWorkers goroutines (W). A READ of a fixed-row plan
// is thus exactly a random-row gather into the caller's destination, with
// no staging and no second copy. The loops run unchecked because the plan
// was normalized (fragments inside the extents, ids inside the table,
// destinations disjoint) and the extents are checked against the lengths
// the Mapper returns (the real mapping, not the caller's RegionInfo). The
// Mapper grants only what the owner granted: a WRITE to a region exported
// without remote write fails with ErrAccess before any byte moves. The
// part completes when the copy returns: Trace.Window is the copy time,
// Trace.Mapped its bytes, and Trace.DirectRequests stays 0.
// EngineConfig.PostOnMapped turns this off.
//
// Pricing mapped direct: the cost model's T_direct charges N/R_post for
// the requests. On a mapped Conn a request is a copy the engine makes with
// W workers, so R_post is set, per operation, to the rate that makes
// N/R_post the local gather time S/(W*B_mem) + M/(W*R_copy), with B_mem
// and R_copy from the engine's local calibration (EngineConfig.Calibration,
// the staging probe, or a probe with W workers run once by Prepare or the
// first mapped ModeAuto operation); the queue never limits (Q >= N), since
// nothing is in flight; B_net and L stay the link's. T_gather already
// holds the owner's packing of the same bytes, S/(P*B_mem) + M/(P*R_copy),
// plus the command, the pipeline fill and the bulk transfer, so with the
// owner packing on no more cores than W the model predicts direct, and
// ModeAuto chooses it without any "shm means direct" rule. An owner that
// packs with more workers than W can still win, as it would in fact.
// Forced ModeGather and ModeHybrid still run the owner's gather.
//
// Gather READ: the destination must be exposed on the Conn
// (ConnectOptions.Expose, AccessRemoteWrite); the capability answer lists
// the exposures, so the engine knows. It encodes one planfmt.Command (chunk
// size C, staging slots P) and calls [MethodGather]; the owner validates it,
// packs chunk by chunk into leased staging and WRITEs each chunk's
// destination runs while packing the next. When the call returns, the data
// is in place and the reply carries the owner's stage times.
//
// Inline reply: a READ gather of at most EngineConfig.InlineMax payload
// bytes (default 256 KiB; the whole plan, not a hybrid's part) sets
// planfmt.FlagInlineReply, and an owner whose ServiceConfig.InlineMax
// admits the payload packs it straight into its reply instead of staging
// and WRITEing it; the engine copies the reply's stream into the
// destination runs. A latency-sized gather then costs one round trip
// (the command and its reply) instead of two (the bulk WRITEs are
// acknowledged before the reply), and holds no staging. The destination
// must still be exposed: the owner validates the command the same way.
// For such an operation Trace.Inline is set and Trace.Window is the
// owner's packing plus the engine's copy.
//
// Gather WRITE: the engine packs the fragments into its own staging
// (EngineConfig.Staging, exposed on the Conn with AccessRemoteRead) in
// waves of at most P*C bytes and calls [MethodGather] once per wave with a
// ranges command over the staged stream; the owner READs the wave chunk by
// chunk into its staging (P chunks in flight) and copies each chunk's runs
// into its region. On shm a registered arena cannot be exposed, so WRITE
// gather there falls back to direct (FallbackNotExposed).
//
// Hybrid: the spans of gathered classes become a FormRanges sub-plan (built
// into the operation's reused storage) sent as a gather command; the
// others are posted direct; both run at once.
//
// Fallback: when gather cannot run (no service, nothing exposed, a row
// larger than the owner's largest chunk) or fails (the owner refused the
// command, staging stayed exhausted past the owner's deadline, the transfer
// broke off, the reply was malformed), the gathered spans are sent direct,
// which rewrites every byte a broken gather may have written. If the direct
// transfers fail too, or the operation's context ends, the whole operation
// fails with an [*OpError]: there is no partial success. Result.Fallback
// and [EngineStats] count the reasons.
//
// Abort fence: an operation whose context ends stops posting, but what it
// has in flight (direct requests, a gather command the owner is running)
// could still land in the caller's memory. It gets EngineConfig.AbortGrace
// to finish; then one engine watchdog closes its Conn, which ends it all
// (the transports complete the requests in flight with ErrClosed only once
// nothing more can land), and the operation fails with the context's error
// and ErrClosed. So Do returns in bounded time however the network
// behaves, and nothing of an operation lands after it returned.
//
// Trace: each Result carries a [Trace]: plan, call and control, the owner's
// decode, pack (or scatter) and fill, the bulk window and the completion
// tail, with [Trace.Goodput] (payload over the full API time) and
// [Trace.WindowGoodput] (payload over the window). The stage markers of
// package verbs/stage bracket the operation, plan, control, decode, pack
// and scatter (per chunk, [stage.ChunkID]; at most stage.MaxMarkedChunks
// chunks of a command carry markers, each weighted by the chunks it stands
// for), post (per batch or chunk; a READ chunk's pack and post share one
// stage.Next) and completion; never a fragment. Operation ids and the
// gather service's command ids come from one process-wide counter, so a
// profiler's (id, stage) keys never collide within a process
// (tools/cmd/scatterprof).
//
// # Gather service
//
// A [GatherService] serves [MethodGatherInfo] and [MethodGather] on the
// owner's segment. Commands are untrusted: each is decoded under the
// service's planfmt.Limits, its owner-side window must lie inside one of
// the service's exports with the access the direction needs, its
// requester-side window inside a region the requester exposed
// (Peer.Remote) with the access it needs, and its plan must normalize
// (bounds, overlapping destinations); WRITE commands must carry ranges that
// read the staged stream in order. A command that fails any check is
// answered with an error and nothing is read or written. The chunk size is
// clamped to the service's bounds and the slots to MaxSlots and
// CommandBudget, so a command never holds more than P*C of staging;
// commands share the pool, and one whose first slot is not free within
// AcquireTimeout fails with GatherExhausted (the requester falls back).
// Rows are packed with bufferpool/pack's unchecked loops (the decode and
// the window checks make them safe), split over PackWorkers goroutines for
// large chunks; ranges with one copy per span piece. Each slot is released
// once its requests have completed, including after a failure.
//
// Budgets: before a command is decoded, the service reads the shape its
// header declares (planfmt.Limits.PeekCommand) and charges an upper bound
// of what it will take (every fragment counted, empty ones too) against
// MemoryBudget, with at most MaxCommands running at once over all
// connections; a command that finds no room within AcquireTimeout fails
// with GatherExhausted (the requester falls back to direct), one larger
// than the whole budget is refused. Finished commands' storage is kept for
// reuse only within small bounds. A command that makes no progress for
// ProgressTimeout (a requester that stopped acknowledging the owner's
// WRITEs, a partition) has its connection evicted ([Segment.Evict]): the
// command fails and its staging is released once the connection is
// fenced. Together with the transports' caps (ListenOptions: sessions,
// lanes, calls and call bytes per connection and per segment), what peers
// can make an owner hold is bounded by its configuration, and nothing a
// peer does holds staging, or a handler, past ProgressTimeout.
//
// # Format
//
// The gather methods' messages are little-endian, unaligned, version 2
// (version 2 added the inline reply).
// A decoder rejects another version, a wrong magic, reserved bytes that
// are not zero, lengths that disagree with the counts, non-finite or
// non-positive rates, inconsistent staging bounds and negative durations
// (a *WireError wrapping ErrProtocol). The request of [MethodGatherInfo]
// is empty. Its reply:
//
//	+--------+------+--------------------------------------------------+
//	| offset | size | field                                            |
//	+--------+------+--------------------------------------------------+
//	|      0 |    4 | magic "SKGI"                                     |
//	|      4 |    1 | version: 2                                       |
//	|      5 |    1 | reserved, 0                                      |
//	|      6 |    2 | E: exposures listed (at most 1024)               |
//	|      8 |    8 | B_mem, float64 bits: bytes/s per pack worker     |
//	|     16 |    8 | R_copy, float64 bits: spans/s per pack worker    |
//	|     24 |    8 | staging budget of one command, bytes             |
//	|     32 |    8 | largest chunk, bytes (<= budget)                 |
//	|     40 |    8 | smallest chunk (the pool's smallest class)       |
//	|     48 |    4 | most staging slots of one command                |
//	|     52 |    4 | pack workers                                     |
//	|     56 |    8 | inline reply limit, bytes (0: none; <= 8 MiB)    |
//	|     64 | 24*E | exposures: key (8), length (8), access (1),      |
//	|        |      | reserved (7, zero)                               |
//	+--------+------+--------------------------------------------------+
//
// The request of [MethodGather] is a planfmt command message (see package
// planfmt, # Format): READ names the owner's export as its source window
// and the requester's exposure as its destination; WRITE names the
// requester's staged wave as its source and the owner's export as its
// destination, with FormRanges whose sources are offsets in the wave. The
// command's chunk size is C, its pipeline width the staging slots P. The
// reply is the owner's stage record (88 bytes), followed, for an inline
// reply, by the READ's packed payload (exactly the payload bytes field):
//
//	+--------+------+--------------------------------------------------+
//	|      0 |    4 | magic "SKGR"                                     |
//	|      4 |    1 | version: 2                                       |
//	|      5 |    1 | direction: 1 READ, 2 WRITE                       |
//	|      6 |    1 | flags: bit 0 = inline payload follows (READ)     |
//	|      7 |    1 | reserved, 0                                      |
//	|      8 |    8 | decode and validation, ns                        |
//	|     16 |    8 | pack (READ) or scatter (WRITE) total, ns         |
//	|     24 |    8 | window: first bulk post to last completion, ns   |
//	|     32 |    8 | handler: command received to reply, ns           |
//	|     40 |    8 | fill: command received to first bulk post, ns    |
//	|     48 |    8 | payload bytes                                    |
//	|     56 |    8 | staging peak, bytes                              |
//	|     64 |    8 | chunk size used, bytes                           |
//	|     72 |    4 | chunks                                           |
//	|     76 |    4 | staging slots used                               |
//	|     80 |    4 | pack workers used                                |
//	|     84 |    4 | reserved, 0                                      |
//	+--------+------+--------------------------------------------------+
//
// A failed command is answered with the handler error of a [*GatherError],
// which reaches the requester as the Message of a [*CallError]:
//
//	verbs: gather <code>: <stage>: <detail>
//
// where code is "refused" (validation failed; nothing read or written),
// "exhausted" (no staging slot in time; nothing written) or "aborted" (a
// transfer failed after the command started). The requester maps the code
// to its Fallback reason; any other text counts as aborted.
package verbs

// Package engine is scatterkit's transfer engine, the requester's side of
// adaptive scatter: it runs scatter operations over any transport of the
// verbs contract, choosing per operation between direct one-sided
// transfers, owner-side gather (package verbs/gather serves it) and a
// hybrid of both, from the cost model (package costmodel).
//
// # Scatter executor
//
// An [Engine] runs one scatter operation ([ScatterOp]: a Conn, a direction,
// the owner's region, the caller's [verbs.Region] and a [planfmt.Plan]) under
// one completion. [Engine.Submit] normalizes the plan once, decides once and
// starts the transfers, returning an [Operation]; [Operation.Wait] returns
// the [Result]. [Engine.Do] is both in one call. Many goroutines may submit
// at once.
//
// Groups: [Engine.SubmitGroup] (and [Engine.DoGroup]) run several
// ScatterOps as one operation, typically one per owner of a source cut by
// planfmt.Splitter: every part is checked and normalized before any
// starts (one invalid part starts nothing and names itself), then all run
// at once, each deciding its own mode on its own Conn. A failed part
// does not cancel the others (the connections to healthy owners are never
// fenced for another owner's failure); the group fails whole with a
// [GroupError] listing the failed parts, which a caller may retry on
// replicas; [GroupResult] sums the parts' bytes and, for parts cut
// from one plan, their span byte counts span by span.
//
// Device destinations: [Engine.DoDevice] runs a READ into memory the
// transports cannot write (a GPU's, through a [DeviceDst] that cudagather
// satisfies; the engine calls no device API). The plan is cut by its
// destination into pieces of at most DeviceOp.Window bytes
// (planfmt.DstCutter), up to DeviceOp.Depth of them in flight, each
// transferred in its own mode into a slot of a registered bounce region
// and, once landed, handed to DeviceDst.CopyIn with its destination runs
// (bytes between runs stay as they are, as -1 rows do) while later pieces
// transfer; a slot is reused once its copy has read it. The bounce region
// holds Depth x Window bytes whatever the plan's size, and the operation
// returns once every copy has finished.
//
// Deciding: ModeAuto asks the owner's gather service for its capability
// once per Conn ([Engine.Prepare] does it ahead of time) and feeds
// costmodel the Conn's [verbs.LinkParams], the owner's packing calibration
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
// use Config.CopyWorkers goroutines (W). A READ of a fixed-row plan
// is thus exactly a random-row gather into the caller's destination, with
// no staging and no second copy. The loops run unchecked because the plan
// was normalized (fragments inside the extents, ids inside the table,
// destinations disjoint) and the extents are checked against the lengths
// the Mapper returns (the real mapping, not the caller's RegionInfo). The
// Mapper grants only what the owner granted: a WRITE to a region exported
// without remote write fails with ErrAccess before any byte moves. The
// part completes when the copy returns: Trace.Window is the copy time,
// Trace.Mapped its bytes, and Trace.DirectRequests stays 0.
// Config.PostOnMapped turns this off.
//
// Pricing mapped direct: the cost model's T_direct charges N/R_post for
// the requests. On a mapped Conn a request is a copy the engine makes with
// W workers, so R_post is set, per operation, to the rate that makes
// N/R_post the local gather time S/(W*B_mem) + M/(W*R_copy), with B_mem
// and R_copy from the engine's local calibration (Config.Calibration,
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
// Staged READ: when the destination is as fragmented as the source (its
// runs hold fewer than Config.MinRunFragments fragments on average) the
// owner would post a WRITE per fragment; if the engine's staging is
// exposed with AccessRemoteWrite, the gather goes instead as a command per
// chunk whose destination is a lease of C bytes of that staging (up to P
// in flight; a rows plan's chunk is sent as its carrying ids in the rows
// form, a ranges plan's as its source ranges), and the engine scatters
// each landed chunk into its destination (Trace.Staged): a rows chunk by
// the plan's layout, row by row from its ids, a ranges chunk by the
// destination runs built at planning. The issuing loop only cuts each
// chunk and leases its staging; the chunk's goroutine encodes its command
// (the plan's own id slice when it has no -1 ids), sends it and scatters
// the reply, so the first P commands leave together. Where both
// sides allow inline replies, C is at most the smaller inline limit and
// each call asks for one: the chunk comes back inside the reply (one round
// trip; the owner neither WRITEs the lease nor waits for that WRITE's
// acknowledgement before replying), and is scattered from there. The lease
// is held either way, so an owner that answers with a WRITE after all
// writes only staging the operation owns. costmodel.DecideStaged prices and shapes it (its P calls
// in flight, each carrying its chunk through the owner's packing, the
// link and this side's scatter), with the Conn's measured per-call cost as
// T_chunk_fixed; ModeAuto weighs it against direct. Config.ChunkedRead
// (experimental, off) sends a plain READ gather as a command per chunk
// the same way, landing in place.
//
// Measured link figures: direct operations of at least 1 MiB in requests
// of at least 256 KiB feed the Conn's bandwidth, which replaces the
// connect probe's B_net in every later decision; other direct operations
// feed its request rate. Every direct operation of 256 requests or more
// also feeds its own time outside its window per request (its planning,
// posting and completing on this side: its Plan, then launch to
// completion, less its Window), which later decisions add to T_direct as
// N*TDirectPerRequest, the counterpart of the gather's priced front.
//
// Inline reply: a READ gather of at most Config.InlineMax payload
// bytes (default 256 KiB; the whole plan, not a hybrid's part) sets
// planfmt.FlagInlineReply, and an owner whose gather.Config.InlineMax
// admits the payload packs it straight into its reply instead of staging
// and WRITEing it; the engine copies the reply's stream into the
// destination runs. A latency-sized gather then costs one round trip
// (the command and its reply) instead of two (the bulk WRITEs are
// acknowledged before the reply), and holds no staging. The destination
// must still be exposed: the owner validates the command the same way.
// For such an operation Trace.Inline is set and Trace.Window is the
// owner's packing plus the engine's copy. Since the owner posts no WRITE
// per destination run, ModeAuto weighs an inline gather against direct
// also when the destination is fragmented (its runs shorter than
// Config.MinRunFragments fragments, as in one owner's part of a lookup
// split over several): the gather front, the owner's packing, the payload
// once over the link and this side's copy into the runs (R_copy per run,
// B_mem per byte).
//
// Gather WRITE: the engine packs the fragments into its own staging
// (Config.Staging, exposed on the Conn with AccessRemoteRead) chunk by
// chunk, each chunk into a lease of C bytes (C a size class of that pool),
// and calls [MethodGather] once per chunk with a ranges command over it,
// up to P calls in flight while it packs the next chunk; the owner READs
// each chunk into its staging and copies its runs into its region. The
// requester's staging held at once is at most P leases of C
// (Trace.StagingPeak <= Trace.Slots x Trace.ChunkBytes). On shm a registered arena cannot be exposed, so WRITE
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
// and [Stats] count the reasons.
//
// Abort fence: an operation whose context ends stops posting, but what it
// has in flight (direct requests, a gather command the owner is running)
// could still land in the caller's memory. It gets Config.AbortGrace
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
package engine

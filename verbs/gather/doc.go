// Package gather is the owner's side of adaptive scatter: a gather
// service that, on the owner's segment, packs a requester's fragments into
// registered staging and moves them in a few bulk transfers (READ), or
// reads the requester's staged bytes and scatters them (WRITE). The
// requester's side is package verbs/engine; the wire format below is
// defined once, for both, in verbs/internal/gatherwire.
//
// A [Service] serves [MethodGatherInfo] and [MethodGather] on the
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
// AcquireTimeout fails with engine.GatherExhausted (the requester falls back).
// Rows are packed with bufferpool/pack's unchecked loops (the decode and
// the window checks make them safe), ranges with one copy per span piece;
// a chunk of at least ParallelMin bytes is split over PackWorkers
// goroutines in either form (ranges cut into pieces of about equal
// bytes, inside a range where a cut falls). Each slot is released
// once its requests have completed, including after a failure.
//
// Budgets: before a command is decoded, the service reads the shape its
// header declares (planfmt.Limits.PeekCommand) and charges an upper bound
// of what it will take (every fragment counted, empty ones too) against
// MemoryBudget, with at most MaxCommands running at once over all
// connections; a command that finds no room within AcquireTimeout fails
// with engine.GatherExhausted (the requester falls back to direct), one larger
// than the whole budget is refused. Finished commands' storage is kept for
// reuse only within small bounds. A command that makes no progress for
// ProgressTimeout (a requester that stopped acknowledging the owner's
// WRITEs, a partition) has its connection evicted ([verbs.Segment.Evict]): the
// command fails and its staging is released once the connection is
// fenced. Together with the transports' caps (ListenOptions: sessions,
// lanes, calls and call bytes per connection and per segment), what peers
// can make an owner hold is bounded by its configuration, and nothing a
// peer does holds staging, or a handler, past ProgressTimeout.
//
// # Format
//
// The gather methods' messages are little-endian, unaligned, version 3
// (version 2 added the inline reply, version 3 the owner's parallel
// packing threshold).
// A decoder rejects another version, a wrong magic, reserved bytes that
// are not zero, lengths that disagree with the counts, non-finite or
// non-positive rates, inconsistent staging bounds and negative durations
// (an *engine.WireError wrapping verbs.ErrProtocol). The request of [MethodGatherInfo]
// is empty. Its reply:
//
//	+--------+------+--------------------------------------------------+
//	| offset | size | field                                            |
//	+--------+------+--------------------------------------------------+
//	|      0 |    4 | magic "SKGI"                                     |
//	|      4 |    1 | version: 3                                       |
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
//	|     64 |    8 | smallest chunk packed on more than one worker    |
//	|     72 | 24*E | exposures: key (8), length (8), access (1),      |
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
//	|      4 |    1 | version: 3                                       |
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
// A failed command is answered with the handler error of a [*engine.GatherError],
// which reaches the requester as the Message of a [*CallError]:
//
//	verbs: gather <code>: <stage>: <detail>
//
// where code is "refused" (validation failed; nothing read or written),
// "exhausted" (no staging slot in time; nothing written) or "aborted" (a
// transfer failed after the command started). The requester maps the code
// to its Fallback reason; any other text counts as aborted.
package gather

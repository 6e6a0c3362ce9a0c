// Package remote serves Engram byte tables from an owner process and looks
// rows up from a requester through the verbs transfer engine.
//
// An Engram table is immutable: NumRows rows of RowBytes bytes each. A lookup
// takes int32 or int64 ids shaped [T,K] (one table name per column; names may
// repeat) and fills a uint8 output shaped [T,K,R] through byte strides, so a
// token-major ([T,K,R]: TStride = K*R, KStride = R), head-major ([K,T,R]:
// TStride = R, KStride = T*R) or padded output is the same call. Id -1 leaves
// its output row untouched. Optional per-column offsets turn global ids into
// table rows (row = id - offset).
//
// # Owner
//
// Serve registers each table's rows with the transport for remote READ only
// (never WRITE), exports them under ExportName(namespace, table), listens,
// starts a gather.Service over those exports with its own staging, and
// answers MethodTables with the namespace and the table specs (see # Format).
// The owner serves only its own registered ranges: every work request and
// gather command is validated by the verbs layer against the exports, so a
// requester can read table rows and nothing else, and write nothing.
//
// The tcp backend exports the caller's memory as is (an mmap'd snapshot is
// served without a copy). The shm backend can export only memory it
// allocated itself: there Serve copies every table once into an Alloc'ed,
// sealed region and serves the copy (Server.Copied reports it), which costs
// the tables' size in memory and a copy at start.
//
// # Requester
//
// Dial creates a staging.Staging as the output arena (AccessLocal |
// AccessRemoteWrite), connects exposing it, so the owner's gather service can
// WRITE packed rows straight into it, fetches the table specs (the namespace
// must match) and keeps each table's RegionInfo. NewOutput leases an output
// buffer inside that arena. On shm a registered arena cannot be exposed; Dial
// then connects without exposing it, and lookups run as the engine's mapped
// direct copies (a local random-row gather from the mapped table).
//
// A lookup is a lookup.Request, checked in full before anything is submitted
// by the one check every Engram lookup passes (lookup.Request.Check, with the
// Client as its lookup.Tables): the shape, every table name and row size, that
// the output lies inside the client's arena, the strides (no negative one, no
// two output rows overlapping, all inside the output; the lookup core's exact
// overlap rule), and every id against its table and offset. An invalid call
// returns the lookup core's typed error, the same a local lookup returns, and
// writes no byte. Lookup checks and runs; Run runs a lookup its caller has
// already checked (package engram checks against its own view of the tables).
// A checked call is lowered into fixed-row scatter
// operations (planfmt.FormRows), never one request per row: the columns are
// grouped by (table, offset); each group's columns, split into evenly spaced
// runs, become one strided plan (Cols = run length, RowStride = TStride,
// ColStride = spacing * KStride, DstBase = the run's first column). A run that
// is the whole [T,K] id array with offset 0 uses the caller's ids as they are;
// any other run's ids are compacted and offset-adjusted into reused scratch
// (-1 kept, int32 whenever the table's rows fit). So a lookup of K columns of
// one table, the common case, is exactly one operation.
//
// One refinement: a run whose rows are adjacent down a column but not along a
// token (head-major, TStride = R) is planned column by column instead (its
// ids transposed into scratch, Cols = T, RowStride = spacing * KStride,
// ColStride = TStride). Its destination then forms a few long runs rather than
// one per row, which lets the engine's cost model gather it (the owner packs
// and writes each column in bulk); in token order the engine would have to
// run it direct. This is skipped when the mode is forced direct or the arena
// is not exposed.
//
// Every operation but the last is submitted (Engine.Submit, the mode chosen
// by the engine's cost model unless ClientConfig.Mode forces one), then the
// last runs on the calling goroutine (Engine.Do, so a single-operation lookup
// has no hand-off), then the others are waited for; the call returns the
// first failure (in operation order) after all have ended. A transfer that fails
// leaves the output bytes the request names undefined, as a failed verbs
// operation does.
//
// The connection defaults to one tcp lane (DefaultLanes), not verbs' four:
// lookups are latency-bound, and on one lane a batch is one write and its
// answers one read.
//
// Steady-state lookups reuse their plans, scatter operations and id scratch
// (per-call state taken from a small free list, so concurrent lookups do not
// serialize on a lock): a single-operation lookup allocates nothing once the
// transports' buffers have grown; one of several operations allocates at most
// one small object per operation submitted before the last (the engine starts
// a gather it does not run inline on its own goroutine).
//
// # Shards
//
// ClientConfig.Shards spreads tables over several owners by row ranges:
// shard [Lo, Hi) of a table is served by each of its Addrs (replicas) as a
// table of Hi-Lo rows named Shard.Served. Dial connects to every owner
// once, checks each shard's table against the owner's list and exports,
// and that the shards tile each table from row 0. The client's tables are
// the whole tables. A lookup lowers as above into one plan per run over
// the whole table; each plan is cut by its table's shards
// (planfmt.Splitter: the shard's rows rebased, -1 for the others, the
// layout kept), and every shard with rows in the lookup becomes one part
// of a single engine group on its shard's live replica, all in flight at
// once. A part that fails is read again from its shard's next replica and
// the failed replica is not used again by this Client; only the failed
// parts are repeated (a failed part's rows are exactly what it is asked
// again). A shard with no replica left fails the lookup whole with a
// *ShardError (table, rows, owners, last failure); the output rows are
// then undefined, as for any failed transfer. Unsharded tables of a
// sharded client (one shard) need no cut. Lookups of a client dialled
// with Addr take the single-owner path unchanged.
//
// # Format
//
// The control methods live on the owner's segment next to the gather
// service's (0x4701, 0x4702):
//
//	MethodTables (0x4501): request empty; reply: the table list below.
//	MethodPing   (0x4502): request empty; reply empty (a round trip).
//
// Any non-empty request is refused with a handler error. The table list is
// little-endian and unaligned, version 1:
//
//	+--------+------+------------------------------------------------+
//	| offset | size | field                                          |
//	+--------+------+------------------------------------------------+
//	|      0 |    4 | magic "SKET"                                   |
//	|      4 |    1 | version: 1                                     |
//	|      5 |    1 | S: namespace length (1..64)                    |
//	|      6 |    2 | N: tables (1..252)                             |
//	|      8 |    4 | length: bytes of the whole message             |
//	|     12 |    4 | reserved, 0                                    |
//	|     16 |    S | namespace                                      |
//	+--------+------+------------------------------------------------+
//
// then N table records, in the owner's order, each 16+L bytes:
//
//	+--------+------+------------------------------------------------+
//	|      0 |    8 | rows (1..2^63-1)                               |
//	|      8 |    4 | R: row bytes (1..2^24)                         |
//	|     12 |    1 | L: name length (1..128)                        |
//	|     13 |    3 | reserved, 0                                    |
//	|     16 |    L | name                                           |
//	+--------+------+------------------------------------------------+
//
// Names and the namespace are printable ASCII without spaces (0x21..0x7e).
// A table's bytes (rows * R) must not exceed 2^63-1. A new layout or meaning
// changes the version byte; there are no optional fields.
//
// DecodeTables rejects, with a *DecodeError, a message shorter than its
// header, its length field or its records (ErrTruncated); another version
// (ErrVersion); a wrong magic, nonzero reserved bytes, a length field smaller
// than the message, a namespace or name length or byte out of range, zero or
// too many tables, bytes after the last record, a zero row count or row size,
// a row size over 2^24, a table larger than 2^63-1 bytes and duplicate names
// (ErrCorrupt). The encoding is canonical: a message that
// decodes re-encodes to the same bytes.
//
// The client then checks each table against the segment's exports (a region
// named ExportName(namespace, name), readable, exactly rows * R bytes long);
// a disagreement fails Dial with a *MismatchError.
package remote

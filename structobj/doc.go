// Package structobj stores Structured Objects: a manifest (metadata and
// named members: tensors, ndarrays, bytes, ragged lists and sparse COO
// updates) plus a payload, kept in owners' registered memory and moved with
// the transfer engine's scatter operations: the Structured Object workload
// of scatterkit's adaptive scatter RFC.
//
// An Owner serves objects from one registered region of its transport
// ("objects"), hands out space (Reserve), installs an object atomically
// under a key (Commit: a reader sees the old object or the new, never a
// mix), keeps a replaced or deleted object's space until the readers
// holding it are done, and publishes each key in a segment directory
// (package verbs/discovery: embedded or etcd). A Client writes an object's
// separate buffers straight into reserved space as scatter WRITEs (staging
// unregistered memory through a pool of registered buffers, chunk by
// chunk, several chunks in flight) and reads whole objects, selected
// members or byte ranges of members straight into caller memory, one
// scatter READ per owner. Without the fast path (no pool, no gather
// service, pool exhausted) plain inline PUT and GET give the same results.
//
// # Across owners
//
// A Placement spreads keys over a list of owners with R replicas per key,
// by rendezvous hashing (stable: an owner joining or leaving moves only
// the keys it gains or held; every client with the same list agrees).
// Client.PutReplicas puts an object on each of a key's owners at once and
// fails unless all took it. GetMany reads requests from every owner in
// parallel (one scatter READ per owner); a request with Replicas reads
// from its first owner and, when that owner fails it (unreachable,
// closed, no such key, a failed transfer), from the next, within the same
// call. A bad selection fails on the first replica without trying others.
//
// # Manifest format
//
// An encoded manifest is one self-delimiting message with magic "SKOM". All
// integers are little-endian; lengths and offsets are unsigned, shape,
// stride and nnz values are two's complement int64. Nothing is aligned:
// decoders read unaligned. Strings are length-prefixed (names and keys by
// one byte, values by four) and hold their bytes verbatim.
//
//	Header (32 bytes)
//	+--------+------+------------------------------------------------------+
//	| offset | size | field                                                |
//	+--------+------+------------------------------------------------------+
//	|      0 |    4 | magic: "SKOM"                                        |
//	|      4 |    1 | version: 1                                           |
//	|      5 |    3 | reserved, 0                                          |
//	|      8 |    4 | length: bytes of the whole message                   |
//	|     12 |    4 | crc32c (Castagnoli) of the whole message, computed   |
//	|        |      | with these 4 bytes as zero                           |
//	|     16 |    8 | payload bytes (Manifest.PayloadBytes)                |
//	|     24 |    4 | M: metadata entries                                  |
//	|     28 |    4 | N: members                                           |
//	+--------+------+------------------------------------------------------+
//
// Then M metadata entries, in Manifest.Meta order (6 bytes at least):
//
//	+0      1  key length k (1..255)
//	+1      k  key
//	+1+k    4  value length v
//	+5+k    v  value
//
// Then N member records, in Manifest.Members order (22 bytes at least). The
// fields after the shape depend on the kind:
//
//	+0      1  name length n (1..255)
//	+1      n  name
//	+1+n    1  kind: 1 tensor, 2 ndarray, 3 bytes, 4 ragged, 5 sparse_coo
//	+2+n    1  dtype (see DType; 0 for bytes)
//	+3+n    1  order: 'C' (0x43) or 'F' (0x46) for ndarray, else 0
//	+4+n    1  D: dimensions (0..255)
//	+5+n   8D  shape, D int64
//	       8D  strides in bytes, D int64              tensor only
//	        8  nnz, int64                             sparse_coo only
//	       16  data part: offset, length (uint64)
//	       16  offsets part (ragged) or indices part  ragged, sparse_coo only
//	           (sparse_coo): offset, length (uint64)
//
// For example, a bytes member named "blob" of 5 bytes at payload offset 40
// is the 25 bytes 04 "blob" 03 00 00 00, then 40 and 5 as uint64s.
//
// The last member record ends the message. A part's offset is relative to
// the object's payload; parts a kind does not use are not encoded (and are
// zero in the decoded Member).
//
// Versioning: the version byte changes whenever any layout or meaning
// changes; there are no optional fields. A reader that meets another version
// fails with ErrManifestVersion. Reserved bytes must be zero so that a later
// version can give them meaning.
//
// The encoding is canonical: every byte follows from the Manifest, so
// decoding and re-encoding reproduces a message byte for byte.
//
// What DecodeManifest rejects, always as a *WireError wrapping
// ErrManifestWire: a message over Limits.MaxBytes, or with more metadata
// entries or members than the limits allow (also ErrManifestLimit); bad
// magic; another version (also ErrManifestVersion); nonzero reserved bytes;
// a length field other than the message's size (too short: truncated; too
// long: trailing bytes); a checksum mismatch; counts that need more bytes
// than the message has; a record running past the end, an unknown kind, or
// bytes after the last member; and a well-formed message whose manifest
// breaks a rule of Validate (also the *ManifestError, and so ErrManifest).
//
// Allocation: the decoder sizes nothing from a count before checking that
// the message holds the minimum bytes that count implies, and it allocates
// only once the whole message has been checked. Decoding into a fresh
// Manifest allocates at most about 8 bytes per message byte (the Member
// structs, the shapes, the strings and the validation scratch; 6.2 measured
// for a message of 30,000 minimal members). Decoding into a Manifest that
// already holds a manifest of the same size reuses its storage and
// allocates one block for the strings, or nothing when they are the same
// bytes as before.
//
// # Control protocol
//
// Payload bytes move with one-sided transfers on the owner's "objects"
// region: a client WRITEs a payload into space it reserved and READs an
// object's payload at the offset Open returned. Everything else is one of
// the control calls below, made with verbs.Conn.Call on the owner's
// segment.
//
//	method     id      request                         reply
//	Info       0x5301  -                               capabilities: arena and inline sizes,
//	                                                   TTLs, gather service, limits, names
//	Reserve    0x5302  size                            reservation id, offset, length, TTL
//	Commit     0x5303  reservation id, key, manifest   version
//	Abort      0x5304  reservation id                  -
//	Open       0x5305  key                             hold id, version, payload offset,
//	                                                   hold TTL, manifest
//	Close      0x5306  hold id                         -
//	Delete     0x5307  key                             version deleted
//	PutInline  0x5308  key, manifest, payload          version
//	GetInline  0x5309  key, ranges (none: all)         version, manifest, the ranges' bytes
//
// The messages' byte layout, their versioning and what a decoder rejects
// (a *MessageError, matching ErrProtocol: every malformed message, every
// id, offset, length, TTL and limit out of range) are specified in
// structobj/internal/proto ("Format" in its documentation). Keys are
// checked against the naming rules by the owner; manifests by
// DecodeManifest.
//
// Reservation and hold ids are issued by the owner, never zero, and
// belong to the connection that took them: another connection naming
// them is refused. TTLs travel as durations, so the two sides' clocks need
// not agree: a client adds them to its own clock when the reply arrives.
// What an expired reservation means is the next section.
//
// A call that fails is answered with the handler error text
//
//	structobj <code>: <detail>
//
// where code is one of the Code constants:
//
//	Reserve    nospace (no free extent that large), busy (MaxReservations)
//	Commit     notfound (no such reservation), expired (past its TTL, or
//	           ended with its connection's eviction; its space is gone),
//	           refused (another connection's reservation,
//	           a manifest that does not decode under the limits or whose
//	           PayloadBytes exceed the reservation, a name another live
//	           owner publishes), nospace (MaxObjects), busy (the directory
//	           failed to publish)
//	Abort      notfound, expired (nothing left to abort), refused (another
//	           connection's)
//	Open       notfound (no such key), busy (MaxHolds)
//	Close      notfound, expired (the hold had ended), refused (another
//	           connection's)
//	Delete     notfound
//	PutInline  refused (payload length other than PayloadBytes), nospace,
//	           busy, as Commit
//	GetInline  notfound, refused (a range outside the payload, a whole
//	           payload above the inline limit)
//	any        refused (malformed message, invalid key), closed (the
//	           owner is closing)
//
// The code is what a client branches on; the detail is for people.
// decodeCallError turns such a verbs.CallError back into an *OwnerError
// that matches the code's sentinel (ErrNotFound, ErrNoSpace, ErrExpired,
// ErrRefused, ErrBusy, ErrClosed) with errors.Is.
//
// A new version of any message changes the header's version, and both
// sides refuse what they do not speak.
//
// # Expiry and the fence
//
// A reservation is space lent to one connection for ReserveTTL, by the
// owner's clock from the Reserve. The client WRITEs into it and ends it
// with Commit (the space up to PayloadBytes becomes the object, the rest
// goes back) or Abort (all of it goes back at once). Either is the
// client's word that every WRITE it issued under the reservation has
// landed or failed; the Client keeps it, sending either only once each
// of its WRITEs has completed (over tcp the owner acknowledges a WRITE once
// it is in the region) or failed, and only on the reservation's own
// connection. Abort does not fence: the fence is the end of the
// connection, which would fail every other call the client has on it,
// and it would protect against no one: a client that stalls cannot send
// an Abort, and one that writes after its Abort could as well write any
// other byte of the region.
//
// A reservation that reaches its TTL uncommitted has expired. Its client
// may be dead, but it may also be frozen (SIGSTOP, a GC pause, a VM
// stall), slow, or cut off by a partition that heals later, with WRITEs
// still queued in a kernel or on the wire. So the owner, on its timer or
// on the next call, whichever comes first:
//
//   - ends every reservation of that connection: a Commit or Abort of one
//     of them that is still being served fails with code expired;
//   - evicts the connection (verbs.Segment.Evict): it ends as a failure
//     would, its calls fail and its client sees it end;
//   - keeps the reservations' space quarantined, out of the allocator
//     (OwnerStats.Quarantined, QuarantinedBytes), until the connection's
//     fence closes: over tcp once its lanes have stopped reading (a WRITE
//     read before has landed; the rest dies with the sockets), over shm
//     once the client has unmapped the region and closed its end of the
//     socket (a process that dies does both), and in both once the
//     connection's handler calls have returned (a gather service's WRITE
//     command scatters what it read into the region on its handler).
//     Only then can the space be reserved again. Waiting for the fence
//     holds neither the owner's lock nor its sweeper.
//
// The guarantee: the space of an expired reservation is never handed out
// again while a WRITE issued under it can still land, so no stall, pause
// or partition longer than the TTL tears another object. Over tcp it
// holds against any client, frozen, slow, partitioned or hostile: once
// the fence has closed nothing that connection sent reaches the region.
// Over shm it holds against clients that write only through the verbs
// API, whose copies run under verbs.Mapper.HoldMapped, which the fence
// waits for. A process with a writable mapping of the objects region can
// write any byte of it at any time, whatever the owner does, so admit
// only trusted peers with write access. A client that never lets go
// keeps its space quarantined until the owner's Close, which ends every
// connection (over shm after the transport's CloseGrace) before it gives
// the region back.
//
// The owner does not learn when a connection ends: the reservations of a
// connection that dropped wait for their TTL like any other, and their
// space comes back once the connection's session has ended (its fence
// closes then). Holds are not fenced: a READ cannot change the owner's
// memory, so an expired hold's object is released at once and its
// connection stays (its Close is told expired, and the Client's GET fails).
//
// A client whose connection was evicted sees the connection end, never a
// success: its calls and transfers in flight on it fail with an error
// matching verbs.ErrClosed. The Client's PUT says that the connection
// ended under the reservation and whether its Commit may have been
// applied (an eviction after the Commit was sent leaves that unknown),
// and also matches ErrExpired when the client's own clock is past the
// TTL. The Client then drops the connection, and its next call to that
// owner connects again. Since one connection carries all of a Client's
// calls to an owner, every one of them in flight fails with it: one more
// reason for a PUT to end within the TTL less a margin, as the Client
// bounds it.
package structobj

// Package tcp is the verbs transport across hosts. The owner process
// performs one-sided READs and WRITEs on its exported regions on behalf of
// its requesters, over TCP. It is pure Go and portable.
//
// # Lanes
//
// A connection is a bundle of lanes, TCP connections with TCP_NODELAY
// (ConnectOptions.Lanes, default 4). Lane 0 carries the handshake. The
// others join it with the connection id and a random token. Post spreads
// each batch over the lanes in contiguous runs of about equal bytes,
// starting on a different lane each time, so a few large READs move in
// parallel and many small ones are still batched. Each lane has, on both
// sides, one reader goroutine and one writer goroutine.
//
// # Data path
//
// Post validates the local sides, takes a slot per request (the slot
// number, with a generation, is the frame id), encodes all frames of a
// lane's run into one batch and hands it to the lane's writer. The writer
// writes everything submitted since its last write with one writev. Post
// never makes a syscall and never blocks on the network.
//
// The owner's lane reader takes frames from a 256 KiB buffer and
// validates each one. A READ is answered with DATA taken straight from the
// region: payloads up to Config.InlineMax (default 2 KiB) are copied next
// to their header in the outgoing batch (for a 264 B row this is the one
// random-row copy any server pays); larger ones go to writev by reference,
// with no copy before the kernel's. The payload of a valid WRITE is read
// straight into the region. An invalid WRITE's payload is drained and
// dropped, and answered with a failed ACK. Responses are submitted every
// 256 KiB and whenever the reader's input runs dry, so one writev carries
// thousands of them.
//
// The requester's lane reader copies a DATA payload into the local region
// at the posted offset: small payloads from its buffer, and the remainder
// of a payload of 64 KiB or more directly from the socket. It collects
// completions and publishes them to the completion queue as a batch (one
// lock, one wake-up) when its input runs dry or after 1,024 of them.
//
// Owner-initiated requests (a handler's Peer) use the same frames in the
// other direction. The requester validates them against the regions it
// exposed, exactly as the owner validates requests.
//
// # Control calls
//
// Repeated calls set nothing up: a warm Call allocates nothing on either
// side. The requester reuses its pending-call records and appends the
// REPLY to the caller's buffer. The owner keeps, per connection, parked
// handler goroutines (up to 16), call records with their request and
// response buffers (up to 16; requests up to 4 MiB), and the queues of
// ended calls' Peers (up to 16). A handler's REPLY of 32 KiB or more
// (an inline gather reply's packed rows) is copied and checksummed into
// a batch of its own on the handler's goroutine, outside the lane's lock,
// and then queued; smaller ones join the lane's tail batch. A call's
// Peer is a fresh handle on a reused queue, tied to the queue's epoch:
// when the call ends the queue moves to the next epoch, so a Peer a
// handler kept fails with verbs.ErrClosed and never reaches a later
// call's requests or completions. Handles come from slabs of 256 (one 4 KiB allocation per
// 256 calls), and never serve two calls.
//
// # Ordering
//
// Frames of one lane are handled in order; frames of different lanes are
// not ordered, and completions arrive in any order. A handler's REPLY is
// sent only after every request its Peer posted has been answered (ACK or
// DATA received), waiting for them if the handler did not. So when Call
// returns, the handler's WRITEs are in the requester's memory. Call
// results never overtake data.
//
// # Backpressure
//
// A well-behaved requester bounds the owner's work by its queue depth.
// Against one that is not, an owner lane reader stops reading while more
// than 8 MiB of its responses wait to be written, and TCP flow control
// pushes back on the sender. Requester readers never wait. So the owner's
// writers always drain, and the two sides cannot wait on each other in a
// cycle. The requester trusts the owner it chose for the volume of
// owner-initiated requests (at most the Peer queue depth per running
// call).
//
// # Format
//
// Every frame starts with a 32-byte little-endian header and an 8-byte
// trailer; payloads follow immediately, with no padding or alignment. The
// trailer is the frame's integrity check: a CRC32C (Castagnoli) of the 32
// header bytes and the 4 bytes after it, then the CRC32C of the payload
// (0 for a frame without one). The receiver checks the header's before it
// uses the header, and the payload's once it has read the payload and
// before it acts on it: a WRITE that fails the check is not acknowledged,
// DATA is not completed, a CALL never reaches its handler; the
// connection ends with a *verbs.ProtocolError, and the requests in flight
// complete with ErrClosed. So bytes damaged on the way (a bad link, a
// middlebox) fail the operation instead of landing as if correct (the
// damaged payload of a WRITE may already be in the range the peer was
// writing, which the failed operation leaves undefined). The check is not
// authentication: a hostile peer computes it like anybody. Two sides that
// both set Config.NoChecksums agree, in the handshake (HELLO's flag
// proposes, WELCOME's settles), to send the frames after the handshake
// without the trailer; either side alone keeps them checked.
//
//	+--------------------------------+-----------+------------+---------+
//	| header (32)                    | crc32c of | crc32c of  | payload |
//	|                                | hdr+pcrc  | payload    |         |
//	+--------------------------------+-----------+------------+---------+
//
//	 0       1       2               4                               8
//	+-------+-------+---------------+-------------------------------+
//	| type  |status |    method     |              len              |
//	+-------+-------+---------------+-------------------------------+
//	|                              id                               |  8
//	+---------------------------------------------------------------+
//	|                              key                              | 16
//	+---------------------------------------------------------------+
//	|                              off                              | 24
//	+---------------------------------------------------------------+
//
//	type     name     dir   fields used         payload
//	1        HELLO    R->O  len                 hello body (len bytes)
//	2        WELCOME  O->R  len [status]        hello body; status access and
//	                                            no body: the peer is refused
//	3        JOIN     R->O  id=conn key=token off=lane (1..63)
//	4        JOINED   O->R  -
//	5        READ     both  id key off len      none (len = bytes wanted)
//	6        WRITE    both  id key off len      len bytes of data
//	7        DATA     both  id status len       len bytes (0 if status != ok)
//	8        ACK      both  id status           none
//	9        CALL     R->O  id method len       request (len <= 16 MiB)
//	10       REPLY    O->R  id status method len response, or error text
//	11       PING     R->O  id                  none
//	12       PONG     O->R  id                  none
//	13       PARAMS   R->O  len=32              measured LinkParams
//
// Status values are verbs.Status: 0 ok, 1 bad key, 2 access, 3 bounds
// (DATA and ACK carry no other), 5 not supported and 6 handler failed
// (REPLY only). The id of READ/WRITE is opaque to the answering side and
// echoed in DATA/ACK. This implementation packs queue(24 bits) |
// generation(16) | slot(24) into it and rejects answers that match no
// outstanding request.
//
// The HELLO and WELCOME body:
//
//	0  magic "SKV1" (0x31564b53)   4  version (2, u16)   6  lanes (u16)
//	8  queue depth (u32)          12  region count (u32, at most 252)
//	16 connection id (u64)        24  token (u64)
//	32 probe key (u64)            40  probe length (u64)
//	48 flags (u32; bit 0: frames after the handshake unchecked)
//	52 reserved (u32, 0)
//	56 regions: key (u64) len (u64) access (u8) name length (u8) name
//
// Before answering HELLO the owner asks ListenOptions.Admit about the
// peer (its address; tcp has no credentials): a refused peer gets the
// refusing WELCOME (status 2, length 0) and its Connect fails with
// verbs.ErrNotAdmitted; a peer granted read only is listed every export
// with the write bit cleared, and its WRITEs are answered with status
// access. With no Admit set every peer that reaches the address is
// served with full access.
//
// HELLO lists the requester's exposures and leaves the ids, token and
// probe zero. WELCOME lists the segment's exports, the connection id and
// token for JOIN, the hidden probe region and the queue depth of each
// owner Peer. The PARAMS body is Bandwidth (f64 bits), PostRate (f64
// bits), QueueDepth (u64) and RTT in nanoseconds (u64).
//
// A decoder rejects, and the receiver closes the connection with a
// *verbs.ProtocolError on: an unknown type; a non-zero field the type does
// not use; an unknown status, or one the type cannot carry; DATA with a
// payload and a failure status; CALL/REPLY payloads over 16 MiB; HELLO or
// WELCOME bodies out of range; a JOIN without a token or with a lane out
// of range, for an unknown connection, a wrong token or a lane that has
// already joined; a body with a wrong magic or version, more than 252
// regions, a zero key or length, an access without a remote bit or with
// unknown bits, an empty or duplicate name, a duplicate key, or trailing
// bytes; a header or payload checksum that does not match (version 2
// made every frame checked; version 1 had no trailer); non-finite or
// negative PARAMS; a frame the receiving side never
// gets (CALL to a requester, REPLY to an owner, a second HELLO); DATA or
// ACK that answers nothing, or DATA whose length differs from the READ's.
// A request that is merely invalid (unknown key, no access, out of
// bounds) is answered with its status and is not a protocol violation.
// The version is checked once, in the handshake. A new version changes the
// magic's version field, and both sides refuse what they do not speak.
//
// # Link parameters
//
// Connect measures the fields ConnectOptions.Link leaves zero: RTT is the
// median of 5 PING round trips; Bandwidth is the best of two passes of 8
// READs of 512 KiB (4 MiB) from the owner's hidden probe region, spread
// over the lanes; PostRate is the best of two passes of 1,024 READs of
// 64 B. It takes a few milliseconds on a local network. The requester
// then sends PARAMS, so the owner's Peers report the same figures.
//
// # Measured choices
//
// The figures come from BenchmarkReadSmall, BenchmarkReadSmallVariants
// (4 lanes, depth 16,384), BenchmarkReadLarge and the two ceiling
// benchmarks. They were taken on an idle 16-core host restricted to 2
// cores (taskset) unless noted, in Nov 2026. Runs vary by about 10%, so
// ratios are quoted within one run. The shared development VM is too
// loaded to resolve these differences.
//
//   - 98,304 READs of 264 B, random rows of a 64 MiB table: 0.9-1.2 GB/s
//     (4 lanes, depth 16,384: 1.15-1.24 GB/s). That is 0.24-0.29 of raw
//     loopback TCP (4.3-4.9 GB/s) and 0.22-0.39 of the pack-only gather
//     of the same rows (3.2-5.3 GB/s). About half the CPU is the owner's
//     random-row copy. With 16 cores, 4 lanes reach 2.9-3.1 GB/s.
//   - 64 READs of 512 KiB: 3.7-4.7 GB/s, 0.92-0.99 of raw loopback. With
//     16 cores, 8 lanes reach 21-25 GB/s.
//   - Post writing its run itself when the lane's writer is idle, instead
//     of waking the writer, was within noise (1.10 vs 1.13, 0.95-1.01 vs
//     0.90-1.00 GB/s). So Post never makes the syscall and never blocks.
//     Filling a private batch per Post instead of appending to the lane's
//     tail batch was also within noise. The tail keeps a lane at a few
//     batches, allocation-free, however far a starved writer falls behind.
//   - Every payload by reference (InlineMax -1): 0.74-0.79 vs 0.90-1.13
//     GB/s. Many tiny iovecs cost more than the copy.
//   - A fixed 4 MiB SO_SNDBUF/SO_RCVBUF: no gain (0.97-1.03 vs 0.90-1.13
//     GB/s), so Config.SocketBuffer defaults to the kernel's autotuning.
package tcp

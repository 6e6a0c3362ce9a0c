// Package shm is the verbs transport between processes on one host. Both
// sides map each other's regions, so a one-sided READ or WRITE is a copy
// made by the poster. Only control calls cross a socket. It needs Linux
// (memfd, SCM_RIGHTS); elsewhere New returns a transport whose methods
// fail with verbs.ErrNotSupported.
//
// # Memory
//
// Transport.Alloc creates a memfd, sizes it, maps it shared and seals it
// against shrinking and growing (F_SEAL_SHRINK|F_SEAL_GROW), so a mapping
// of it can never fault. A region peers may only read (its access lacks
// verbs.AccessRemoteWrite: a read-only export, a requester's read-only
// exposure, the probe region) is also sealed against writes
// (F_SEAL_FUTURE_WRITE) once this process has mapped it: from then on the
// kernel refuses write(2), new writable shared mappings, mprotect to
// writable and hole punching through every descriptor of it, including
// one a peer reopens read-write through /proc. Only the allocating
// process's own mapping writes it. F_SEAL_SEAL then fixes the seals. Only
// such regions can be exported (Transport.Listen) or exposed
// (ConnectOptions.Expose): a peer cannot map plain Registered memory, and
// trying fails with verbs.ErrNotSupported. Registered memory works as the
// local side of work requests.
//
// # Connecting and admission
//
// A segment listens on a Unix stream socket. An address starting with '@'
// is in the abstract namespace, which has no file permissions; any other
// is a socket file, created with Config.SocketMode (default 0600: only
// the owner's user can connect). Whatever the address, the owner reads
// the connecting process's credentials from the kernel (SO_PEERCRED) and
// asks ListenOptions.Admit (default: verbs.OwnUIDPolicy, the owner's own
// effective user only) whether to serve it and with what access. A
// refused requester is answered with a refusing WELCOME (status access,
// no body, no descriptors): its Connect fails with verbs.ErrNotAdmitted,
// and the owner reports a *verbs.AdmitError. A requester admitted
// read-only is not sent the exports peers may write at all (a
// descriptor of a writable memfd cannot be kept read-only for one peer),
// so it can map nothing it could change.
//
// The requester sends HELLO with the memfds of its exposures attached
// (SCM_RIGHTS). The owner answers WELCOME with the memfds of the exports
// the requester was admitted to and of a hidden 4 MiB probe region.
// Frames and bodies are those of verbs/tcp (see its "Format" section);
// the descriptors follow the region table's order, the probe's last. A
// region a peer may only read is sent as a read-only descriptor (the
// memfd reopened O_RDONLY) of a write-sealed memfd. A region a peer may
// write is sent read-write: on shm, remote write implies that the peer
// can read it.
//
// Each side validates what it receives before mapping it: exactly one
// descriptor per region, a regular file, sealed against resizing (so a
// mapping can never fault), at least as long as the declared region, and
// mappable with the declared access. Anything else fails the handshake
// with a *verbs.ProtocolError; received descriptors are always closed.
// At most 252 regions fit in one handshake.
//
// # Data path
//
// Post validates the local side of every request in the batch, then the
// remote side against the mapped table of the other side's regions (key,
// access, bounds: the same checks an owner makes over TCP), performs the
// copies, and queues all completions before it returns. Nothing is ever in
// flight. A batch of at least Config.ParallelMin bytes (default 4 MiB) is
// split by bytes among up to Config.CopyWorkers goroutines (default
// min(4, GOMAXPROCS)). On an idle host restricted to 2 cores
// (BenchmarkReadLarge, Nov 2026), 64 READs of 512 KiB ran at 8-9 GB/s
// with 1 worker and 14-18 GB/s with 2. With 16 cores, 8 workers reached
// 37.7 GB/s. BenchmarkReadSmall (98,304 random 264 B rows) ran at 1.8-3.0
// GB/s, about the speed of the random-row gather itself.
//
// The requester's Conn also implements verbs.Mapper: HoldMapped hands out
// the owner's region as mapped here (read-only unless the owner granted
// remote write; asking a read-only region for write fails with
// verbs.ErrAccess) together with the local region, under the same read
// locks a Post holds, so the verbs engine can run a direct operation as
// its own gather loop instead of one request per span.
//
// An owner's handler Peer copies the same way into (or out of) the
// requester's exposures. So its requests are complete when Post returns,
// and certainly before the REPLY is written.
//
// Repeated control calls set nothing up: a warm Call allocates nothing on
// either side. The owner keeps, per connection, parked handler goroutines,
// call records with their request buffers, and the queues of ended calls'
// Peers (up to 16 each). A call's Peer is a fresh handle on a reused
// queue, tied to the queue's epoch: when the call ends the queue moves to
// the next epoch, so a Peer a handler kept fails with verbs.ErrClosed and
// never reaches a later call's completions. Handles come from slabs of
// 256 (one 4 KiB allocation per 256 calls) and never serve two calls.
//
// The mappings of the other side stay valid while a Post copies: a
// connection unmaps them only after it has ended and the Posts in progress
// have finished. When the owner goes away, the requester notices on the
// control socket: later Posts and Calls fail with verbs.ErrClosed, and
// completions already queued are still returned.
//
// Ending a connection, from either side, keeps both sides' memory safe:
// a side first stops touching the other's memory (the owner's handlers
// return, Posts and holds in progress finish, the other side's regions
// are unmapped), then shuts the writing half of the socket, which tells
// the other side "I have let go of your memory", and reads until the
// other side says the same. So when Segment.Evict's channel closes, the
// requester has unmapped the owner's regions, and when Conn.Close returns
// nil, no handler of the owner copies into the requester's exposures any
// more. Each waits for the other side at most Config.CloseGrace in Close
// (Conn.Close then reports it); Evict's fence waits as long as it takes.
//
// # Trust
//
// What the kernel guarantees, against any local process: a region
// exported without remote write cannot be changed by anybody but the
// owner (the seals above), whoever obtains a descriptor of it; no region
// can be resized; a requester the admission policy refuses gets no
// descriptor; a requester admitted read-only gets descriptors of
// write-sealed regions only. What it does not: a requester admitted to a
// writable export maps it writable, so it can change any byte of that
// export at any time, outside the verbs API's per-request validation (as
// an RDMA peer holding the region's key could). Admit write access only
// to users trusted with that export's whole contents. Segment.Evict
// fences an evicted requester once it has unmapped the segment's regions
// (see there); a requester that keeps its mapping and closes its socket
// is outside that fence too.
//
// # Link parameters
//
// Connect measures the fields ConnectOptions.Link leaves zero. RTT is the
// median of 5 pings on the control socket. Bandwidth is the best of two
// 4 MiB READ passes from the probe region (mapped with MAP_POPULATE).
// PostRate is the best of two passes of 1,024 READs of 64 B.
package shm

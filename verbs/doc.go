// Package verbs is scatterkit's transport contract: a verbs-style transport
// (registered memory named by keys, one-sided READ and WRITE work requests,
// completion queues with a queue depth, control calls), with backends for
// the same host (package verbs/shm) and across hosts (package verbs/tcp);
// verbs/transports opens one by name. The transfer engine that runs
// scatter operations over it is package verbs/engine; the owner-side
// gather service is package verbs/gather; registered staging pools, which
// both use, are package verbs/staging.
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
package verbs

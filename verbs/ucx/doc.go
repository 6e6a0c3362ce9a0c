// Package ucx is the verbs backend over UCX: one-sided READ and WRITE as
// UCX gets and puts, on RDMA fabrics (InfiniBand, RoCE: RC and DC verbs)
// where UCX finds them and over its tcp and shared-memory transports
// where it does not. Build with the `ucx` tag (cgo, libucx-dev); without
// it New returns an error wrapping verbs.ErrNotSupported. docs/ucx.md is
// the guide: the settings for two RDMA hosts, what is registered and
// what an owner exposes, and what was and was not tested.
//
// # Shape
//
// A Transport has one UCX context and one worker, run on a locked OS
// thread (loop.go): every UCX call of the transport (registrations,
// endpoints, keys, operations, progress) happens there, so UCX runs
// single-threaded. A connection is two things:
//
//   - a TCP socket, for the handshake and then the control calls (CALL,
//     REPLY, PING, PONG, PARAMS frames, as shm's travel on its Unix
//     socket), run by the session plumbing the backends share
//     (verbs/internal/peers);
//   - an endpoint from this side's worker to the other side's, created
//     from the worker address in the other side's attachment, with the
//     other side's regions' packed keys unpacked for it.
//
// The attachment (attach.go) travels after HELLO (the requester's
// exposures) and WELCOME (the exports the owner granted, and its probe
// region). Its decoder is strict and bounded, and only an admitted
// peer's attachment is ever handed to UCX, which parses worker addresses
// and packed keys without validating them.
//
// # Operations
//
// Post checks each request against this side's registrations and the
// peer's listed regions (remote.go: key, access, bounds, answered with
// the statuses the other backends use) before anything is posted, then
// hands the batch to the loop, which posts it in one cgo call and, as
// the worker progresses, polls it in one more. A batch with WRITEs is
// followed by a flush of the endpoint, and its completions are returned
// once the flush completes: the bytes are at the peer, as the contract
// says of a WRITE's completion and of a call's reply after its handler's
// WRITEs. A failed operation (the peer gone) fails the connection.
//
// # Trust
//
// Over a fabric that enforces keys (verbs) the adapter checks every
// access of a peer against the registration its key names: a region is
// reachable only through its own key, and a read-only grant's key does
// not allow writes. UCX's software one-sided operations (over its tcp and
// shared-memory transports) are messages that the target's worker
// performs at whatever address they name, checking nothing: over those,
// anyone who can reach the worker's own UCX address can write into the
// process. Keep such a worker on a network only trusted peers reach
// (UCX_NET_DEVICES), or use the tcp backend, whose owner checks every
// request it serves.
package ucx

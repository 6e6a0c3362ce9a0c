// Package faultproxy is an in-process TCP proxy that injects network faults
// between a client and a server, for tests: the fault-injection suite
// (tools/internal/faultsuite) and the verbs and owner tests put one
// between a verbs/tcp requester and its owner, and a user can put one in
// front of their own owner to see how their code fails.
//
// New listens on 127.0.0.1:0 and forwards every accepted connection to the
// target: a verbs/tcp session of several lanes is several proxied
// connections. Each direction of each connection is one goroutine that
// reads a chunk (at most Options.ChunkBytes), passes it through the
// current Fault and writes it on. Up is client to target, Down target to
// client.
//
// # Faults
//
// The Fault can be changed at run time (Proxy.Set; Proxy.Heal goes back to
// pass-through). Byte offsets and byte counts of a fault are counted from
// the Set that installed it, per direction, over all connections together:
// the stream of a direction is the concatenation of its chunks in the order
// the proxy forwards them, whichever lane they travel on.
//
//   - Pass forwards everything.
//   - Delay holds each chunk for Fault.Delay before forwarding it (a chunk
//     is what one read returned, so this is both latency and pacing). Go
//     rounds sleeps under 1 ms up to about 1 ms: use delays of 1 ms or more.
//   - Stall stops forwarding in Fault.Dir (one direction or both) for
//     Fault.For, or until the next Set when For is zero. Sockets stay open;
//     the data waits in the proxy and the kernel's buffers, TCP flow control
//     pushes back on the sender, and everything flows again afterwards.
//   - Partition is a stall of both directions that also holds new
//     connections before they are dialed: a partitioned network that
//     heals after Fault.For (or at the next Set). Nothing is lost.
//   - Reset closes every proxied connection abruptly on both sides (linger
//     0, so the peers see a TCP RST) once Fault.After bytes went through in
//     Fault.Dir (both directions together when Dir is Both), or Fault.At
//     after the Set, whichever comes first. The chunk that crosses After is
//     cut at exactly After bytes. A reset strikes once; connections made
//     afterwards pass.
//   - Corrupt XORs bytes of the stream in each direction of Fault.Dir with
//     a non-zero mask: Fault.Flips bytes (default 1) at distinct random
//     offsets in [After, After+Span) (Span 0: the one offset After), or at
//     the offsets Fault.Offsets names. Bytes past the end of what is
//     forwarded are never flipped (Stats.Flipped tells how many were).
//
// # Determinism
//
// Random offsets and masks come from a generator seeded with
// Options.Seed (Proxy.Seed returns it; zero picks one from the clock), in
// the order faults are Set, so a logged seed and the same sequence of
// faults reproduce the same corruption. Which lane a byte travels on, and
// so when a delay or a reset meets it, is the scheduler's.
//
// # Lifetime
//
// Close stops listening, closes every connection and waits for every
// goroutine of the proxy. Stats counts connections, the bytes forwarded in
// each direction, resets and flipped bytes.
package faultproxy

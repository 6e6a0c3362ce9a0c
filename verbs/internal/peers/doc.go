// Package peers is the session plumbing the verbs backends share,
// whatever carries their bytes. A Session is one connection between a
// requester and an owner, seen from either end: how it ends (Fail, once,
// with its cause), the control calls a requester waits on, and on the
// owner the calls it serves, each on a pooled handler goroutine with a
// Peer, a handle on a pooled queue toward the requester's exposures. A
// Segment is the owner's side of one served address: the sessions it
// serves, the handlers their calls run and the limits they share.
//
// A backend's session embeds Session and its segment embeds Segment; what
// differs between backends is behind two small interfaces the backend
// implements. A Poster is a queue of work requests (how a request is
// posted: shm copies through its mappings inside Post, tcp sends frames
// on its lanes and collects the answers). A Carrier is what carries a
// session's frames (how a call is sent, how the owner's Peer queues are
// made and forgotten, how the connection is torn down and finalized).
//
// # Peers
//
// A Peer is valid only while its call's handler runs. When the call ends
// its queue's completion queue is closed, waited idle (every request the
// handler posted is answered, or flushed if the session ends) and
// reopened under a new epoch, and the queue goes back to the session's
// idle list. The Peer's methods are epoch-checked, so a Peer kept past its
// call fails with ErrClosed and can never post to, or take completions
// of, a later call that reuses the queue. Peer handles are never reused:
// they are carved from slabs, one allocation amortized over many calls,
// so a stale handle stays distinct from every live one.
package peers

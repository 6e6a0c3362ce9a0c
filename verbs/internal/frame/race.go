//go:build race

package frame

import "sync/atomic"

// The race detector cannot see that bytes written to a socket are read by
// the peer, so when both ends of a connection run in one process (tests)
// it reports the owner's write of a WRITE payload and the requester's
// later read of that memory (ordered through the ACK) as a race. In race
// builds every socket write releases this fence and every socket read
// acquires it, which is what delivery through the kernel guarantees.
// Normal builds compile both calls away.
var fence atomic.Uint64

// RaceRelease marks a socket write (race builds only).
func RaceRelease() { fence.Add(1) }

// RaceAcquire marks a socket read (race builds only).
func RaceAcquire() { fence.Load() }

package listener

import (
	"fmt"
	"sync/atomic"

	"github.com/scatterkit/scatterkit/verbs"
)

// KeepCallBuffers is the most bytes of call buffers (requests and
// responses) that the idle pools of one segment's sessions keep between
// calls (calls.Jobs.Keep): past it a call's buffers go back to the GC.
const KeepCallBuffers = 64 << 20

// CallBytes bounds the bytes of call requests held at once: a segment
// has one over all its connections and each connection one of its own.
// The zero value holds nothing; set Limit before use.
type CallBytes struct {
	Limit int64
	used  atomic.Int64
}

// Take charges n bytes, or returns false (charging nothing) when that
// would pass the limit.
func (b *CallBytes) Take(n int64) bool {
	if b.used.Add(n) > b.Limit {
		b.used.Add(-n)
		return false
	}
	return true
}

// Give returns n bytes taken earlier.
func (b *CallBytes) Give(n int64) { b.used.Add(-n) }

// Used returns the bytes held now.
func (b *CallBytes) Used() int64 { return b.used.Load() }

// TakeCall charges a CALL of n request bytes to its connection and then
// to its segment, all or nothing. The error, for the REPLY, says which
// limit it met.
func TakeCall(conn, seg *CallBytes, n int64) error {
	if !conn.Take(n) {
		return fmt.Errorf("verbs: busy: a call of %d bytes would pass the connection's %d bytes of calls held (%d held): %w",
			n, conn.Limit, conn.Used(), verbs.ErrInvalid)
	}
	if !seg.Take(n) {
		conn.Give(n)
		return fmt.Errorf("verbs: busy: a call of %d bytes would pass the segment's %d bytes of calls held (%d held): %w",
			n, seg.Limit, seg.Used(), verbs.ErrInvalid)
	}
	return nil
}

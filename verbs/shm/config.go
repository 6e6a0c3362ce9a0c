package shm

import (
	"os"
	"runtime"
	"time"
)

// Config tunes a Transport. The zero value is the documented default.
type Config struct {
	// CopyWorkers is the most goroutines that copy one Post batch; a batch
	// of at least ParallelMin bytes is split by bytes among them. 0 means
	// min(4, GOMAXPROCS); 1 copies on the posting goroutine only.
	CopyWorkers int
	// ParallelMin is the smallest batch (bytes) split among CopyWorkers;
	// 0 means 4 MiB.
	ParallelMin int
	// HandshakeTimeout bounds a handshake when the context has no
	// deadline (and always on the owner side); 0 means 10 s.
	HandshakeTimeout time.Duration
	// CloseGrace is how long Segment.Close waits for each requester to
	// let go of the exports (unmap them and close its socket) before it
	// closes the socket regardless; 0 means 1 s. Requesters are waited
	// for at once, so Close takes at most about one grace.
	CloseGrace time.Duration
	// SocketMode is the permission of a segment's socket file (an address
	// without a leading '@'); 0 means 0600, so only the owner's user can
	// connect. Widen it (and set ListenOptions.Admit) to serve other
	// users. Sockets in the abstract namespace have no permissions: there
	// only Admit decides.
	SocketMode os.FileMode
}

func (c Config) withDefaults() Config {
	if c.CopyWorkers <= 0 {
		c.CopyWorkers = min(4, runtime.GOMAXPROCS(0))
	}
	if c.ParallelMin <= 0 {
		c.ParallelMin = 4 << 20
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.SocketMode == 0 {
		c.SocketMode = 0o600
	}
	if c.CloseGrace <= 0 {
		c.CloseGrace = time.Second
	}
	return c
}

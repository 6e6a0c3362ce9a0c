package tcp

import (
	"context"
	"fmt"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/endpoints"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

// Config tunes a Transport. The zero value is the documented default.
type Config struct {
	// SocketBuffer sets SO_SNDBUF and SO_RCVBUF on every lane. 0 leaves
	// the kernel's autotuning, which on Linux grows buffers beyond what a
	// fixed setting may (a fixed one is capped by net.core.[rw]mem_max).
	SocketBuffer int
	// ReadBuffer is each lane's frame buffer; 0 means 256 KiB. Payload
	// remainders of at least 64 KiB bypass it.
	ReadBuffer int
	// InlineMax is the largest payload copied next to its header in a
	// lane's send buffer; larger payloads are handed to writev straight
	// from the region. 0 means 2 KiB; -1 sends every payload from the
	// region.
	InlineMax int
	// HandshakeTimeout bounds a handshake when the context has no
	// deadline (and always on the owner side); 0 means 10 s.
	HandshakeTimeout time.Duration
	// NoChecksums drops the checksum trailer of the frames after the
	// handshake (see "Format") on connections whose other side sets it
	// too: for links trusted not to damage bytes above TCP's own
	// checksum, where the two passes over every payload cost too much
	// (measured in docs/perf-notes.md). Either side can insist on
	// checksums by leaving it false. The handshake is always checked.
	NoChecksums bool
}

func (c Config) withDefaults() Config {
	if c.ReadBuffer <= 0 {
		c.ReadBuffer = 256 << 10
	}
	switch {
	case c.InlineMax == 0:
		c.InlineMax = 2048
	case c.InlineMax < 0:
		c.InlineMax = 0
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	return c
}

// Transport is the TCP backend of verbs.Transport. Create it with New;
// all methods are safe for concurrent use.
type Transport struct {
	cfg Config
	reg *regtab.Registry

	open endpoints.Set
}

var _ verbs.Transport = (*Transport)(nil)

// New returns a TCP transport.
func New(cfg Config) *Transport {
	return &Transport{cfg: cfg.withDefaults(), reg: regtab.NewRegistry()}
}

// Name implements verbs.Transport: "tcp".
func (*Transport) Name() string { return "tcp" }

// Register registers caller-owned memory. Over TCP any registered region
// may be exported or exposed.
func (t *Transport) Register(buf []byte, access verbs.Access) (*verbs.Region, error) {
	r, err := t.reg.Register(buf, access)
	if err != nil {
		return nil, fmt.Errorf("tcp: %w", err)
	}
	return r, nil
}

// Alloc returns a region of size bytes of Go memory owned by the
// transport.
func (t *Transport) Alloc(size int, access verbs.Access) (*verbs.Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("tcp: alloc of %d bytes: %w", size, verbs.ErrInvalid)
	}
	return t.Register(make([]byte, size), access)
}

// Deregister forgets r. Because regions are Go memory, a READ still in
// flight into r cannot corrupt the heap, but its bytes are undefined.
func (t *Transport) Deregister(r *verbs.Region) error {
	if _, err := t.reg.Remove(r); err != nil {
		return fmt.Errorf("tcp: %w", err)
	}
	return nil
}

// Listen serves exports at addr ("host:port"; port 0 picks one).
func (t *Transport) Listen(addr string, exports []verbs.Export, opts verbs.ListenOptions) (verbs.Segment, error) {
	return t.listen(addr, exports, opts)
}

// Connect connects to the segment at addr.
func (t *Transport) Connect(ctx context.Context, addr string, opts verbs.ConnectOptions) (verbs.Conn, error) {
	return t.connect(ctx, addr, opts)
}

// Close closes every segment and connection, then deregisters every
// region.
func (t *Transport) Close() error {
	if t.open.Close() {
		t.reg.CloseAll()
	}
	return nil
}

//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/endpoints"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

// Transport is the shared-memory backend of verbs.Transport. Create it
// with New; all methods are safe for concurrent use.
type Transport struct {
	cfg Config
	reg *regtab.Registry

	open endpoints.Set
}

var _ verbs.Transport = (*Transport)(nil)

// New returns a shared-memory transport.
func New(cfg Config) *Transport {
	return &Transport{cfg: cfg.withDefaults(), reg: regtab.NewRegistry()}
}

// Name implements verbs.Transport: "shm".
func (*Transport) Name() string { return "shm" }

// Register registers caller-owned memory. Such a region can be the local
// side of work requests only: exporting or exposing it fails with
// ErrNotSupported, because a peer cannot map it (use Alloc).
func (t *Transport) Register(buf []byte, access verbs.Access) (*verbs.Region, error) {
	r, err := t.reg.Register(buf, access)
	if err != nil {
		return nil, fmt.Errorf("shm: %w", err)
	}
	return r, nil
}

// Alloc returns a region backed by a sealed memfd of size bytes, mapped
// shared; it can be exported and exposed to peers on this host.
func (t *Transport) Alloc(size int, access verbs.Access) (*verbs.Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("shm: alloc of %d bytes: %w", size, verbs.ErrInvalid)
	}
	if !access.Valid() {
		return nil, fmt.Errorf("shm: alloc access %s: %w", access, verbs.ErrInvalid)
	}
	m, err := newMemfd(size, false, access.Has(verbs.AccessRemoteWrite))
	if err != nil {
		return nil, err
	}
	r, err := verbs.NewRegion(m.mem, access)
	if err == nil {
		err = t.reg.Add(r, m)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("shm: alloc: %w", err), m.free())
	}
	return r, nil
}

// Deregister forgets r and, for Alloc'ed memory, unmaps it (after any
// Post copying from or into it has finished). Peers that mapped it keep
// their mapping until their connection ends.
func (t *Transport) Deregister(r *verbs.Region) error {
	e, err := t.reg.Remove(r)
	if err != nil {
		return fmt.Errorf("shm: %w", err)
	}
	if m, ok := e.Data.(*memfd); ok {
		return m.free()
	}
	return nil
}

// Listen serves exports at addr, a Unix socket path; a leading '@' names
// the abstract namespace. Every export must have been Alloc'ed.
func (t *Transport) Listen(addr string, exports []verbs.Export, opts verbs.ListenOptions) (verbs.Segment, error) {
	return t.listen(addr, exports, opts)
}

// Connect connects to the segment at addr. Exposed regions must have been
// Alloc'ed.
func (t *Transport) Connect(ctx context.Context, addr string, opts verbs.ConnectOptions) (verbs.Conn, error) {
	return t.connect(ctx, addr, opts)
}

// Close closes every segment and connection, then deregisters (and
// unmaps) every region.
func (t *Transport) Close() error {
	if !t.open.Close() {
		return nil
	}
	var errs []error
	for _, e := range t.reg.CloseAll() {
		if m, ok := e.Data.(*memfd); ok {
			errs = append(errs, m.free())
		}
	}
	return errors.Join(errs...)
}

// shareable returns the memfds behind exports (pinned entries), or
// ErrNotSupported for one that was Registered.
func shareable(entries []*regtab.Entry, exports []verbs.Export) ([]int, error) {
	fds := make([]int, len(entries))
	for i, e := range entries {
		m, ok := e.Data.(*memfd)
		if !ok {
			return nil, fmt.Errorf("region %q was Registered, not Alloc'ed, so peers cannot map it: %w", exports[i].Name, verbs.ErrNotSupported)
		}
		fd, err := m.shareFD(exports[i].Region.Access())
		if err != nil {
			return nil, err
		}
		fds[i] = fd
	}
	return fds, nil
}

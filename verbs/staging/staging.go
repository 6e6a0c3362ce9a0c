package staging

import (
	"errors"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"

	"github.com/scatterkit/scatterkit/bufferpool"
)

// Staging is a bufferpool whose arena is registered once with a
// transport, so every lease is addressable in work requests as the
// region's key plus the lease's offset. The gather service packs into
// one (as the local side of its bulk WRITEs); an Engine stages WRITE
// fragments in one (exposed on the Conn, so the owner can READ it).
//
// On the shm backend a registered arena can be the local side of work
// requests only (it cannot be exposed: shm shares Alloc'ed memory), so
// requester-side WRITE gather needs a backend that can expose Register'ed
// memory, such as tcp.
type Staging struct {
	pool   *bufferpool.Pool
	region *verbs.Region
}

// New creates a pool from cfg (whose Register hook it sets) and
// registers its arena with t under access (AccessLocal at least;
// add AccessRemoteRead to expose it for WRITE gather).
func New(t verbs.Transport, cfg bufferpool.Config, access verbs.Access) (*Staging, error) {
	if t == nil {
		return nil, fmt.Errorf("verbs: staging: nil transport: %w", verbs.ErrInvalid)
	}
	if !access.Has(verbs.AccessLocal) {
		return nil, fmt.Errorf("verbs: staging: access %v lacks local: %w", access, verbs.ErrInvalid)
	}
	if cfg.Register != nil {
		return nil, fmt.Errorf("verbs: staging: Config.Register is set by staging.New: %w", verbs.ErrInvalid)
	}
	s := &Staging{}
	cfg.Register = func(arena []byte) (func() error, error) {
		r, err := t.Register(arena, access)
		if err != nil {
			return nil, err
		}
		s.region = r
		return func() error {
			// A transport that was closed first has dropped the region.
			if err := t.Deregister(r); err != nil && !errors.Is(err, verbs.ErrClosed) && !errors.Is(err, verbs.ErrBadKey) {
				return err
			}
			return nil
		}, nil
	}
	p, err := bufferpool.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("verbs: staging: %w", err)
	}
	s.pool = p
	return s, nil
}

// Pool returns the staging pool.
func (s *Staging) Pool() *bufferpool.Pool { return s.pool }

// Region returns the arena's registration.
func (s *Staging) Region() *verbs.Region { return s.region }

// Export names the arena for ConnectOptions.Expose.
func (s *Staging) Export(name string) verbs.Export { return verbs.Export{Name: name, Region: s.region} }

// Close closes the pool, which deregisters the arena and unmaps it. With
// leases outstanding it returns the pool's *bufferpool.LeakError and keeps
// everything. A connection that still exposes the arena makes the
// deregistration fail (ErrInUse); close it first. Deregistering an arena
// whose transport was closed already is not an error.
func (s *Staging) Close() error {
	return s.pool.Close()
}

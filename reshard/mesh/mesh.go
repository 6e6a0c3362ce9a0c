// Package mesh runs the ranks of a reshard in one process: each rank is a
// region of one shared verbs transport, served as its own segment with its
// own gather service and staging pool, and connected to the ranks of the
// other layout on demand. Examples, tests and scatterbench use it; a
// single host that holds both layouts (a re-layout of a host-memory KV
// cache, say) can use it as is.
//
// Ranks are named by side and index: Src(i) is rank i of the source
// layout, Dst(j) rank j of the destination layout. Links (for
// reshard.Start) connect the side that runs the pairs to the other: the
// destination ranks for a Pull, the source ranks for a Push.
package mesh

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/reshard"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/transports"
)

// Config configures a Mesh.
type Config struct {
	// Transport is "tcp" (default) or "shm" (see verbs/transports).
	Transport string
	// StagingBytes is each rank's gather-service staging (default 16 MiB):
	// the bound on the extra memory a reshard takes on that rank.
	StagingBytes int
	// PackWorkers is each gather service's pack workers (default 2).
	PackWorkers int
	// Calibration, when set, is every gather service's packing
	// calibration; nil has each service measure its own (about 50 ms per
	// rank, in New).
	Calibration *costmodel.Calibration
	// Link, when its fields are set, replaces the link parameters measured
	// at connect (see verbs.ConnectOptions.Link).
	Link verbs.LinkParams
	// Engine configures the engine shared by all ranks of the mesh; its
	// Staging is set by the mesh (requester staging for WRITE gather).
	Engine engine.Config
	// Lanes is the tcp lanes per connection (0: the backend's default).
	Lanes int
}

// Rank is one rank of a mesh: its region (exported as "rank" with remote
// read and write on its own segment) and its gather service.
type Rank struct {
	Region  *verbs.Region
	seg     verbs.Segment
	staging *staging.Staging
	svc     *gather.Service
}

// Bytes is the rank's memory: the region its layout's offsets index.
func (r *Rank) Bytes() []byte { return r.Region.Bytes() }

// Stats is the rank's gather service's counters and its staging pool's.
func (r *Rank) Stats() (gather.Stats, bufferpool.Stats) {
	return r.svc.Stats(), r.staging.Pool().Stats()
}

// Mesh is the ranks of a source and a destination layout in this process.
type Mesh struct {
	cfg      Config
	t        verbs.Transport
	src, dst []*Rank
	engine   *engine.Engine
	// reqStaging is the requester staging for WRITE gather (tcp only: shm
	// cannot expose registered memory, so a Push there runs direct).
	reqStaging *staging.Staging

	mu    sync.Mutex
	conns map[connKey]verbs.Conn
}

type connKey struct {
	dir        reshard.Dir
	self, peer int
}

// New creates the ranks: srcBytes[i] bytes of memory for source rank i
// and dstBytes[j] for destination rank j (each at least 1).
func New(cfg Config, srcBytes, dstBytes []int64) (*Mesh, error) {
	if cfg.Transport == "" {
		cfg.Transport = "tcp"
	}
	t, err := transports.New(cfg.Transport, transports.Config{})
	if err != nil {
		return nil, fmt.Errorf("mesh: %w", err)
	}
	if cfg.StagingBytes == 0 {
		cfg.StagingBytes = 16 << 20
	}
	if cfg.PackWorkers == 0 {
		cfg.PackWorkers = 2
	}
	mm := &Mesh{cfg: cfg, t: t, conns: map[connKey]verbs.Conn{}}
	if err := mm.open(srcBytes, dstBytes); err != nil {
		return nil, errors.Join(err, mm.Close())
	}
	return mm, nil
}

// open creates the ranks, the requester staging and the engine.
func (m *Mesh) open(srcBytes, dstBytes []int64) error {
	cfg := m.cfg
	for side, sizes := range [][]int64{srcBytes, dstBytes} {
		for i, n := range sizes {
			r, err := m.newRank(n)
			if err != nil {
				return fmt.Errorf("mesh: %s rank %d: %w", [...]string{"source", "destination"}[side], i, err)
			}
			if side == 0 {
				m.src = append(m.src, r)
			} else {
				m.dst = append(m.dst, r)
			}
		}
	}
	ecfg := cfg.Engine
	if m.t.Name() == "tcp" {
		st, err := staging.New(m.t, bufferpool.Config{Budget: cfg.StagingBytes, MinSlot: 64 << 10, NoHugePages: true},
			verbs.AccessLocal|verbs.AccessRemoteRead)
		if err != nil {
			return fmt.Errorf("mesh: requester staging: %w", err)
		}
		m.reqStaging = st
		ecfg.Staging = st
	}
	var err error
	if m.engine, err = engine.New(ecfg); err != nil {
		return fmt.Errorf("mesh: engine: %w", err)
	}
	return nil
}

func (m *Mesh) newRank(n int64) (*Rank, error) {
	if n < 1 || int64(int(n)) != n {
		return nil, fmt.Errorf("mesh: %d bytes of memory", n)
	}
	r := &Rank{}
	var err error
	if r.Region, err = m.t.Alloc(int(n), verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite); err != nil {
		return nil, err
	}
	exports := []verbs.Export{{Name: "rank", Region: r.Region}}
	addr, err := transports.LocalAddr(m.t.Name(), "scatterkit-mesh")
	if err != nil {
		return nil, err
	}
	if r.seg, err = m.t.Listen(addr, exports, verbs.ListenOptions{}); err != nil {
		return nil, err
	}
	if r.staging, err = staging.New(m.t, bufferpool.Config{Budget: m.cfg.StagingBytes, MinSlot: 64 << 10, NoHugePages: true}, verbs.AccessLocal); err != nil {
		return nil, errors.Join(err, r.seg.Close())
	}
	if r.svc, err = gather.NewService(gather.Config{Segment: r.seg, Exports: exports, Staging: r.staging,
		PackWorkers: m.cfg.PackWorkers, Calibration: m.cfg.Calibration}); err != nil {
		return nil, errors.Join(err, r.staging.Close(), r.seg.Close())
	}
	return r, nil
}

// Src is source rank i.
func (m *Mesh) Src(i int) *Rank { return m.src[i] }

// Dst is destination rank j.
func (m *Mesh) Dst(j int) *Rank { return m.dst[j] }

// Engine is the engine every rank of the mesh submits through.
func (m *Mesh) Engine() *engine.Engine { return m.engine }

// Links returns the links of dir: for a Pull, self is a destination rank
// and peer a source rank; for a Push the other way round. Connections are
// opened on first use and kept until Close.
func (m *Mesh) Links(ctx context.Context, dir reshard.Dir) reshard.LinkFunc {
	return func(self, peer int) (reshard.Link, error) {
		selfRanks, peerRanks := m.dst, m.src
		if dir == reshard.Push {
			selfRanks, peerRanks = m.src, m.dst
		}
		if self < 0 || self >= len(selfRanks) || peer < 0 || peer >= len(peerRanks) {
			return reshard.Link{}, fmt.Errorf("mesh: no link %d -> %d for %v", self, peer, dir)
		}
		c, err := m.conn(ctx, dir, self, peer, selfRanks[self], peerRanks[peer])
		if err != nil {
			return reshard.Link{}, err
		}
		remote, ok := verbs.FindRegion(c.Remote(), "rank")
		if !ok {
			return reshard.Link{}, fmt.Errorf("mesh: peer %d lists no region \"rank\"", peer)
		}
		return reshard.Link{Conn: c, Remote: remote, Local: selfRanks[self].Region}, nil
	}
}

func (m *Mesh) conn(ctx context.Context, dir reshard.Dir, self, peer int, s, p *Rank) (verbs.Conn, error) {
	k := connKey{dir, self, peer}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.conns[k]; ok {
		return c, nil
	}
	opts := verbs.ConnectOptions{Link: m.cfg.Link, Lanes: m.cfg.Lanes,
		Expose: []verbs.Export{{Name: "rank", Region: s.Region}}}
	if dir == reshard.Push && m.reqStaging != nil {
		opts.Expose = append(opts.Expose, m.reqStaging.Export("staging"))
	}
	c, err := m.t.Connect(ctx, p.seg.Addr(), opts)
	if err != nil {
		return nil, fmt.Errorf("mesh: connect %d -> %d: %w", self, peer, err)
	}
	m.conns[k] = c
	return c, nil
}

// Close closes the connections, the engine, the services, the staging
// pools and the transports. Staging leases still held are reported as
// errors (a leak).
func (m *Mesh) Close() error {
	var errs []error
	m.mu.Lock()
	for _, c := range m.conns {
		errs = append(errs, c.Close())
	}
	m.conns = map[connKey]verbs.Conn{}
	m.mu.Unlock()
	if m.engine != nil {
		errs = append(errs, m.engine.Close())
	}
	if m.reqStaging != nil {
		errs = append(errs, m.reqStaging.Close())
	}
	for _, r := range append(append([]*Rank(nil), m.src...), m.dst...) {
		// The segment first: its connections end, so no command waits.
		errs = append(errs, r.seg.Close(), r.svc.Close(), r.staging.Close())
	}
	errs = append(errs, m.t.Close())
	return errors.Join(errs...)
}

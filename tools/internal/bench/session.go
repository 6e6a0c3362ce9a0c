package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/tools/internal/netns"
	"github.com/scatterkit/scatterkit/tools/internal/owner"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs"
)

// Seeds derived from the run's seed: the owner's table is the pattern
// stream of the seed itself; the others are offsets from it.
const (
	scratchSalt  = 1 // the owner's scratch region before any WRITE
	writeSrcSalt = 2 // the requester's WRITE source region
	poisonSalt   = 3 // what a verified destination holds before the repetition
	planSalt     = 4 // positions of fragments
)

// Direct control geometry: 64 x 512 KiB, as the RFC's control.
const (
	controlCount = 64
	controlSize  = 512 << 10
)

// session is the requester side of one pass: its owner, connection,
// engine and registered memory.
type session struct {
	cfg       *Config
	transport string
	own       ownerHandle
	tr        verbs.Transport
	conn      verbs.Conn
	eng       *engine.Engine
	staging   *staging.Staging // requester staging for WRITE gather (tcp only)

	table, scratch verbs.RegionInfo
	dst            *verbs.Region // READ destinations: Callers slots of dstStride
	dstStride      uint64
	src            *verbs.Region // WRITE source (pattern of seed+writeSrcSalt)
	verify         *verbs.Region // WRITE read-back and poison staging
	writeStride    uint64        // scratch bytes per caller

	// more are the owners past the first for workloads of several
	// (Workload.Owners), each serving the same table; splitters cut those
	// workloads' plans, one per caller.
	more      []*extraOwner
	splitters []planfmt.Splitter

	// -dst gpu: READ destinations in device memory (dev, Callers slots of
	// dstStride), landed through a bounce region of bounceStride bytes a
	// caller; unpins releases the host memory pinned for it.
	dev          deviceMem
	bounce       *verbs.Region
	bounceStride uint64
	unpins       []func() error

	control *planfmt.Plan // the direct control's plan
	// calibration lists the owner's and the engine's calibrations that
	// fell back (calibration.go).
	calibration []CalibrationFallback
}

func roundUp(n, to uint64) uint64 { return (n + to - 1) / to * to }

// writeSrcBytes is the size of the requester's WRITE source region.
func writeSrcBytes(c *Config, ws []Workload) uint64 {
	var need uint64
	for i := range ws {
		if ws[i].Dir == verbs.OpWrite {
			need = max(need, 2*ws[i].Payload())
		}
	}
	if need == 0 {
		return 0
	}
	return min(uint64(c.TableBytes), max(need, 64<<20))
}

// newSession starts the pass's owner and connects to it.
func newSession(ctx context.Context, c *Config, p Pass, link *netns.Link, stderr io.Writer) (s *session, err error) {
	s = &session{cfg: c, transport: p.Transport}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close(nil))
			s = nil
		}
	}()
	var maxRead, maxWrite uint64 = controlCount * controlSize, 0
	for i := range p.Workloads {
		w := &p.Workloads[i]
		if w.Dir == verbs.OpRead {
			maxRead = max(maxRead, w.DstExtent())
		} else {
			maxWrite = max(maxWrite, w.DstExtent())
		}
	}
	s.dstStride = roundUp(maxRead, 4096)
	s.writeStride = roundUp(maxWrite, 4096)
	spec := ownerSpec{transport: p.Transport, noChecksums: c.TCPNoChecksums, tableBytes: c.TableBytes, seed: c.Seed,
		scratch: int64(s.writeStride) * int64(c.Callers), scratchSeed: c.Seed + scratchSalt,
		stagingBytes: c.StagingBytes, slots: c.StagingSlots}
	var childErr io.Writer
	if !c.Quiet {
		childErr = stderr
	}
	switch c.Owner {
	case OwnerInproc:
		s.own, err = startInproc(ctx, spec)
	case OwnerNetns:
		s.own, err = startProcess(ctx, c, spec, link, childErr)
	default:
		s.own, err = startProcess(ctx, c, spec, nil, childErr)
	}
	if err != nil {
		s.own = nil
		return s, err
	}

	if s.tr, err = c.newTransport(p.Transport); err != nil {
		return s, err
	}
	if s.dst, err = s.tr.Alloc(int(s.dstStride)*c.Callers, verbs.AccessLocal|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
		return s, fmt.Errorf("scatterbench: destination region: %w", err)
	}
	expose := []verbs.Export{{Name: "dst", Region: s.dst}}
	if c.DstGPU {
		if expose, err = s.gpuSetup(expose); err != nil {
			return s, err
		}
	}
	if n := writeSrcBytes(c, p.Workloads); n > 0 {
		if s.src, err = s.tr.Alloc(int(n), verbs.AccessLocal|verbs.AccessRemoteRead); err != nil {
			return s, fmt.Errorf("scatterbench: write source region: %w", err)
		}
		pattern.ParallelFill(s.src.Bytes(), c.Seed+writeSrcSalt, 0, 0)
		if s.verify, err = s.tr.Alloc(int(s.writeStride), verbs.AccessLocal); err != nil {
			return s, fmt.Errorf("scatterbench: verify region: %w", err)
		}
	}
	if s.tr.Name() == "tcp" {
		// The requester's staging, exposed: WRITE gather packs into it (the
		// owner READs it), and a READ gather into a fragmented destination
		// lands in it (the owner WRITEs it) to be scattered here. shm cannot
		// expose registered memory: those gathers run direct there.
		s.staging, err = staging.New(s.tr, bufferpool.Config{Budget: int(c.StagingBytes)},
			verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
		if err != nil {
			return s, fmt.Errorf("scatterbench: requester staging: %w", err)
		}
		expose = append(expose, s.staging.Export("staging"))
	}
	s.conn, err = s.tr.Connect(ctx, s.own.addr(), verbs.ConnectOptions{Expose: expose, Lanes: c.Lanes})
	if err != nil {
		return s, &OwnerError{Owner: c.Owner, Stage: "connect", Err: err}
	}
	var ok bool
	if s.table, ok = verbs.FindRegion(s.conn.Remote(), owner.DefaultExport); !ok {
		return s, &OwnerError{Owner: c.Owner, Stage: "connect", Err: errors.New("no \"table\" export")}
	}
	if s.writeStride > 0 {
		if s.scratch, ok = verbs.FindRegion(s.conn.Remote(), owner.DefaultScratchName); !ok {
			return s, &OwnerError{Owner: c.Owner, Stage: "connect", Err: errors.New("no \"scratch\" export")}
		}
	}
	if s.eng, err = engine.New(engine.Config{Staging: s.staging, ChunkedRead: c.ChunkedRead}); err != nil {
		return s, fmt.Errorf("scatterbench: engine: %w", err)
	}
	info, err := s.eng.Prepare(ctx, s.conn)
	if err != nil {
		return s, &OwnerError{Owner: c.Owner, Stage: "gather info", Err: err}
	}
	// The owner's calibration as the owner reports it (its ready line or
	// Info; else as its gather capability shows it), and the engine's own
	// (WRITE gather staging, mapped direct copies over shm).
	s.calibration = append(handleFallback(fmt.Sprintf("owner (%s) gather service", c.Owner), s.own, info),
		engineFallback("requester engine", s.eng)...)
	s.control = controlPlan(rand.New(rand.NewPCG(c.Seed, planSalt)), s.table.Len)
	owners := 1
	for _, w := range p.Workloads {
		if w.Engram == "" && w.Reshard == "" && w.StructObj == "" {
			owners = max(owners, w.Owners)
		}
	}
	for range owners - 1 {
		x := &extraOwner{}
		s.more = append(s.more, x)
		if c.Owner == OwnerInproc {
			x.own, err = startInproc(ctx, spec)
		} else {
			x.own, err = startProcess(ctx, c, spec, nil, childErr) // netns: one link, the first owner's
		}
		if err != nil {
			x.own = nil
			return s, err
		}
		if x.conn, err = s.tr.Connect(ctx, x.own.addr(), verbs.ConnectOptions{Expose: expose, Lanes: c.Lanes}); err != nil {
			return s, &OwnerError{Owner: c.Owner, Stage: "connect", Err: err}
		}
		if x.table, ok = verbs.FindRegion(x.conn.Remote(), owner.DefaultExport); !ok {
			return s, &OwnerError{Owner: c.Owner, Stage: "connect", Err: errors.New("no \"table\" export")}
		}
		if _, err := s.eng.Prepare(ctx, x.conn); err != nil {
			return s, &OwnerError{Owner: c.Owner, Stage: "gather info", Err: err}
		}
	}
	s.splitters = make([]planfmt.Splitter, c.Callers)
	return s, nil
}

// extraOwner is an owner past a session's first: its handle, the
// requester's connection to it and its table.
type extraOwner struct {
	own   ownerHandle
	conn  verbs.Conn
	table verbs.RegionInfo
}

// controlPlan is the direct control: 64 random 4 KiB-aligned 512 KiB
// ranges of the table into a contiguous destination.
func controlPlan(r *rand.Rand, tableBytes uint64) *planfmt.Plan {
	w := Workload{Name: "ceiling/" + CeilingDirect, Dir: verbs.OpRead, Large: Frags{controlSize, controlCount}, Src: Random, Dst: Contiguous}
	return w.rangesPlan(r, tableBytes)
}

// close releases the session; it returns the owner's leaked leases
// through leaked (when not nil).
func (s *session) close(leaked *int) error {
	var errs []error
	if s.eng != nil {
		errs = append(errs, s.eng.Close())
	}
	if s.conn != nil {
		errs = append(errs, s.conn.Close())
	}
	for _, x := range s.more {
		if x.conn != nil {
			errs = append(errs, x.conn.Close())
		}
	}
	if s.staging != nil {
		if err := s.staging.Close(); err != nil {
			var le *bufferpool.LeakError
			if errors.As(err, &le) && leaked != nil {
				*leaked += len(le.Leases)
			}
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.gpuClose())
	if s.tr != nil {
		errs = append(errs, s.tr.Close())
	}
	for _, h := range append([]ownerHandle{s.own}, s.extraHandles()...) {
		if h == nil {
			continue
		}
		n, err := h.close()
		if leaked != nil {
			*leaked += n
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *session) extraHandles() []ownerHandle {
	var hs []ownerHandle
	for _, x := range s.more {
		if x.own != nil {
			hs = append(hs, x.own)
		}
	}
	return hs
}

// ownerStats asks the owner for its staging and gather counters.
func (s *session) ownerStats(ctx context.Context) (owner.Stats, error) {
	return connStats(ctx, s.conn)
}

func connStats(ctx context.Context, c verbs.Conn) (owner.Stats, error) {
	resp, err := c.Call(ctx, owner.MethodStats, nil, nil)
	if err != nil {
		return owner.Stats{}, fmt.Errorf("scatterbench: owner stats: %w", err)
	}
	return owner.DecodeStats(resp)
}

// leases is the staging leases every owner of the session holds now.
func (s *session) leases(ctx context.Context) (int, error) {
	st, err := s.ownerStats(ctx)
	if err != nil {
		return 0, err
	}
	n := int(st.Leases)
	for _, x := range s.more {
		st, err := connStats(ctx, x.conn)
		if err != nil {
			return 0, err
		}
		n += int(st.Leases)
	}
	return n, nil
}

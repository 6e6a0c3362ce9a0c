package owner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/tcp"
	"github.com/scatterkit/scatterkit/verbs/transports"
)

// Owner is a running data owner: a transport, the data region (and the
// optional scratch region) exported as one segment, the gather service
// with its staging pool, the control methods and the discovery record.
type Owner struct {
	cfg     Config
	tr      verbs.Transport
	mem     *mapping // data memory this package mapped (nil for transport memory)
	data    *verbs.Region
	scratch *verbs.Region
	exports []verbs.Export
	seg     verbs.Segment
	staging *staging.Staging
	svc     *gather.Service
	ctl     *control
	reg     discovery.Registration

	closeOnce sync.Once
	report    Report
	closeErr  error
}

// Info describes a running owner.
type Info struct {
	Transport string
	Addr      string
	// Name and Revision of the discovery record (empty without one).
	Name     string
	Revision int64
	// Regions are the exported regions as requesters see them.
	Regions []verbs.RegionInfo
	// Generated reports generated data, of pattern Seed.
	Generated bool
	Seed      uint64
	// Staging shape served to requesters.
	StagingBytes int64
	StagingSlots int
	PackWorkers  int
	Pid          int
	// CalibrationFallback is empty when the gather service measured its
	// packing calibration, and otherwise why it uses the conservative
	// figures instead.
	CalibrationFallback string
}

// Report is what an owner found when it closed.
type Report struct {
	// LeakedLeases counts staging leases outstanding at Close; Leak is
	// the pool's description of them.
	LeakedLeases int
	Leak         string
	// Service holds the gather service's counters.
	Service gather.Stats
	// StagingPeak is the most staging bytes in use at once.
	StagingPeak int64
}

// Start creates the owner described by cfg and begins serving. On error
// everything it created is released.
func Start(ctx context.Context, cfg Config) (o *Owner, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	o = &Owner{cfg: cfg}
	defer func() {
		if err != nil {
			_, cerr := o.Close()
			err = errors.Join(err, cerr)
			o = nil
		}
	}()
	if o.tr, err = transports.New(cfg.Transport, transports.Config{TCP: tcp.Config{NoChecksums: cfg.TCPNoChecksums}}); err != nil {
		return o, fmt.Errorf("owner: %w", err)
	}
	if err = o.makeData(); err != nil {
		return o, err
	}
	o.exports = []verbs.Export{{Name: cfg.Export, Region: o.data}}
	if cfg.Scratch > 0 {
		o.scratch, err = o.tr.Alloc(int(cfg.Scratch), verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
		if err != nil {
			return o, fmt.Errorf("owner: scratch region: %w", err)
		}
		pattern.ParallelFill(o.scratch.Bytes(), cfg.ScratchSeed, 0, 0)
		o.exports = append(o.exports, verbs.Export{Name: DefaultScratchName, Region: o.scratch})
	}
	addr := cfg.Listen
	if addr == "" {
		if addr, err = transports.LocalAddr(cfg.Transport, "scatterd"); err != nil {
			return o, fmt.Errorf("owner: %w", err)
		}
	}
	lopts := verbs.ListenOptions{OnError: cfg.OnError}
	if len(cfg.AllowUIDs)+len(cfg.ReadUIDs) > 0 {
		lopts.Admit = verbs.UIDPolicy{Write: cfg.AllowUIDs, Read: cfg.ReadUIDs}.Admit
	}
	if len(cfg.AllowNets)+len(cfg.ReadNets) > 0 {
		lopts.Admit = verbs.NetPolicy{Write: cfg.AllowNets, Read: cfg.ReadNets}.Admit
	}
	o.seg, err = o.tr.Listen(addr, o.exports, lopts)
	if err != nil {
		return o, fmt.Errorf("owner: listen: %w", err)
	}
	o.staging, err = staging.New(o.tr, bufferpool.Config{Budget: int(cfg.StagingBytes), Prefault: true}, verbs.AccessLocal)
	if err != nil {
		return o, fmt.Errorf("owner: staging: %w", err)
	}
	o.svc, err = gather.NewService(gather.Config{Segment: o.seg, Exports: o.exports, Staging: o.staging,
		MaxSlots: cfg.StagingSlots, PackWorkers: cfg.PackWorkers, ParallelMin: cfg.ParallelMin,
		ProgressTimeout: cfg.ProgressTimeout})
	if err != nil {
		return o, fmt.Errorf("owner: gather service: %w", err)
	}
	o.ctl = newControl(o)
	o.seg.Handle(MethodPing, verbs.HandlerFunc(o.ctl.servePing))
	o.seg.Handle(MethodStats, verbs.HandlerFunc(o.ctl.serveStats))
	if cfg.BenchControl {
		o.seg.Handle(MethodPackOnly, verbs.HandlerFunc(o.ctl.servePackOnly))
	}
	if cfg.Directory != nil {
		attrs := map[string]string{"export": cfg.Export, "bytes": strconv.Itoa(o.data.Len())}
		if cfg.File == "" {
			attrs["seed"] = strconv.FormatUint(cfg.Seed, 10)
		}
		for k, v := range cfg.Attrs {
			attrs[k] = v
		}
		o.reg, err = cfg.Directory.Publish(ctx, discovery.Record{Name: cfg.Name, Transport: cfg.Transport,
			Addr: o.seg.Addr(), Attrs: attrs})
		if err != nil {
			return o, fmt.Errorf("owner: publish %q: %w", cfg.Name, err)
		}
	}
	return o, nil
}

// makeData creates the data region: a mapped file or generated pattern
// bytes, in memory the transport can export.
func (o *Owner) makeData() error {
	cfg := &o.cfg
	access := verbs.AccessRemoteRead
	if cfg.Writable {
		access |= verbs.AccessRemoteWrite
	}
	var err error
	switch {
	case cfg.File != "" && cfg.Transport != TransportSHM:
		// tcp and ucx register the file's mapping itself.
		if o.mem, err = mapFile(cfg.File, cfg.Writable); err != nil {
			return err
		}
		o.data, err = o.tr.Register(o.mem.buf, access)
	case cfg.File != "":
		// shm can export only its own memfd memory: copy the file in.
		var m *mapping
		if m, err = mapFile(cfg.File, false); err != nil {
			return err
		}
		if o.data, err = o.tr.Alloc(len(m.buf), access); err == nil {
			copy(o.data.Bytes(), m.buf)
		}
		err = errors.Join(err, m.unmap())
	case cfg.Transport == TransportTCP:
		if o.mem, err = mapAnon(int(cfg.Size), cfg.NoHugePages); err != nil {
			return err
		}
		pattern.ParallelFill(o.mem.buf, cfg.Seed, 0, 0)
		o.data, err = o.tr.Register(o.mem.buf, access)
	default:
		if o.data, err = o.tr.Alloc(int(cfg.Size), access); err == nil {
			pattern.ParallelFill(o.data.Bytes(), cfg.Seed, 0, 0)
		}
	}
	if err != nil {
		return fmt.Errorf("owner: data region: %w", err)
	}
	return nil
}

// Info describes the owner.
func (o *Owner) Info() Info {
	in := Info{Transport: o.cfg.Transport, Addr: o.seg.Addr(), Regions: o.seg.Regions(),
		Generated: o.cfg.File == "", StagingBytes: int64(o.staging.Pool().Stats().Budget),
		StagingSlots: o.cfg.StagingSlots, PackWorkers: o.cfg.PackWorkers, Pid: os.Getpid(),
		CalibrationFallback: o.svc.Calibration().Fallback}
	if in.Generated {
		in.Seed = o.cfg.Seed
	}
	if o.reg != nil {
		r := o.reg.Record()
		in.Name, in.Revision = r.Name, r.Revision
	}
	return in
}

// Registration returns the discovery registration (nil without a
// directory); its Done channel closes if the record is lost.
func (o *Owner) Registration() discovery.Registration { return o.reg }

// Data returns the data region's memory (for tests and in-process
// benchmarks that read it back).
func (o *Owner) Data() []byte { return o.data.Bytes() }

// Stats returns the staging pool's and the gather service's counters
// (what MethodStats answers).
func (o *Owner) Stats() Stats {
	ps := o.staging.Pool().Stats()
	ss := o.svc.Stats()
	return Stats{Leases: uint64(ps.Leases), InUse: uint64(ps.InUse), Peak: uint64(ps.Peak), Budget: uint64(ps.Budget),
		Commands: ss.Reads + ss.Writes, Failed: ss.Refused + ss.Exhausted + ss.Aborted}
}

// Close withdraws the discovery record, closes the segment (ending every
// connection first, so no command waits on a peer: a stuck requester
// cannot hold the shutdown past the transport's close grace), stops the
// gather service and the control methods, closes the staging pool
// (reporting leases still outstanding, with ErrLeak) and releases the
// data memory and the transport. It is idempotent.
func (o *Owner) Close() (Report, error) {
	o.closeOnce.Do(func() { o.report, o.closeErr = o.close() })
	return o.report, o.closeErr
}

func (o *Owner) close() (Report, error) {
	var rep Report
	var errs []error
	if o.reg != nil {
		errs = append(errs, o.reg.Close())
	}
	if o.seg != nil {
		errs = append(errs, o.seg.Close())
	}
	if o.svc != nil {
		errs = append(errs, o.svc.Close())
		rep.Service = o.svc.Stats()
	}
	if o.ctl != nil {
		o.ctl.close()
	}
	if o.staging != nil {
		st := o.staging.Pool().Stats()
		rep.StagingPeak = int64(st.Peak)
		if err := o.staging.Close(); err != nil {
			var le *bufferpool.LeakError
			if errors.As(err, &le) {
				rep.LeakedLeases, rep.Leak = len(le.Leases), le.Error()
				errs = append(errs, fmt.Errorf("%w: %v", ErrLeak, err))
			} else {
				errs = append(errs, fmt.Errorf("owner: staging: %w", err))
			}
		}
	}
	if o.tr != nil {
		// Closing the transport deregisters every region; only then may
		// memory this package mapped go away.
		errs = append(errs, o.tr.Close())
	}
	errs = append(errs, o.mem.unmap())
	return rep, errors.Join(errs...)
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/engram/snapshot"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/transports"
)

// Engram workload kinds (Workload.Engram).
const (
	EngramCPU    = "cpu"
	EngramRemote = "remote"
)

// CeilingLocal is engram-remote's second latency ceiling: the p50 of the
// local lookup of the same ids, measured in the same repetitions.
const CeilingLocal = "local-lookup"

// CeilingOneOwner is engram-remote-sharded's ceiling: the p50 of the same
// lookup from one owner of the whole table, in the same repetitions.
const CeilingOneOwner = "one-owner"

const (
	engramNS    = "scatterbench"
	engramTable = "bench"
	engramSalt  = 5 // the Engram table's rows
)

// engramEnv is the table the engram workloads of a run share: a snapshot
// of Config.TableBytes of pattern rows (seed + engramSalt) in a temporary
// directory, opened as a local store, and the same file mapped again for
// the pack-only ceiling.
type engramEnv struct {
	dir      string
	rowBytes int
	spec     engram.TableSpec
	seed     uint64
	store    *engram.Store
	snap     *snapshot.Table
	workers  *pack.Workers
	nworkers int
}

func (r *Runner) engramEnvFor(ctx context.Context, rowBytes int) (*engramEnv, error) {
	if r.engram != nil && r.engram.rowBytes == rowBytes {
		return r.engram, nil
	}
	if err := r.closeEngram(); err != nil {
		return nil, err
	}
	c := r.cfg
	e := &engramEnv{rowBytes: rowBytes, seed: c.Seed + engramSalt, nworkers: min(runtime.GOMAXPROCS(0), 8)}
	e.spec = engram.TableSpec{NumRows: c.TableBytes / int64(rowBytes), RowBytes: rowBytes}
	var err error
	if e.dir, err = os.MkdirTemp("", "scatterbench-engram-"); err != nil {
		return nil, err
	}
	r.engram = e
	if !c.Quiet {
		fmt.Fprintf(r.stderr, "scatterbench: writing a %d MiB Engram table snapshot in %s...\n", e.spec.Size()>>20, e.dir)
	}
	e.store, err = engram.Open(ctx, engram.Config{Tables: map[string]engram.TableSpec{engramTable: e.spec},
		Namespace: engramNS, Dir: e.dir, Workers: e.nworkers})
	if err != nil {
		return nil, errors.Join(err, r.closeEngram())
	}
	src := pattern.Reader(e.seed, uint64(e.spec.Size()))
	if err := e.store.PopulateFrom(engramTable, src); err != nil {
		return nil, errors.Join(err, r.closeEngram())
	}
	e.snap, err = snapshot.Open(e.dir+"/"+engramNS, engramTable, nil, &snapshot.OpenOptions{Pin: snapshot.PinNone, SkipRowChecksums: true})
	if err != nil {
		return nil, errors.Join(err, r.closeEngram())
	}
	e.workers = pack.NewWorkers(e.nworkers)
	return e, nil
}

// closeEngram removes the run's Engram table.
func (r *Runner) closeEngram() error {
	e := r.engram
	if e == nil {
		return nil
	}
	r.engram = nil
	var err error
	if e.workers != nil {
		e.workers.Close()
	}
	if e.snap != nil {
		err = errors.Join(err, e.snap.Close())
	}
	if e.store != nil {
		err = errors.Join(err, e.store.Close())
	}
	return errors.Join(err, os.RemoveAll(e.dir))
}

// checkRows reports the first output row that does not hold its id's
// row of the pattern table.
func (e *engramEnv) checkRows(out []byte, ids []int64) error {
	r := e.rowBytes
	for i, id := range ids {
		if pattern.Check(out[i*r:(i+1)*r], e.seed, uint64(id)*uint64(r)) >= 0 {
			return fmt.Errorf("%w: output row %d does not hold table row %d", ErrVerify, i, id)
		}
	}
	return nil
}

// engramIDs draws the workload's ids.
func (r *Runner) engramIDs(w *Workload, e *engramEnv) []int64 {
	rg := planRand(r.cfg.Seed, w.Name)
	ids := make([]int64, w.Small.Count)
	for i := range ids {
		ids[i] = rg.Int64N(e.spec.NumRows)
	}
	return ids
}

// timings collects one series of repetitions.
type timings struct {
	d      []time.Duration
	errors int
	first  error
}

func (t *timings) run(measured bool, f func() error) error {
	start := time.Now()
	err := f()
	el := time.Since(start)
	if err != nil {
		return t.fail(err)
	}
	if measured {
		t.d = append(t.d, el)
	}
	return nil
}

// fail counts a failed operation and returns err.
func (t *timings) fail(err error) error {
	t.errors++
	if t.first == nil {
		t.first = err
	}
	return err
}

func (t *timings) p(q float64) time.Duration { return quantile(slices.Clone(t.d), q) }

// runEngram runs an Engram workload: every repetition runs each side once,
// in an order that rotates by one each repetition.
func (r *Runner) runEngram(ctx context.Context, transport string, w *Workload) (WorkloadResult, error) {
	res := WorkloadResult{Workload: *w}
	if w.Tokens < 1 || w.Small.Count%w.Tokens != 0 || w.Small.Size == 0 {
		return res, &FlagError{Flag: "-workloads", Value: w.Name, Reason: "an Engram workload needs T tokens dividing its fragments"}
	}
	e, err := r.engramEnvFor(ctx, int(w.Small.Size))
	if err != nil {
		return res, fmt.Errorf("scatterbench: engram table: %w", err)
	}
	if w.Engram == EngramCPU {
		return r.runEngramCPU(ctx, e, w)
	}
	return r.runEngramRemote(ctx, e, transport, w)
}

func (r *Runner) runEngramCPU(ctx context.Context, e *engramEnv, w *Workload) (WorkloadResult, error) {
	c := r.cfg
	res := WorkloadResult{Workload: *w}
	T, K, R := w.Tokens, w.Small.Count/w.Tokens, e.rowBytes
	ids := r.engramIDs(w, e)
	names := slices.Repeat([]string{engramTable}, K)
	out := make([]byte, T*K*R)
	packed := make([]byte, T*K*R)
	var look, po timings
	lookup := func() error {
		return e.store.Lookup(names, engram.IDs64(ids, T, K), engram.TokenMajor(out, T, K, R), nil)
	}
	packOnly := func() error {
		return pack.ParallelGather(e.workers, packed, e.snap.Rows, ids, pack.Layout{Rows: len(ids), RowBytes: R})
	}
	var failure error
	reps := w.Reps(c)
	for rep := -c.Warmup; rep < reps && failure == nil; rep++ {
		if failure = ctx.Err(); failure != nil {
			break
		}
		measured := rep >= 0
		sides := []func() error{func() error { return look.run(measured, lookup) }, func() error { return po.run(measured, packOnly) }}
		if rep%2 != 0 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, f := range sides {
			_ = f()
		}
		if rep == -c.Warmup || rep == reps-1 {
			for i := range out {
				out[i] = ^out[i] // a stale output cannot pass the check
			}
			if err := look.run(false, lookup); err == nil {
				failure = errors.Join(e.checkRows(out, ids), e.checkRows(packed, ids))
				if failure == nil {
					res.Verified++
				}
			}
		}
		if r.step != nil {
			r.step(w.Name)
		}
	}
	if failure == nil && (look.first != nil || po.first != nil) {
		failure = fmt.Errorf("scatterbench: %s: %w", w.Name, errors.Join(look.first, po.first))
	}
	payload := w.Payload()
	p50 := look.p(0.5)
	res.Lines = []Line{{Workload: w.Name, Transport: "local", Owner: "local", Seed: c.Seed, Mode: "cpu", Chosen: "cpu",
		Direction: "read", Fragments: uint64(w.Fragments()), PayloadBytes: payload, Reps: len(look.d),
		P50Ms: ms(p50), P95Ms: ms(look.p(0.95)), GoodputGbps: gbps(payload, p50), WindowGbps: gbps(payload, p50),
		PackMs: ms(p50), Errors: look.errors, opErr: look.first}}
	res.OverBound = []int{0}
	g := gbps(payload, po.p(0.5))
	res.Ceilings = []CeilingLine{{Workload: "ceiling/" + CeilingPack, For: w.Name, Transport: "local", Owner: "local",
		Seed: c.Seed, Reps: len(po.d), GoodputGbps: &g}}
	return res, failure
}

func (r *Runner) runEngramRemote(ctx context.Context, e *engramEnv, transport string, w *Workload) (res WorkloadResult, err error) {
	c := r.cfg
	res = WorkloadResult{Workload: *w}
	T, K, R := w.Tokens, w.Small.Count/w.Tokens, e.rowBytes
	ids := r.engramIDs(w, e)
	names := slices.Repeat([]string{engramTable}, K)
	ownerT, reqT, err := c.newTransportPair(transport)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, reqT.Close(), ownerT.Close()) }()
	addr, err := ownerAddr(ownerT)
	if err != nil {
		return res, err
	}
	srv, err := e.store.Serve(engram.ServeConfig{Transport: ownerT, Addr: addr, StagingBytes: c.StagingBytes})
	if err != nil {
		return res, fmt.Errorf("scatterbench: engram owner: %w", err)
	}
	defer func() { err = errors.Join(err, srv.Close()) }()
	// The server's gather service is engram's: ask it what it reports.
	if res.Calibration, err = probeOwnerCalibration(ctx, "engram owner gather service", reqT, srv.Addr()); err != nil {
		return res, err
	}

	type side struct {
		mode  Mode
		store *engram.Store
		eng   *engine.Engine // the store's (what engram would make), closed after it
		buf   *engram.Buffer
		t     timings
	}
	var sides []*side
	// A sharded workload: the table's rows over w.Owners owners, and one
	// more side reading the whole table from the one owner (its ceiling).
	// With -owner process the shards' owners and the one owner of the
	// whole table are processes of their own (EngramOwnerMain), so that
	// the owners' work and the requester's do not share one runtime.
	var shards []engram.RemoteShard
	var one *side
	oneAddr, ownerKind := srv.Addr(), OwnerInproc
	if w.Owners > 1 {
		var stop func() error
		if c.Owner == OwnerProcess {
			ownerKind = OwnerProcess
			shards, oneAddr, stop, err = r.shardOwnerProcs(ctx, e, transport, w.Owners)
		} else {
			shards, stop, err = r.shardOwners(ctx, e, transport, w.Owners)
		}
		if err != nil {
			return res, err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	defer func() {
		for _, s := range sides {
			if s.buf != nil {
				s.buf.Release()
			}
			if s.store != nil {
				err = errors.Join(err, s.store.Close())
			}
			res.Calibration = append(res.Calibration, engineFallback("engram requester engine ("+s.mode.Name+")", s.eng)...)
			err = errors.Join(err, s.eng.Close())
		}
	}()
	modes := c.Modes
	if shards != nil {
		modes = append(slices.Clone(modes), Mode{Name: CeilingOneOwner, Verbs: engine.ModeAuto})
	}
	for _, m := range modes {
		eng, err := engine.New(engine.Config{})
		if err != nil {
			return res, err
		}
		sd := &side{mode: m, eng: eng}
		sides = append(sides, sd)
		rc := &engram.RemoteConfig{Transport: reqT, Addr: oneAddr, BufferBytes: max(int64(T*K*R)*2, 1<<20), Mode: m.Verbs,
			Connect: verbs.ConnectOptions{Lanes: c.Lanes}, Engine: eng}
		if shards != nil && m.Name != CeilingOneOwner {
			rc.Addr, rc.Shards = "", shards
		}
		if sd.store, err = engram.Open(ctx, engram.Config{Tables: map[string]engram.TableSpec{engramTable: e.spec}, Namespace: engramNS,
			Remote: rc}); err != nil {
			return res, &OwnerError{Owner: ownerKind, Stage: "connect", Err: err}
		}
		if sd.buf, err = sd.store.NewBuffer(T * K * R); err != nil {
			return res, err
		}
		if m.Name == CeilingOneOwner {
			one = sd
		}
	}
	localOut := make([]byte, T*K*R)
	var local, rtt timings
	runs := []func(bool) error{
		func(m bool) error {
			return local.run(m, func() error {
				return e.store.Lookup(names, engram.IDs64(ids, T, K), engram.TokenMajor(localOut, T, K, R), nil)
			})
		},
		func(m bool) error {
			return rtt.run(m, func() error { _, err := sides[0].store.Ping(ctx); return err })
		},
	}
	for _, s := range sides {
		runs = append(runs, func(m bool) error {
			return s.t.run(m, func() error {
				return s.store.LookupContext(ctx, names, engram.IDs64(ids, T, K), engram.TokenMajor(s.buf.Bytes(), T, K, R), nil)
			})
		})
	}
	var failure error
	reps := w.Reps(c)
	for rep := -c.Warmup; rep < reps && failure == nil; rep++ {
		if failure = ctx.Err(); failure != nil {
			break
		}
		for i := range runs {
			if err := runs[(i+rep+c.Warmup)%len(runs)](rep >= 0); err != nil && fatal(ctx, err) {
				failure = err
				break
			}
		}
		if failure != nil {
			break
		}
		if rep == -c.Warmup || rep == reps-1 {
			if failure = e.checkRows(localOut, ids); failure != nil {
				break
			}
			for _, s := range sides {
				b := s.buf.Bytes()
				for i := range b {
					b[i] = ^b[i]
				}
				if err := s.t.run(false, func() error {
					return s.store.LookupContext(ctx, names, engram.IDs64(ids, T, K), engram.TokenMajor(b, T, K, R), nil)
				}); err != nil {
					continue
				}
				if err := e.checkRows(b, ids); err != nil {
					failure = fmt.Errorf("%s: %w", s.mode.Name, err)
					break
				}
			}
			if failure == nil {
				res.Verified++
			}
		}
		if r.step != nil {
			r.step(w.Name)
		}
	}
	payload := w.Payload()
	for _, s := range sides {
		if s == one {
			continue // a ceiling, below
		}
		st, err := s.store.Stats()
		if err != nil {
			failure = errors.Join(failure, err)
			continue
		}
		p50 := s.t.p(0.5)
		res.Lines = append(res.Lines, Line{Workload: w.Name, Transport: transport, Owner: ownerKind, Seed: c.Seed,
			Mode: s.mode.Name, Chosen: chosenOf(st.Remote), Direction: "read", Fragments: uint64(w.Fragments()),
			PayloadBytes: payload, Reps: len(s.t.d), P50Ms: ms(p50), P95Ms: ms(s.t.p(0.95)),
			GoodputGbps: gbps(payload, p50), WindowGbps: gbps(payload, p50),
			Fallbacks: int(st.Remote.Fallbacks), Errors: s.t.errors, opErr: s.t.first})
		res.OverBound = append(res.OverBound, 0)
	}
	rp, lp := ms(rtt.p(0.5)), ms(local.p(0.5))
	res.Ceilings = []CeilingLine{
		{Workload: "ceiling/" + CeilingRTT, For: w.Name, Transport: transport, Owner: ownerKind, Seed: c.Seed, Reps: len(rtt.d), P50Ms: &rp},
		{Workload: "ceiling/" + CeilingLocal, For: w.Name, Transport: "local", Owner: "local", Seed: c.Seed, Reps: len(local.d), P50Ms: &lp},
	}
	if one != nil {
		op := ms(one.t.p(0.5))
		res.Ceilings = append(res.Ceilings, CeilingLine{Workload: "ceiling/" + CeilingOneOwner, For: w.Name, Transport: transport,
			Owner: ownerKind, Seed: c.Seed, Reps: len(one.t.d), P50Ms: &op})
		if one.t.first != nil && failure == nil {
			failure = fmt.Errorf("scatterbench: %s: one owner: %w", w.Name, one.t.first)
		}
	}
	if err := errors.Join(local.first, rtt.first); err != nil && failure == nil {
		failure = fmt.Errorf("scatterbench: %s: %w", w.Name, err)
	}
	return res, failure
}

// chosenOf names the mode most of a remote store's operations ran in.
func chosenOf(st *engram.RemoteStats) string {
	if st == nil || st.Ops == 0 {
		return ""
	}
	switch {
	case st.Gather >= st.Direct && st.Gather >= st.Hybrid:
		return "gather"
	case st.Hybrid >= st.Direct:
		return "hybrid"
	}
	return "direct"
}

// shardOwnerProcs is shardOwners with every owner a process of its own
// (EngramOwnerMain), plus one more process serving the whole table (the
// one-owner ceiling), whose address it returns too.
func (r *Runner) shardOwnerProcs(ctx context.Context, e *engramEnv, transport string, n int) (shards []engram.RemoteShard, oneAddr string, _ func() error, err error) {
	var procs []*engramOwnerProc
	stopAll := func() error {
		var err error
		for _, p := range procs {
			err = errors.Join(err, p.close())
		}
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, stopAll())
		}
	}()
	rows := e.spec.NumRows
	for i := range n + 1 {
		lo, hi, name := int64(0), rows, engramTable
		if i < n {
			lo, hi, name = rows*int64(i)/int64(n), rows*int64(i+1)/int64(n), fmt.Sprintf("%s.s%d", engramTable, i)
		}
		p, err := r.cfg.startEngramOwner(ctx, e, transport, name, lo, hi-lo)
		if err != nil {
			return nil, "", nil, err
		}
		procs = append(procs, p)
		if i < n {
			shards = append(shards, engram.RemoteShard{Table: engramTable, Served: name, Lo: lo, Hi: hi, Addrs: []string{p.addr}})
		} else {
			oneAddr = p.addr
		}
	}
	return shards, oneAddr, stopAll, nil
}

// ownerAddr is a listen address for an in-process owner over tr.
func ownerAddr(tr verbs.Transport) (string, error) {
	addr, err := transports.LocalAddr(tr.Name(), "scatterbench-engram")
	if err != nil {
		return "", fmt.Errorf("scatterbench: %w", err)
	}
	return addr, nil
}

// shardOwners serves e's table cut by row ranges over n owners, each a
// local store of its shard (rows of the same pattern stream, so checkRows
// holds) served over its own transport of kind transport, and returns the
// shards and a function that stops them all.
func (r *Runner) shardOwners(ctx context.Context, e *engramEnv, transport string, n int) (shards []engram.RemoteShard, _ func() error, err error) {
	var closers closers
	stopAll := func() error {
		var err error
		closers.closeInto(&err)
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, stopAll())
		}
	}()
	dir, err := os.MkdirTemp("", "scatterbench-engram-shards-")
	if err != nil {
		return nil, nil, err
	}
	closers.push(func() error { return os.RemoveAll(dir) })
	rows, R := e.spec.NumRows, int64(e.rowBytes)
	for i := range n {
		lo, hi := rows*int64(i)/int64(n), rows*int64(i+1)/int64(n)
		name := fmt.Sprintf("%s.s%d", engramTable, i)
		st, err := engram.Open(ctx, engram.Config{Tables: map[string]engram.TableSpec{name: {NumRows: hi - lo, RowBytes: e.rowBytes}},
			Namespace: engramNS, Dir: fmt.Sprintf("%s/owner%d", dir, i)})
		if err != nil {
			return nil, nil, err
		}
		closers.push(st.Close)
		if err := st.PopulateFrom(name, pattern.ReaderFrom(e.seed, uint64(lo*R), uint64((hi-lo)*R))); err != nil {
			return nil, nil, err
		}
		tr, err := r.cfg.newTransport(transport)
		if err != nil {
			return nil, nil, err
		}
		closers.push(tr.Close)
		addr, err := ownerAddr(tr)
		if err != nil {
			return nil, nil, err
		}
		srv, err := st.Serve(engram.ServeConfig{Transport: tr, Addr: addr, StagingBytes: r.cfg.StagingBytes})
		if err != nil {
			return nil, nil, fmt.Errorf("scatterbench: engram shard owner %d: %w", i, err)
		}
		closers.push(srv.Close)
		shards = append(shards, engram.RemoteShard{Table: engramTable, Served: name, Lo: lo, Hi: hi, Addrs: []string{srv.Addr()}})
	}
	return shards, stopAll, nil
}

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
	for _, m := range c.Modes {
		eng, err := engine.New(engine.Config{})
		if err != nil {
			return res, err
		}
		sd := &side{mode: m, eng: eng}
		sides = append(sides, sd)
		if sd.store, err = engram.Open(ctx, engram.Config{Tables: map[string]engram.TableSpec{engramTable: e.spec}, Namespace: engramNS,
			Remote: &engram.RemoteConfig{Transport: reqT, Addr: srv.Addr(), BufferBytes: max(int64(T*K*R)*2, 1<<20), Mode: m.Verbs,
				Connect: verbs.ConnectOptions{Lanes: c.Lanes}, Engine: eng}}); err != nil {
			return res, &OwnerError{Owner: OwnerInproc, Stage: "connect", Err: err}
		}
		if sd.buf, err = sd.store.NewBuffer(T * K * R); err != nil {
			return res, err
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
		st, err := s.store.Stats()
		if err != nil {
			failure = errors.Join(failure, err)
			continue
		}
		p50 := s.t.p(0.5)
		res.Lines = append(res.Lines, Line{Workload: w.Name, Transport: transport, Owner: OwnerInproc, Seed: c.Seed,
			Mode: s.mode.Name, Chosen: chosenOf(st.Remote), Direction: "read", Fragments: uint64(w.Fragments()),
			PayloadBytes: payload, Reps: len(s.t.d), P50Ms: ms(p50), P95Ms: ms(s.t.p(0.95)),
			GoodputGbps: gbps(payload, p50), WindowGbps: gbps(payload, p50),
			Fallbacks: int(st.Remote.Fallbacks), Errors: s.t.errors, opErr: s.t.first})
		res.OverBound = append(res.OverBound, 0)
	}
	rp, lp := ms(rtt.p(0.5)), ms(local.p(0.5))
	res.Ceilings = []CeilingLine{
		{Workload: "ceiling/" + CeilingRTT, For: w.Name, Transport: transport, Owner: OwnerInproc, Seed: c.Seed, Reps: len(rtt.d), P50Ms: &rp},
		{Workload: "ceiling/" + CeilingLocal, For: w.Name, Transport: "local", Owner: "local", Seed: c.Seed, Reps: len(local.d), P50Ms: &lp},
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

// ownerAddr is a listen address for an in-process owner over tr.
func ownerAddr(tr verbs.Transport) (string, error) {
	addr, err := transports.LocalAddr(tr.Name(), "scatterbench-engram")
	if err != nil {
		return "", fmt.Errorf("scatterbench: %w", err)
	}
	return addr, nil
}

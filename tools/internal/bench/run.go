package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/tools/internal/netns"
	"github.com/scatterkit/scatterkit/tools/internal/owner"
	"github.com/scatterkit/scatterkit/verbs"
)

// pingsPerRep is how many control round trips each repetition times for
// the rtt ceiling.
const pingsPerRep = 3

// packChunk is the staging chunk of the pack-only ceiling: at least the
// gather service's ParallelMin, so it packs with all pack workers.
const packChunk = 1 << 20

// opTimeout bounds one operation.
const opTimeout = 60 * time.Second

// WorkloadResult is one workload's outcome in one pass.
type WorkloadResult struct {
	Workload Workload
	// Lines has one entry per mode, in Config.Modes order.
	Lines []Line
	// OverBound counts, per mode, operations whose staging peak exceeded
	// their P*C.
	OverBound []int
	// Ceilings: direct-control, pack-only (absent when the plan's rows
	// exceed the largest staging class) and rtt.
	Ceilings []CeilingLine
	// Verified counts verified repetitions (all modes and the control).
	Verified int
	// Status is StatusOK, StatusFailed or StatusNotRun; Err, a
	// *WorkloadError, says why (nil when ok). A failed workload keeps a
	// line per mode, its goals are n/a and the run's exit status is 1.
	Status string
	Err    error
	// Calibration lists the calibrations behind the figures that fell
	// back to conservative figures.
	Calibration []CalibrationFallback
}

// PassResult is one pass's outcome.
type PassResult struct {
	Transport string
	Owner     string // where the owner ran
	Workloads []WorkloadResult
	// Leaked counts leases outstanding when the owner and the requester
	// staging closed.
	Leaked int
	// Err is the pass's owner's failure to start (its scatter workloads
	// did not run) or to close; a workload's failure is its own Err.
	Err error
	// LoadBefore and LoadAfter are the 1-minute load averages.
	LoadBefore, LoadAfter float64
	// Axis and AxisValue: the -sweep axis and its value for this pass
	// (empty without a sweep).
	Axis      string
	AxisValue int64
}

// Runner runs the passes of a Config.
type Runner struct {
	cfg    *Config
	stderr io.Writer
	// axis and axisValue: the -sweep axis and the value running now.
	axis      string
	axisValue int64
	// emit receives every JSON line (Line and CeilingLine values) as soon
	// as it is known; nil drops them.
	emit func(any) error
	// step is called after every repetition (the progress bar).
	step func(desc string)
	// engram is the Engram table of the engram workloads (engram.go).
	engram *engramEnv
	// cals are the in-process gather services' calibrations, by pack
	// workers (calibration.go).
	cals map[int]costmodel.Calibration
}

// Run runs every pass. A workload that fails is recorded with its reason
// and the run goes on; what makes going on pointless (the context ended;
// the connection to a pass's owner is gone, for that owner's workloads)
// records the workloads left as not run. It returns every pass and the
// failures joined (owners' and workloads', not those not run).
func (r *Runner) Run(ctx context.Context) ([]PassResult, error) {
	c := r.cfg
	var out []PassResult
	defer func() {
		if err := r.closeEngram(); err != nil {
			fmt.Fprintf(r.stderr, "scatterbench: removing the Engram table: %v\n", err)
		}
	}()
	var link *netns.Link
	var setup error
	if c.Owner == OwnerNetns {
		if err := netns.Available(c.TBF != ""); err != nil {
			setup = &OwnerError{Owner: OwnerNetns, Stage: "start", Err: err}
		} else {
			_ = netns.Sweep(ctx, nil)
			if link, err = netns.Create(ctx, netns.Options{Rate: c.TBF}); err != nil {
				setup = &OwnerError{Owner: OwnerNetns, Stage: "start", Err: err}
			} else {
				defer link.Close()
			}
		}
	}
	// Without -sweep the passes run once; with it, once per value, the
	// axis set in the configuration (and restored after).
	values := []int64{0}
	if c.Sweep.Axis != "" {
		values = c.Sweep.Values
	}
	saved := *c
	defer func() { *c = saved; r.axis, r.axisValue = "", 0 }()
	for _, x := range values {
		if c.Sweep.Axis != "" {
			c.Sweep.apply(c, x)
			r.axis, r.axisValue = c.Sweep.Axis, x
		}
		for _, p := range c.Passes {
			var why error
			switch {
			case ctx.Err() != nil:
				why = fmt.Errorf("interrupted: %w", context.Cause(ctx))
			case setup != nil:
				why = setup
			}
			var pr PassResult
			if why != nil {
				pr = PassResult{Transport: p.Transport, Owner: c.Owner, LoadBefore: loadAverage(), Err: setup}
				for _, w := range p.Workloads {
					r.notRun(&pr, w, p.Transport, why)
				}
				pr.LoadAfter = pr.LoadBefore
			} else {
				pr = r.runPass(ctx, p, link)
			}
			pr.Axis, pr.AxisValue = r.axis, r.axisValue
			out = append(out, pr)
		}
	}
	var errs []error
	for _, pr := range out {
		if pr.Err != nil && !slices.ContainsFunc(errs, func(e error) bool { return e == pr.Err }) {
			errs = append(errs, pr.Err)
		}
		for _, wr := range pr.Workloads {
			if wr.Status == StatusFailed {
				errs = append(errs, wr.Err)
			}
		}
	}
	return out, errors.Join(errs...)
}

func (r *Runner) runPass(ctx context.Context, p Pass, link *netns.Link) (pr PassResult) {
	pr = PassResult{Transport: p.Transport, Owner: r.cfg.Owner, LoadBefore: loadAverage()}
	defer func() { pr.LoadAfter = loadAverage() }()
	// Engram, reshard and structobj workloads bring their own tables,
	// owners and ranks; they run after the scatter workloads, which share
	// the pass's owner.
	var scatter, engramW, reshardW, structW []Workload
	for _, w := range p.Workloads {
		switch {
		case w.Engram != "":
			engramW = append(engramW, w)
		case w.Reshard != "":
			reshardW = append(reshardW, w)
		case w.StructObj != "":
			structW = append(structW, w)
		default:
			scatter = append(scatter, w)
		}
	}
	if len(scatter) > 0 {
		p.Workloads = scatter
		r.runScatter(ctx, p, link, &pr)
	} else {
		pr.Owner = OwnerInproc
	}
	own := func(w Workload, run func(context.Context, string, *Workload) (WorkloadResult, error)) {
		if ctx.Err() != nil {
			r.notRun(&pr, w, p.Transport, fmt.Errorf("interrupted: %w", context.Cause(ctx)))
			return
		}
		wr, err := run(ctx, p.Transport, &w)
		r.record(&pr, p.Transport, wr, err)
	}
	for _, w := range engramW {
		own(w, r.runEngram)
	}
	for _, w := range reshardW {
		own(w, r.runReshard)
	}
	for _, w := range structW {
		own(w, r.runStructObj)
	}
	return pr
}

// runScatter runs the scatter workloads of a pass on one owner. When the
// owner cannot start, or an operation finds the connection to it gone, the
// workloads left are recorded as not run.
func (r *Runner) runScatter(ctx context.Context, p Pass, link *netns.Link, pr *PassResult) {
	s, err := newSession(ctx, r.cfg, p, link, r.stderr)
	if err != nil {
		pr.Err = err
		for _, w := range p.Workloads {
			r.notRun(pr, w, p.Transport, fmt.Errorf("the pass's owner did not start: %w", err))
		}
		return
	}
	pr.Owner = s.own.desc()
	if link != nil {
		pr.Owner = fmt.Sprintf("%s, %s %s", pr.Owner, link.Namespace, link.PeerAddr)
		if link.Rate != "" {
			pr.Owner += ", tbf " + link.Rate
		}
	}
	defer func() {
		if err := s.close(&pr.Leaked); err != nil {
			pr.Err = errors.Join(pr.Err, err)
		}
		pr.LoadAfter = loadAverage()
	}()
	var stop error
	for i := range p.Workloads {
		w := &p.Workloads[i]
		if stop == nil && ctx.Err() != nil {
			stop = fmt.Errorf("interrupted: %w", context.Cause(ctx))
		}
		if stop != nil {
			r.notRun(pr, *w, p.Transport, stop)
			continue
		}
		wr, err := s.runWorkload(ctx, w, r)
		wr.Calibration = append(wr.Calibration, s.calibration...)
		r.record(pr, p.Transport, wr, err)
		if err != nil && fatal(ctx, err) && ctx.Err() == nil {
			stop = fmt.Errorf("%s lost the connection to the owner: %w", w.Name, err)
		}
	}
}

// record settles a workload's result (settle), adds it to its pass and
// emits its JSON lines.
func (r *Runner) record(pr *PassResult, transport string, wr WorkloadResult, err error) {
	r.settle(&wr, transport, err)
	pr.Workloads = append(pr.Workloads, wr)
	for _, l := range wr.Lines {
		r.emitLine(l)
	}
	for _, l := range wr.Ceilings {
		r.emitLine(l)
	}
}

func (r *Runner) emitLine(v any) {
	if r.emit == nil {
		return
	}
	if r.axis != "" {
		// A sweep's lines carry its axis and value (fields only added).
		b, err := json.Marshal(v)
		m := map[string]any{}
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil {
			fmt.Fprintf(r.stderr, "scatterbench: writing JSON: %v\n", err)
			return
		}
		m["axis"], m["axis_value"] = r.axis, r.axisValue
		v = m
	}
	if err := r.emit(v); err != nil {
		fmt.Fprintf(r.stderr, "scatterbench: writing JSON: %v\n", err)
	}
}

// fatal reports whether err should stop the pass: the context ended or
// the connection to the owner is gone.
func fatal(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, verbs.ErrClosed)
}

// repeat runs w's repetitions, warm-ups first: each runs n variants once
// (modes, sides), in an order that rotates by one from one repetition to
// the next, calling once(i, measured, verify) for variant i; verify is set
// in the first warm-up and the last measured repetition. A failure (the
// context ended, or once returned an error: wrong bytes, a connection
// gone) ends the repetition it happened in, after which the progress step
// still counts it, and stops them; repeat returns it, and the lines still
// show what was measured.
func (r *Runner) repeat(ctx context.Context, w *Workload, n int, once func(i int, measured, verify bool) error) error {
	c := r.cfg
	reps := w.Reps(c)
	var failure error
	for rep := -c.Warmup; rep < reps && failure == nil; rep++ {
		if failure = ctx.Err(); failure != nil {
			break
		}
		verify := rep == -c.Warmup || rep == reps-1
		for i := range n {
			if failure = once((i+rep+c.Warmup)%n, rep >= 0, verify); failure != nil {
				break
			}
		}
		if r.step != nil {
			r.step(w.Name)
		}
	}
	return failure
}

// closers is what a workload set up and must close, in the order made:
// closeInto closes it in reverse order, as a chain of defers would.
type closers []func() error

func (cs *closers) push(f func() error) { *cs = append(*cs, f) }

// closeInto closes everything, last made first, joining each error into
// *err. (A pointer receiver, so that "defer done.closeInto(&err)" closes
// what was pushed after the defer.)
func (cs *closers) closeInto(err *error) {
	for i := len(*cs) - 1; i >= 0; i-- {
		*err = errors.Join(*err, (*cs)[i]())
	}
}

// planRand returns the generator of a workload's plan: fixed by the seed
// and the workload's name, so reruns with -seed build the same plans.
func planRand(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed+planSalt, h.Sum64()))
}

// runWorkload runs one workload: every repetition runs the ceilings and
// every mode once, in an order that rotates by one each repetition, so all
// of them see the same machine over the run.
func (s *session) runWorkload(ctx context.Context, w *Workload, r *Runner) (WorkloadResult, error) {
	c := s.cfg
	res := WorkloadResult{Workload: *w}
	srcBytes := s.table.Len
	if w.Dir == verbs.OpWrite {
		srcBytes = uint64(s.src.Len())
	}
	plan, err := w.Plan(planRand(c.Seed, w.Name), srcBytes)
	if err != nil {
		return res, err
	}
	// Pack-only needs the plan on the owner (source offsets into its
	// table; a WRITE plan's geometry packed from the table stands for the
	// requester's packing, which runs the same loops).
	packOK, err := s.loadPackPlan(ctx, w, plan)
	if err != nil {
		return res, err
	}
	all := make([]*series, len(c.Modes))
	for i, m := range c.Modes {
		all[i] = newSeries(m)
	}
	var control, packTimes, rtts, h2d, hostDst []time.Duration
	const (
		stepControl = iota
		stepPack
		stepRTT
		stepH2D     // -dst gpu
		stepHostDst // -dst gpu
		stepModes
	)
	steps := stepModes + len(all)
	total := c.Warmup + w.Reps(c)
	var failure error
	for rep := 0; rep < total && failure == nil; rep++ {
		measured, verify := rep >= c.Warmup, rep == 0 || rep == total-1
		for k := range steps {
			if err := ctx.Err(); err != nil {
				failure = err
				break
			}
			switch step := (rep + k) % steps; step {
			case stepControl:
				d, err := s.runControl(ctx, verify)
				if err != nil {
					failure = err
				} else if measured {
					control = append(control, d)
				}
				if verify && err == nil {
					res.Verified++
				}
			case stepPack:
				if !packOK {
					continue
				}
				d, err := s.packOnce(ctx, w, plan)
				if err != nil {
					failure = err
				} else if measured {
					packTimes = append(packTimes, d)
				}
			case stepRTT:
				for range pingsPerRep {
					t := time.Now()
					if _, err := s.conn.Call(ctx, owner.MethodPing, nil, nil); err != nil {
						failure = fmt.Errorf("scatterbench: ping: %w", err)
						break
					}
					if measured {
						rtts = append(rtts, time.Since(t))
					}
				}
			case stepH2D, stepHostDst:
				if s.dev == nil {
					continue
				}
				var d time.Duration
				var err error
				if step == stepH2D {
					d, err = s.h2dOnce(w.Payload())
				} else {
					d, err = s.hostDstOnce(ctx, plan)
				}
				if err != nil {
					failure = err
				} else if measured && step == stepH2D {
					h2d = append(h2d, d)
				} else if measured {
					hostDst = append(hostDst, d)
				}
			default:
				se := all[step-stepModes]
				err := s.runMode(ctx, w, plan, se, measured, verify)
				var ve *VerifyError
				switch {
				case errors.As(err, &ve):
					failure = err
				case err != nil && fatal(ctx, err):
					failure = err
				case err != nil:
					// Counted in the series; the run goes on.
				case verify:
					res.Verified++
				}
			}
			if failure != nil {
				break
			}
		}
		if r.step != nil {
			r.step(w.Name)
		}
	}
	for _, se := range all {
		res.Lines = append(res.Lines, se.line(w, s.transport, c.Owner, c.Seed))
		res.OverBound = append(res.OverBound, se.overBound)
		if se.firstErr != nil && r.stderr != nil {
			fmt.Fprintf(r.stderr, "scatterbench: %s/%s over %s: %d failed operations, first: %v\n",
				w.Name, se.mode.Name, s.transport, se.errors, se.firstErr)
		}
		if c.Explain && r.stderr != nil && len(se.traces) > 0 {
			explain(r.stderr, w.Name, se.mode.Name, s.transport, &se.last)
		}
	}
	ceil := func(name string, n int) CeilingLine {
		return CeilingLine{Workload: "ceiling/" + name, For: w.Name, Transport: s.transport, Owner: c.Owner, Seed: c.Seed, Reps: n}
	}
	if len(control) > 0 {
		l := ceil(CeilingDirect, len(control))
		v := gbps(controlCount*controlSize, quantile(control, 0.5))
		l.GoodputGbps = &v
		res.Ceilings = append(res.Ceilings, l)
	}
	if len(packTimes) > 0 {
		l := ceil(CeilingPack, len(packTimes))
		v := gbps(w.Payload(), quantile(packTimes, 0.5))
		l.GoodputGbps = &v
		res.Ceilings = append(res.Ceilings, l)
	}
	for _, g := range []struct {
		name  string
		times []time.Duration
	}{{CeilingH2D, h2d}, {CeilingHostDst, hostDst}} {
		if len(g.times) > 0 {
			l := ceil(g.name, len(g.times))
			v := gbps(w.Payload(), quantile(g.times, 0.5))
			l.GoodputGbps = &v
			res.Ceilings = append(res.Ceilings, l)
		}
	}
	if len(rtts) > 0 {
		l := ceil(CeilingRTT, len(rtts))
		v := ms(quantile(rtts, 0.5))
		l.P50Ms = &v
		res.Ceilings = append(res.Ceilings, l)
	}
	return res, failure
}

// loadPackPlan stores the plan on the owner for the pack-only ceiling.
// It reports false when the plan's rows do not fit a staging chunk.
func (s *session) loadPackPlan(ctx context.Context, w *Workload, p *planfmt.Plan) (bool, error) {
	if p.Form == planfmt.FormRows && p.Rows.RowSize > packChunk {
		return false, nil
	}
	enc, err := planfmt.AppendPlan(nil, p)
	if err != nil {
		return false, fmt.Errorf("scatterbench: %s: encoding the plan: %w", w.Name, err)
	}
	resp, err := s.conn.Call(ctx, owner.MethodPackOnly, owner.AppendPackRequest(nil,
		&owner.PackRequest{Op: owner.PackLoad, PlanID: 1, Plan: enc}), nil)
	if err != nil {
		return false, fmt.Errorf("scatterbench: %s: loading the pack-only plan: %w", w.Name, err)
	}
	var rep owner.PackReply
	if err := owner.DecodePackReply(&rep, owner.PackLoad, resp); err != nil {
		return false, err
	}
	if rep.Payload != w.Payload() {
		return false, fmt.Errorf("scatterbench: %s: the owner sees %d payload bytes, want %d", w.Name, rep.Payload, w.Payload())
	}
	return true, nil
}

// packOnce times one owner-side pack of the loaded plan.
func (s *session) packOnce(ctx context.Context, w *Workload, p *planfmt.Plan) (time.Duration, error) {
	chunk := uint64(packChunk)
	if p.Form == planfmt.FormRows {
		chunk = max(chunk, p.Rows.RowSize)
	}
	resp, err := s.conn.Call(ctx, owner.MethodPackOnly, owner.AppendPackRequest(nil,
		&owner.PackRequest{Op: owner.PackRun, PlanID: 1, Chunk: chunk, Reps: 1}), nil)
	if err != nil {
		return 0, fmt.Errorf("scatterbench: %s: pack-only: %w", w.Name, err)
	}
	var rep owner.PackReply
	if err := owner.DecodePackReply(&rep, owner.PackRun, resp); err != nil {
		return 0, err
	}
	return rep.Times[0], nil
}

// runControl runs the direct control once into caller 0's destination.
func (s *session) runControl(ctx context.Context, verify bool) (time.Duration, error) {
	p := s.control
	w := &Workload{Name: "ceiling/" + CeilingDirect, Dir: verbs.OpRead}
	if verify {
		if err := s.poison(ctx, w, p); err != nil {
			return 0, err
		}
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	res, err := s.eng.Do(octx, &engine.ScatterOp{Conn: s.conn, Dir: verbs.OpRead, Remote: s.table, Local: s.dst,
		Plan: p, Mode: engine.ModeDirect})
	if err != nil {
		return 0, fmt.Errorf("scatterbench: direct control: %w", err)
	}
	if verify {
		dst := s.dst.Bytes()[:p.DstExtent]
		if bad := verifyDest(p, dst, streamSource{s.cfg.Seed}, s.cfg.Seed+poisonSalt, 0); bad != nil {
			bad.Workload, bad.Mode = w.Name, "direct"
			return 0, bad
		}
	}
	return res.Trace.Total, nil
}

// runMode runs one repetition of a workload in one mode on every caller
// at once, records it and, on a verified repetition, checks every
// destination.
func (s *session) runMode(ctx context.Context, w *Workload, p *planfmt.Plan, se *series, measured, verify bool) error {
	c := s.cfg
	if verify {
		if err := s.poison(ctx, w, p); err != nil {
			return err
		}
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	results := make([]engine.Result, c.Callers)
	errs := make([]error, c.Callers)
	do := func(i int) {
		op := engine.ScatterOp{Conn: s.conn, Dir: w.Dir, Plan: p, Mode: se.mode.Verbs}
		if w.Dir == verbs.OpRead {
			op.Remote, op.Local, op.LocalOff = s.table, s.dst, uint64(i)*s.dstStride
		} else {
			op.Remote, op.RemoteOff, op.Local = s.scratch, uint64(i)*s.writeStride, s.src
		}
		if s.dev != nil && w.Dir == verbs.OpRead {
			results[i], errs[i] = s.doDevice(octx, i, op)
			return
		}
		if w.Owners > 1 && w.Dir == verbs.OpRead && len(s.more) >= w.Owners-1 {
			results[i], errs[i] = s.doOwners(octx, w, &s.splitters[i], op)
			return
		}
		results[i], errs[i] = s.eng.Do(octx, &op)
	}
	if c.Callers == 1 {
		do(0)
	} else {
		var wg sync.WaitGroup
		for i := range c.Callers {
			wg.Go(func() { do(i) })
		}
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		// Interrupted: what was in flight is not a failed operation.
		return err
	}
	var first error
	for i := range results {
		se.add(results[i], errs[i], measured)
		if errs[i] != nil && first == nil {
			first = errs[i]
		}
	}
	leased, err := s.leases(ctx)
	if err != nil {
		return errors.Join(first, err)
	}
	if s.staging != nil {
		leased += s.staging.Pool().Stats().Leases
	}
	se.leaked = max(se.leaked, leased)
	if first != nil {
		return first
	}
	if verify {
		if err := s.check(ctx, w, p, se.mode.Name); err != nil {
			return err
		}
		se.verified++
	}
	return nil
}

// explain writes one operation's decision: the mode it ran in, the cost
// model's inputs and candidates, and the hybrid split when there was one.
func explain(w io.Writer, workload, mode, transport string, res *engine.Result) {
	fmt.Fprintf(w, "scatterbench: explain %s/%s over %s: chose %v, ran %v (%d B in %v)\n",
		workload, mode, transport, res.Chosen, res.Mode, res.Trace.Payload, res.Trace.Total)
	if res.Decision.Geometry().S > 0 {
		fmt.Fprintf(w, "%v", res.Decision)
	}
	if res.Split.Splits > 0 {
		fmt.Fprintf(w, "split     %v\n", res.Split)
	}
}

// doOwners runs op, a READ of the table, from w.Owners owners at once: the
// plan cut by its source into equal shares of the table (on row
// boundaries for a rows plan), owner k reading share k from its own copy
// of the table, as one engine group. The result stands for the group: the
// slowest part's stage times, the group's total, the parts' bytes, and
// their staging peaks and bounds added.
func (s *session) doOwners(ctx context.Context, w *Workload, sp *planfmt.Splitter, op engine.ScatterOp) (engine.Result, error) {
	n := w.Owners
	p := op.Plan
	align := uint64(1)
	if p.Form == planfmt.FormRows {
		align = p.Rows.RowSize
	}
	cuts := make([]uint64, n+1)
	for k := 1; k < n; k++ {
		cuts[k] = p.SrcExtent * uint64(k) / uint64(n)
		if p.Form == planfmt.FormRows && cuts[k] > p.Rows.SrcBase {
			cuts[k] -= (cuts[k] - p.Rows.SrcBase) % align
		}
	}
	cuts[n] = p.SrcExtent
	shards, err := sp.Split(p, cuts)
	if err != nil {
		return engine.Result{}, err
	}
	parts := make([]engine.ScatterOp, n)
	for k := range parts {
		parts[k] = op
		parts[k].Plan, parts[k].RemoteOff = &shards[k].Plan, cuts[k]
		if k > 0 {
			parts[k].Conn, parts[k].Remote = s.more[k-1].conn, s.more[k-1].table
		}
	}
	gr, err := s.eng.DoGroup(ctx, parts)
	if err != nil {
		return engine.Result{}, err
	}
	res := gr.Parts[0]
	var peak, bound int64
	for _, pr := range gr.Parts {
		if pr.Trace.Total > res.Trace.Total {
			res = pr
		}
		peak += pr.Trace.StagingPeak
		bound += int64(pr.Trace.Slots) * pr.Trace.ChunkBytes
		if pr.Fallback != engine.FallbackNone {
			res.Fallback = pr.Fallback
		}
	}
	res.Bytes, res.Fragments, res.Spans, res.SpanBytes = gr.Bytes, gr.Fragments, gr.Spans, gr.SpanBytes
	res.Trace.Total, res.Trace.Payload = gr.Total, gr.Bytes
	res.Trace.StagingPeak, res.Trace.Slots, res.Trace.ChunkBytes = peak, 1, bound
	return res, nil
}

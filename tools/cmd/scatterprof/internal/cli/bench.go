package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/probe"
	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/report"
	"github.com/scatterkit/scatterkit/tools/internal/bench"
	"github.com/scatterkit/scatterkit/tools/internal/owner"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/stage"
	"github.com/scatterkit/scatterkit/verbs/transports"
)

// BenchConfig is one run of "scatterprof bench": a scatterbench workload
// against an owner in this process, in blocks of operations with the
// profiler attached to this process and detached, alternating.
type BenchConfig struct {
	Workload   string
	TableBytes int64
	Seed       uint64
	Reps       int // pairs of blocks (one detached, one attached)
	Block      int // operations per block
	Warmup     int
	Pairs      int // calibration pairs
	JSON       bool
	// Control attaches nothing in the "attached" blocks: an A/A run that
	// shows the spread of the statistics on this machine.
	Control bool
}

// Goals of the profiler issue.
const (
	goalGoodput   = 0.98  // attached goodput / detached goodput, at least
	goalMarkers   = 0.005 // detached markers' cost / operation time, at most
	goalAgreement = 0.10  // |profiler share - trace share| of operation time, at most
)

func parseBench(args []string, out io.Writer) (BenchConfig, error) {
	c := BenchConfig{}
	fs := flag.NewFlagSet("scatterprof bench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(out, "usage: scatterprof bench [flags]\n\nRuns a scatterbench workload over tcp against an owner in this process, with\nthe profiler attached to this process and detached in alternating blocks,\nand reports goodput attached / detached, the detached markers' cost and\nthe profiler's stage shares against the engine's own trace.\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.Workload, "workload", "many-small", "scatterbench workload (a READ workload of the named table)")
	size := fs.Int64("table-bytes", 1<<30, "the owner's generated table, bytes")
	fs.Uint64Var(&c.Seed, "seed", 42, "table pattern and plan seed")
	fs.IntVar(&c.Reps, "reps", 24, "pairs of blocks, one detached and one attached, in alternating order")
	fs.IntVar(&c.Block, "block", 4, "operations per block")
	fs.IntVar(&c.Warmup, "warmup", 3, "untimed operations first")
	fs.IntVar(&c.Pairs, "calibrate", 20000, "marker pairs fired to calibrate the probe's cost")
	fs.BoolVar(&c.JSON, "json", false, "print JSON lines")
	fs.BoolVar(&c.Control, "control", false, "A/A control: attach nothing in the attached blocks, to see the statistics' spread")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	c.TableBytes = *size
	switch {
	case fs.NArg() > 0:
		return c, &FlagError{Flag: "bench", Reason: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	case c.Reps < 1:
		return c, &FlagError{Flag: "-reps", Reason: "at least 1"}
	case c.Block < 1:
		return c, &FlagError{Flag: "-block", Reason: "at least 1"}
	case c.Warmup < 0:
		return c, &FlagError{Flag: "-warmup", Reason: "must not be negative"}
	case c.Pairs < 1:
		return c, &FlagError{Flag: "-calibrate", Reason: "at least 1 (the overhead figures need it)"}
	case c.TableBytes < 1<<20:
		return c, &FlagError{Flag: "-table-bytes", Reason: "at least 1 MiB"}
	}
	w, ok := bench.Lookup(c.Workload)
	if !ok || w.Dir != verbs.OpRead || w.Engram != "" || w.Reshard != "" || w.StructObj != "" {
		return c, &FlagError{Flag: "-workload", Reason: fmt.Sprintf("%q is not a READ scatter workload of scatterbench's named table", c.Workload)}
	}
	return c, nil
}

// BenchResult is what one bench run measured.
type BenchResult struct {
	Workload    string            `json:"workload"`
	Transport   string            `json:"transport"`
	Chosen      string            `json:"chosen"`
	Ops         int               `json:"ops"`          // per side
	OpsRecorded uint64            `json:"ops_recorded"` // op stage intervals the profiler recorded while attached
	Payload     uint64            `json:"payload_bytes"`
	P50Off      float64           `json:"p50_detached_ms"`
	P50On       float64           `json:"p50_attached_ms"`
	GoodputOff  float64           `json:"goodput_detached_gbps"`
	GoodputOn   float64           `json:"goodput_attached_gbps"`
	Goodput     float64           `json:"goodput_ratio"`        // attached / detached, of the p50s over all blocks
	Paired      float64           `json:"goodput_ratio_paired"` // median over repetitions of attached / detached of adjacent blocks
	HitsPerOp   float64           `json:"probe_hits_per_op"`
	Calibration probe.Calibration `json:"calibration"`
	Markers     float64           `json:"markers_detached_share"` // hits/op x unprobed / p50 detached
	ProbeShare  float64           `json:"probe_share_estimate"`   // hits/op x hit / p50 detached
	Shares      []ShareCompare    `json:"shares"`
	Unmatched   uint64            `json:"unmatched"`
	Control     bool              `json:"control"` // an A/A run: nothing was attached
}

// ShareCompare is one stage's share of operation time by the profiler and
// by the engine's trace of the same operations.
type ShareCompare struct {
	Stage    string  `json:"stage"`
	Trace    string  `json:"trace_field"`
	Profiler float64 `json:"profiler"`
	Engine   float64 `json:"trace"`
	Diff     float64 `json:"diff"`
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseBench(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	res, err := RunBench(ctx, c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFail
	}
	if c.JSON {
		b, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", b)
	}
	printBench(stdout, &res)
	return 0
}

// RunBench runs the bench; progress notes go to notes.
func RunBench(ctx context.Context, c BenchConfig, notes io.Writer) (res BenchResult, err error) {
	w, _ := bench.Lookup(c.Workload)
	prof, err := probe.New()
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, prof.Close()) }()
	if res.Calibration, err = prof.Calibrate(c.Pairs); err != nil {
		return res, err
	}
	o, err := owner.Start(ctx, owner.Config{Transport: owner.TransportTCP, Size: c.TableBytes, Seed: c.Seed})
	if err != nil {
		return res, fmt.Errorf("scatterprof bench: owner: %w", err)
	}
	defer func() {
		if _, cerr := o.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	tr, err := transports.New(o.Info().Transport, transports.Config{})
	if err != nil {
		return res, fmt.Errorf("scatterprof bench: %w", err)
	}
	defer func() { err = errors.Join(err, tr.Close()) }()
	dst, err := tr.Alloc(int(w.DstExtent()), verbs.AccessLocal|verbs.AccessRemoteWrite)
	if err != nil {
		return res, fmt.Errorf("scatterprof bench: destination: %w", err)
	}
	conn, err := tr.Connect(ctx, o.Info().Addr, verbs.ConnectOptions{Expose: []verbs.Export{{Name: "dst", Region: dst}}})
	if err != nil {
		return res, fmt.Errorf("scatterprof bench: connect: %w", err)
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	table, ok := verbs.FindRegion(conn.Remote(), owner.DefaultExport)
	if !ok {
		return res, errors.New("scatterprof bench: the owner exports no table")
	}
	eng, err := engine.New(engine.Config{})
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, eng.Close()) }()
	if _, err := eng.Prepare(ctx, conn); err != nil {
		return res, fmt.Errorf("scatterprof bench: gather info: %w", err)
	}
	plan, err := w.Plan(rand.New(rand.NewPCG(c.Seed, 4)), table.Len)
	if err != nil {
		return res, err
	}
	do := func() (engine.Result, error) {
		return eng.Do(ctx, &engine.ScatterOp{Conn: conn, Dir: verbs.OpRead, Plan: plan, Remote: table, Local: dst})
	}
	for range c.Warmup {
		if _, err := do(); err != nil {
			return res, err
		}
	}

	var off, on []engine.Trace
	var attached report.Snapshot // summed deltas of the attached blocks
	var chosen = map[string]int{}
	// Both sides read the maps before and after their block, so they differ
	// only in the probes being attached.
	block := func(probed bool) error {
		if probed && !c.Control {
			if _, err := prof.AttachSelf(); err != nil {
				return err
			}
		}
		var before, after report.Snapshot
		if err := prof.Read(&before); err != nil {
			return err
		}
		for range c.Block {
			r, err := do()
			if err != nil {
				return err
			}
			chosen[r.Mode.String()]++
			if probed {
				on = append(on, r.Trace)
			} else {
				off = append(off, r.Trace)
			}
		}
		if err := prof.Read(&after); err != nil {
			return err
		}
		if !probed || c.Control {
			if after.Hits() != before.Hits() {
				return errors.New("scatterprof bench: probes fired while detached")
			}
			return nil
		}
		if err := prof.Detach(selfPID()); err != nil {
			return err
		}
		d := after.Sub(&before)
		addSnapshot(&attached, &d)
		return nil
	}
	fmt.Fprintf(notes, "scatterprof bench: %s, %d x 2 blocks of %d operations\n", c.Workload, c.Reps, c.Block)
	var paired []float64
	for r := range c.Reps {
		first := r%2 == 1 // alternate which side runs first
		nOff, nOn := len(off), len(on)
		for _, probed := range []bool{first, !first} {
			if err := block(probed); err != nil {
				return res, err
			}
		}
		paired = append(paired, float64(medianTotal(off[nOff:]))/float64(medianTotal(on[nOn:])))
		if r == 0 || r == c.Reps-1 {
			if err := verifyRows(plan, dst.Bytes(), o.Data()); err != nil {
				return res, err
			}
		}
	}

	res.Workload, res.Transport, res.Ops, res.Payload = c.Workload, tr.Name(), len(on), w.Payload()
	res.Control = c.Control
	res.Chosen = mostFrequent(chosen)
	p50off, p50on := medianTotal(off), medianTotal(on)
	res.P50Off, res.P50On = ms(p50off), ms(p50on)
	res.GoodputOff = float64(res.Payload) * 8 / p50off.Seconds() / 1e9
	res.GoodputOn = float64(res.Payload) * 8 / p50on.Seconds() / 1e9
	res.Goodput = res.GoodputOn / res.GoodputOff
	slices.Sort(paired)
	res.Paired = paired[len(paired)/2]
	if len(paired)%2 == 0 {
		res.Paired = (paired[len(paired)/2-1] + paired[len(paired)/2]) / 2
	}
	res.HitsPerOp = float64(attached.Hits()) / float64(len(on))
	res.Markers = res.HitsPerOp * float64(res.Calibration.Unprobed) / float64(p50off)
	res.ProbeShare = res.HitsPerOp * float64(res.Calibration.Hit) / float64(p50off)
	res.Unmatched = attached.Counters.Unmatched
	res.OpsRecorded = attached.Stages[stage.Op].Count
	if !c.Control {
		res.Shares = compareShares(&attached, on)
	}
	return res, nil
}

// traceStages pairs the markers with the Trace fields that time the same
// span (Control brackets the whole command call: Trace.Call).
var traceStages = []struct {
	st    stage.Stage
	field string
	get   func(*engine.Trace) time.Duration
}{
	{stage.Plan, "plan", func(t *engine.Trace) time.Duration { return t.Plan }},
	{stage.Control, "call", func(t *engine.Trace) time.Duration { return t.Call }},
	{stage.Decode, "decode", func(t *engine.Trace) time.Duration { return t.Decode }},
	{stage.Pack, "pack", func(t *engine.Trace) time.Duration { return t.Pack }},
	{stage.Scatter, "scatter", func(t *engine.Trace) time.Duration { return t.Scatter }},
	{stage.Complete, "complete", func(t *engine.Trace) time.Duration { return t.Complete }},
}

// compareShares puts each stage's summed time over the summed operation
// time, by the profiler and by the traces of the same operations.
func compareShares(s *report.Snapshot, traces []engine.Trace) []ShareCompare {
	var total time.Duration
	for i := range traces {
		total += traces[i].Total
	}
	opNs := float64(s.Stages[stage.Op].SumNs)
	var out []ShareCompare
	for _, ts := range traceStages {
		var sum time.Duration
		for i := range traces {
			sum += ts.get(&traces[i])
		}
		pn := float64(s.Stages[ts.st].SumNs)
		if sum == 0 && pn == 0 {
			continue
		}
		sc := ShareCompare{Stage: ts.st.String(), Trace: ts.field}
		if opNs > 0 {
			sc.Profiler = pn / opNs
		}
		if total > 0 {
			sc.Engine = float64(sum) / float64(total)
		}
		sc.Diff = sc.Profiler - sc.Engine
		out = append(out, sc)
	}
	return out
}

func addSnapshot(dst, d *report.Snapshot) {
	for i := range dst.Stages {
		a, b := &dst.Stages[i], &d.Stages[i]
		a.Count += b.Count
		a.SumNs += b.SumNs
		a.Bytes += b.Bytes
		a.Probes += b.Probes
		for j := range a.Hist {
			a.Hist[j] += b.Hist[j]
		}
	}
	c, e := &dst.Counters, d.Counters
	c.Unmatched += e.Unmatched
	c.Nexts += e.Nexts
	c.BadStage += e.BadStage
	c.StoreErrors += e.StoreErrors
}

func medianTotal(ts []engine.Trace) time.Duration {
	d := make([]time.Duration, len(ts))
	for i := range ts {
		d[i] = ts[i].Total
	}
	slices.Sort(d)
	return d[(len(d)-1)/2]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func mostFrequent(m map[string]int) string {
	best, n := "", -1
	for k, v := range m {
		if v > n || v == n && k < best {
			best, n = k, v
		}
	}
	return best
}

// verifyRows checks a fixed-row plan's destination against the owner's
// data: every row where the plan put it.
func verifyRows(p *planfmt.Plan, dst, src []byte) error {
	if p.Form != planfmt.FormRows || p.Rows.Layout != (planfmt.Layout{}) {
		return nil
	}
	r := p.Rows
	n := max(len(r.IDs32), len(r.IDs64))
	for i := range n {
		var id uint64
		if r.IDs32 != nil {
			id = uint64(r.IDs32[i])
		} else {
			id = uint64(r.IDs64[i])
		}
		s := r.SrcBase + id*r.RowSize
		d := r.DstBase + uint64(i)*r.RowSize
		if !bytes.Equal(dst[d:d+r.RowSize], src[s:s+r.RowSize]) {
			return fmt.Errorf("scatterprof bench: row %d (table row %d) differs from the owner's data", i, id)
		}
	}
	return nil
}

// printBench writes the bench's table and goals.
func printBench(w io.Writer, r *BenchResult) {
	fmt.Fprintf(w, "scatterprof bench: %s over %s (chosen %s), %d ops per side, %d B payload\n",
		r.Workload, r.Transport, r.Chosen, r.Ops, r.Payload)
	if r.Control {
		fmt.Fprintln(w, "A/A control: nothing was attached on either side; the ratios show the machine's noise, the probe figures are empty")
	}
	fmt.Fprintf(w, "probe calibration: hit %v, bias %v, unprobed marker call %v; %.0f probe hits per op\n",
		r.Calibration.Hit, r.Calibration.Bias, r.Calibration.Unprobed, r.HitsPerOp)
	fmt.Fprintf(w, "p50 detached %.3f ms, attached %.3f ms; goodput %.2f / %.2f Gbit/s\n",
		r.P50Off, r.P50On, r.GoodputOff, r.GoodputOn)
	if len(r.Shares) > 0 {
		fmt.Fprintf(w, "%-10s %-9s %9s %9s %8s\n", "stage", "trace", "profiler", "trace", "diff")
	}
	for _, s := range r.Shares {
		fmt.Fprintf(w, "%-10s %-9s %8.1f%% %8.1f%% %+7.1f%%\n", s.Stage, s.Trace, 100*s.Profiler, 100*s.Engine, 100*s.Diff)
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	worst := 0.0
	for _, s := range r.Shares {
		worst = max(worst, abs(s.Diff))
	}
	fmt.Fprintf(w, "goodput attached / detached: %.3f of the p50s over all blocks\n", r.Goodput)
	if r.Control {
		fmt.Fprintf(w, "A/A: goodput ratio (median over repetitions of adjacent blocks) %.3f; the goals need the profiler attached\n", r.Paired)
		return
	}
	fmt.Fprintf(w, "goal: goodput attached / detached >= %.2f (median over repetitions of adjacent blocks): %.3f %s\n", goalGoodput, r.Paired, met(r.Paired >= goalGoodput))
	fmt.Fprintf(w, "goal: detached markers / op time <= %.1f%%: %.4f%% %s\n", 100*goalMarkers, 100*r.Markers, met(r.Markers <= goalMarkers))
	fmt.Fprintf(w, "goal: stage shares within %.0f%% of op time of the trace: worst %.1f%% %s\n", 100*goalAgreement, 100*worst, met(worst <= goalAgreement && len(r.Shares) > 0))
	if r.Unmatched > 0 {
		fmt.Fprintf(w, "note: %d unmatched end probes\n", r.Unmatched)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

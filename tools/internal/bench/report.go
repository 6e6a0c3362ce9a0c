package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/scatterkit/scatterkit/tools/internal/units"
)

// loadAverage returns the 1-minute load average (NaN where unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// ceiling returns the named ceiling of a workload result, or NaN.
func (w *WorkloadResult) ceiling(name string) float64 {
	for i := range w.Ceilings {
		if w.Ceilings[i].Name() == name {
			return w.Ceilings[i].Value()
		}
	}
	return math.NaN()
}

// line returns the line of mode, or nil.
func (w *WorkloadResult) line(mode string) *Line {
	for i := range w.Lines {
		if w.Lines[i].Mode == mode {
			return &w.Lines[i]
		}
	}
	return nil
}

func f2(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v != 0 && math.Abs(v) < 0.01:
		return strconv.FormatFloat(v, 'f', 4, 64)
	case math.Abs(v) < 100:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// PrintTable writes the results in the RFC's shape: one row per workload
// and mode, then the ceilings measured for that workload.
func PrintTable(out io.Writer, c *Config, passes []PassResult) {
	for _, p := range passes {
		seed := strconv.FormatUint(c.Seed, 10)
		if c.SeedFromClock {
			seed += " (from the clock; rerun with -seed " + seed + ")"
		}
		sweep := ""
		if p.Axis != "" {
			sweep = fmt.Sprintf(", sweep %s=%d", p.Axis, p.AxisValue)
		}
		fmt.Fprintf(out, "\nscatterbench: transport %s, owner %s, seed %s%s\n", p.Transport, p.Owner, seed, sweep)
		fmt.Fprintf(out, "  %d reps (at least %d for latency-sized workloads; +%d warmup) per workload and mode, %d caller(s), GOMAXPROCS %d, load %s -> %s\n",
			c.Reps, LatencyMinReps, c.Warmup, c.Callers, runtime.GOMAXPROCS(0), f2(p.LoadBefore), f2(p.LoadAfter))
		fmt.Fprintf(out, "  goodput = payload / p50 of the full API time, window = payload / median bulk window, both in Gbit/s (1e9 bit/s);\n")
		fmt.Fprintf(out, "  plan..complete: median stage times in ms; staging peak/bound: most staging bytes one op held / its P x C\n\n")
		rows := [][]string{{"workload", "mode", "chosen", "frags", "payload", "p50 ms", "p95 ms", "goodput", "window",
			"plan", "control", "decode", "pack", "complete", "staging peak/bound", "fb", "err"}}
		for _, wr := range p.Workloads {
			for _, l := range wr.Lines {
				fig := func(v float64) string {
					if l.Reps == 0 {
						return "-" // nothing measured: the workload failed or did not run
					}
					return f2(v)
				}
				chosen := l.Chosen
				if chosen == "" {
					chosen = "-"
				}
				rows = append(rows, []string{l.Workload, l.Mode, chosen, strconv.FormatUint(l.Fragments, 10),
					units.FormatBytes(int64(l.PayloadBytes)), fig(l.P50Ms), fig(l.P95Ms), fig(l.GoodputGbps), fig(l.WindowGbps),
					fig(l.PlanMs), fig(l.ControlMs), fig(l.DecodeMs), fig(l.PackMs), fig(l.CompleteMs),
					units.FormatBytes(l.StagingPeakBytes) + " / " + units.FormatBytes(l.StagingBoundBytes),
					strconv.Itoa(l.Fallbacks), strconv.Itoa(l.Errors)})
			}
		}
		renderTable(out, rows, 3)
		fmt.Fprintf(out, "\n  ceilings measured in the same repetitions:\n")
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		for _, wr := range p.Workloads {
			var cs []string
			for _, cl := range wr.Ceilings {
				switch cl.Name() {
				case CeilingRTT:
					cs = append(cs, fmt.Sprintf("rtt p50 %s ms", f2(cl.Value())))
				case CeilingLocal:
					cs = append(cs, fmt.Sprintf("local lookup p50 %s ms", f2(cl.Value())))
				case CeilingOneOwner:
					cs = append(cs, fmt.Sprintf("one-owner lookup p50 %s ms", f2(cl.Value())))
				case CeilingDirect:
					cs = append(cs, fmt.Sprintf("direct-control (64 x 512 KiB) %s Gbit/s", f2(cl.Value())))
				default:
					cs = append(cs, fmt.Sprintf("%s %s Gbit/s", cl.Name(), f2(cl.Value())))
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t(%d verified reps)\n", wr.Workload.Name, strings.Join(cs, ", "), wr.Verified)
		}
		_ = tw.Flush()
		printCalibration(out, p)
		printFailures(out, p)
		if p.Leaked > 0 {
			fmt.Fprintf(out, "  LEAK: %d staging leases outstanding at shutdown\n", p.Leaked)
		}
		if p.Err != nil {
			fmt.Fprintf(out, "  owner: %v\n", p.Err)
		}
	}
}

// printCalibration lists a pass's calibrations that fell back, each once
// with the workloads whose figures stand on it.
func printCalibration(out io.Writer, p PassResult) {
	fbs := calibrationFallbacks([]PassResult{p})
	if len(fbs) == 0 {
		return
	}
	fmt.Fprintf(out, "\n  CALIBRATION FALLBACK: these packing calibrations could not finish; the cost model used costmodel's\n")
	fmt.Fprintf(out, "  conservative figures (packing priced high, leaning toward direct) for the workloads named:\n")
	for _, f := range fbs {
		fmt.Fprintf(out, "    %s\n", strings.TrimPrefix(f, p.Transport+" "))
	}
}

// printFailures lists a pass's workloads that failed or did not run, with
// the reason; their goals are n/a.
func printFailures(out io.Writer, p PassResult) {
	var rows [][]string
	for _, wr := range p.Workloads {
		if we, ok := errors.AsType[*WorkloadError](wr.Err); ok {
			rows = append(rows, []string{wr.Workload.Name, we.Status(), we.Reason()})
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "\n  FAILED workloads (their goals are n/a; the exit status is 1):\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "    %s\t%s\t%s\n", r[0], r[1], r[2])
	}
	_ = tw.Flush()
}

// renderTable writes rows as aligned columns, the first left columns
// aligned left and the others right, two spaces apart.
func renderTable(out io.Writer, rows [][]string, left int) {
	var width []int
	for _, r := range rows {
		for i, cell := range r {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len(cell))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, cell := range r {
			pad := strings.Repeat(" ", width[i]-len(cell))
			b.WriteString("  ")
			if i < left {
				b.WriteString(cell + pad)
			} else {
				b.WriteString(pad + cell)
			}
		}
		b.WriteString("\n")
	}
	_, _ = io.WriteString(out, b.String())
}

// Goal is one of the performance goals evaluated on one run.
type Goal struct {
	Transport string
	Text      string  // what is compared, e.g. "few-large: adaptive / forced direct"
	Value     float64 // the measured ratio (NaN for a yes/no goal)
	Target    string  // e.g. ">= 0.97"
	Verdict   string  // "ok", "MISSED" or "n/a" (with Note saying why)
	Note      string

	// What a picture draws of a ratio goal, from the very figures the
	// verdict compares: the threshold base + target x den on the axis
	// ("goodput" or "p50") of the workload's panel (see drawn).
	workload, axis, label string
	base, den, target     float64
}

// ratioOf is ratioGoal of num / den, remembering den and the target so a
// picture can draw the goal's threshold (see drawn).
func ratioOf(t, text string, num, den, target float64, atLeast bool) Goal {
	g := ratioGoal(t, text, ratio(num, den), target, atLeast)
	g.den, g.target = den, target
	return g
}

// drawn marks a ratioOf goal as a threshold line the pictures draw on axis
// ("goodput": Gbit/s; "p50": ms), at base + target x den, labelled label.
func (g Goal) drawn(axis, label string, base float64) Goal {
	g.axis, g.label, g.base = axis, label, base
	return g
}

// threshold is the line a picture draws for g (ok false: g draws none).
func (g Goal) threshold() (axis string, value float64, label string, ok bool) {
	if g.axis == "" {
		return "", 0, "", false
	}
	return g.axis, g.base + g.target*g.den, g.label, true
}

func ratioGoal(t, text string, v float64, target float64, atLeast bool) Goal {
	g := Goal{Transport: t, Text: text, Value: v}
	if atLeast {
		g.Target = ">= " + f2(target)
	} else {
		g.Target = "<= " + f2(target)
	}
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		g.Verdict, g.Note = "n/a", "not measured in this run"
	case atLeast && v >= target, !atLeast && v <= target:
		g.Verdict = "ok"
	default:
		g.Verdict = "MISSED"
	}
	return g
}

func boolGoal(t, text, got, want string) Goal {
	g := Goal{Transport: t, Text: text, Value: math.NaN(), Target: want, Note: got}
	switch {
	case got == "":
		g.Verdict, g.Note = "n/a", "not measured in this run"
	case got == want:
		g.Verdict = "ok"
	default:
		g.Verdict = "MISSED"
	}
	return g
}

// countGoal is a count that must be zero; measured false (nothing ran
// that could have counted) makes it n/a, never ok.
func countGoal(t, text string, n int, note string, measured bool) Goal {
	if note == "" {
		note = strconv.Itoa(n)
	}
	g := Goal{Transport: t, Text: text, Value: math.NaN(), Target: "= 0", Note: note, Verdict: "ok"}
	switch {
	case n != 0:
		g.Verdict = "MISSED"
	case !measured:
		g.Verdict, g.Note = "n/a", "nothing ran in this pass"
	}
	return g
}

// failedGoal makes g, whose inputs come from a workload that failed or
// did not run, n/a with the reason.
func failedGoal(g Goal, we *WorkloadError) Goal {
	g.Value, g.Verdict = math.NaN(), "n/a"
	g.Note = fmt.Sprintf("%s %s: %s", we.Workload, we.Status(), we.Reason())
	return g
}

func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}

func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// Goals evaluates the goals on the results: ratios between figures
// of the same run only.
func Goals(passes []PassResult) []Goal {
	var out []Goal
	for i := range passes {
		g := newGoalSet(&passes[i], out)
		g.transferGoals()
		g.engramGoals()
		g.shardedGoals()
		g.reshardGoals()
		g.structObjGoals()
		g.latencyGoals()
		g.countGoals()
		out = g.out
	}
	return out
}

// goalSet is the goals of one pass being evaluated: the pass, its
// workloads by name, and the goals so far (appended to out).
type goalSet struct {
	p      *PassResult
	t      string // the pass's transport
	byName map[string]*WorkloadResult
	out    []Goal
}

func newGoalSet(p *PassResult, out []Goal) *goalSet {
	g := &goalSet{p: p, t: p.Transport, byName: map[string]*WorkloadResult{}, out: out}
	for i := range p.Workloads {
		g.byName[p.Workloads[i].Workload.Name] = &p.Workloads[i]
	}
	return g
}

// add appends goals of workload w: n/a with the reason when w failed or
// did not run (its figures are no goal's inputs).
func (g *goalSet) add(w string, gs ...Goal) {
	var we *WorkloadError
	if wr := g.byName[w]; wr != nil {
		we, _ = errors.AsType[*WorkloadError](wr.Err)
	}
	for _, goal := range gs {
		if we != nil {
			goal = failedGoal(goal, we)
		}
		goal.workload = w
		g.out = append(g.out, goal)
	}
}

// get returns the line of mode in workload w, nil without one.
func (g *goalSet) get(w, mode string) *Line {
	if r := g.byName[w]; r != nil {
		return r.line(mode)
	}
	return nil
}

// lineValue is f of l, NaN when l is missing or measured nothing.
func lineValue(l *Line, f func(*Line) float64) float64 {
	if l == nil || l.Reps == 0 {
		return math.NaN()
	}
	return f(l)
}

func lineGoodput(l *Line) float64 { return l.GoodputGbps }
func lineP50(l *Line) float64     { return l.P50Ms }

// lineChosen is what l chose, "" when l is missing or measured nothing.
func lineChosen(l *Line) string {
	if l == nil || l.Reps == 0 {
		return ""
	}
	return l.Chosen
}

// transferGoals are the goals of the transfer workloads: many-small,
// few-large, mixed and single-read.
func (g *goalSet) transferGoals() {
	t := g.t
	if ms := g.byName["many-small"]; ms != nil {
		a := g.get("many-small", "adaptive")
		if t == "shm" {
			g.add("many-small",
				boolGoal(t, "many-small: adaptive chooses", lineChosen(a), "direct"),
				ratioOf(t, "many-small: adaptive goodput / pack-only", lineValue(a, lineGoodput), ms.ceiling(CeilingPack), 0.9, true).
					drawn("goodput", "goal >= 0.9 pack-only", 0))
		} else {
			dc, po := ms.ceiling(CeilingDirect), ms.ceiling(CeilingPack)
			g.add("many-small",
				boolGoal(t, "many-small: adaptive chooses", lineChosen(a), "gather"),
				ratioGoal(t, "many-small: adaptive window / direct control", ratio(lineValue(a, func(l *Line) float64 { return l.WindowGbps }), dc), 0.9, true),
				ratioOf(t, "many-small: adaptive goodput / min(direct control, pack-only)", lineValue(a, lineGoodput), math.Min(dc, po), 0.75, true).
					drawn("goodput", "goal >= 0.75 min(direct-control, pack-only)", 0))
		}
	}
	if ms := g.byName["many-small"]; ms != nil && !math.IsNaN(ms.ceiling(CeilingHostDst)) {
		// -dst gpu: the READ into device memory against the same READ
		// into host memory, measured beside it.
		g.add("many-small", ratioOf(t, "many-small into device memory: adaptive goodput / the same READ into host memory",
			lineValue(g.get("many-small", "adaptive"), lineGoodput), ms.ceiling(CeilingHostDst), 0.9, true).
			drawn("goodput", "goal >= 0.9 host-dst", 0))
	}
	if g.byName["many-small-3owners"] != nil {
		g.add("many-small-3owners", ratioOf(t, "many-small-3owners: adaptive goodput / many-small adaptive (one owner)",
			lineValue(g.get("many-small-3owners", "adaptive"), lineGoodput), lineValue(g.get("many-small", "adaptive"), lineGoodput), 2, true).
			drawn("goodput", "goal >= 2 one owner", 0))
	}
	if g.byName["few-large"] != nil {
		g.add("few-large", ratioOf(t, "few-large: adaptive / forced direct",
			lineValue(g.get("few-large", "adaptive"), lineGoodput), lineValue(g.get("few-large", "direct"), lineGoodput), 0.97, true).
			drawn("goodput", "goal >= 0.97 direct", 0))
	}
	if g.byName["mixed"] != nil {
		best := math.Max(lineValue(g.get("mixed", "direct"), lineGoodput), lineValue(g.get("mixed", "gather"), lineGoodput))
		g.add("mixed", ratioOf(t, "mixed: adaptive / better of forced direct and gather",
			lineValue(g.get("mixed", "adaptive"), lineGoodput), best, 0.95, true).
			drawn("goodput", "goal >= 0.95 max(direct, gather)", 0))
	}
	if sr := g.byName["single-read"]; sr != nil {
		g.add("single-read", ratioOf(t, "single-read: adaptive p50 / rtt p50",
			lineValue(g.get("single-read", "adaptive"), lineP50), sr.ceiling(CeilingRTT), 1.5, false).
			drawn("p50", "goal p50 <= 1.5 rtt", 0))
	}
}

// engramGoals are the goals of the Engram workloads: the local lookup
// against pack-only, the remote ones against the local p50 and the rtt.
func (g *goalSet) engramGoals() {
	if ec := g.byName["engram-cpu"]; ec != nil {
		g.add("engram-cpu", ratioOf("local", "engram-cpu: lookup goodput / pack-only (same workers)",
			lineValue(g.get("engram-cpu", "cpu"), lineGoodput), ec.ceiling(CeilingPack), 0.9, true).
			drawn("goodput", "goal >= 0.9 pack-only", 0))
	}
	for _, name := range Groups["engram-remote"] {
		er := g.byName[name]
		if er == nil {
			continue
		}
		// p50(remote) - p50(local) <= 2 rtt + 0.2 p50(local), as a
		// ratio of the two sides (<= 1).
		a := lineValue(g.get(name, "adaptive"), lineP50)
		rtt, local := er.ceiling(CeilingRTT), er.ceiling(CeilingLocal)
		g.add(name, ratioOf(g.t, name+": (p50 - local p50) / (2 rtt + 0.2 local p50)",
			a-local, 2*rtt+0.2*local, 1, false).
			drawn("p50", "goal p50 <= 1.2 local + 2 rtt", local))
	}
}

// shardedGoals: a lookup from a table over several owners against the
// same lookup from one owner of the whole table.
func (g *goalSet) shardedGoals() {
	const name = "engram-remote-sharded"
	if er := g.byName[name]; er != nil {
		g.add(name, ratioOf(g.t, name+": adaptive p50 / one-owner p50", lineValue(g.get(name, "adaptive"), lineP50),
			er.ceiling(CeilingOneOwner), 1.3, false).drawn("p50", "goal p50 <= 1.3 one owner", 0))
	}
}

// reshardGoals: adaptive against the better forced mode, and its
// staging peak within the budget.
func (g *goalSet) reshardGoals() {
	for _, name := range Groups["reshard"] {
		if g.byName[name] == nil {
			continue
		}
		a := g.get(name, "adaptive")
		best := math.Max(lineValue(g.get(name, "direct"), lineGoodput), lineValue(g.get(name, "gather"), lineGoodput))
		g.add(name,
			ratioOf(g.t, name+": adaptive / better of forced direct and gather", lineValue(a, lineGoodput), best, 0.95, true).
				drawn("goodput", "goal >= 0.95 max(direct, gather)", 0),
			ratioGoal(g.t, name+": adaptive staging peak / staging budget (never the tensor)",
				ratio(lineValue(a, func(l *Line) float64 { return float64(l.StagingPeakBytes) }), lineValue(a, func(l *Line) float64 { return float64(l.StagingBoundBytes) })), 1, false))
	}
}

// structObjGoals: the fast paths against the fallback client, and a
// multi-buffer PUT against a single buffer.
func (g *goalSet) structObjGoals() {
	t := g.t
	if g.byName["structobj-put"] != nil {
		gp := func(m string) float64 { return lineValue(g.get("structobj-put", m), lineGoodput) }
		g.add("structobj-put",
			ratioOf(t, "structobj-put: multi-buffer (64) / single-buffer PUT", gp("multi"), gp("single"), 0.9, true).
				drawn("goodput", "goal multi >= 0.9 single", 0),
			ratioOf(t, "structobj-put: fast path / fallback", gp("multi"), gp("fallback"), 1.0, true).
				drawn("goodput", "goal multi >= fallback", 0))
	}
	if g.byName["structobj-get"] != nil {
		gp := func(m string) float64 { return lineValue(g.get("structobj-get", m), lineGoodput) }
		g.add("structobj-get",
			ratioOf(t, "structobj-get: fast path / fallback (whole)", gp("whole"), gp("fallback"), 1.0, true).
				drawn("goodput", "goal whole >= fallback", 0),
			ratioOf(t, "structobj-get: fast path / fallback (selective)", gp("selective"), gp("selective-fallback"), 1.0, true).
				drawn("goodput", "goal selective >= selective-fallback", 0))
	}
}

// latencyGoals: for every workload with an adaptive line (not Engram),
// its tail, plan and decode times against its p50.
func (g *goalSet) latencyGoals() {
	for i := range g.p.Workloads {
		wr := &g.p.Workloads[i]
		a := wr.line("adaptive")
		if a == nil || wr.Workload.Engram != "" {
			continue
		}
		n := wr.Workload.Name
		g.add(n,
			ratioGoal(g.t, n+": adaptive p95 / p50", ratio(a.P95Ms, a.P50Ms), 1.25, false),
			ratioGoal(g.t, n+": adaptive plan / p50", ratio(a.PlanMs, a.P50Ms), 0.05, false),
			ratioGoal(g.t, n+": adaptive decode / p50", ratio(a.DecodeMs, a.P50Ms), 0.05, false))
	}
}

// countGoals: the pass's counts that must be zero (over-bound staging,
// leaked leases, failures), over every workload.
func (g *goalSet) countGoals() {
	p, t := g.p, g.t
	over, leaked, errs, failed := 0, p.Leaked, 0, 0
	measured := p.Leaked > 0
	for _, wr := range p.Workloads {
		for i, l := range wr.Lines {
			over += wr.OverBound[i]
			leaked += l.LeakedLeases
			errs += l.Errors
			measured = measured || l.Reps > 0 || l.Errors > 0
		}
		if wr.Err != nil {
			failed++
		}
	}
	g.out = append(g.out,
		countGoal(t, "operations whose staging peak exceeded their P x C", over, "", measured),
		countGoal(t, "leaked leases (after each repetition and at shutdown)", leaked, "", measured),
		// Always measured: what failed, or did not run, is counted
		// here whatever else ran.
		countGoal(t, "failed workloads and operations", failed+errs,
			plural(failed, "workload")+", "+plural(errs, "operation"), true))
}

// PrintGoals writes the goals block: per goal the transport, what is
// compared, the measured value (or what was observed), the target, the
// verdict and, for n/a, why.
func PrintGoals(out io.Writer, goals []Goal) {
	if len(goals) == 0 {
		return
	}
	fmt.Fprintf(out, "\ngoals (ratios measured in this run; the machine is shared and noisy):\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, g := range goals {
		v, note := f2(g.Value), ""
		switch {
		case g.Verdict == "n/a":
			v, note = "-", g.Note
		case math.IsNaN(g.Value):
			v = g.Note
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", g.Transport, g.Text, v, g.Target, g.Verdict, note)
	}
	_ = tw.Flush()
}

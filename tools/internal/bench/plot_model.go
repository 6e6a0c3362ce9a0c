package bench

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"
)

// The pictures are built in two steps: Figures turns pass results into a
// figure model (figures of panels, each panel one workload's bars, stacks
// or lines with its own ceilings and goals as reference lines), and
// plot_render.go draws a model with gonum/plot. Tests check the model,
// where a misplaced ceiling or a repeated colour is a plain value.

// FigureKind says what a figure shows.
type FigureKind string

// Figure kinds.
const (
	KindGoodput FigureKind = "goodput" // Gbit/s bars per mode, a panel per workload
	KindLatency FigureKind = "latency" // p50 bars and p95 whiskers in ms, a panel per latency-sized workload
	KindStages  FigureKind = "stages"  // stacked median stage times per mode, a panel per workload
	KindMatrix  FigureKind = "matrix"  // goodput over fragment count, a panel per fragment size and direction
	KindSweep   FigureKind = "sweep"   // goodput over a -sweep axis's values, a panel per workload
)

// MaxFigureWidthPx bounds every picture's width.
const MaxFigureWidthPx = 2000

// Figure is one picture: panels in a grid of Columns, a title and a
// colour key. Sizes are in pixels (the PNG is rendered at 96 dpi).
type Figure struct {
	Name      string // file name without ".png", e.g. "goodput-tcp"
	Title     string
	Subtitle  string
	Kind      FigureKind
	Transport string
	Columns   int
	PanelW    int
	PanelH    int
	Panels    []Panel
	// Keys is the colour key drawn under the title: every mode (or
	// stage) of the figure once, with its colour, then the reference
	// line styles.
	Keys []Key
}

// headerPx is the height of a figure's title and key; minFigureWidthPx
// leaves the title and the key of a one-panel figure room.
const (
	headerPx         = 84
	minFigureWidthPx = 900
)

// widen makes a figure of few panels at least minFigureWidthPx wide.
func (f *Figure) widen() {
	f.PanelW = max(f.PanelW, minFigureWidthPx/max(1, f.Columns))
}

// WidthPx is the figure's width in pixels.
func (f *Figure) WidthPx() int { return max(1, f.Columns) * f.PanelW }

// Rows is the number of panel rows.
func (f *Figure) Rows() int {
	c := max(1, f.Columns)
	return (len(f.Panels) + c - 1) / c
}

// HeightPx is the figure's height in pixels.
func (f *Figure) HeightPx() int { return headerPx + max(1, f.Rows())*f.PanelH }

// Key is one entry of a figure's colour key.
type Key struct {
	Name  string
	Color color.RGBA
	Ref   RefKind // "" for a mode or stage; else the reference line's kind
}

// Panel is one workload's (or, for the matrix, one fragment size and
// direction's) part of a figure.
type Panel struct {
	// Workload is the workload whose figures the panel shows (goodput,
	// latency, stages); for a matrix panel, the workloads are Group.
	Workload string
	Group    []string
	Title    string
	// Note is a line under the title: the panel's goal verdicts, or why
	// nothing was measured.
	Note   string
	XLabel string
	YLabel string
	Bars   []Bar
	Stacks []Stack
	Series []Series
	Refs   []Ref
	// XTicks label a matrix panel's fragment counts.
	XTicks []float64
}

// Bar is one mode's bar: Value (goodput, or p50), and for latency High
// (p95; NaN when not drawn).
type Bar struct {
	Mode  string
	Value float64
	High  float64
	Color color.RGBA
	Label string // drawn above the bar
}

// Stack is one mode's stacked stage times, with the p50 of the full API
// time beside it: where the stages sum past P50 they overlapped.
type Stack struct {
	Mode     string
	Segments []Segment
	P50      float64
}

// Sum is the stack's total.
func (s *Stack) Sum() float64 {
	t := 0.0
	for _, g := range s.Segments {
		t += g.Ms
	}
	return t
}

// Segment is one stage's median time in a stack.
type Segment struct {
	Stage string
	Ms    float64
	Color color.RGBA
}

// Series is one line of a matrix panel: a mode's goodput, or a ceiling
// (Ceiling set) measured for each point's workload.
type Series struct {
	Mode    string
	Ceiling string
	Color   color.RGBA
	Points  []Point
}

// Point is one workload's value in a series.
type Point struct {
	X, Y     float64
	Workload string
}

// RefKind is what a reference line stands for.
type RefKind string

// Reference line kinds.
const (
	RefCeiling RefKind = "ceiling"
	RefGoal    RefKind = "goal"
)

// Ref is a horizontal reference line in a panel: a ceiling of the
// panel's workload (Name is the ceiling's name) or a goal threshold
// (Goal is the text of the goal in Goals, Verdict its verdict).
type Ref struct {
	Kind     RefKind
	Name     string
	Workload string
	Value    float64
	Goal     string
	Verdict  string
	Color    color.RGBA
	Label    string
}

func rgb(s string) color.RGBA {
	var r, g, b uint8
	_, _ = fmt.Sscanf(s, "#%02x%02x%02x", &r, &g, &b)
	return color.RGBA{r, g, b, 255}
}

// modePalette holds distinct colours; knownModes take fixed entries so a
// mode has the same colour in every figure, and other modes the first
// entry unused in their figure.
var modePalette = []color.RGBA{
	rgb("#1f77b4"), rgb("#ff7f0e"), rgb("#2ca02c"), rgb("#9467bd"), rgb("#8c564b"),
	rgb("#e377c2"), rgb("#17becf"), rgb("#bcbd22"), rgb("#d62728"), rgb("#393b79"),
	rgb("#e6ab02"), rgb("#637939"), rgb("#7b4173"), rgb("#a6761d"), rgb("#66c2a5"),
	rgb("#fc8d62"), rgb("#8da0cb"), rgb("#a6d854"), rgb("#e78ac3"), rgb("#b15928"),
}

var knownModes = []string{"direct", "gather", "adaptive", "hybrid", "cpu",
	"multi", "single", "concat", "buffers", "fallback",
	"whole", "whole-buffer", "selective", "selective-fallback"}

// Reference line colours: outside modePalette.
var (
	refColor = map[string]color.RGBA{
		CeilingDirect: rgb("#222222"),
		CeilingPack:   rgb("#808080"),
		CeilingRTT:    rgb("#222222"),
		CeilingLocal:  rgb("#808080"),
	}
	goalColor = rgb("#c51b7d")
)

// stageOrder and stageColors: the stage figure's series.
var (
	stageOrder  = []string{"plan", "control", "decode", "pack", "window", "complete"}
	stageColors = []color.RGBA{rgb("#e69f00"), rgb("#56b4e9"), rgb("#009e73"), rgb("#f0e442"), rgb("#0072b2"), rgb("#d55e00")}
)

// colors assigns modes of one figure their colours.
type colors struct {
	of   map[string]color.RGBA
	used map[color.RGBA]bool
	keys []Key
}

func newColors() *colors {
	return &colors{of: map[string]color.RGBA{}, used: map[color.RGBA]bool{}}
}

func (c *colors) mode(m string) color.RGBA {
	if col, ok := c.of[m]; ok {
		return col
	}
	col := color.RGBA{}
	if i := slices.Index(knownModes, m); i >= 0 && !c.used[modePalette[i]] {
		col = modePalette[i]
	} else {
		found := false
		for _, p := range modePalette[len(knownModes):] {
			if !c.used[p] {
				col, found = p, true
				break
			}
		}
		if !found { // more modes than colours: a generated hue
			h := float64(len(c.of)) * 0.618034
			col = hsv(h-math.Floor(h), 0.7, 0.8)
		}
	}
	c.of[m], c.used[col] = col, true
	c.keys = append(c.keys, Key{Name: m, Color: col})
	return col
}

func hsv(h, s, v float64) color.RGBA {
	i := math.Floor(h * 6)
	f := h*6 - i
	p, q, t := v*(1-s), v*(1-f*s), v*(1-(1-f)*s)
	var r, g, b float64
	switch int(i) % 6 {
	case 0:
		r, g, b = v, t, p
	case 1:
		r, g, b = q, v, p
	case 2:
		r, g, b = p, v, t
	case 3:
		r, g, b = p, q, v
	case 4:
		r, g, b = t, p, v
	default:
		r, g, b = v, p, q
	}
	return color.RGBA{uint8(r * 255), uint8(g * 255), uint8(b * 255), 255}
}

// isLatency reports whether a workload is latency-sized: its figures are
// times, drawn on a ms axis.
func isLatency(w *Workload) bool {
	if w.MinReps >= LatencyMinReps {
		return true
	}
	if nw, ok := Lookup(w.Name); ok {
		return nw.MinReps >= LatencyMinReps
	}
	return false
}

func isMatrix(w *Workload) bool { return strings.HasPrefix(w.Name, "matrix/") }

// measured reports whether a line has figures.
func measured(l *Line) bool { return l != nil && l.Reps > 0 }

// goalLine is a goal drawn as a threshold in its workload's panel: Text
// is the goal's text in Goals (its verdict comes from there), Value the
// threshold in the panel's unit (NaN when its inputs were not measured).
type goalLine struct {
	Text, Label, Verdict string
	Value                float64
}

// goalLines returns the goals of wr that the pictures draw as thresholds
// (on the goodput axis for throughput workloads, on the ms axis for
// latency workloads), in the order Goals gives them: the line is the one
// the verdict compares against (Goal.threshold), never a second copy of
// the goal's formula.
func goalLines(wr *WorkloadResult, goals []Goal) []goalLine {
	var out []goalLine
	for _, g := range goals {
		if g.workload != wr.Workload.Name {
			continue
		}
		if _, v, label, ok := g.threshold(); ok {
			out = append(out, goalLine{Text: g.Text, Value: v, Label: label, Verdict: g.Verdict})
		}
	}
	return out
}

// panelNote summarizes the verdicts of the goals of workload name.
func panelNote(name string, wr *WorkloadResult, goals []Goal) string {
	if we, ok := errors.AsType[*WorkloadError](wr.Err); ok {
		return we.Status() + ": " + truncate(we.Reason(), 60)
	}
	var ok, missed, na int
	for _, g := range goals {
		if !strings.HasPrefix(g.Text, name+":") {
			continue
		}
		switch g.Verdict {
		case "ok":
			ok++
		case "MISSED":
			missed++
		default:
			na++
		}
	}
	if ok+missed+na == 0 {
		return ""
	}
	s := fmt.Sprintf("goals: %d ok", ok)
	if missed > 0 {
		s += fmt.Sprintf(", %d MISSED", missed)
	}
	if na > 0 {
		s += fmt.Sprintf(", %d n/a", na)
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// Figures builds the figure model of a run: per pass goodput-<t>
// (throughput workloads), latency-<t> (latency-sized workloads), stages-<t>
// and, when the pass ran matrix workloads, matrix-<t>-<src>-<dst>.
func Figures(passes []PassResult) []Figure {
	var out []Figure
	for _, p := range passes {
		first := len(out)
		goals := passGoals(p)
		var thr, lat, mat []*WorkloadResult
		for i := range p.Workloads {
			wr := &p.Workloads[i]
			switch {
			case isMatrix(&wr.Workload):
				mat = append(mat, wr)
			case isLatency(&wr.Workload):
				lat = append(lat, wr)
			default:
				thr = append(thr, wr)
			}
		}
		if len(thr) > 0 {
			out = append(out, goodputFigure(p, thr, goals))
		}
		if len(lat) > 0 {
			out = append(out, latencyFigure(p, lat, goals))
		}
		if len(thr)+len(lat) > 0 {
			out = append(out, stagesFigure(p, append(append([]*WorkloadResult(nil), thr...), lat...)))
		}
		out = append(out, matrixFigures(p, mat)...)
		if p.Axis != "" { // a sweep's passes: one set of figures per value, named by it
			for i := first; i < len(out); i++ {
				out[i].Name += fmt.Sprintf("-%s-%d", p.Axis, p.AxisValue)
				out[i].Title += fmt.Sprintf(" (%s %d)", p.Axis, p.AxisValue)
			}
		}
	}
	out = append(out, sweepFigures(passes)...)
	return out
}

// refs returns a panel's reference lines: the named ceilings of wr (in
// the unit unit) and its goal lines.
func refs(wr *WorkloadResult, ceilings []string, goals []Goal) []Ref {
	var out []Ref
	for _, name := range ceilings {
		v := wr.ceiling(name)
		if math.IsNaN(v) {
			continue
		}
		out = append(out, Ref{Kind: RefCeiling, Name: name, Workload: wr.Workload.Name, Value: v,
			Color: refColor[name], Label: fmt.Sprintf("%s %s", name, f2(v))})
	}
	for _, gl := range goalLines(wr, goals) {
		if math.IsNaN(gl.Value) || math.IsInf(gl.Value, 0) {
			continue
		}
		verdict := gl.Verdict
		out = append(out, Ref{Kind: RefGoal, Name: "goal", Workload: wr.Workload.Name, Value: gl.Value, Goal: gl.Text,
			Verdict: verdict, Color: goalColor, Label: fmt.Sprintf("%s = %s: %s", gl.Label, f2(gl.Value), verdict)})
	}
	return out
}

func refKeys(f *Figure) []Key {
	seen := map[string]bool{}
	var out []Key
	for _, p := range f.Panels {
		for _, r := range p.Refs {
			k := string(r.Kind) + " " + r.Name
			if r.Kind == RefGoal {
				k = "goal"
			}
			if !seen[k] {
				seen[k] = true
				out = append(out, Key{Name: k, Color: r.Color, Ref: r.Kind})
			}
		}
	}
	return out
}

func goodputFigure(p PassResult, ws []*WorkloadResult, goals []Goal) Figure {
	f := Figure{Name: "goodput-" + p.Transport, Kind: KindGoodput, Transport: p.Transport,
		Title:    fmt.Sprintf("scatterbench goodput over %s (owner %s)", p.Transport, p.Owner),
		Subtitle: "Gbit/s = payload / p50 of the full API time; lines: the workload's ceilings measured in the same run, and its goal"}
	return barFigure(f, ws, goals, "Gbit/s", []string{CeilingDirect, CeilingPack}, func(l *Line, b *Bar) {
		b.Value, b.Label = l.GoodputGbps, f2(l.GoodputGbps)
	})
}

func latencyFigure(p PassResult, ws []*WorkloadResult, goals []Goal) Figure {
	f := Figure{Name: "latency-" + p.Transport, Kind: KindLatency, Transport: p.Transport,
		Title:    fmt.Sprintf("scatterbench latency-sized workloads over %s (owner %s)", p.Transport, p.Owner),
		Subtitle: "bars: p50 of the full API time, whiskers: p95 (ms); lines: rtt and local-lookup ceilings, and the goal"}
	return barFigure(f, ws, goals, "ms", []string{CeilingRTT, CeilingLocal}, func(l *Line, b *Bar) {
		b.Value, b.High, b.Label = l.P50Ms, l.P95Ms, f2(l.P50Ms)
	})
}

// barFigure fills f with one panel of bars per workload: a bar per mode
// (set by bar from a measured line; "-" otherwise) in the mode's colour,
// the workload's ceilings and its drawn goals as lines.
func barFigure(f Figure, ws []*WorkloadResult, goals []Goal, yLabel string, ceilings []string, bar func(*Line, *Bar)) Figure {
	f.Columns, f.PanelW, f.PanelH = min(4, len(ws)), 440, 330
	f.widen()
	cs := newColors()
	for _, wr := range ws {
		pn := Panel{Workload: wr.Workload.Name, Title: wr.Workload.Name, YLabel: yLabel, Note: panelNote(wr.Workload.Name, wr, goals)}
		for i := range wr.Lines {
			l := &wr.Lines[i]
			b := Bar{Mode: l.Mode, Value: math.NaN(), High: math.NaN(), Color: cs.mode(l.Mode), Label: "-"}
			if measured(l) {
				bar(l, &b)
			}
			pn.Bars = append(pn.Bars, b)
		}
		pn.Refs = refs(wr, ceilings, goals)
		f.Panels = append(f.Panels, pn)
	}
	f.Keys = append(cs.keys, refKeys(&f)...)
	return f
}

// windowMs is the median bulk window of a line in ms (NaN when unknown).
func windowMs(l *Line) float64 {
	if l.WindowGbps <= 0 || math.IsNaN(l.WindowGbps) {
		return math.NaN()
	}
	return float64(l.PayloadBytes) * 8 / (l.WindowGbps * 1e9) * 1e3
}

func stagesFigure(p PassResult, ws []*WorkloadResult) Figure {
	f := Figure{Name: "stages-" + p.Transport, Kind: KindStages, Transport: p.Transport,
		Title:    fmt.Sprintf("scatterbench stage times over %s (medians, ms)", p.Transport),
		Subtitle: "stacked: plan, control, decode, pack, window, complete; black tick: p50 of the full API time (stages past it overlapped)",
		Columns:  min(3, len(ws)), PanelW: 600, PanelH: 250}
	f.widen()
	for i, s := range stageOrder {
		f.Keys = append(f.Keys, Key{Name: s, Color: stageColors[i]})
	}
	for _, wr := range ws {
		pn := Panel{Workload: wr.Workload.Name, Title: wr.Workload.Name, XLabel: "ms"}
		for i := range wr.Lines {
			l := &wr.Lines[i]
			if !measured(l) {
				continue
			}
			st := Stack{Mode: l.Mode, P50: l.P50Ms}
			for j, v := range []float64{l.PlanMs, l.ControlMs, l.DecodeMs, l.PackMs, windowMs(l), l.CompleteMs} {
				if math.IsNaN(v) || v < 0 {
					v = 0
				}
				st.Segments = append(st.Segments, Segment{Stage: stageOrder[j], Ms: v, Color: stageColors[j]})
			}
			pn.Stacks = append(pn.Stacks, st)
		}
		if len(pn.Stacks) == 0 {
			pn.Note = "nothing measured"
		}
		f.Panels = append(f.Panels, pn)
	}
	f.Keys = append(f.Keys, Key{Name: "p50", Color: color.RGBA{0, 0, 0, 255}, Ref: RefCeiling})
	return f
}

// matrixFigures draws the matrix workloads of a pass: one figure per
// source order and destination layout, a row per fragment size, READ and
// WRITE side by side, fragment count on a log x axis, a line per mode and
// the pack-only and direct-control ceilings of each point's workload.
func matrixFigures(p PassResult, ws []*WorkloadResult) []Figure {
	type key struct {
		src Order
		dst Layout
	}
	var order []key
	groups := map[key][]*WorkloadResult{}
	for _, wr := range ws {
		k := key{wr.Workload.Src, wr.Workload.Dst}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], wr)
	}
	var out []Figure
	for _, k := range order {
		f := Figure{Name: fmt.Sprintf("matrix-%s-%s-%s", p.Transport, k.src, k.dst), Kind: KindMatrix, Transport: p.Transport,
			Title:    fmt.Sprintf("scatterbench matrix over %s: %s sources, %s destinations", p.Transport, k.src, k.dst),
			Subtitle: "goodput (Gbit/s) over the fragment count, one panel per fragment size and direction; grey: ceilings of each point's workload",
			Columns:  2, PanelW: 560, PanelH: 230}
		cs := newColors()
		var sizes []uint64
		for _, wr := range groups[k] {
			if !slices.Contains(sizes, wr.Workload.Small.Size) {
				sizes = append(sizes, wr.Workload.Small.Size)
			}
		}
		slices.Sort(sizes)
		for _, size := range sizes {
			for _, dir := range []string{"read", "write"} {
				pn := Panel{Title: fmt.Sprintf("%s fragments, %s", sizeName(size), strings.ToUpper(dir)),
					XLabel: "fragments", YLabel: "Gbit/s"}
				var lines lineSet
				for _, wr := range groups[k] {
					w := &wr.Workload
					if w.Small.Size != size || !strings.EqualFold(w.Dir.String(), dir) {
						continue
					}
					x := float64(w.Small.Count)
					pn.Group = append(pn.Group, w.Name)
					if !slices.Contains(pn.XTicks, x) {
						pn.XTicks = append(pn.XTicks, x)
					}
					lines.add(wr, x, cs)
				}
				if len(pn.Group) == 0 {
					pn.Note = "not in this run"
				}
				slices.Sort(pn.XTicks)
				pn.Series = lines.series()
				f.Panels = append(f.Panels, pn)
			}
		}
		f.Keys = append(cs.keys, ceilingKeys()...)
		out = append(out, f)
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// passGoals evaluates the goals of one pass; a result built by hand (or
// read back from JSON) may lack OverBound counts, which Goals indexes.
func passGoals(p PassResult) []Goal {
	ws := slices.Clone(p.Workloads)
	for i := range ws {
		if len(ws[i].OverBound) < len(ws[i].Lines) {
			ob := make([]int, len(ws[i].Lines))
			copy(ob, ws[i].OverBound)
			ws[i].OverBound = ob
		}
	}
	p.Workloads = ws
	return Goals([]PassResult{p})
}

// lineSet gathers the lines of a series panel (matrix, sweep): each
// mode's goodput and the pack-only and direct-control ceilings, one point
// per workload result at its x.
type lineSet struct {
	order []string
	by    map[string]*Series
}

// add puts wr's measured modes and ceilings at x.
func (ls *lineSet) add(wr *WorkloadResult, x float64, cs *colors) {
	put := func(name, ceiling string, col color.RGBA, y float64) {
		s := ls.by[name]
		if s == nil {
			if ls.by == nil {
				ls.by = map[string]*Series{}
			}
			s = &Series{Mode: name, Ceiling: ceiling, Color: col}
			if ceiling != "" {
				s.Mode = ""
			}
			ls.by[name] = s
			ls.order = append(ls.order, name)
		}
		s.Points = append(s.Points, Point{X: x, Y: y, Workload: wr.Workload.Name})
	}
	for i := range wr.Lines {
		l := &wr.Lines[i]
		col := cs.mode(l.Mode) // in the key even when not measured
		if measured(l) {
			put(l.Mode, "", col, l.GoodputGbps)
		}
	}
	for _, c := range []string{CeilingPack, CeilingDirect} {
		if v := wr.ceiling(c); !math.IsNaN(v) {
			put("ceiling "+c, c, refColor[c], v)
		}
	}
}

// series returns the lines in the order first seen, points by x.
func (ls *lineSet) series() []Series {
	var out []Series
	for _, name := range ls.order {
		s := ls.by[name]
		slices.SortFunc(s.Points, func(a, b Point) int { return cmpFloat(a.X, b.X) })
		out = append(out, *s)
	}
	return out
}

// ceilingKeys are a series figure's reference keys.
func ceilingKeys() []Key {
	return []Key{{Name: "ceiling " + CeilingPack, Color: refColor[CeilingPack], Ref: RefCeiling},
		{Name: "ceiling " + CeilingDirect, Color: refColor[CeilingDirect], Ref: RefCeiling}}
}

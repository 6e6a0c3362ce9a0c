package bench

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WritePlots writes the run's pictures into dir, one PNG per figure of
// Figures: goodput-<transport>.png (a panel per throughput workload: a
// bar per mode, its ceilings and goal as lines), latency-<transport>.png
// (latency-sized workloads: p50 bars, p95 whiskers, rtt and local-lookup
// ceilings, goal), stages-<transport>.png (stacked median stage times per
// workload and mode against the p50) and, for matrix runs,
// matrix-<transport>-<src>-<dst>.png.
func WritePlots(dir string, passes []PassResult) error {
	var errs []error
	for _, f := range Figures(passes) {
		b, err := RenderPNG(&f)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f.Name+".png"), b, 0o644)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Name, err))
		}
	}
	return errors.Join(errs...)
}

// pt converts pixels (at 96 dpi) to points.
func pt(px float64) vg.Length { return vg.Length(px * 0.75) }

// RenderPNG draws a figure as a PNG of f.WidthPx() x f.HeightPx() pixels.
func RenderPNG(f *Figure) ([]byte, error) {
	if len(f.Panels) == 0 || f.Columns < 1 {
		return nil, fmt.Errorf("figure %s: %w", f.Name, ErrNoFigure)
	}
	w, h := f.WidthPx(), f.HeightPx()
	c := vgimg.NewWith(vgimg.UseWH(pt(float64(w)), pt(float64(h))), vgimg.UseDPI(96), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(c)
	drawHeader(dc, f)

	body := draw.Crop(dc, 0, 0, 0, -pt(headerPx))
	rows, cols := f.Rows(), f.Columns
	plots := make([][]*plot.Plot, rows)
	for r := range plots {
		plots[r] = make([]*plot.Plot, cols)
	}
	for i := range f.Panels {
		pl, err := panelPlot(f, &f.Panels[i])
		if err != nil {
			return nil, fmt.Errorf("figure %s, panel %s: %w", f.Name, f.Panels[i].Title, err)
		}
		plots[i/cols][i%cols] = pl
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: pt(14), PadY: pt(10), PadTop: pt(4), PadBottom: pt(6), PadLeft: pt(8), PadRight: pt(12)}
	canvases := plot.Align(plots, tiles, body)
	for r := range plots {
		for i, pl := range plots[r] {
			if pl != nil {
				pl.Draw(canvases[r][i])
			}
		}
	}
	var b bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func textStyle(size float64, col color.Color) text.Style {
	s := plot.New().Title.TextStyle
	s.Font.Size = font.Length(pt(size))
	s.Color = col
	s.XAlign, s.YAlign = draw.XLeft, draw.YTop
	return s
}

// drawHeader writes the title, the subtitle and the colour key.
func drawHeader(dc draw.Canvas, f *Figure) {
	top := dc.Max.Y
	x0 := dc.Min.X + pt(12)
	dc.FillText(textStyle(17, color.Black), vg.Point{X: x0, Y: top - pt(8)}, f.Title)
	dc.FillText(textStyle(12, color.Gray{Y: 70}), vg.Point{X: x0, Y: top - pt(32)}, f.Subtitle)
	ks := textStyle(12, color.Black)
	ks.YAlign = draw.YCenter
	x, y := x0, top-pt(66)
	for _, k := range f.Keys {
		wText := ks.Width(k.Name)
		if x+pt(30)+wText > dc.Max.X-pt(8) { // wrap
			x, y = x0, y-pt(18)
		}
		switch k.Ref {
		case "":
			dc.SetColor(k.Color)
			dc.Fill(rectPath(x, y-pt(6), x+pt(14), y+pt(6)))
		default:
			dc.StrokeLine2(refStyle(k.Name, k.Ref, k.Color), x, y, x+pt(22), y)
		}
		dc.FillText(ks, vg.Point{X: x + pt(26), Y: y}, k.Name)
		x += pt(40) + wText
	}
}

func rectPath(x0, y0, x1, y1 vg.Length) vg.Path {
	var p vg.Path
	p.Move(vg.Point{X: x0, Y: y0})
	p.Line(vg.Point{X: x1, Y: y0})
	p.Line(vg.Point{X: x1, Y: y1})
	p.Line(vg.Point{X: x0, Y: y1})
	p.Close()
	return p
}

// refStyle is a reference line's stroke: ceilings dashed (the second
// ceiling dotted), goals solid and thick, the stage figure's p50 solid.
func refStyle(name string, kind RefKind, col color.RGBA) draw.LineStyle {
	ls := draw.LineStyle{Color: col, Width: pt(2)}
	switch {
	case kind == RefGoal:
		ls.Width = pt(2.5)
	case name == "p50":
		ls.Width = pt(3)
	case name == CeilingPack || name == CeilingLocal || name == "ceiling "+CeilingPack || name == "ceiling "+CeilingLocal:
		ls.Dashes = []vg.Length{pt(2), pt(3)}
	default:
		ls.Dashes = []vg.Length{pt(8), pt(4)}
	}
	return ls
}

func newPanelPlot(pn *Panel) *plot.Plot {
	pl := plot.New()
	pl.Title.Text = pn.Title
	if pn.Note != "" {
		pl.Title.Text += "\n" + pn.Note
	}
	pl.Title.TextStyle.Font.Size = font.Length(pt(13))
	pl.X.Label.Text, pl.Y.Label.Text = pn.XLabel, pn.YLabel
	for _, a := range []*plot.Axis{&pl.X, &pl.Y} {
		a.Label.TextStyle.Font.Size = font.Length(pt(11))
		a.Tick.Label.Font.Size = font.Length(pt(11))
	}
	return pl
}

func panelPlot(f *Figure, pn *Panel) (*plot.Plot, error) {
	switch f.Kind {
	case KindStages:
		return stackPlot(pn)
	case KindMatrix, KindSweep:
		return seriesPlot(pn)
	}
	return barPlot(f, pn)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func labels(xys plotter.XYs, texts []string, size float64, col color.Color, xa text.XAlignment, ya text.YAlignment) (*plotter.Labels, error) {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font.Size = font.Length(pt(size))
		l.TextStyle[i].Color = col
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = xa, ya
	}
	return l, nil
}

func hline(x0, x1, y float64, ls draw.LineStyle) (*plotter.Line, error) {
	l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}})
	if err != nil {
		return nil, err
	}
	l.LineStyle = ls
	return l, nil
}

// barPlot draws a goodput or latency panel: a bar per mode labelled with
// its mode (x ticks) and value, p95 whiskers, and the reference lines
// across the panel with their labels.
func barPlot(f *Figure, pn *Panel) (*plot.Plot, error) {
	pl := newPanelPlot(pn)
	n := len(pn.Bars)
	top := 0.0
	barW := pt(math.Min(46, 0.62*float64(f.PanelW-90)/float64(max(1, n))))
	var names []string
	var valXY plotter.XYs
	var valText []string
	for i, b := range pn.Bars {
		names = append(names, b.Mode)
		v := b.Value
		if finite(v) {
			bc, err := plotter.NewBarChart(plotter.Values{v}, barW)
			if err != nil {
				return nil, err
			}
			bc.XMin, bc.Color, bc.LineStyle.Width = float64(i), b.Color, 0
			pl.Add(bc)
			top = math.Max(top, v)
		} else {
			v = 0
		}
		y := v
		if finite(b.High) && b.High > v {
			w, err := plotter.NewLine(plotter.XYs{{X: float64(i), Y: v}, {X: float64(i), Y: b.High}})
			if err != nil {
				return nil, err
			}
			w.LineStyle = draw.LineStyle{Color: color.Black, Width: pt(1.5)}
			c, err := hline(float64(i)-0.15, float64(i)+0.15, b.High, draw.LineStyle{Color: color.Black, Width: pt(1.5)})
			if err != nil {
				return nil, err
			}
			pl.Add(w, c)
			top = math.Max(top, b.High)
			y = b.High
		}
		valXY = append(valXY, plotter.XY{X: float64(i), Y: y})
		valText = append(valText, b.Label)
	}
	for _, r := range pn.Refs {
		top = math.Max(top, r.Value)
	}
	if top <= 0 {
		top = 1
	}
	pl.Y.Min, pl.Y.Max = 0, top*1.22
	pl.X.Min, pl.X.Max = -0.6, float64(n)-0.4
	if err := addRefs(pl, pn.Refs, -0.6, float64(n)-0.4, top); err != nil {
		return nil, err
	}
	if len(valXY) > 0 {
		// values above the bars, lifted clear of them, over the
		// reference labels
		for i := range valXY {
			st := textStyle(11, color.Black)
			st.XAlign, st.YAlign = draw.XCenter, draw.YBottom
			pl.Add(boxLabel{X: valXY[i].X, Y: valXY[i].Y + top*0.01, Text: valText[i], Style: st})
		}
	}
	pl.NominalX(names...)
	if n > 3 {
		pl.X.Tick.Label.Rotation = math.Pi / 9
		pl.X.Tick.Label.XAlign, pl.X.Tick.Label.YAlign = draw.XRight, draw.YTop
	}
	return pl, nil
}

// addRefs draws reference lines from x0 to x1 with their labels: the
// ceilings' labels at the left end, the goals' at the right, each pushed
// clear of the one before when two lie close.
func addRefs(pl *plot.Plot, rs []Ref, x0, x1, top float64) error {
	var last []float64
	for _, r := range rs {
		l, err := hline(x0, x1, r.Value, refStyle(r.Name, r.Kind, r.Color))
		if err != nil {
			return err
		}
		pl.Add(l)
		y := r.Value
		for _, o := range last {
			if math.Abs(o-y) < top*0.07 {
				y = o + top*0.07
			}
		}
		last = append(last, y)
		xa, x := draw.XLeft, x0+0.03
		if r.Kind == RefGoal {
			xa, x = draw.XRight, x1-0.03
		}
		st := textStyle(10, r.Color)
		st.XAlign, st.YAlign = xa, draw.YBottom
		pl.Add(boxLabel{X: x, Y: y, Text: r.Label, Style: st})
	}
	return nil
}

// stackPlot draws a stage panel: a horizontal stacked bar per mode (its
// median stage times) with a black tick at its p50.
func stackPlot(pn *Panel) (*plot.Plot, error) {
	pl := newPanelPlot(pn)
	// The first mode on top: NominalY counts from the bottom.
	stacks := slices.Clone(pn.Stacks)
	slices.Reverse(stacks)
	n := len(stacks)
	if n == 0 {
		pl.HideY()
		pl.X.Min, pl.X.Max = 0, 1
		return pl, nil
	}
	var prev *plotter.BarChart
	right := 0.0
	for j := range stageOrder {
		vs := make(plotter.Values, n)
		for i := range stacks {
			if j < len(stacks[i].Segments) {
				vs[i] = stacks[i].Segments[j].Ms
			}
		}
		bc, err := plotter.NewBarChart(vs, pt(math.Min(26, 150/float64(n))))
		if err != nil {
			return nil, err
		}
		bc.Horizontal, bc.Color, bc.LineStyle.Width = true, stageColors[j], 0
		if prev != nil {
			bc.StackOn(prev)
		}
		pl.Add(bc)
		prev = bc
	}
	var xys plotter.XYs
	var texts []string
	for i := range stacks {
		s := &stacks[i]
		fi := float64(i)
		tick, err := plotter.NewLine(plotter.XYs{{X: s.P50, Y: fi - 0.42}, {X: s.P50, Y: fi + 0.42}})
		if err != nil {
			return nil, err
		}
		tick.LineStyle = draw.LineStyle{Color: color.Black, Width: pt(3)}
		pl.Add(tick)
		end := math.Max(s.Sum(), s.P50)
		right = math.Max(right, end)
		xys = append(xys, plotter.XY{X: end, Y: fi})
		over := s.Sum() - s.P50
		t := fmt.Sprintf("  p50 %s, stages %s", f2(s.P50), f2(s.Sum()))
		if over > 0.01*s.P50 {
			t += " (" + f2(over) + " overlapped)"
		}
		texts = append(texts, t)
	}
	if right <= 0 {
		right = 1
	}
	lb, err := labels(xys, texts, 10, color.Black, draw.XLeft, draw.YCenter)
	if err != nil {
		return nil, err
	}
	// Labels place their text after the point; keep it inside by making
	// room on the right.
	pl.Add(lb)
	pl.X.Min, pl.X.Max = 0, right*1.75
	var names []string
	for _, s := range stacks {
		names = append(names, s.Mode)
	}
	pl.NominalY(names...)
	pl.Y.Min, pl.Y.Max = -0.6, float64(n)-0.4
	return pl, nil
}

// countLabel writes a fragment count for an axis: 98304 as "96Ki".
func countLabel(n float64) string {
	switch v := int64(n); {
	case v >= 1<<10 && v%(1<<10) == 0:
		return strconv.FormatInt(v>>10, 10) + "Ki"
	default:
		return strconv.FormatInt(v, 10)
	}
}

// seriesPlot draws a matrix panel: goodput over the fragment count (log
// x), a line per mode, the ceilings grey, both axes logarithmic.
func seriesPlot(pn *Panel) (*plot.Plot, error) {
	pl := newPanelPlot(pn)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range pn.Series {
		var xys plotter.XYs
		for _, p := range s.Points {
			if finite(p.Y) && p.Y > 0 {
				xys = append(xys, plotter.XY{X: p.X, Y: p.Y})
				lo, hi = math.Min(lo, p.Y), math.Max(hi, p.Y)
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		if s.Ceiling != "" {
			l.LineStyle = refStyle(s.Ceiling, RefCeiling, s.Color)
			l.LineStyle.Width = pt(1.5)
			sc.Shape = draw.BoxGlyph{}
			sc.Radius = pt(2.5)
		} else {
			l.LineStyle = draw.LineStyle{Color: s.Color, Width: pt(2.2)}
			sc.Shape = draw.CircleGlyph{}
			sc.Radius = pt(3.5)
		}
		sc.Color = s.Color
		pl.Add(l, sc)
	}
	if len(pn.XTicks) > 0 {
		var ticks []plot.Tick
		for _, x := range pn.XTicks {
			ticks = append(ticks, plot.Tick{Value: x, Label: countLabel(x)})
		}
		pl.X.Tick.Marker = plot.ConstantTicks(ticks)
		// 96Ki and 128Ki lie close on a log axis: slanted labels clear
		pl.X.Tick.Label.Rotation = math.Pi / 7
		pl.X.Tick.Label.XAlign, pl.X.Tick.Label.YAlign = draw.XRight, draw.YTop
		pl.X.Min, pl.X.Max = pn.XTicks[0]/1.6, pn.XTicks[len(pn.XTicks)-1]*1.6
		pl.X.Scale = plot.LogScale{}
	} else {
		pl.X.Min, pl.X.Max = 1, 2
	}
	if finite(lo) && lo > 0 {
		pl.Y.Scale = plot.LogScale{}
		pl.Y.Tick.Marker = logTicks{}
		pl.Y.Min, pl.Y.Max = lo/1.5, hi*1.5
	} else {
		pl.Y.Min, pl.Y.Max = 0, 1
	}
	return pl, nil
}

// logTicks marks 1, 2 and 5 of every decade.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(lo)) - 1; e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo && v <= hi {
				out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
			}
		}
	}
	return out
}

// boxLabel is a text on a translucent white box, so a reference line's
// label stays readable over the bars it crosses.
type boxLabel struct {
	X, Y  float64
	Text  string
	Style text.Style
}

func (b boxLabel) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	p := vg.Point{X: trX(b.X), Y: trY(b.Y) + pt(4)}
	r := b.Style.Rectangle(b.Text)
	pad := pt(2)
	c.SetColor(color.NRGBA{R: 255, G: 255, B: 255, A: 215})
	c.Fill(rectPath(p.X+r.Min.X-pad, p.Y+r.Min.Y-pad/2, p.X+r.Max.X+pad, p.Y+r.Max.Y+pad/2))
	c.FillText(b.Style, p, b.Text)
}

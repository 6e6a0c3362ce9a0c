package bench

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// WritePlots writes two PNG files per pass into dir:
// goodput-<transport>.png, each workload's goodput per mode next to its
// direct-control and pack-only ceilings (Gbit/s), and
// stages-<transport>.png, each workload and mode's p50 beside its median
// stage times (ms).
func WritePlots(dir string, passes []PassResult) error {
	var errs []error
	for _, p := range passes {
		if len(p.Workloads) == 0 {
			continue
		}
		errs = append(errs,
			goodputPlot(filepath.Join(dir, "goodput-"+p.Transport+".png"), p),
			stagesPlot(filepath.Join(dir, "stages-"+p.Transport+".png"), p))
	}
	return errors.Join(errs...)
}

// bars adds one bar series per entry of series to pl: values[i][g] is
// series i's bar in group g, grouped around the nominal x positions.
func bars(pl *plot.Plot, series []string, values [][]float64) error {
	const width = 7
	n := len(series)
	top := 0.0
	for i, name := range series {
		vs := make(plotter.Values, len(values[i]))
		for g, v := range values[i] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				v = 0
			}
			vs[g] = v
			top = math.Max(top, v)
		}
		b, err := plotter.NewBarChart(vs, vg.Points(width))
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = vg.Points(width * (float64(i) - float64(n-1)/2))
		pl.Add(b)
		pl.Legend.Add(name, b)
	}
	pl.Legend.Top = true
	pl.Y.Min, pl.Y.Max = 0, math.Max(top*1.4, 1e-9) // room for the legend
	pl.X.Tick.Label.Rotation = math.Pi / 6
	pl.X.Tick.Label.XAlign = text.XRight
	pl.X.Tick.Label.YAlign = text.YCenter
	return nil
}

func goodputPlot(path string, p PassResult) error {
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("scatterbench goodput over %s, owner %s", p.Transport, p.Owner)
	pl.Y.Label.Text = "Gbit/s (payload / p50)"
	var names []string
	modes := map[string]bool{}
	var modeOrder []string
	for _, wr := range p.Workloads {
		names = append(names, wr.Workload.Name)
		for _, l := range wr.Lines {
			if !modes[l.Mode] {
				modes[l.Mode] = true
				modeOrder = append(modeOrder, l.Mode)
			}
		}
	}
	series := append(append([]string(nil), modeOrder...), "ceiling "+CeilingDirect, "ceiling "+CeilingPack)
	values := make([][]float64, len(series))
	for _, wr := range p.Workloads {
		for i, m := range modeOrder {
			v := math.NaN()
			if l := wr.line(m); l != nil {
				v = l.GoodputGbps
			}
			values[i] = append(values[i], v)
		}
		values[len(modeOrder)] = append(values[len(modeOrder)], wr.ceiling(CeilingDirect))
		values[len(modeOrder)+1] = append(values[len(modeOrder)+1], wr.ceiling(CeilingPack))
	}
	if err := bars(pl, series, values); err != nil {
		return err
	}
	pl.NominalX(names...)
	w := vg.Length(math.Max(6, 1.6*float64(len(names)))) * vg.Inch
	return pl.Save(w, 4.5*vg.Inch, path)
}

func stagesPlot(path string, p PassResult) error {
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("scatterbench stage times over %s (medians)", p.Transport)
	pl.Y.Label.Text = "ms"
	series := []string{"p50 (full API)", "plan", "control", "decode", "pack", "complete"}
	values := make([][]float64, len(series))
	var names []string
	for _, wr := range p.Workloads {
		for _, l := range wr.Lines {
			names = append(names, l.Workload+"/"+l.Mode)
			for i, v := range []float64{l.P50Ms, l.PlanMs, l.ControlMs, l.DecodeMs, l.PackMs, l.CompleteMs} {
				values[i] = append(values[i], v)
			}
		}
	}
	if err := bars(pl, series, values); err != nil {
		return err
	}
	pl.NominalX(names...)
	w := vg.Length(math.Max(6, 1.1*float64(len(names)))) * vg.Inch
	return pl.Save(w, 4.5*vg.Inch, path)
}

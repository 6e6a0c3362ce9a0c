package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fixtureLine is a measured line of workload w in mode m.
func fixtureLine(t *testing.T, transport string, w Workload, m string, gbps float64) Line {
	t.Helper()
	l := Line{Workload: w.Name, Transport: transport, Owner: "process", Seed: 7, Mode: m, Chosen: m,
		Direction: strings.ToLower(w.Dir.String()), Fragments: uint64(w.Fragments()), PayloadBytes: w.Payload(),
		Reps: 20, GoodputGbps: gbps, WindowGbps: gbps * 1.1, PlanMs: 0.2, ControlMs: 0.3, DecodeMs: 0.1, PackMs: 1.5,
		CompleteMs: 0.01, Status: StatusOK}
	if gbps > 0 {
		l.P50Ms = float64(w.Payload()) * 8 / (gbps * 1e9) * 1e3
		l.P95Ms = l.P50Ms * 1.2
	}
	return l
}

func ceil(transport, w, name string, v float64) CeilingLine {
	c := CeilingLine{Workload: "ceiling/" + name, For: w, Transport: transport, Owner: "process", Seed: 7, Reps: 20}
	if name == CeilingRTT || name == CeilingLocal {
		c.P50Ms = &v
	} else {
		c.GoodputGbps = &v
	}
	return c
}

func named(t *testing.T, name string) Workload {
	t.Helper()
	w, ok := Lookup(name)
	require.True(t, ok, name)
	return w
}

// fixturePasses is a run of every kind of panel, every ceiling value
// distinct so a ceiling drawn in the wrong panel shows: over tcp
// many-small, few-large, structobj-put and -get (13 modes in one
// figure), single-read, engram-remote-t1
// and a few matrix entries; over shm many-small.
func fixturePasses(t *testing.T) []PassResult {
	t.Helper()
	modes := []string{"direct", "gather", "adaptive"}
	wr := func(tr string, w Workload, ms []string, base float64, cs ...CeilingLine) WorkloadResult {
		r := WorkloadResult{Workload: w, Ceilings: cs, Verified: 2, Status: StatusOK}
		for i, m := range ms {
			r.Lines = append(r.Lines, fixtureLine(t, tr, w, m, base+float64(i)))
			r.OverBound = append(r.OverBound, 0)
		}
		return r
	}
	tcp := PassResult{Transport: "tcp", Owner: "process", Workloads: []WorkloadResult{
		wr("tcp", named(t, "many-small"), modes, 2, ceil("tcp", "many-small", CeilingDirect, 12.5),
			ceil("tcp", "many-small", CeilingPack, 16.25), ceil("tcp", "many-small", CeilingRTT, 0.17)),
		wr("tcp", named(t, "few-large"), modes, 11, ceil("tcp", "few-large", CeilingDirect, 13.75),
			ceil("tcp", "few-large", CeilingPack, 75.5), ceil("tcp", "few-large", CeilingRTT, 0.16)),
		wr("tcp", named(t, "structobj-put"), structObjVariants[StructObjPut], 5),
		wr("tcp", named(t, "structobj-get"), structObjVariants[StructObjGet], 4),
		wr("tcp", named(t, "single-read"), modes, 0.015, ceil("tcp", "single-read", CeilingDirect, 12.75),
			ceil("tcp", "single-read", CeilingRTT, 0.115)),
		wr("tcp", named(t, "engram-remote-t1"), modes, 1, ceil("tcp", "engram-remote-t1", CeilingRTT, 0.031),
			ceil("local", "engram-remote-t1", CeilingLocal, 0.0026)),
	}}
	for i, w := range Matrix() {
		if w.Src != Random || w.Dst != Contiguous || (w.Small.Size != 64 && w.Small.Size != 264) {
			continue
		}
		tcp.Workloads = append(tcp.Workloads, wr("tcp", w, modes, 1+float64(i%7),
			ceil("tcp", w.Name, CeilingDirect, 12+float64(i)/100), ceil("tcp", w.Name, CeilingPack, 20+float64(i)/100)))
	}
	shm := PassResult{Transport: "shm", Owner: "process", Workloads: []WorkloadResult{
		wr("shm", named(t, "many-small"), modes, 8, ceil("shm", "many-small", CeilingDirect, 67.5),
			ceil("shm", "many-small", CeilingPack, 13.4), ceil("shm", "many-small", CeilingRTT, 0.1)),
	}}
	return []PassResult{tcp, shm}
}

func figureByName(t *testing.T, figs []Figure, name string) *Figure {
	t.Helper()
	for i := range figs {
		if figs[i].Name == name {
			return &figs[i]
		}
	}
	require.Failf(t, "no figure", "%s not among the figures", name)
	return nil
}

func workloadOf(t *testing.T, passes []PassResult, transport, name string) *WorkloadResult {
	t.Helper()
	for i := range passes {
		if passes[i].Transport != transport {
			continue
		}
		for j := range passes[i].Workloads {
			if passes[i].Workloads[j].Workload.Name == name {
				return &passes[i].Workloads[j]
			}
		}
	}
	require.Failf(t, "no workload", "%s/%s", transport, name)
	return nil
}

// TestFigureCeilingsInOwnPanel: every ceiling drawn is its own
// workload's, in that workload's panel, with the value measured for it;
// every ceiling a panel's axis can show is drawn.
func TestFigureCeilingsInOwnPanel(t *testing.T) {
	passes := fixturePasses(t)
	figs := Figures(passes)
	for _, f := range figs {
		for _, pn := range f.Panels {
			switch f.Kind {
			case KindGoodput, KindLatency:
				wr := workloadOf(t, passes, f.Transport, pn.Workload)
				want := []string{CeilingDirect, CeilingPack}
				if f.Kind == KindLatency {
					want = []string{CeilingRTT, CeilingLocal}
				}
				var got []string
				for _, r := range pn.Refs {
					require.Equal(t, pn.Workload, r.Workload, "%s: a ref of %s in the panel of %s", f.Name, r.Workload, pn.Workload)
					if r.Kind != RefCeiling {
						continue
					}
					require.Equal(t, wr.ceiling(r.Name), r.Value, "%s/%s: %s", f.Name, pn.Workload, r.Name)
					got = append(got, r.Name)
				}
				for _, name := range want {
					if !math.IsNaN(wr.ceiling(name)) {
						require.Contains(t, got, name, "%s/%s lacks its %s ceiling", f.Name, pn.Workload, name)
					}
				}
			case KindMatrix:
				for _, s := range pn.Series {
					for _, p := range s.Points {
						require.Contains(t, pn.Group, p.Workload, "%s/%s: a point of another panel's workload", f.Name, pn.Title)
						if s.Ceiling != "" {
							wr := workloadOf(t, passes, f.Transport, p.Workload)
							require.Equal(t, wr.ceiling(s.Ceiling), p.Y, "%s/%s: %s of %s", f.Name, pn.Title, s.Ceiling, p.Workload)
						}
					}
				}
			}
		}
	}
	// The ceilings of many-small over tcp, and only they, in its panel.
	ms := figureByName(t, figs, "goodput-tcp").Panels[0]
	require.Equal(t, "many-small", ms.Workload)
	var vals []float64
	for _, r := range ms.Refs {
		if r.Kind == RefCeiling {
			vals = append(vals, r.Value)
		}
	}
	require.Equal(t, []float64{12.5, 16.25}, vals)
}

// TestFigureModeColours: within a figure every mode has one colour and
// no two modes share one; reference lines use none of the modes' colours.
func TestFigureModeColours(t *testing.T) {
	for _, f := range Figures(fixturePasses(t)) {
		byMode := map[string]color.RGBA{}
		byColor := map[color.RGBA]string{}
		see := func(mode string, c color.RGBA) {
			if prev, ok := byMode[mode]; ok {
				require.Equal(t, prev, c, "%s: mode %s has two colours", f.Name, mode)
				return
			}
			require.NotContains(t, byColor, c, "%s: %s has the colour of %s", f.Name, mode, byColor[c])
			byMode[mode], byColor[c] = c, mode
		}
		for _, pn := range f.Panels {
			for _, b := range pn.Bars {
				see(b.Mode, b.Color)
			}
			for _, s := range pn.Series {
				if s.Ceiling == "" {
					see(s.Mode, s.Color)
				}
			}
			for _, st := range pn.Stacks {
				for _, g := range st.Segments {
					see("stage "+g.Stage, g.Color)
				}
			}
		}
		require.NotEmpty(t, byMode, f.Name)
		for _, pn := range f.Panels {
			for _, r := range pn.Refs {
				require.NotContains(t, byColor, r.Color, "%s: ref %s has a mode's colour", f.Name, r.Name)
			}
			for _, s := range pn.Series {
				if s.Ceiling != "" {
					require.NotContains(t, byColor, s.Color, "%s: ceiling %s has a mode's colour", f.Name, s.Ceiling)
				}
			}
		}
		// The key lists each mode once with its colour.
		for _, k := range f.Keys {
			if k.Ref == "" && !strings.HasPrefix(k.Name, "stage ") {
				if c, ok := byMode[k.Name]; ok {
					require.Equal(t, c, k.Color, "%s: key of %s", f.Name, k.Name)
				} else {
					require.Equal(t, KindStages, f.Kind, "%s: key %s of no mode", f.Name, k.Name)
				}
			}
		}
	}
}

// TestFigureColoursManyModes: more modes than the palette still get
// distinct colours.
func TestFigureColoursManyModes(t *testing.T) {
	cs := newColors()
	seen := map[color.RGBA]bool{}
	for i := range 40 {
		c := cs.mode(fmt.Sprintf("mode-%d", i))
		require.False(t, seen[c], "mode-%d repeats a colour", i)
		seen[c] = true
	}
}

// TestFigureSizes: every picture, the model and the PNG, is at most
// MaxFigureWidthPx wide, and the PNG is the model's size.
func TestFigureSizes(t *testing.T) {
	passes := fixturePasses(t)
	// The whole matrix as well: 192 workloads over tcp.
	var all []WorkloadResult
	for _, w := range Matrix() {
		all = append(all, WorkloadResult{Workload: w, Lines: []Line{fixtureLine(t, "tcp", w, "adaptive", 3)}, Status: StatusOK})
	}
	passes = append(passes, PassResult{Transport: "tcp-matrix", Owner: "process", Workloads: all})
	figs := Figures(passes)
	require.NotEmpty(t, figs)
	for _, f := range figs {
		require.LessOrEqual(t, f.WidthPx(), MaxFigureWidthPx, f.Name)
		require.LessOrEqual(t, f.HeightPx(), 2200, f.Name)
		b, err := RenderPNG(&f)
		require.NoError(t, err, f.Name)
		img, err := png.Decode(bytes.NewReader(b))
		require.NoError(t, err, f.Name)
		require.Equal(t, f.WidthPx(), img.Bounds().Dx(), f.Name)
		require.Equal(t, f.HeightPx(), img.Bounds().Dy(), f.Name)
	}
}

// TestFigureKinds: throughput workloads on the goodput figure, latency-
// sized ones on the latency figure (ms), every workload in the stages
// figure, the matrix apart.
func TestFigureKinds(t *testing.T) {
	figs := Figures(fixturePasses(t))
	var names []string
	for _, f := range figs {
		names = append(names, f.Name)
	}
	require.Equal(t, []string{"goodput-tcp", "latency-tcp", "stages-tcp", "matrix-tcp-random-contiguous",
		"goodput-shm", "stages-shm"}, names)
	panels := func(f *Figure) []string {
		var out []string
		for _, p := range f.Panels {
			out = append(out, p.Workload)
		}
		return out
	}
	require.Equal(t, []string{"many-small", "few-large", "structobj-put", "structobj-get"}, panels(figureByName(t, figs, "goodput-tcp")))
	lat := figureByName(t, figs, "latency-tcp")
	require.Equal(t, []string{"single-read", "engram-remote-t1"}, panels(lat))
	for _, pn := range lat.Panels {
		require.Equal(t, "ms", pn.YLabel)
		for _, b := range pn.Bars {
			require.Greater(t, b.High, b.Value, "p95 whisker above p50")
		}
	}
	require.Equal(t, []string{"many-small", "few-large", "structobj-put", "structobj-get", "single-read", "engram-remote-t1"},
		panels(figureByName(t, figs, "stages-tcp")))
}

// TestFigureGoalLines: the goal lines stand where the goal's formula puts
// them and carry the verdict Goals gives that goal.
func TestFigureGoalLines(t *testing.T) {
	passes := fixturePasses(t)
	figs := Figures(passes)
	texts := map[string]Goal{}
	for _, p := range passes {
		for _, g := range Goals([]PassResult{p}) {
			texts[p.Transport+" "+g.Text] = g
		}
	}
	goalsOf := func(f *Figure, w string) []Ref {
		for _, pn := range f.Panels {
			if pn.Workload == w {
				var out []Ref
				for _, r := range pn.Refs {
					if r.Kind == RefGoal {
						out = append(out, r)
					}
				}
				return out
			}
		}
		return nil
	}
	for _, f := range figs {
		for _, pn := range f.Panels {
			for _, r := range pn.Refs {
				if r.Kind != RefGoal {
					continue
				}
				g, ok := texts[f.Transport+" "+r.Goal]
				require.True(t, ok, "%s/%s: goal %q is not one of Goals", f.Name, pn.Workload, r.Goal)
				require.Equal(t, g.Verdict, r.Verdict, r.Goal)
			}
		}
	}
	ms := goalsOf(figureByName(t, figs, "goodput-tcp"), "many-small")
	require.Len(t, ms, 1)
	require.InDelta(t, 0.75*12.5, ms[0].Value, 1e-9)
	shm := goalsOf(figureByName(t, figs, "goodput-shm"), "many-small")
	require.Len(t, shm, 1)
	require.InDelta(t, 0.9*13.4, shm[0].Value, 1e-9)
	fl := goalsOf(figureByName(t, figs, "goodput-tcp"), "few-large")
	require.InDelta(t, 0.97*11, fl[0].Value, 1e-9) // direct is the first mode: 11 Gbit/s
	sr := goalsOf(figureByName(t, figs, "latency-tcp"), "single-read")
	require.InDelta(t, 1.5*0.115, sr[0].Value, 1e-9)
	er := goalsOf(figureByName(t, figs, "latency-tcp"), "engram-remote-t1")
	require.InDelta(t, 0.0026+2*0.031+0.2*0.0026, er[0].Value, 1e-9)
}

// TestFigureStages: a stack per measured mode, the six stages in order,
// window from the window goodput, and the p50 beside it.
func TestFigureStages(t *testing.T) {
	passes := fixturePasses(t)
	f := figureByName(t, Figures(passes), "stages-tcp")
	ms := f.Panels[0]
	require.Equal(t, "many-small", ms.Workload)
	require.Len(t, ms.Stacks, 3)
	l := workloadOf(t, passes, "tcp", "many-small").Lines[0]
	st := ms.Stacks[0]
	require.Equal(t, l.Mode, st.Mode)
	require.Equal(t, l.P50Ms, st.P50)
	var stages []string
	for _, g := range st.Segments {
		stages = append(stages, g.Stage)
	}
	require.Equal(t, stageOrder, stages)
	require.InDelta(t, float64(l.PayloadBytes)*8/(l.WindowGbps*1e9)*1e3, st.Segments[4].Ms, 1e-9)
}

// TestFigureMatrix: the matrix as small multiples: a panel per fragment
// size and direction (READ and WRITE side by side), fragment count on x,
// a line per mode.
func TestFigureMatrix(t *testing.T) {
	f := figureByName(t, Figures(fixturePasses(t)), "matrix-tcp-random-contiguous")
	require.Equal(t, 2, f.Columns)
	var titles []string
	for _, pn := range f.Panels {
		titles = append(titles, pn.Title)
	}
	require.Equal(t, []string{"64B fragments, READ", "64B fragments, WRITE", "264B fragments, READ", "264B fragments, WRITE"}, titles)
	for _, pn := range f.Panels {
		var modes []string
		for _, s := range pn.Series {
			if s.Ceiling == "" {
				modes = append(modes, s.Mode)
				var xs []float64
				for _, p := range s.Points {
					xs = append(xs, p.X)
				}
				require.True(t, slices.IsSorted(xs), pn.Title)
				require.Equal(t, pn.XTicks, xs, pn.Title)
			}
		}
		require.Equal(t, []string{"direct", "gather", "adaptive"}, modes, pn.Title)
		for _, w := range pn.Group {
			require.Equal(t, strings.Contains(pn.Title, "READ"), strings.HasSuffix(w, "/read"), w)
		}
	}
}

// jsonLines writes passes as scatterbench's JSON lines.
func jsonLines(t *testing.T, passes []PassResult) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, p := range passes {
		for _, wr := range p.Workloads {
			for _, l := range wr.Lines {
				require.NoError(t, enc.Encode(l))
			}
			for _, c := range wr.Ceilings {
				require.NoError(t, enc.Encode(c))
			}
		}
	}
	require.NoError(t, enc.Encode(SummaryLine{Workload: "summary", Text: "x"}))
	return b.Bytes()
}

// TestReadPasses: pictures drawn from a run's JSON lines are the run's.
func TestReadPasses(t *testing.T) {
	passes := fixturePasses(t)
	got, err := ReadPasses(bytes.NewReader(jsonLines(t, passes)))
	require.NoError(t, err)
	// %+v: the models hold NaN (no whisker), which == never matches.
	require.Equal(t, fmt.Sprintf("%+v", Figures(passes)), fmt.Sprintf("%+v", Figures(got)))

	_, err = ReadPasses(strings.NewReader("{\"workload\":\"many-small\"}\nnot json\n"))
	var je *JSONLineError
	require.ErrorAs(t, err, &je)
	require.Equal(t, 2, je.Line)
	require.ErrorIs(t, err, ErrJSONLines)
	_, err = ReadPasses(strings.NewReader("{\"workload\":\"ceiling/rtt\"}\n"))
	require.ErrorIs(t, err, ErrJSONLines)
}

// TestWritePlots writes one decodable PNG per figure.
func TestWritePlots(t *testing.T) {
	dir := t.TempDir()
	passes := fixturePasses(t)
	require.NoError(t, WritePlots(dir, passes))
	for _, f := range Figures(passes) {
		b, err := os.ReadFile(filepath.Join(dir, f.Name+".png"))
		require.NoError(t, err)
		_, err = png.Decode(bytes.NewReader(b))
		require.NoError(t, err, f.Name)
	}
	_, err := RenderPNG(&Figure{Name: "empty", Columns: 1})
	require.ErrorIs(t, err, ErrNoFigure)
}

// TestFigureFailedWorkload: a failed workload keeps its panel, says why,
// and draws no bar for what was not measured.
func TestFigureFailedWorkload(t *testing.T) {
	passes := fixturePasses(t)
	wr := &passes[0].Workloads[1]
	wr.Status = StatusFailed
	wr.Err = &WorkloadError{Transport: "tcp", Workload: wr.Workload.Name, Err: fmt.Errorf("gather: 3 failed operations")}
	wr.Lines[1].Reps = 0
	f := figureByName(t, Figures(passes), "goodput-tcp")
	pn := f.Panels[1]
	require.Equal(t, "few-large", pn.Workload)
	require.Contains(t, pn.Note, "failed")
	require.True(t, math.IsNaN(pn.Bars[1].Value))
	_, err := RenderPNG(f)
	require.NoError(t, err)
}

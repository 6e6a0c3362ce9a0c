package bench

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/scatterkit/scatterkit/tools/internal/units"
)

// WriteReport writes dir/index.html: one self-contained page (CSS, the
// pictures as PNG data URIs, no external asset) with the run's summary
// line, per pass the table, the ceilings and the failures, the goals with
// their verdicts (from Goals, the text report's own) and the pictures of
// Figures. The page carries a tiny script that records script errors and
// pictures that fail to load into #page-check (what the headless browser
// test reads back).
func WriteReport(dir string, c *Config, passes []PassResult) error {
	b, err := RenderReport(c, passes)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "index.html"), b, 0o644)
}

type reportFigure struct {
	Name, Title string
	W, H        int
	Src         template.URL
}

type reportPass struct {
	Transport, Owner string
	Rows             [][]string
	Ceilings         [][]string
	Failures         [][]string
	Calibration      []string
	Leaked           int
	Err              string
	Figures          []reportFigure
}

type reportGoal struct {
	Transport, Text, Value, Target, Verdict, Note, Class string
}

type reportData struct {
	Seed    string
	Summary string
	Passes  []reportPass
	Goals   []reportGoal
	Header  []string
}

var reportHeader = []string{"workload", "mode", "chosen", "frags", "payload", "p50 ms", "p95 ms", "goodput", "window",
	"plan", "control", "decode", "pack", "complete", "staging peak / bound", "fb", "err", "status"}

// RenderReport returns the HTML report of a run (see WriteReport).
func RenderReport(c *Config, passes []PassResult) ([]byte, error) {
	var goals []Goal
	for _, p := range passes {
		goals = append(goals, passGoals(p)...)
	}
	d := reportData{Seed: strconv.FormatUint(c.Seed, 10), Summary: Summarize(goals).String(), Header: reportHeader}
	figs := Figures(passes)
	for _, p := range passes {
		rp := reportPass{Transport: p.Transport, Owner: p.Owner, Leaked: p.Leaked, Calibration: calibrationFallbacks([]PassResult{p})}
		if p.Err != nil {
			rp.Err = p.Err.Error()
		}
		for _, wr := range p.Workloads {
			for _, l := range wr.Lines {
				fig := func(v float64) string {
					if l.Reps == 0 {
						return "-"
					}
					return f2(v)
				}
				chosen := l.Chosen
				if chosen == "" {
					chosen = "-"
				}
				rp.Rows = append(rp.Rows, []string{l.Workload, l.Mode, chosen, strconv.FormatUint(l.Fragments, 10),
					units.FormatBytes(int64(l.PayloadBytes)), fig(l.P50Ms), fig(l.P95Ms), fig(l.GoodputGbps), fig(l.WindowGbps),
					fig(l.PlanMs), fig(l.ControlMs), fig(l.DecodeMs), fig(l.PackMs), fig(l.CompleteMs),
					units.FormatBytes(l.StagingPeakBytes) + " / " + units.FormatBytes(l.StagingBoundBytes),
					strconv.Itoa(l.Fallbacks), strconv.Itoa(l.Errors), l.Status})
			}
			for _, cl := range wr.Ceilings {
				unit := "Gbit/s"
				if cl.GoodputGbps == nil {
					unit = "ms (p50)"
				}
				rp.Ceilings = append(rp.Ceilings, []string{wr.Workload.Name, cl.Name(), f2(cl.Value()), unit})
			}
			if we, ok := errors.AsType[*WorkloadError](wr.Err); ok {
				rp.Failures = append(rp.Failures, []string{wr.Workload.Name, we.Status(), we.Reason()})
			}
		}
		for i := range figs {
			f := &figs[i]
			if f.Transport != p.Transport {
				continue
			}
			png, err := RenderPNG(f)
			if err != nil {
				return nil, err
			}
			rp.Figures = append(rp.Figures, reportFigure{Name: f.Name, Title: f.Title, W: f.WidthPx(), H: f.HeightPx(),
				Src: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(png))})
		}
		d.Passes = append(d.Passes, rp)
	}
	for _, g := range goals {
		v := f2(g.Value)
		switch {
		case g.Verdict == "n/a":
			v = "-"
		case math.IsNaN(g.Value):
			v = g.Note
		}
		note := ""
		if g.Verdict == "n/a" {
			note = g.Note
		}
		class := map[string]string{"ok": "ok", "MISSED": "missed"}[g.Verdict]
		if class == "" {
			class = "na"
		}
		d.Goals = append(d.Goals, reportGoal{Transport: g.Transport, Text: g.Text, Value: v, Target: g.Target,
			Verdict: g.Verdict, Note: note, Class: class})
	}
	var b bytes.Buffer
	if err := reportTemplate.Execute(&b, d); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return b.Bytes(), nil
}

var reportTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>scatterbench report, seed {{.Seed}}</title>
<script>
// Records script errors and pictures that do not load into #page-check
// (read back by the headless browser test).
(function () {
  var errs = [];
  window.addEventListener("error", function (e) {
    var t = e.target;
    if (t && t.tagName === "IMG") { errs.push("image failed: " + (t.alt || t.src.slice(0, 40))); }
    else { errs.push("error: " + (e.message || String(e))); }
  }, true);
  var ce = console.error;
  console.error = function () { errs.push("console.error: " + Array.prototype.join.call(arguments, " ")); ce.apply(console, arguments); };
  window.addEventListener("load", function () {
    var imgs = document.getElementsByTagName("img"), ok = 0;
    for (var i = 0; i < imgs.length; i++) {
      if (imgs[i].complete && imgs[i].naturalWidth > 0) { ok++; } else { errs.push("image not loaded: " + imgs[i].alt); }
    }
    document.getElementById("page-check").textContent = JSON.stringify({images: imgs.length, loaded: ok, errors: errs});
  });
})();
</script>
<style>
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 12.5px; }
th, td { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; position: sticky; top: 0; }
td.l, th.l { text-align: left; }
tr.missed td.v { color: #b00020; font-weight: bold; } tr.ok td.v { color: #1b7d2c; } tr.na td.v { color: #777; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { color: #555; }
.summary { font-size: 1.2em; font-weight: bold; }
.fail { color: #b00020; }
#page-check { display: none; }
</style>
</head>
<body>
<h1>scatterbench report</h1>
<p class="summary">{{.Summary}}</p>
<p>seed {{.Seed}}; goodput in Gbit/s (1e9 bit/s) of payload over the p50 of the full API time; stage times are medians in ms.
The machine is shared and noisy: missed goals are measurements, not failures.</p>
<h2>Goals</h2>
<table>
<tr><th class="l">transport</th><th class="l">goal</th><th>value</th><th>target</th><th class="l">verdict</th><th class="l">note</th></tr>
{{range .Goals}}<tr class="{{.Class}}"><td class="l">{{.Transport}}</td><td class="l">{{.Text}}</td><td>{{.Value}}</td><td>{{.Target}}</td><td class="l v">{{.Verdict}}</td><td class="l">{{.Note}}</td></tr>
{{end}}</table>
{{range .Passes}}
<h2>Transport {{.Transport}}, owner {{.Owner}}</h2>
{{if .Err}}<p class="fail">owner: {{.Err}}</p>{{end}}
{{if .Leaked}}<p class="fail">LEAK: {{.Leaked}} staging leases outstanding at shutdown</p>{{end}}
{{range .Figures}}<figure id="{{.Name}}"><img src="{{.Src}}" alt="{{.Name}}" width="{{.W}}" height="{{.H}}"><figcaption>{{.Title}} ({{.Name}}.png)</figcaption></figure>
{{end}}
<table>
<tr>{{range $.Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}<td{{if lt $i 3}} class="l"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table>
<h3>Ceilings measured in the same repetitions</h3>
<table>
<tr><th class="l">workload</th><th class="l">ceiling</th><th>value</th><th class="l">unit</th></tr>
{{range .Ceilings}}<tr><td class="l">{{index . 0}}</td><td class="l">{{index . 1}}</td><td>{{index . 2}}</td><td class="l">{{index . 3}}</td></tr>
{{end}}</table>
{{if .Failures}}<h3 class="fail">FAILED workloads (their goals are n/a)</h3>
<table>{{range .Failures}}<tr><td class="l">{{index . 0}}</td><td class="l">{{index . 1}}</td><td class="l">{{index . 2}}</td></tr>{{end}}</table>{{end}}
{{if .Calibration}}<h3>CALIBRATION FALLBACK</h3><ul>{{range .Calibration}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{end}}
<pre id="page-check"></pre>
</body>
</html>
`))

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/verbs"
)

// summaryRE is the run's last line.
var summaryRE = regexp.MustCompile(`^\d+ goals ok, \d+ missed, \d+ not measured$`)

// badStructObjPut is structobj-put with too few members: its setup fails
// (a real failure of the workload, not a seam), after which the run must
// go on.
func badStructObjPut() Workload {
	w, _ := Lookup("structobj-put")
	w.Small.Count = 4
	return w
}

// readJSONLines returns every JSON object of a -json file.
func readJSONLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		out = append(out, m)
	}
	return out
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// goalRow returns the goals-table row whose text contains text.
func goalRow(t *testing.T, out, text string) string {
	t.Helper()
	_, goals, ok := strings.Cut(out, "\ngoals (")
	require.True(t, ok, "a goals block")
	for _, l := range strings.Split(goals, "\n") {
		if strings.Contains(l, text) {
			return l
		}
	}
	require.Failf(t, "no goal row", "%q in\n%s", text, goals)
	return ""
}

// TestFailedWorkloadIsListed runs a workload whose setup fails between two
// that work: the failure is listed with its reason in the table and the
// JSON, its goals are n/a, the others still run, the failure counts in the
// goals, the exit status is 1 and the run ends with the summary line.
func TestFailedWorkloadIsListed(t *testing.T) {
	get, _ := Lookup("structobj-get")
	c := tinyConfig(t, "tcp", OwnerInproc, tinyWorkloads[0], badStructObjPut(), get)
	c.Reps, c.Warmup, c.Quiet = 1, 0, false
	c.JSONPath = filepath.Join(t.TempDir(), "out.jsonl")
	var stdout, stderr bytes.Buffer
	code := Run(testContext(t), c, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	require.Equal(t, 1, code, "a failed workload fails the run")
	out := stdout.String()

	// Listed with its reason.
	require.Regexp(t, `(?m)^\s+structobj-put\s+failed\s+.*at least 8 members`, out)
	// Its goals are n/a with the reason; the workload after it ran.
	require.Regexp(t, `\sn/a\s+structobj-put failed: .*at least 8 members`, goalRow(t, out, "structobj-put: multi-buffer (64) / single-buffer PUT"))
	require.Regexp(t, `\sn/a\s+structobj-put failed`, goalRow(t, out, "structobj-put: fast path / fallback"))
	require.NotContains(t, goalRow(t, out, "structobj-get: fast path / fallback (whole)"), "n/a")
	// The failure counts.
	require.Regexp(t, `\s1 workload, 0 operations\s+= 0\s+MISSED`, goalRow(t, out, "failed workloads and operations"))
	// One summary line, last.
	require.Regexp(t, summaryRE, lastLine(out))
	require.Equal(t, 1, len(regexp.MustCompile(`(?m)^\d+ goals ok, `).FindAllString(out+stderr.String(), -1)))

	// The JSON: every mode of the failed workload, with its reason, then
	// the summary record.
	lines := readJSONLines(t, c.JSONPath)
	modes := map[string]map[string]any{}
	for _, l := range lines {
		if l["workload"] == "structobj-put" {
			modes[l["mode"].(string)] = l
		}
	}
	require.Len(t, modes, 5, "multi, single, concat, buffers, fallback")
	for m, l := range modes {
		require.Equal(t, "failed", l["status"], m)
		require.Contains(t, l["error"], "at least 8 members", m)
		require.Zero(t, l["reps"], m)
	}
	for _, l := range lines {
		if l["workload"] == "structobj-get" || l["workload"] == "rows" {
			require.Equal(t, "ok", l["status"], "%s/%s", l["workload"], l["mode"])
			require.Nil(t, l["error"])
		}
	}
	sum := lines[len(lines)-1]
	require.Equal(t, "summary", sum["workload"])
	require.Equal(t, float64(1), sum["exit_status"])
	require.Equal(t, "failed", sum["status"])
	fw := sum["failed_workloads"].([]any)
	require.Len(t, fw, 1)
	require.Equal(t, "structobj-put", fw[0].(map[string]any)["workload"])
	require.Positive(t, sum["goals_not_measured"])
}

// TestCalibrationFallbackReported makes the in-process gather services'
// calibration fall back (the seam replaces costmodel.CalibrateOrFallback
// with what it returns when the machine is too busy): the run goes on,
// and the table, the lines and the summary record say so.
func TestCalibrationFallbackReported(t *testing.T) {
	get, _ := Lookup("structobj-get")
	c := tinyConfig(t, "tcp", OwnerInproc, get)
	c.Reps, c.Warmup, c.Quiet = 1, 0, false
	c.JSONPath = filepath.Join(t.TempDir(), "out.jsonl")
	const reason = "costmodel: calibration interrupted: context deadline exceeded"
	calls := 0
	c.calibrate = func(_ context.Context, o costmodel.CalibrateOptions) (costmodel.Calibration, error) {
		calls++
		return costmodel.Calibration{BMem: costmodel.ConservativeBMem, RCopy: costmodel.ConservativeRCopy,
			Workers: o.Workers, Fallback: reason}, nil
	}
	var stdout, stderr bytes.Buffer
	code := Run(testContext(t), c, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	require.Equal(t, 0, code, "a calibration that fell back does not fail the run")
	require.Equal(t, 1, calls)
	out := stdout.String()
	require.Contains(t, out, "CALIBRATION FALLBACK")
	require.Regexp(t, `in-process gather services \(\d+ pack workers\): `+regexp.QuoteMeta(reason)+` \[structobj-get\]`, out)

	lines := readJSONLines(t, c.JSONPath)
	n := 0
	for _, l := range lines {
		if l["workload"] == "structobj-get" {
			n++
			require.Equal(t, "ok", l["status"])
			require.Contains(t, l["calibration_fallback"], reason, l["mode"])
		}
	}
	require.Equal(t, 5, n)
	sum := lines[len(lines)-1]
	require.Equal(t, "summary", sum["workload"])
	fbs := sum["calibration_fallbacks"].([]any)
	require.Len(t, fbs, 1)
	require.Contains(t, fbs[0], reason)
}

// TestOwnerFallback: an owner's capability with costmodel's conservative
// figures (bit for bit, as the wire carries them) reads as a fallback;
// measured figures do not.
func TestOwnerFallback(t *testing.T) {
	fb := ownerFallback("owner (process) gather service", engine.OwnerInfo{BMem: costmodel.ConservativeBMem, RCopy: costmodel.ConservativeRCopy})
	require.Len(t, fb, 1)
	require.Equal(t, "owner (process) gather service", fb[0].Who)
	require.Contains(t, fb[0].Reason, "conservative")
	require.Empty(t, ownerFallback("owner", engine.OwnerInfo{BMem: 9.1e9, RCopy: 3.4e6}))
	require.Empty(t, ownerFallback("owner", engine.OwnerInfo{BMem: costmodel.ConservativeBMem, RCopy: 3.4e6}))
}

// TestHandleFallback: a pass's owner that says why its calibration fell
// back (a process owner's ready line, calibration_fallback) is reported
// with its reason; one that does not say is inferred from the
// conservative figures its capability shows, as before.
func TestHandleFallback(t *testing.T) {
	const (
		who    = "owner (process) gather service"
		reason = "costmodel: calibration interrupted: context deadline exceeded"
	)
	conservative := engine.OwnerInfo{BMem: costmodel.ConservativeBMem, RCopy: costmodel.ConservativeRCopy}
	measured := engine.OwnerInfo{BMem: 9.1e9, RCopy: 3.4e6}
	for _, tc := range []struct {
		name  string
		ready string // the owner's ready line
		info  engine.OwnerInfo
		want  []CalibrationFallback
	}{
		{"says why", `{"event":"ready","addr":"127.0.0.1:1","calibration_fallback":"` + reason + `"}`, conservative,
			[]CalibrationFallback{{Who: who, Reason: reason}}},
		{"measured", `{"event":"ready","addr":"127.0.0.1:1"}`, measured, nil},
		{"does not say", `{"event":"ready","addr":"127.0.0.1:1"}`, conservative,
			[]CalibrationFallback{{Who: who, Reason: ownerFallbackReason}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &procOwner{}
			require.NoError(t, json.Unmarshal([]byte(tc.ready), &h.ready))
			require.Equal(t, tc.want, handleFallback(who, h, tc.info))
		})
	}
}

// TestVerifyFailureDoesNotStopTheRun corrupts the first verified
// destination only: that workload fails with a *VerifyError, the next
// one runs and passes.
func TestVerifyFailureDoesNotStopTheRun(t *testing.T) {
	c := tinyConfig(t, "tcp", OwnerInproc, tinyWorkloads[0], tinyWorkloads[2])
	c.Modes = Modes[1:2]
	corrupted := false
	c.corrupt = func(dst []byte) {
		if !corrupted {
			corrupted = true
			dst[len(dst)/2] ^= 0x01
		}
	}
	passes, lines, err := run(t, c)
	require.ErrorIs(t, err, ErrVerify)
	require.ErrorIs(t, err, ErrWorkload)
	ws := passes[0].Workloads
	require.Len(t, ws, 2)
	require.Equal(t, StatusFailed, ws[0].Status)
	require.ErrorIs(t, ws[0].Err, ErrVerify)
	require.Equal(t, StatusOK, ws[1].Status, "%v", ws[1].Err)
	require.NoError(t, ws[1].Err)
	for _, l := range lines {
		switch l["workload"] {
		case ws[0].Workload.Name:
			require.Equal(t, "failed", l["status"])
			require.Contains(t, l["error"], "destination byte")
		case ws[1].Workload.Name:
			require.Equal(t, "ok", l["status"])
		}
	}
}

// TestOwnerStartFailureRunsTheRest: the pass's owner does not start, so
// its scatter workloads are listed as not run (with why, goals n/a); the
// workloads that bring their own owner still run.
func TestOwnerStartFailureRunsTheRest(t *testing.T) {
	get, _ := Lookup("structobj-get")
	c := tinyConfig(t, "tcp", OwnerProcess, tinyWorkloads[0], get)
	c.Reps, c.Warmup = 1, 0
	c.ownerCommand = []string{"/bin/false"}
	passes, lines, err := run(t, c)
	require.ErrorIs(t, err, ErrOwner)
	p := passes[0]
	require.ErrorIs(t, p.Err, ErrOwner)
	require.Len(t, p.Workloads, 2)
	rows := p.Workloads[0]
	require.Equal(t, StatusNotRun, rows.Status)
	require.ErrorIs(t, rows.Err, ErrOwner)
	require.Len(t, rows.Lines, len(c.Modes), "a line per mode, empty")
	require.Equal(t, StatusOK, p.Workloads[1].Status, "%v", p.Workloads[1].Err)
	n := 0
	for _, l := range lines {
		if l["workload"] == "rows" {
			n++
			require.Equal(t, "not run", l["status"])
			require.Contains(t, l["error"], "did not start")
		}
	}
	require.Equal(t, len(c.Modes), n)
	for _, g := range Goals(passes) {
		if strings.HasPrefix(g.Text, "rows: ") {
			require.Equal(t, "n/a", g.Verdict, g.Text)
			require.Contains(t, g.Note, "rows not run: ")
		}
		if g.Text == "failed workloads and operations" {
			require.Equal(t, "MISSED", g.Verdict)
			require.Equal(t, "1 workload, 0 operations", g.Note)
		}
	}
}

// TestSettle: failed operations, a mode without a timed repetition and a
// run without a verified repetition each fail a workload that returned no
// error; a line is added for every mode that has none.
func TestSettle(t *testing.T) {
	c := tinyConfig(t, "tcp", OwnerInproc, tinyWorkloads[0])
	r := &Runner{cfg: c}
	w := tinyWorkloads[0]
	for _, tc := range []struct {
		name   string
		lines  []Line
		verify int
		want   string // "" for ok
	}{
		{"ok", []Line{{Mode: "direct", Reps: 3}, {Mode: "gather", Reps: 3}, {Mode: "adaptive", Reps: 3}}, 2, ""},
		{"failed operations", []Line{{Mode: "direct", Reps: 3}, {Mode: "gather", Reps: 1, Errors: 2, opErr: errTest},
			{Mode: "adaptive", Reps: 3}}, 2, "gather: 2 failed operations; first: injected"},
		{"missing mode", []Line{{Mode: "direct", Reps: 3}, {Mode: "gather", Reps: 3}}, 2, "adaptive: no timed repetition"},
		{"nothing verified", []Line{{Mode: "direct", Reps: 3}, {Mode: "gather", Reps: 3}, {Mode: "adaptive", Reps: 3}}, 0, "no repetition verified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wr := WorkloadResult{Workload: w, Lines: tc.lines, OverBound: make([]int, len(tc.lines)), Verified: tc.verify}
			r.settle(&wr, "tcp", nil)
			require.Len(t, wr.Lines, 3)
			require.Len(t, wr.OverBound, 3)
			for i, m := range []string{"direct", "gather", "adaptive"} {
				require.Equal(t, m, wr.Lines[i].Mode)
			}
			if tc.want == "" {
				require.NoError(t, wr.Err)
				require.Equal(t, StatusOK, wr.Status)
				for _, l := range wr.Lines {
					require.Equal(t, StatusOK, l.Status)
					require.Empty(t, l.Error)
				}
				return
			}
			require.ErrorIs(t, wr.Err, ErrWorkload)
			require.Equal(t, StatusFailed, wr.Status)
			require.Contains(t, wr.Err.Error(), tc.want)
			for _, l := range wr.Lines {
				require.Equal(t, StatusFailed, l.Status)
				require.NotEmpty(t, l.Error)
			}
		})
	}
}

// TestGoalsOfAFailedRun pins the goals block, the failures block and the
// summary line of a pass with a failed workload, one not run and a
// calibration fallback (testdata/goals.golden; refresh with -update).
func TestGoalsOfAFailedRun(t *testing.T) {
	c := &Config{Modes: Modes[:3], Seed: 42, Owner: OwnerProcess}
	r := &Runner{cfg: c}
	fb := []CalibrationFallback{{Who: "owner (process) gather service", Reason: "costmodel: calibration interrupted: context deadline exceeded"}}
	ms := result("many-small", []Line{
		{Mode: "direct", Chosen: "direct", GoodputGbps: 5, P50Ms: 40, P95Ms: 44},
		{Mode: "gather", Chosen: "gather", GoodputGbps: 15, P50Ms: 14, P95Ms: 15},
		{Mode: "adaptive", Chosen: "gather", GoodputGbps: 16, WindowGbps: 19, P50Ms: 13, P95Ms: 15, PlanMs: 0.3, DecodeMs: 0.4},
	}, 20, 30, 0.1)
	ms.Verified, ms.Calibration = 8, fb
	fl := result("few-large", []Line{
		{Mode: "direct", Chosen: "direct", GoodputGbps: 20, P50Ms: 13, P95Ms: 14},
		{Mode: "gather", Chosen: "gather", GoodputGbps: 12, P50Ms: 20, P95Ms: 21, Errors: 2, opErr: errTest},
		{Mode: "adaptive", Chosen: "direct", GoodputGbps: 19.9, P50Ms: 13.1, P95Ms: 14},
	}, 20, 100, 0.1)
	fl.Verified, fl.Calibration = 8, fb
	p := PassResult{Transport: "tcp", Owner: "process (pid 1)"}
	r.record(&p, "tcp", ms, nil)
	r.record(&p, "tcp", fl, nil)
	mixed, _ := Lookup("mixed")
	r.notRun(&p, mixed, "tcp", fmt.Errorf("few-large lost the connection to the owner: %w", verbs.ErrClosed))
	goals := Goals([]PassResult{p})
	var b bytes.Buffer
	printCalibration(&b, p)
	printFailures(&b, p)
	PrintGoals(&b, goals)
	fmt.Fprintf(&b, "\n%s\n", Summarize(goals))
	got := b.String()
	path := filepath.Join("testdata", "goals.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got, "goals output changed (refresh with -update if intended)")
	require.Equal(t, Summary{OK: 8, Missed: 1, NotMeasured: 8}, Summarize(goals))
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReportSelfContained: the report has the summary, every goal with
// the verdict Goals gives it, every table row and every picture, and
// refers to nothing outside itself.
func TestReportSelfContained(t *testing.T) {
	passes := fixturePasses(t)
	c := &Config{Seed: 7}
	b, err := RenderReport(c, passes)
	require.NoError(t, err)
	page := string(b)

	var goals []Goal
	for _, p := range passes {
		goals = append(goals, passGoals(p)...)
	}
	require.Contains(t, page, Summarize(goals).String())
	text := html.UnescapeString(page)
	for _, g := range goals {
		require.Regexp(t, regexp.QuoteMeta(g.Text)+`</td>.*<td class="l v">`+regexp.QuoteMeta(g.Verdict)+`</td>`, text, g.Text)
	}
	for _, f := range Figures(passes) {
		require.Contains(t, page, `id="`+f.Name+`"`, f.Name)
	}
	imgs := regexp.MustCompile(`<img [^>]*src="([^"]*)"`).FindAllStringSubmatch(page, -1)
	require.Len(t, imgs, len(Figures(passes)))
	for _, m := range imgs {
		require.True(t, strings.HasPrefix(m[1], "data:image/png;base64,"), "picture not embedded: %.40s", m[1])
	}
	for _, external := range []string{"http://", "https://", "<link", "@import", "url("} {
		require.NotContains(t, page, external)
	}
	// One row per line.
	n := 0
	for _, p := range passes {
		for _, wr := range p.Workloads {
			n += len(wr.Lines)
		}
	}
	require.Equal(t, n, strings.Count(page, `<td class="l">`+"ok</td></tr>")+strings.Count(page, "<td>ok</td></tr>"), "table rows")

	dir := t.TempDir()
	require.NoError(t, WriteReport(dir, c, passes))
	onDisk, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	require.Equal(t, b, onDisk)
}

// TestReportFailedWorkload: a failed workload is listed with its reason.
func TestReportFailedWorkload(t *testing.T) {
	passes := fixturePasses(t)
	wr := &passes[0].Workloads[0]
	wr.Status, wr.Err = StatusFailed, &WorkloadError{Transport: "tcp", Workload: "many-small", Err: errString("wrong bytes at 42")}
	b, err := RenderReport(&Config{Seed: 7}, passes)
	require.NoError(t, err)
	require.Contains(t, string(b), "FAILED workloads")
	require.Contains(t, string(b), "wrong bytes at 42")
}

type errString string

func (e errString) Error() string { return string(e) }

// chromium returns the headless browser's path, or skips (fails with
// REQUIRE_CHROMIUM=1, as CI sets it) when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why = "no chromium on PATH (apt-get install --no-install-recommends chromium; scripts/test.sh installs it)"
	if os.Getenv("REQUIRE_CHROMIUM") == "1" {
		t.Fatal(why + ", and REQUIRE_CHROMIUM=1")
	}
	t.Skip(why)
	return ""
}

// TestReportInBrowser opens the report in headless chromium: the page
// loads, every picture decodes (naturalWidth > 0) and no script error or
// console error is recorded (the page's own check, read back from the
// DOM).
func TestReportInBrowser(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	passes := fixturePasses(t)
	require.NoError(t, WriteReport(dir, &Config{Seed: 7}, passes))

	check := browserCheck(t, bin, dir)
	require.Equal(t, len(Figures(passes)), check.Images)
	require.Equal(t, check.Images, check.Loaded, "pictures that did not load: %v", check.Errors)
	require.Empty(t, check.Errors)

	// The check can fail: a page with a broken picture and a script
	// error reports both.
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	broken := regexp.MustCompile(`src="data:image/png;base64,[^"]*"`).ReplaceAllLiteralString(string(page), `src="data:image/png;base64,AAAA"`)
	broken = strings.Replace(broken, "</body>", "<script>undefinedFunction();</script></body>", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte(broken), 0o644))
	bad := browserCheck(t, bin, dir)
	require.Zero(t, bad.Loaded)
	require.Len(t, bad.Errors, 2*bad.Images+1, "%v", bad.Errors) // failed and not loaded, per picture; the script error
}

type pageCheck struct {
	Images, Loaded int
	Errors         []string
}

// browserCheck loads dir/index.html in headless chromium and returns the
// page's own check, read back from the DOM.
func browserCheck(t *testing.T, bin, dir string) pageCheck {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang bound, not an assertion
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--enable-logging=stderr", "--v=0",
		"--virtual-time-budget=5000", "--dump-dom", "file://"+filepath.Join(dir, "index.html"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "chromium: %s", stderr.String())

	m := regexp.MustCompile(`<pre id="page-check">([^<]*)</pre>`).FindStringSubmatch(stdout.String())
	require.NotNil(t, m, "no page check in the DOM; stderr:\n%s", stderr.String())
	var check pageCheck
	require.NoError(t, json.Unmarshal([]byte(html.UnescapeString(m[1])), &check), m[1])
	return check
}

// TestMainReport: -report writes the page of the run, with its pictures.
func TestMainReport(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := Main(testContext(t), []string{"-owner", "inproc", "-table-bytes", "8MiB", "-staging-bytes", "4MiB",
		"-frags", "500", "-transport", "tcp", "-reps", "2", "-warmup", "0", "-seed", "7", "-quiet",
		"-report", filepath.Join(dir, "r")}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	b, err := os.ReadFile(filepath.Join(dir, "r", "index.html"))
	require.NoError(t, err)
	page := string(b)
	require.Contains(t, page, "custom: adaptive p95 / p50")
	for _, name := range []string{"goodput-tcp", "stages-tcp"} {
		require.Contains(t, page, `id="`+name+`"`)
	}
}

package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/fixture"
	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/report"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

// fixtureBin skips (or fails, with REQUIRE_EBPF=1) where eBPF cannot run,
// and builds the fixture program.
func fixtureBin(t *testing.T) string {
	t.Helper()
	fixture.RequireEBPF(t)
	return fixture.Build(t, fixture.ProgPackage, "")
}

// runAsync runs Main in a goroutine; its exit status arrives on the channel.
func runAsync(ctx context.Context, args []string, stdout, stderr io.Writer) <-chan int {
	done := make(chan int, 1)
	go func() { done <- Main(ctx, args, stdout, stderr) }()
	return done
}

// lastSummary decodes the last JSON line of the profiler's output.
func lastSummary(t *testing.T, l *fixture.Lines) report.Summary {
	t.Helper()
	line := l.Last("{")
	require.NotEmpty(t, line, "no JSON line in:\n%s", strings.Join(l.All(), "\n"))
	s, err := report.DecodeJSON([]byte(line))
	require.NoError(t, err)
	return s
}

func count(s *report.Summary, st stage.Stage) uint64 {
	r, _ := s.Row(int(st))
	return r.Count
}

// TestCommand starts the fixture under the profiler: held at its first
// instruction until attached, so every operation is recorded; its output
// and exit status pass through.
func TestCommand(t *testing.T) {
	bin := fixtureBin(t)
	stages := "plan=20us,pack=40us"
	spec, err := fixture.ParseStages(stages)
	require.NoError(t, err)
	var out bytes.Buffer
	errs := fixture.NewLines()
	code := Main(context.Background(), []string{"-interval", "0", "-json", "-calibrate", "2000", "--", bin, "-ops", "50", "-stages", stages}, &out, errs)
	require.Equal(t, 0, code, "%s", strings.Join(errs.All(), "\n"))
	require.Contains(t, out.String(), fmt.Sprintf("done ops=50 checksum=%016x", fixture.Expect(50, spec)))
	s := lastSummary(t, errs)
	require.Equal(t, uint64(50), count(&s, stage.Op))
	require.Equal(t, uint64(50), count(&s, stage.Plan))
	require.Equal(t, uint64(50), count(&s, stage.Pack))
	require.Zero(t, s.Counters.Unmatched)
	require.Len(t, s.Targets, 1)
	require.Positive(t, s.Bias)

	// The command's failure is the profiler's exit status.
	code = Main(context.Background(), []string{"-interval", "0", "-calibrate", "0", "--", bin, "-stages", "nonsense"}, io.Discard, io.Discard)
	require.Equal(t, 2, code)
	code = Main(context.Background(), []string{"-interval", "0", "--", filepath.Join(t.TempDir(), "missing")}, io.Discard, io.Discard)
	require.Equal(t, exitFail, code)
}

// TestChildren profiles a shell that starts two fixtures: the shell has
// no markers, its children are found and attached.
func TestChildren(t *testing.T) {
	bin := fixtureBin(t)
	script := fmt.Sprintf("%[1]s -ops 30 -delay 1s -stages plan=20us & %[1]s -ops 20 -delay 1s -stages plan=20us & wait", bin)
	errs := fixture.NewLines()
	code := Main(context.Background(), []string{"-interval", "0", "-json", "-calibrate", "0", "-poll", "10ms", "--", "/bin/sh", "-c", script}, io.Discard, errs)
	require.Equal(t, 0, code, "%s", strings.Join(errs.All(), "\n"))
	s := lastSummary(t, errs)
	require.Equal(t, uint64(50), count(&s, stage.Op), "both children's operations")
	require.Len(t, s.Targets, 2)
}

// TestPIDs attaches to a running fixture, serves /metrics, and detaches
// at -duration; the fixture runs on, correct, to its end.
func TestPIDs(t *testing.T) {
	bin := fixtureBin(t)
	stages := "plan=20us,pack=40us"
	spec, err := fixture.ParseStages(stages)
	require.NoError(t, err)
	f := fixture.Start(t, bin, "-ops", "400", "-stages", stages, "-pause-at", "0,200")
	pid := f.Cmd.Process.Pid
	f.Expect("paused 0")

	out, errs := fixture.NewLines(), fixture.NewLines()
	done := runAsync(context.Background(), []string{"-p", strconv.Itoa(pid), "-json", "-interval", "50ms", "-duration", "3s",
		"-calibrate", "2000", "-metrics", "127.0.0.1:0"}, out, errs)
	addr := strings.TrimSuffix(strings.TrimPrefix(errs.Wait(t, "metrics at "), "scatterprof: metrics at "), "\n")
	out.Wait(t, "{") // attached: the first refresh
	f.Go()
	f.Expect("paused 200")

	resp, err := http.Get(addr)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `scatterprof_stage_duration_seconds_count{stage="pack"} 200`)
	require.Contains(t, string(body), `scatterprof_targets 1`)

	code := <-done
	require.Equal(t, 0, code, "%s", strings.Join(errs.All(), "\n"))
	s := lastSummary(t, out)
	require.Equal(t, uint64(200), count(&s, stage.Op))
	require.Equal(t, uint64(200*264), s.Rows[1].Bytes)

	f.Go() // runs on, detached
	n, sum := f.Finish()
	require.Equal(t, 400, n)
	require.Equal(t, fixture.Expect(400, spec), sum)
}

// TestTargetExits ends the profile when its only target exits.
func TestTargetExits(t *testing.T) {
	bin := fixtureBin(t)
	f := fixture.Start(t, bin, "-ops", "30", "-stages", "pack=20us", "-pause-at", "0")
	pid := f.Cmd.Process.Pid
	f.Expect("paused 0")
	out, errs := fixture.NewLines(), fixture.NewLines()
	done := runAsync(context.Background(), []string{"-p", strconv.Itoa(pid), "-json", "-interval", "50ms", "-calibrate", "0", "-poll", "10ms"}, out, errs)
	out.Wait(t, "{")
	f.Go()
	f.Finish()
	select {
	case code := <-done:
		require.Equal(t, 0, code)
	case <-time.After(time.Minute):
		t.Fatal("the profile did not end when its target exited")
	}
	errs.Wait(t, fmt.Sprintf("target %d exited", pid))
	s := lastSummary(t, out)
	require.Equal(t, uint64(30), count(&s, stage.Op))

	// Attaching to a process that is gone is an error.
	code := Main(context.Background(), []string{"-p", strconv.Itoa(pid), "-calibrate", "0"}, io.Discard, errs)
	require.Equal(t, exitFail, code)
	errs.Wait(t, "exited")
}

// TestRefusedTargets: stripped executables and processes without markers
// are refused with the reason.
func TestRefusedTargets(t *testing.T) {
	fixture.RequireEBPF(t)
	stripped := fixture.Build(t, fixture.ProgPackage, "-s -w")
	errs := fixture.NewLines()
	code := Main(context.Background(), []string{"-children=false", "-calibrate", "0", "--", stripped, "-ops", "1"}, io.Discard, errs)
	require.Equal(t, exitFail, code)
	errs.Wait(t, "stripped")

	sleep := exec.Command("sleep", "30")
	require.NoError(t, sleep.Start())
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	code = Main(context.Background(), []string{"-p", strconv.Itoa(sleep.Process.Pid), "-calibrate", "0"}, io.Discard, errs)
	require.Equal(t, exitFail, code)
	require.NoError(t, sleep.Process.Signal(syscall.Signal(0)), "a refused target keeps running")
}

// TestNotRoot runs the command as an unprivileged user.
func TestNotRoot(t *testing.T) {
	fixture.RequireEBPF(t) // root here, so it can drop to another user
	bin := fixture.Build(t, "github.com/scatterkit/scatterkit/tools/cmd/scatterprof", "")
	dir, err := os.MkdirTemp("", "scatterprof-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	exe := filepath.Join(dir, "scatterprof")
	b, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(exe, b, 0o755))
	cmd := exec.Command(exe, "-p", "1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	require.Equal(t, exitFail, ee.ExitCode())
	require.Contains(t, string(out), "needs root")
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		flag string
	}{
		{"nothing", nil, "-p"},
		{"both", []string{"-p", "1", "--", "true"}, "-p"},
		{"bad pid", []string{"-p", "1,x"}, "-p"},
		{"zero pid", []string{"-p", "0"}, "-p"},
		{"negative interval", []string{"-p", "1", "-interval", "-1s"}, "-interval"},
		{"tiny interval", []string{"-p", "1", "-interval", "1ms"}, "-interval"},
		{"negative duration", []string{"-p", "1", "-duration", "-1s"}, "-duration"},
		{"negative calibration", []string{"-p", "1", "-calibrate", "-1"}, "-calibrate"},
		{"tiny poll", []string{"-p", "1", "-poll", "1ms"}, "-poll"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.args, io.Discard)
			require.ErrorIs(t, err, ErrUsage)
			var fe *FlagError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.flag, fe.Flag)
		})
	}
	c, err := Parse([]string{"-p", "12, 34", "-json", "-metrics", ":9464"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []int{12, 34}, c.PIDs)
	require.True(t, c.JSON)
	require.True(t, c.Children)
	c, err = Parse([]string{"--", "prog", "-x"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"prog", "-x"}, c.Command)
	_, err = Parse([]string{"-nonsense"}, io.Discard)
	require.ErrorIs(t, err, ErrUsage)
	require.Equal(t, 2, Main(context.Background(), []string{"-p", "x"}, io.Discard, io.Discard))
	require.Equal(t, 0, Main(context.Background(), []string{"-h"}, io.Discard, io.Discard))
}

func TestParseBench(t *testing.T) {
	for _, args := range [][]string{
		{"-reps", "0"}, {"-block", "0"}, {"-warmup", "-1"}, {"-calibrate", "0"},
		{"-table-bytes", "1000"}, {"-workload", "reshard-kv"}, {"-workload", "nope"}, {"extra"},
	} {
		_, err := parseBench(args, io.Discard)
		require.ErrorIs(t, err, ErrUsage, "%v", args)
	}
	c, err := parseBench([]string{"-reps", "3"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 3, c.Reps)
	require.Equal(t, "many-small", c.Workload)
}

// TestBench runs the bench on a small table: every attached operation is
// recorded once, the shares are there, the data is right.
func TestBench(t *testing.T) {
	fixture.RequireEBPF(t)
	res, err := RunBench(context.Background(), BenchConfig{Workload: "many-small", TableBytes: 64 << 20, Seed: 7,
		Reps: 2, Block: 2, Warmup: 1, Pairs: 2000}, io.Discard)
	require.NoError(t, err)
	t.Logf("%+v", res)
	require.Equal(t, 4, res.Ops)
	require.Equal(t, uint64(res.Ops), res.OpsRecorded, "every attached operation recorded once")
	require.Zero(t, res.Unmatched)
	require.Positive(t, res.HitsPerOp)
	require.Positive(t, res.GoodputOn)
	require.Positive(t, res.GoodputOff)
	names := map[string]bool{}
	for _, s := range res.Shares {
		names[s.Stage] = true
	}
	require.True(t, names["plan"] && names["pack"] && names["decode"], "shares %+v", res.Shares)
	var buf bytes.Buffer
	printBench(&buf, &res)
	require.Contains(t, buf.String(), "goal: goodput attached / detached")

	// The A/A control attaches nothing and claims no goal.
	res, err = RunBench(context.Background(), BenchConfig{Workload: "many-small", TableBytes: 64 << 20, Seed: 7,
		Reps: 1, Block: 2, Warmup: 1, Pairs: 2000, Control: true}, io.Discard)
	require.NoError(t, err)
	require.True(t, res.Control)
	require.Zero(t, res.OpsRecorded)
	require.Zero(t, res.HitsPerOp)
	require.Empty(t, res.Shares)
	buf.Reset()
	printBench(&buf, &res)
	require.NotContains(t, buf.String(), "goal:")
	require.Contains(t, buf.String(), "A/A")
}

// TestInterrupt cancels a command-mode profile (as SIGINT does): the
// command gets SIGINT, the final summary is printed, and the status says
// the command did not succeed.
func TestInterrupt(t *testing.T) {
	bin := fixtureBin(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := fixture.NewLines()
	done := runAsync(ctx, []string{"-json", "-interval", "50ms", "-calibrate", "0", "--", bin, "-ops", "1000000", "-stages", "pack=50us"}, io.Discard, errs)
	for {
		s, err := report.DecodeJSON([]byte(errs.Wait(t, "{")))
		require.NoError(t, err)
		if count(&s, stage.Op) > 0 {
			break
		}
	}
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 1, code, "a command ended by SIGINT did not succeed")
	case <-time.After(time.Minute):
		t.Fatal("the profile did not end after the interrupt")
	}
	s := lastSummary(t, errs)
	require.Positive(t, count(&s, stage.Pack))
}

// TestCommandDuration ends a command-mode profile with -duration while the
// command runs: the probes come off mid-run, the command runs on to its
// end, correct, and its status is the profiler's.
func TestCommandDuration(t *testing.T) {
	bin := fixtureBin(t)
	stages := "pack=2ms"
	spec, err := fixture.ParseStages(stages)
	require.NoError(t, err)
	var out bytes.Buffer
	errs := fixture.NewLines()
	code := Main(context.Background(), []string{"-interval", "0", "-json", "-calibrate", "0", "-duration", "200ms", "--",
		bin, "-ops", "400", "-stages", stages}, &out, errs)
	require.Equal(t, 0, code, "%s", strings.Join(errs.All(), "\n"))
	errs.Wait(t, "profile ended after 200ms")
	require.Contains(t, out.String(), fmt.Sprintf("done ops=400 checksum=%016x", fixture.Expect(400, spec)))
	s := lastSummary(t, errs)
	n := count(&s, stage.Pack)
	require.Positive(t, n)
	require.Less(t, n, uint64(400), "the profile ended before the command")
}

// TestDelta: with -delta each refresh shows only its interval, and the
// final summary the totals.
func TestDelta(t *testing.T) {
	bin := fixtureBin(t)
	f := fixture.Start(t, bin, "-ops", "60", "-stages", "pack=20us", "-pause-at", "0,30")
	pid := f.Cmd.Process.Pid
	f.Expect("paused 0")
	out := fixture.NewLines()
	done := runAsync(context.Background(), []string{"-p", strconv.Itoa(pid), "-json", "-delta", "-interval", "50ms", "-calibrate", "0", "-poll", "10ms"}, out, io.Discard)
	out.Wait(t, "{")
	f.Go()
	f.Expect("paused 30")
	// Once the 30 operations are behind a refresh, the next shows none.
	var seen uint64
	for {
		s, err := report.DecodeJSON([]byte(out.Wait(t, "{")))
		require.NoError(t, err)
		n := count(&s, stage.Op)
		if seen == 30 && n == 0 {
			break
		}
		seen += n
		require.LessOrEqual(t, seen, uint64(30))
	}
	f.Go()
	f.Finish()
	require.Equal(t, 0, <-done)
	s := lastSummary(t, out)
	require.Equal(t, uint64(60), count(&s, stage.Op), "the final summary holds the totals")
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		line  string
		state byte
		ppid  int
		ok    bool
	}{
		{"1234 (scatterbench) S 1200 1234 1200 0 -1", 'S', 1200, true},
		{"77 (a) b (c)) R 5 77", 'R', 5, true},
		{"88 (zombie) Z 1 88", 'Z', 1, true},
		{"88 (cut", 0, 0, false},
		{"88 (x) S", 0, 0, false},
		{"88 (x) S y", 0, 0, false},
		{"88 (x) SS 1", 0, 0, false},
	} {
		st, pp, ok := parseStat([]byte(tc.line))
		require.Equal(t, tc.ok, ok, tc.line)
		if ok {
			require.Equal(t, tc.state, st, tc.line)
			require.Equal(t, tc.ppid, pp, tc.line)
		}
	}
	require.True(t, alive(os.Getpid()))
	kids, err := children(map[int]bool{os.Getppid(): true})
	require.NoError(t, err)
	require.Contains(t, kids, os.Getpid())
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/tools/internal/netns"
	"github.com/scatterkit/scatterkit/verbs"
)

// tinyWorkloads are small versions of the shapes the benchmark runs: a
// fixed-row READ, a mixed ranges READ and a fragmented WRITE.
var tinyWorkloads = []Workload{
	{Name: "rows", Dir: verbs.OpRead, Small: Frags{264, 2000}, Src: Random, Dst: Contiguous},
	{Name: "mixed", Dir: verbs.OpRead, Small: Frags{264, 600}, Large: Frags{64 << 10, 4}, Src: Random, Dst: Contiguous},
	{Name: "write", Dir: verbs.OpWrite, Small: Frags{128, 1500}, Src: Random, Dst: Fragmented},
}

func tinyConfig(t *testing.T, transport, ownerKind string, ws ...Workload) *Config {
	return &Config{Passes: []Pass{{Transport: transport, Workloads: ws}}, Owner: ownerKind, Modes: Modes[:3],
		StagingSlots: 4, StagingBytes: 4 << 20, Callers: 1, Reps: 3, Warmup: 1, Seed: testSeed(t),
		TableBytes: 8 << 20, Quiet: true}
}

// run runs c and returns the passes and every emitted JSON line.
func run(t *testing.T, c *Config) ([]PassResult, []map[string]any, error) {
	t.Helper()
	var lines []map[string]any
	var stderr bytes.Buffer
	r := &Runner{cfg: c, stderr: &stderr, emit: func(v any) error {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		lines = append(lines, m)
		return nil
	}}
	passes, err := r.Run(testContext(t))
	if stderr.Len() > 0 {
		t.Logf("stderr:\n%s", stderr.String())
	}
	return passes, lines, err
}

// checkLines checks the JSON lines of a pass for consistency.
func checkLines(t *testing.T, c *Config, transport string, lines []map[string]any) {
	t.Helper()
	perWorkload := map[string]int{}
	ceilings := map[string]int{}
	for _, l := range lines {
		name := l["workload"].(string)
		require.Equal(t, transport, l["transport"])
		require.Equal(t, float64(c.Seed), l["seed"])
		if strings.HasPrefix(name, "ceiling/") {
			ceilings[l["for"].(string)+" "+name]++
			if name == "ceiling/rtt" {
				require.Positive(t, l["p50_ms"])
				require.Nil(t, l["goodput_gbps"])
			} else {
				require.Positive(t, l["goodput_gbps"])
				require.Nil(t, l["p50_ms"])
			}
			continue
		}
		perWorkload[name]++
		mode := l["mode"].(string)
		require.Equal(t, float64(c.Reps*c.Callers), l["reps"], "%s/%s", name, mode)
		require.Zero(t, l["errors"], "%s/%s", name, mode)
		require.Zero(t, l["leaked_leases"], "%s/%s", name, mode)
		p50, p95 := l["p50_ms"].(float64), l["p95_ms"].(float64)
		require.Positive(t, p50)
		require.GreaterOrEqual(t, p95, p50)
		payload := l["payload_bytes"].(float64)
		want := payload * 8 / (p50 / 1e3) / 1e9
		require.InEpsilon(t, want, l["goodput_gbps"].(float64), 1e-6, "goodput is payload over p50 in Gbit/s")
		require.Positive(t, l["window_gbps"])
		for _, f := range []string{"plan_ms", "control_ms", "decode_ms", "pack_ms", "complete_ms"} {
			require.GreaterOrEqual(t, l[f].(float64), 0.0)
			require.LessOrEqual(t, l[f].(float64), p95, "%s is a median stage time, within the p95 of the whole operation", f)
		}
		switch mode {
		case "direct":
			require.Equal(t, "direct", l["chosen"])
			require.Zero(t, l["staging_bound_bytes"])
		case "gather":
			require.Equal(t, "gather", l["chosen"])
			if l["direction"] == "write" && transport == "shm" {
				// shm cannot expose the requester's staging: WRITE
				// gathers fall back to direct, and say so.
				require.Equal(t, float64(c.Reps+c.Warmup), l["fallbacks"])
				continue
			}
			require.Zero(t, l["fallbacks"])
			require.Positive(t, l["staging_bound_bytes"])
			require.Positive(t, l["staging_peak_bytes"])
			if l["direction"] == "read" {
				require.Positive(t, l["decode_ms"])
				require.Positive(t, l["pack_ms"])
			}
		}
	}
	for _, w := range c.Passes[0].Workloads {
		require.Equal(t, len(c.Modes), perWorkload[w.Name], w.Name)
		for _, cl := range []string{CeilingDirect, CeilingPack, CeilingRTT} {
			require.Equal(t, 1, ceilings[w.Name+" ceiling/"+cl], "%s for %s", cl, w.Name)
		}
	}
}

func TestRunInproc(t *testing.T) {
	for _, tr := range []string{"tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			c := tinyConfig(t, tr, OwnerInproc, tinyWorkloads...)
			passes, lines, err := run(t, c)
			require.NoError(t, err)
			require.Len(t, passes, 1)
			p := passes[0]
			require.NoError(t, p.Err)
			require.Zero(t, p.Leaked)
			require.Equal(t, "inproc", p.Owner)
			require.Len(t, p.Workloads, len(tinyWorkloads))
			for _, w := range p.Workloads {
				require.Equal(t, 2*(len(c.Modes)+1), w.Verified, "first and last repetition of every mode and the control")
				// OverBound is what verbs did (a chunk that is not a size
				// class leases more than C): reported, not asserted.
				require.Len(t, w.OverBound, len(c.Modes))
			}
			checkLines(t, c, tr, lines)
			var table bytes.Buffer
			PrintTable(&table, c, passes)
			require.Contains(t, table.String(), "Gbit/s (1e9 bit/s)")
			for _, w := range tinyWorkloads {
				require.Contains(t, table.String(), w.Name)
			}
		})
	}
}

func TestRunCallers(t *testing.T) {
	c := tinyConfig(t, "tcp", OwnerInproc, tinyWorkloads[0], tinyWorkloads[2])
	c.Callers, c.Reps, c.Modes = 3, 2, []Mode{Modes[1], Modes[2]}
	passes, lines, err := run(t, c)
	require.NoError(t, err)
	require.NoError(t, passes[0].Err)
	checkLines(t, c, "tcp", lines)
}

// TestVerificationCatchesCorruption flips one destination byte after an
// operation: the run must fail with a *VerifyError naming it.
func TestVerificationCatchesCorruption(t *testing.T) {
	for _, w := range []Workload{tinyWorkloads[0], tinyWorkloads[2]} {
		t.Run(w.Name, func(t *testing.T) {
			c := tinyConfig(t, "tcp", OwnerInproc, w)
			c.Modes = Modes[1:2]
			var at int
			c.corrupt = func(dst []byte) {
				at = len(dst) / 3
				dst[at] ^= 0x20
			}
			passes, _, err := run(t, c)
			require.ErrorIs(t, err, ErrVerify)
			var ve *VerifyError
			require.True(t, errors.As(err, &ve))
			require.Equal(t, w.Name, ve.Workload)
			require.Equal(t, "gather", ve.Mode)
			require.Equal(t, uint64(at), ve.Offset)
			require.Equal(t, ve.Want^0x20, ve.Got)
			require.ErrorIs(t, passes[0].Workloads[0].Err, ErrVerify)
			require.Equal(t, StatusFailed, passes[0].Workloads[0].Status)
			require.NoError(t, passes[0].Err, "the pass's owner is fine")
			require.Zero(t, passes[0].Leaked, "the owner still shut down cleanly")
		})
	}
}

func TestRunProcessOwner(t *testing.T) {
	c := tinyConfig(t, "tcp", OwnerProcess, tinyWorkloads[0])
	selfOwner(t, c)
	passes, lines, err := run(t, c)
	require.NoError(t, err)
	require.Contains(t, passes[0].Owner, "process (pid ")
	checkLines(t, c, "tcp", lines)
}

func TestRunProcessOwnerFails(t *testing.T) {
	c := tinyConfig(t, "tcp", OwnerProcess, tinyWorkloads[0])
	c.ownerCommand = []string{"/bin/false"}
	passes, _, err := run(t, c)
	require.ErrorIs(t, err, ErrOwner)
	var oe *OwnerError
	require.True(t, errors.As(err, &oe))
	require.Equal(t, "start", oe.Stage)
	require.ErrorIs(t, passes[0].Err, ErrOwner)
}

// TestRunNetns runs the owner in a network namespace over a shaped veth
// (root with ip and tc only) and checks the namespace is gone afterwards.
func TestRunNetns(t *testing.T) {
	if err := netns.Available(true); err != nil {
		t.Skipf("skipping: %v", err)
	}
	c := tinyConfig(t, "tcp", OwnerNetns, tinyWorkloads[0])
	c.TBF = "2gbit"
	c.Modes = Modes[2:3]
	selfOwner(t, c)
	passes, lines, err := run(t, c)
	require.NoError(t, err)
	require.Contains(t, passes[0].Owner, "netns (pid ")
	require.Contains(t, passes[0].Owner, netns.Prefix)
	require.Contains(t, passes[0].Owner, "tbf 2gbit")
	checkLines(t, c, "tcp", lines)
	out, err := runCmd(testContext(t), "ip", "netns", "list")
	require.NoError(t, err)
	require.NotContains(t, out, netns.Prefix+itoa(os.Getpid()), "the namespace was removed")
}

func TestMainRuns(t *testing.T) {
	dir := t.TempDir()
	jsonPath, plotDir := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "plots")
	var stdout, stderr bytes.Buffer
	code := Main(testContext(t), []string{"-owner", "inproc", "-table-bytes", "8MiB", "-staging-bytes", "4MiB",
		"-workloads", "single-read", "-frags", "500", "-transport", "tcp,shm", "-reps", "2", "-warmup", "0",
		"-seed", "7", "-json", jsonPath, "-plot", plotDir}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	require.Contains(t, stdout.String(), "goals (ratios measured in this run")
	require.Contains(t, stdout.String(), "single-read: adaptive p50 / rtt p50")
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	n := strings.Count(string(b), "\n")
	require.Equal(t, 2*2*(3+3)+1, n, "2 passes x 2 workloads x (3 modes + 3 ceilings), the summary")
	var sum SummaryLine
	require.NoError(t, json.Unmarshal([]byte(lastLine(string(b))), &sum))
	require.Equal(t, "summary", sum.Workload)
	require.Zero(t, sum.ExitStatus)
	require.Equal(t, StatusOK, sum.Status)
	require.Empty(t, sum.FailedWorkloads)
	require.Equal(t, sum.Text, lastLine(stdout.String()), "the run ends with the summary line")
	require.Regexp(t, summaryRE, sum.Text)
	for _, name := range []string{"goodput-tcp.png", "stages-tcp.png", "goodput-shm.png", "stages-shm.png"} {
		png, err := os.ReadFile(filepath.Join(plotDir, name))
		require.NoError(t, err)
		require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")), name)
	}

	stdout.Reset()
	stderr.Reset()
	require.Equal(t, 2, Main(context.Background(), []string{"-reps", "zero"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "invalid value")
	require.Equal(t, 0, Main(context.Background(), []string{"-h"}, &stdout, &stderr))
}

func TestGoodputUnits(t *testing.T) {
	require.InDelta(t, 8.0, gbps(1e9, 1e9), 1e-12, "1 GB in 1 s is 8 Gbit/s")
	require.Zero(t, gbps(100, 0))
	require.True(t, math.IsNaN(ratio(1, 0)))
}

func itoa(v int) string { return strconv.Itoa(v) }

func runCmd(ctx context.Context, argv ...string) (string, error) {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	return string(out), err
}

// TestReshardWorkloads runs the reshard workloads once in every mode over
// tcp: lines for every mode, every repetition verified, no errors; a
// corrupted destination byte fails the run with a *VerifyError.
func TestReshardWorkloads(t *testing.T) {
	var ws []Workload
	for _, w := range Named {
		if w.Reshard != "" {
			ws = append(ws, w)
		}
	}
	require.Len(t, ws, 2)
	c := tinyConfig(t, "tcp", OwnerInproc, ws...)
	c.Reps, c.Warmup = 1, 0
	passes, lines, err := run(t, c)
	require.NoError(t, err)
	require.Len(t, passes, 1)
	require.Len(t, passes[0].Workloads, 2)
	for _, wr := range passes[0].Workloads {
		require.Equal(t, len(c.Modes), wr.Verified, wr.Workload.Name)
		require.Len(t, wr.Lines, len(c.Modes))
		for _, l := range wr.Lines {
			require.Zero(t, l.Errors, "%s/%s", l.Workload, l.Mode)
			require.Equal(t, 1, l.Reps)
			require.Equal(t, uint64(64<<20), l.PayloadBytes)
			require.Positive(t, l.PlanMs)
			require.LessOrEqual(t, l.StagingPeakBytes, l.StagingBoundBytes)
		}
	}
	require.Len(t, lines, 2*len(c.Modes))

	c = tinyConfig(t, "tcp", OwnerInproc, ws[0])
	c.Reps, c.Warmup = 1, 0
	c.corrupt = func(dst []byte) { // some of these bytes are held, whatever the page tables
		for i := 0; i < len(dst); i += 4096 {
			dst[i] ^= 0x40
		}
	}
	_, _, err = run(t, c)
	var ve *VerifyError
	require.ErrorAs(t, err, &ve)
}

// TestStructObjWorkloads runs the structobj workloads once over tcp:
// every variant verified, no errors, the fallback client on a fallback
// path and the pooled variants on the pool.
func TestStructObjWorkloads(t *testing.T) {
	var ws []Workload
	for _, w := range Named {
		if w.StructObj != "" {
			ws = append(ws, w)
		}
	}
	require.Len(t, ws, 2)
	c := tinyConfig(t, "tcp", OwnerInproc, ws...)
	c.Reps, c.Warmup = 1, 0
	passes, _, err := run(t, c)
	require.NoError(t, err)
	require.Len(t, passes[0].Workloads, 2)
	for _, wr := range passes[0].Workloads {
		require.Equal(t, len(wr.Lines), wr.Verified, wr.Workload.Name)
		var modes []string
		for _, l := range wr.Lines {
			modes = append(modes, l.Mode)
		}
		require.Equal(t, structObjVariants[wr.Workload.StructObj], modes, "the variants a failed run lists are those it runs")
		for _, l := range wr.Lines {
			require.Zero(t, l.Errors, "%s/%s", l.Workload, l.Mode)
			require.Equal(t, 1, l.Reps)
			if strings.Contains(l.Mode, "fallback") {
				require.NotEqual(t, "pool", l.Chosen, "%s/%s", l.Workload, l.Mode)
			} else {
				require.Equal(t, "pool", l.Chosen, "%s/%s", l.Workload, l.Mode)
			}
		}
	}
}

// TestRepeat: warm-ups first, the order rotating by one, verify in the
// first warm-up and the last repetition, a progress step per repetition
// (also the one a failure ends), nothing after a failure.
func TestRepeat(t *testing.T) {
	c := &Config{Reps: 3, Warmup: 1}
	w := &Workload{Name: "w"}
	type call struct {
		i                int
		measured, verify bool
	}
	for _, tc := range []struct {
		name   string
		failAt int // the call that fails, -1 for none
		want   []call
		steps  int
	}{
		{"all", -1, []call{
			{0, false, true}, {1, false, true},
			{1, true, false}, {0, true, false},
			{0, true, false}, {1, true, false},
			{1, true, true}, {0, true, true},
		}, 4},
		{"failure", 2, []call{{0, false, true}, {1, false, true}, {1, true, false}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := 0
			r := &Runner{cfg: c, step: func(string) { steps++ }}
			var got []call
			errWrong := errors.New("wrong bytes")
			err := r.repeat(context.Background(), w, 2, func(i int, measured, verify bool) error {
				got = append(got, call{i, measured, verify})
				if len(got)-1 == tc.failAt {
					return errWrong
				}
				return nil
			})
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.steps, steps)
			if tc.failAt >= 0 {
				require.ErrorIs(t, err, errWrong)
			} else {
				require.NoError(t, err)
			}
		})
	}
	t.Run("context ended", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := &Runner{cfg: c}
		err := r.repeat(ctx, w, 2, func(int, bool, bool) error { t.Fatal("ran after the context ended"); return nil })
		require.ErrorIs(t, err, context.Canceled)
	})
}

// TestClosers: last made, first closed, every error joined into the
// result, also what was pushed after the defer.
func TestClosers(t *testing.T) {
	var order []int
	e1, e3 := errors.New("one"), errors.New("three")
	f := func() (err error) {
		var done closers
		defer done.closeInto(&err)
		done.push(func() error { order = append(order, 1); return e1 })
		done.push(func() error { order = append(order, 2); return nil })
		done.push(func() error { order = append(order, 3); return e3 })
		return nil
	}
	err := f()
	require.Equal(t, []int{3, 2, 1}, order)
	require.ErrorIs(t, err, e1)
	require.ErrorIs(t, err, e3)
}

// TestEngramRemoteWorkloads runs the one-owner and the sharded remote
// lookups on a tiny table, the sharded one's owners in this process and
// as owner processes: every mode verified against the pattern table, the
// sharded one's one-owner ceiling measured beside it and its goal
// computed from the two.
func TestEngramRemoteWorkloads(t *testing.T) {
	for _, kind := range []string{OwnerInproc, OwnerProcess} {
		t.Run(kind, func(t *testing.T) { testEngramRemoteWorkloads(t, kind) })
	}
}

func testEngramRemoteWorkloads(t *testing.T, kind string) {
	t16, ok := Lookup("engram-remote-t16")
	require.True(t, ok)
	sh, ok := Lookup("engram-remote-sharded")
	require.True(t, ok)
	require.Equal(t, 3, sh.Owners)
	t16.MinReps, sh.MinReps = 0, 0
	c := tinyConfig(t, "tcp", kind, t16, sh)
	if kind == OwnerProcess {
		selfOwner(t, c)
	}
	passes, lines, err := run(t, c)
	require.NoError(t, err)
	for _, l := range lines {
		if l["workload"] == "engram-remote-sharded" || l["for"] == "engram-remote-sharded" {
			if l["owner"] != "local" { // the local lookup's ceiling
				require.Equal(t, kind, l["owner"], "%v", l)
			}
		}
	}
	for _, wr := range passes[0].Workloads {
		require.NoError(t, wr.Err, wr.Workload.Name)
		require.Equal(t, 2, wr.Verified, "first and last repetitions of %s", wr.Workload.Name)
		require.Len(t, wr.Lines, len(c.Modes), "the one-owner side is a ceiling, not a line")
		for _, l := range wr.Lines {
			require.Zero(t, l.Errors, "%s/%s", l.Workload, l.Mode)
		}
	}
	shr := passes[0].Workloads[1]
	require.False(t, math.IsNaN(shr.ceiling(CeilingOneOwner)), "the sharded workload's one-owner ceiling")
	require.True(t, math.IsNaN(passes[0].Workloads[0].ceiling(CeilingOneOwner)))
	var found bool
	for _, g := range Goals(passes) {
		if strings.Contains(g.Text, "engram-remote-sharded: adaptive p50 / one-owner p50") {
			found = true
			require.False(t, math.IsNaN(g.Value), "%+v", g)
		}
	}
	require.True(t, found, "the sharded goal")
}

// TestManySmallOwners runs many-small's rows from 3 owners (inproc and
// owner processes): every mode verified, no lease left on any owner, and
// the goal against many-small in the same pass computed.
func TestManySmallOwners(t *testing.T) {
	for _, kind := range []string{OwnerInproc, OwnerProcess} {
		t.Run(kind, func(t *testing.T) {
			one, ok := Lookup("many-small")
			require.True(t, ok)
			three, ok := Lookup("many-small-3owners")
			require.True(t, ok)
			one.Small.Count, three.Small.Count = 5000, 5000
			c := tinyConfig(t, "tcp", kind, one, three)
			if kind == OwnerProcess {
				selfOwner(t, c) // this test binary as the owner processes
			}
			passes, _, err := run(t, c)
			require.NoError(t, err)
			p := passes[0]
			require.NoError(t, p.Err)
			require.Zero(t, p.Leaked)
			for _, wr := range p.Workloads {
				require.NoError(t, wr.Err, wr.Workload.Name)
				require.Equal(t, 2*(len(c.Modes)+1), wr.Verified, wr.Workload.Name)
				for _, l := range wr.Lines {
					require.Zero(t, l.Errors, "%s/%s", l.Workload, l.Mode)
				}
			}
			var found bool
			for _, g := range Goals(passes) {
				if strings.HasPrefix(g.Text, "many-small-3owners: adaptive goodput / many-small") {
					found = true
					require.False(t, math.IsNaN(g.Value))
				}
			}
			require.True(t, found)
		})
	}
}

package probe_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/fixture"
	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/probe"
	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/report"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

func newProfiler(t *testing.T) *probe.Profiler {
	t.Helper()
	fixture.RequireEBPF(t)
	p, err := probe.New()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

func read(t *testing.T, p *probe.Profiler) report.Snapshot {
	t.Helper()
	var s report.Snapshot
	require.NoError(t, p.Read(&s))
	return s
}

// modeBucket is the fullest bucket of a histogram.
func modeBucket(h *[report.Buckets]uint64) int {
	best := 0
	for i, c := range h {
		if c > h[best] {
			best = i
		}
	}
	return best
}

// TestStageMedians runs the fixture with stages whose busy waits sit in
// the middle of a log2 bucket (and of one of its sub-buckets) and checks
// what the kernel recorded: every interval, the medians in the right log2
// buckets, the fullest sub-bucket where the wait lies, the bytes; with
// begin/end pairs and with one stage.Next at each boundary.
func TestStageMedians(t *testing.T) {
	for _, next := range []bool{false, true} {
		t.Run(map[bool]string{false: "pairs", true: "next"}[next], func(t *testing.T) { testStageMedians(t, next) })
	}
}

func testStageMedians(t *testing.T, next bool) {
	p := newProfiler(t)
	cal, err := p.Calibrate(5000)
	require.NoError(t, err)
	t.Logf("calibration %+v", cal)
	require.Positive(t, cal.Bias)
	require.Less(t, cal.Bias, 100*time.Microsecond)

	const ops = 200
	stages := "plan=22.5us,pack=180us,decode=1.44ms"
	spec, err := fixture.ParseStages(stages)
	require.NoError(t, err)
	bin := fixture.Build(t, fixture.ProgPackage, "")
	f := fixture.Start(t, bin, "-ops", "200", "-stages", stages, "-pause-at", "0", "-bytes", "264",
		"-next="+strconv.FormatBool(next))
	_, err = p.Attach(f.Cmd.Process.Pid)
	require.NoError(t, err)
	f.Expect("paused 0")
	f.Go()
	n, sum := f.Finish()
	require.Equal(t, ops, n)
	require.Equal(t, fixture.Expect(ops, spec), sum, "the probed fixture computed a different checksum")

	s := read(t, p)
	require.Zero(t, s.Counters.Unmatched)
	require.Zero(t, s.Counters.BadStage)
	require.Zero(t, s.Counters.StoreErrors)
	require.Equal(t, uint64(ops*(len(spec)+1)), s.Intervals())
	if next {
		require.Equal(t, uint64(ops*(len(spec)-1)), s.Counters.Nexts)
		require.Equal(t, uint64(ops*(len(spec)+3)), s.Hits(), "op pair, first begin, nexts, last end")
	} else {
		require.Zero(t, s.Counters.Nexts)
		require.Equal(t, uint64(ops*2*(len(spec)+1)), s.Hits())
	}
	require.Zero(t, s.Stages[report.CalibrationStage].Count, "calibration data must be cleared")
	for _, sp := range spec {
		st := &s.Stages[sp.Stage]
		p50 := report.Quantile(&st.Hist, 0.5)
		t.Logf("%-7s spin %-8v count %d p50 %.1fus mean %.1fus p99 %.1fus", sp.Stage, sp.Spin, st.Count,
			p50/1e3, float64(st.SumNs)/float64(st.Count)/1e3, report.Quantile(&st.Hist, 0.99)/1e3)
		require.Equal(t, uint64(ops), st.Count, sp.Stage.String())
		require.Equal(t, uint64(ops*264), st.Bytes, sp.Stage.String())
		require.Equal(t, report.Log2Bucket(uint64(sp.Spin)), report.Log2Bucket(uint64(p50)),
			"%s: median %.0f ns is not in the log2 bucket of %v", sp.Stage, p50, sp.Spin)
		require.Equal(t, report.BucketOf(uint64(sp.Spin)), modeBucket(&st.Hist),
			"%s: the fullest bucket is not the one holding %v", sp.Stage, sp.Spin)
		var total uint64
		for _, c := range st.Hist {
			total += c
		}
		require.Equal(t, st.Count, total)
	}
	op := &s.Stages[stage.Op]
	require.Equal(t, uint64(ops), op.Count)
	require.Equal(t, uint64(ops*264*len(spec)), op.Bytes)
	var inner uint64
	for _, sp := range spec {
		inner += s.Stages[sp.Stage].SumNs
	}
	require.GreaterOrEqual(t, op.SumNs, inner, "an operation lasts at least as long as its stages")
}

// TestAttachDetach attaches, detaches and attaches again while the fixture
// runs: exactly the operations run while attached are recorded, and the
// fixture runs to its end with the right checksum.
func TestAttachDetach(t *testing.T) {
	p := newProfiler(t)
	bin := fixture.Build(t, fixture.ProgPackage, "")
	stages := "plan=20us,pack=40us"
	spec, err := fixture.ParseStages(stages)
	require.NoError(t, err)
	f := fixture.Start(t, bin, "-ops", "300", "-stages", stages, "-pause-at", "0,100,200")
	pid := f.Cmd.Process.Pid

	f.Expect("paused 0")
	_, err = p.Attach(pid)
	require.NoError(t, err)
	f.Go()
	f.Expect("paused 100")
	s := read(t, p)
	require.Equal(t, uint64(100), s.Stages[stage.Op].Count)
	require.Equal(t, uint64(100), s.Stages[stage.Pack].Count)

	require.NoError(t, p.Detach(pid))
	require.Empty(t, p.Targets())
	f.Go()
	f.Expect("paused 200")
	s = read(t, p)
	require.Equal(t, uint64(100), s.Stages[stage.Op].Count, "a detached process must not be recorded")

	_, err = p.Attach(pid)
	require.NoError(t, err)
	f.Go()
	n, sum := f.Finish()
	require.Equal(t, 300, n)
	require.Equal(t, fixture.Expect(300, spec), sum)
	s = read(t, p)
	require.Equal(t, uint64(200), s.Stages[stage.Op].Count)
	require.Equal(t, uint64(200), s.Stages[stage.Plan].Count)
	require.Zero(t, s.Counters.Unmatched)
	require.NoError(t, p.Detach(pid), "detaching an exited process")
}

// TestRefusals checks the errors for executables and processes the
// profiler cannot use.
func TestRefusals(t *testing.T) {
	p := newProfiler(t)

	stripped := fixture.Build(t, fixture.ProgPackage, "-s -w")
	_, err := probe.CheckExecutable(stripped)
	require.ErrorIs(t, err, probe.ErrStripped)
	f := fixture.Start(t, stripped, "-ops", "1", "-pause-at", "0")
	_, err = p.Attach(f.Cmd.Process.Pid)
	require.ErrorIs(t, err, probe.ErrStripped)
	var ee *probe.ExecError
	require.True(t, errors.As(err, &ee))
	require.Equal(t, f.Cmd.Process.Pid, ee.PID)
	f.Go()
	f.Finish()

	// Markers of another probe ABI: the begin marker's first move replaced.
	good := fixture.Build(t, fixture.ProgPackage, "")
	m, err := probe.CheckExecutable(good)
	require.NoError(t, err)
	require.NotZero(t, m.Next, "the fixture calls stage.Next")
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	b[m.Begin-10] = 0x90
	other := filepath.Join(t.TempDir(), "other-abi")
	require.NoError(t, os.WriteFile(other, b, 0o755))
	_, err = probe.CheckExecutable(other)
	require.ErrorIs(t, err, probe.ErrMarkerABI)

	// A Go program without the engine.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() { println(\"hi\") }\n"), 0o644))
	plain := filepath.Join(dir, "plain")
	build := exec.Command(filepath.Join(runtimeGOROOT(), "bin", "go"), "build", "-o", plain, "main.go")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GO111MODULE=off")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	_, err = probe.CheckExecutable(plain)
	require.ErrorIs(t, err, probe.ErrNoMarkers)

	_, err = probe.CheckExecutable(filepath.Join(dir, "main.go"))
	require.Error(t, err)

	// A process that is gone.
	gone := exec.Command(plain)
	require.NoError(t, gone.Run())
	_, err = p.Attach(gone.Process.Pid)
	require.ErrorIs(t, err, probe.ErrTargetExited)
	_, err = p.Attach(-1)
	require.ErrorIs(t, err, probe.ErrTargetExited)
	require.Empty(t, p.Targets())

	_, err = p.Calibrate(0)
	require.Error(t, err)
	require.NoError(t, p.Close())
	_, err = p.Attach(os.Getpid())
	require.ErrorIs(t, err, probe.ErrClosed)
	require.ErrorIs(t, p.Read(&report.Snapshot{}), probe.ErrClosed)
}

// TestOpenStages fires markers in this process to check the kernel's
// bookkeeping: a stage begun again before it ended starts over, many
// stages open at once overflow some sets (each replaced start shows up as
// a store error and, later, as one unmatched end), an end without a begin
// is unmatched, and stage numbers past the table are counted, not stored.
func TestOpenStages(t *testing.T) {
	p := newProfiler(t)
	_, err := p.AttachSelf()
	require.NoError(t, err)
	base := uint64(1) << 60

	stage.Begin(base, stage.Pack)
	stage.Begin(base, stage.Pack)
	stage.End(base, stage.Pack, 7)
	stage.End(base+1, stage.Pack, 7) // never begun
	s := read(t, p)
	require.Equal(t, uint64(1), s.Stages[stage.Pack].Count)
	require.Equal(t, uint64(7), s.Stages[stage.Pack].Bytes)
	require.Equal(t, uint64(1), s.Counters.Unmatched)
	require.Zero(t, s.Counters.StoreErrors)

	const open = 3000 // against 4096 ways in 2048 sets
	for i := range uint64(open) {
		stage.Begin(base+10+i, stage.Post)
	}
	for i := range uint64(open) {
		stage.End(base+10+i, stage.Post, 1)
	}
	d := read(t, p)
	d = d.Sub(&s)
	t.Logf("%d open at once: %d recorded, %d replaced, %d unmatched", open, d.Stages[stage.Post].Count, d.Counters.StoreErrors, d.Counters.Unmatched)
	require.Equal(t, d.Counters.StoreErrors, d.Counters.Unmatched, "each replaced start leaves one end unmatched")
	require.Equal(t, uint64(open), d.Stages[stage.Post].Count+d.Counters.Unmatched)
	require.Less(t, d.Counters.StoreErrors, uint64(open/10))

	stage.Begin(base, stage.Stage(report.MaxStages))
	stage.End(base, stage.Stage(report.MaxStages+3), 1)
	e := read(t, p)
	require.Equal(t, uint64(2), e.Counters.BadStage-s.Counters.BadStage)
}

// TestSampledChunks runs chunk intervals marked the way the engine marks
// them (at most stage.MaxMarkedChunks per operation, each weighted by the
// chunks it stands for): the recorded count, time and bytes stand for every
// chunk, only the sampled ones were probed, the median lies where the
// chunks' spin does, and the time is weighted like the histogram.
func TestSampledChunks(t *testing.T) {
	p := newProfiler(t)
	_, err := p.Calibrate(5000)
	require.NoError(t, err)
	const ops, chunks = 50, 40
	spin := 45 * time.Microsecond
	marked := 0
	for k := range chunks {
		if m, _ := stage.ChunkSample(k, chunks); m {
			marked++
		}
	}
	require.Less(t, marked, chunks)

	bin := fixture.Build(t, fixture.ProgPackage, "")
	f := fixture.Start(t, bin, "-ops", strconv.Itoa(ops), "-stages", "plan=10us", "-chunks", strconv.Itoa(chunks),
		"-chunk-spin", spin.String(), "-pause-at", "0")
	_, err = p.Attach(f.Cmd.Process.Pid)
	require.NoError(t, err)
	f.Expect("paused 0")
	f.Go()
	n, sum := f.Finish()
	require.Equal(t, ops, n)
	spec, err := fixture.ParseStages("plan=10us")
	require.NoError(t, err)
	require.Equal(t, fixture.ExpectChunks(ops, spec, stage.Scatter, chunks), sum)

	s := read(t, p)
	st := &s.Stages[stage.Scatter]
	require.Equal(t, uint64(ops*chunks), st.Count, "the weights stand for every chunk")
	require.Equal(t, uint64(ops*marked), st.Probes)
	require.Equal(t, uint64(ops*chunks*264), st.Bytes)
	var total uint64
	for _, c := range st.Hist {
		total += c
	}
	require.Equal(t, st.Count, total)
	p50 := report.Quantile(&st.Hist, 0.5)
	require.Equal(t, report.Log2Bucket(uint64(spin)), report.Log2Bucket(uint64(p50)), "median %.0f ns", p50)
	// The time is weighted as the histogram is: it lies between the sums
	// of the buckets' lower and upper edges (an unweighted sum would fall
	// far below).
	var lo, hi float64
	for i, c := range st.Hist {
		lo += float64(c) * float64(report.Lower(i))
		hi += float64(c) * float64(report.Upper(i))
	}
	require.GreaterOrEqual(t, float64(st.SumNs), lo)
	require.LessOrEqual(t, float64(st.SumNs), hi)
	require.Equal(t, uint64(ops*(2+2+2*marked)), s.Hits(), "op, plan and the sampled chunks' pairs")
}

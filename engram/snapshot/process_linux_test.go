//go:build linux

package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// child is a running copy of the test binary in a child mode.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr lockedBuffer
}

// lockedBuffer collects a child's stderr, which os/exec copies in from
// its own goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startChild(t testing.TB, mode string, env ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0])}
	c.cmd.Env = append(os.Environ(), append([]string{childEnv + "=" + mode}, env...)...)
	c.cmd.Stderr = &c.stderr
	var err error
	c.stdin, err = c.cmd.StdinPipe()
	require.NoError(t, err)
	out, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	c.stdout = bufio.NewReader(out)
	require.NoError(t, c.cmd.Start())
	return c
}

// line reads the child's next line of output.
func (c *child) line(t testing.TB) string {
	t.Helper()
	s, err := c.stdout.ReadString('\n')
	require.NoError(t, err, "child output ended; stderr: %s", c.stderr.String())
	return strings.TrimSuffix(s, "\n")
}

// kill sends SIGKILL, reaps the child and returns the output it had left.
func (c *child) kill(t testing.TB) string {
	t.Helper()
	require.NoError(t, c.cmd.Process.Kill())
	rest, _ := io.ReadAll(c.stdout)
	_ = c.stdin.Close()
	_ = c.cmd.Wait() // "signal: killed", or the exit status if it was done
	return string(rest)
}

// report runs a child to its end and decodes its JSON report.
func runReport(t testing.TB, mode string, env ...string) childReport {
	t.Helper()
	c := startChild(t, mode, env...)
	_ = c.stdin.Close()
	var r childReport
	require.NoError(t, json.NewDecoder(c.stdout).Decode(&r), "stderr: %s", c.stderr.String())
	require.NoError(t, c.cmd.Wait(), "stderr: %s", c.stderr.String())
	if r.Skip != "" {
		t.Skipf("child cannot run here: %s", r.Skip)
	}
	require.Empty(t, r.Err)
	return r
}

func crashEnv(dir string, key uint64, fallback bool, spin time.Duration) []string {
	fb := "0"
	if fallback {
		fb = "1"
	}
	return []string{envDir + "=" + dir, envKey + "=" + strconv.FormatUint(key, 10),
		envFallback + "=" + fb, envSpin + "=" + strconv.FormatInt(int64(spin), 10)}
}

// TestCrashDuringCreate kills a child process with SIGKILL at random
// moments of Create, spread over the whole of it and past its end, at
// least 200 times, on both publishing paths. After each kill the
// directory must hold either no table or the complete one, byte for byte,
// and nothing that List or Open would take for a table.
func TestCrashDuringCreate(t *testing.T) {
	const runs = 240
	const spin = 30 * time.Microsecond // per write call: about 66 calls
	rng := newRand(t)
	root := t.TempDir()

	// Calibrate: uninterrupted runs give the time Create takes here, with
	// this process busy-waiting as it does before a kill (on a small
	// machine that slows the child down).
	var durations []time.Duration
	for i := range 5 {
		dir := filepath.Join(root, "calibrate-"+strconv.Itoa(i))
		require.NoError(t, os.Mkdir(dir, 0o755))
		c := startChild(t, "crash", crashEnv(dir, 1, i%2 == 1, spin)...)
		require.Equal(t, "ready", c.line(t))
		lines := make(chan string, 1)
		go func() {
			s, _ := c.stdout.ReadString('\n')
			lines <- s
		}()
		var done string
	wait:
		for {
			select {
			case done = <-lines:
				break wait
			default:
			}
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(done, "done ")), 10, 64)
		require.NoError(t, err, "child said %q; stderr: %s", done, c.stderr.String())
		c.kill(t)
		durations = append(durations, time.Duration(ns))
	}
	// Kill at uniform moments over twice the median: about half the kills
	// land during Create, the rest after it.
	slices.Sort(durations)
	window := 2 * durations[len(durations)/2]
	t.Logf("Create takes %v here; killing at random in [0, %v)", durations, window)

	var absent, published, afterDone, leftovers int
	for i := range runs {
		dir := filepath.Join(root, strconv.Itoa(i))
		require.NoError(t, os.Mkdir(dir, 0o755))
		key, fallback := rng.Uint64(), i%2 == 1
		delay := time.Duration(rng.Int64N(int64(window)))
		c := startChild(t, "crash", crashEnv(dir, key, fallback, spin)...)
		require.Equal(t, "ready", c.line(t))
		for start := time.Now(); time.Since(start) < delay; {
			// Busy-wait: sleeps are too coarse for these delays.
		}
		rest := c.kill(t)
		require.NotContains(t, rest, "error", "the child's Create failed: %s %s", rest, c.stderr.String())
		if strings.Contains(rest, "done") {
			afterDone++
		}

		names := entries(t, dir)
		table := false
		for _, n := range names {
			switch {
			case n == FileName(crashSpec.Name):
				table = true
			case fallback && tempTable(n) == crashSpec.Name:
				leftovers++
			default:
				t.Fatalf("run %d: unexpected file %q after the kill", i, n)
			}
		}
		specs, err := List(dir)
		require.NoError(t, err, "run %d", i)
		tbl, err := Open(dir, crashSpec.Name, &crashSpec, nil)
		if !table {
			absent++
			require.ErrorIs(t, err, ErrNotExist, "run %d", i)
			require.Empty(t, specs)
		} else {
			published++
			require.NoError(t, err, "run %d: a published table must be complete", i)
			require.True(t, tbl.Verified)
			require.True(t, bytes.Equal(makeRows(crashSpec, key), tbl.Rows), "run %d: rows differ", i)
			require.NoError(t, tbl.Close())
			require.Equal(t, []Spec{crashSpec}, specs)
		}
		if strings.Contains(rest, "done") {
			require.True(t, table, "run %d: Create returned, so the table must exist", i)
		}
		_, err = CleanTemp(dir)
		require.NoError(t, err)
		if table {
			require.Equal(t, []string{FileName(crashSpec.Name)}, entries(t, dir))
		} else {
			require.Empty(t, entries(t, dir))
		}
	}
	t.Logf("%d kills: %d left no table, %d a complete one (%d of them after Create returned); %d hidden temporary files cleaned",
		runs, absent, published, afterDone, leftovers)
	require.NotZero(t, absent, "some kills must land during Create")
	require.NotZero(t, published, "some kills must land after publishing")
}

// TestSharedPages checks that two processes mapping one table share its
// page-cache pages: a child maps and pins it while this process holds it
// too, and reports its mapping's Shared_Clean from /proc/self/smaps. As a
// control, once this process has closed it, the child's pages are private.
func TestSharedPages(t *testing.T) {
	spec := Spec{Name: "shared", NumRows: 16 << 10, RowBytes: 256} // 4 MiB
	rows := makeRows(spec, 21)
	dir := newDir(t, "ns")
	require.NoError(t, Create(dir, spec, rows, nil))
	page := int64(os.Getpagesize())
	fullKB := (spec.Size() + page - 1) / page * page / 1024
	env := []string{envDir + "=" + dir, envName + "=" + spec.Name}

	tbl, err := Open(dir, spec.Name, &spec, &OpenOptions{Pin: PinBestEffort})
	require.NoError(t, err)
	r := runReport(t, "share", env...)
	t.Logf("while both map it, the child's mapping: %+v", r)
	require.Equal(t, fullKB, r.RssKB, "the child has it all resident")
	require.Equal(t, fullKB, r.SharedKB, "every page is shared")
	require.Zero(t, r.PrivateKB)
	mine := residentKB(t, tbl.Rows)
	require.Equal(t, fullKB, mine["Rss"])
	require.NoError(t, tbl.Close())

	r = runReport(t, "share", env...)
	t.Logf("alone, the child's mapping: %+v", r)
	require.Equal(t, fullKB, r.RssKB)
	require.Zero(t, r.SharedKB, "no other process maps it now")
	require.Equal(t, fullKB, r.PrivateKB)
}

// TestPinRefusedByKernel runs Open in a child without CAP_IPC_LOCK and
// with RLIMIT_MEMLOCK at zero, so the kernel itself refuses mlock:
// PinRequired fails with ErrPin, PinBestEffort falls back to populated,
// unlocked pages.
func TestPinRefusedByKernel(t *testing.T) {
	spec := Spec{Name: "nolock", NumRows: 4 << 10, RowBytes: 256} // 1 MiB
	dir := newDir(t, "ns")
	require.NoError(t, Create(dir, spec, makeRows(spec, 5), nil))
	r := runReport(t, "nolock", envDir+"="+dir, envName+"="+spec.Name)
	t.Logf("child: %+v", r)
	require.True(t, r.RequiredPin, "PinRequired: %s", r.RequiredErr)
	require.False(t, r.Locked)
	require.True(t, r.BestPinErr)
	require.True(t, r.BestRowsOK)
	require.Equal(t, spec.Size()/1024, r.RssKB, "populated though unlocked")
}

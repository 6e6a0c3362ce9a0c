package owner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// runMain starts Main in a goroutine and returns its stdout lines and
// exit status channel.
func runMain(t *testing.T, args []string, stdin io.Reader) (<-chan string, <-chan int, *bytes.Buffer) {
	t.Helper()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Main(context.Background(), "scatterd", args, stdin, pw, &stderr)
		pw.Close()
	}()
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines, code, &stderr
}

func nextLine(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		require.True(t, ok, "stdout ended early")
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30 s")
		return ""
	}
}

// TestMainServesAndStopsOnSIGTERM runs the daemon in-process: it
// publishes its record, serves a READ, and on SIGTERM withdraws the record
// and reports no leaked leases.
func TestMainServesAndStopsOnSIGTERM(t *testing.T) {
	r := newRand(t)
	seed := r.Uint64N(1 << 62)
	dirPath := filepath.Join(t.TempDir(), "discovery.json")
	lines, code, stderr := runMain(t, []string{"-size", "4MiB", "-seed", strconv.FormatUint(seed, 10), "-staging", "1MiB",
		"-discovery", dirPath, "-name", "test/scatterd"}, nil)
	var ready ReadyEvent
	require.NoError(t, json.Unmarshal([]byte(nextLine(t, lines)), &ready))
	require.Equal(t, "ready", ready.Event)
	require.Equal(t, "test/scatterd", ready.Name)
	require.Equal(t, TransportTCP, ready.Transport)
	require.NotNil(t, ready.Seed)
	require.Equal(t, seed, *ready.Seed)
	require.Equal(t, []EventRegion{{Name: "table", Bytes: 4 << 20, Access: "remote-read"}}, ready.Regions)

	dir, err := discovery.NewFile(dirPath)
	require.NoError(t, err)
	defer dir.Close()
	rec, err := dir.Lookup(testContext(t), "test/scatterd")
	require.NoError(t, err)
	require.Equal(t, ready.Addr, rec.Addr)

	q := connect(t, TransportTCP, rec.Addr, 1<<20)
	table := region(t, q.conn, "table")
	q.post(t, []verbs.WorkRequest{{ID: 1, Op: verbs.OpRead, Len: 264, LocalKey: q.local.Key(), RemoteKey: table.Key, RemoteOff: 264 * 1000}})
	require.Equal(t, -1, pattern.Check(q.local.Bytes()[:264], seed, 264*1000))
	require.NoError(t, q.conn.Close())

	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGTERM))
	var closed ClosedEvent
	require.NoError(t, json.Unmarshal([]byte(nextLine(t, lines)), &closed))
	require.Equal(t, "closed", closed.Event)
	require.Equal(t, "signal", closed.Reason)
	require.Zero(t, closed.LeakedLeases)
	require.Empty(t, closed.Error)
	require.Equal(t, 0, <-code, "stderr: %s", stderr)
	require.Contains(t, stderr.String(), "serving table on tcp")
	_, err = dir.Lookup(testContext(t), "test/scatterd")
	require.ErrorIs(t, err, discovery.ErrNotFound, "the record was withdrawn")
}

func TestMainStopsAtStdinEOF(t *testing.T) {
	pr, pw := io.Pipe()
	lines, code, stderr := runMain(t, []string{"-transport", "shm", "-size", "1MiB", "-staging", "1MiB",
		"-discovery", "off", "-stdin-eof", "-quiet"}, pr)
	var ready ReadyEvent
	require.NoError(t, json.Unmarshal([]byte(nextLine(t, lines)), &ready))
	require.Equal(t, TransportSHM, ready.Transport)
	require.True(t, strings.HasPrefix(ready.Addr, "@scatterd-"))
	require.Empty(t, ready.Name)
	require.NoError(t, pw.Close())
	var closed ClosedEvent
	require.NoError(t, json.Unmarshal([]byte(nextLine(t, lines)), &closed))
	require.Equal(t, "standard input closed", closed.Reason)
	require.Equal(t, 0, <-code)
	require.Empty(t, stderr.String(), "-quiet prints only events")
}

func TestMainUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"-bogus"}, "flag provided but not defined"},
		{"bad size", []string{"-size", "lots"}, `invalid value "lots" for flag -size`},
		{"no source", []string{"-discovery", "off"}, "set a file to serve or a size"},
		{"both sources", []string{"-size", "1MiB", "-file", "/etc/hostname", "-discovery", "off"}, "not both"},
		{"bad transport", []string{"-size", "1MiB", "-transport", "udp", "-discovery", "off"}, "want tcp or shm"},
		{"stray argument", []string{"serve"}, "unexpected"},
		{"bad network", []string{"-size", "1MiB", "-allow-net", "10.0.0.0/33", "-discovery", "off"}, `invalid value "10.0.0.0/33" for flag -allow-net`},
		{"networks over shm", []string{"-size", "1MiB", "-transport", "shm", "-read-net", "10.0.0.1", "-discovery", "off"}, "admission by network is for tcp and ucx"},
		{"bad name", []string{"-size", "1MiB", "-name", "a//b", "-discovery", filepath.Join(t.TempDir(), "d.json")}, "Name"},
		{"bad attribute", []string{"-size", "1MiB", "-attr", "shard", "-discovery", "off"}, "want KEY=VALUE"},
		{"attribute twice", []string{"-size", "1MiB", "-attr", "a=1", "-attr", "a=2", "-discovery", "off"}, "given twice"},
		{"bad spec", []string{"-size", "1MiB", "-discovery", "http://nowhere/x"}, "bad directory spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			got := Main(context.Background(), "scatterd", tc.args, nil, &out, &errb)
			require.Equal(t, 2, got)
			require.Contains(t, errb.String(), tc.want)
			require.Empty(t, out.String(), "no event for a usage error")
		})
	}
	var out, errb bytes.Buffer
	require.Equal(t, 0, Main(context.Background(), "scatterd", []string{"-h"}, nil, &out, &errb))
	require.Contains(t, errb.String(), "-bench-control")
}

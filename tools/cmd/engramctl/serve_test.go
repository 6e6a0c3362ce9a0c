package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// serving runs engramctl serve until the test cancels it; it returns the
// ready line's address and a stop function that waits for the exit.
func serving(t *testing.T, args ...string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve"}, args...), pw, &errb)
		pw.Close()
	}()
	var ready struct {
		Event, Addr string
		Tables      []string
	}
	require.NoError(t, json.NewDecoder(pr).Decode(&ready), errb.String())
	require.Equal(t, "ready", ready.Event)
	go io.Copy(io.Discard, pr)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			require.Equal(t, 0, <-done, errb.String())
		}
	}
	t.Cleanup(stop)
	return ready.Addr, stop
}

// TestServeSharded: a table cut into two shards, populated (from one
// generated stream) over two owners' directories, the first shard on both,
// served by engramctl serve into one discovery file; a remote store opened
// from the file alone reads the whole table's rows, before and after the
// first owner stops; inspect -discovery lists the records.
func TestServeSharded(t *testing.T) {
	disc := filepath.Join(t.TempDir(), "discovery.json")
	dirA, dirB := t.TempDir(), t.TempDir()
	const R, rows, cut, seed = 264, 900, 350, 11
	// The first owner's shard from a raw file of the whole table (its
	// slice), the second owner's two from the generated stream (each at
	// its rows' offset in it).
	raw := filepath.Join(t.TempDir(), "a.raw")
	whole := make([]byte, rows*R)
	pattern.Fill(whole, seed, 0)
	require.NoError(t, os.WriteFile(raw, whole, 0o644))
	for _, c := range [][]string{
		{"create", "-dir", dirA, "-ns", "sh", "-table", "a.s0:350:264:a@0"},
		{"populate", "-dir", dirA, "-ns", "sh", "-table", "a.s0", "-from", raw},
		{"create", "-dir", dirB, "-ns", "sh", "-table", "a.s0:350:264:a@0", "-table", "a.s1:550:264:a@350"},
		{"populate", "-dir", dirB, "-ns", "sh", "-table", "a.s0", "-gen", "11"},
		{"populate", "-dir", dirB, "-ns", "sh", "-table", "a.s1", "-gen", "11"},
	} {
		_, errs, code := ctl(t, c...)
		require.Equal(t, 0, code, "%v: %s", c, errs)
	}

	_, stopA := serving(t, "-dir", dirA, "-ns", "sh", "-discovery", disc)
	serving(t, "-dir", dirB, "-ns", "sh", "-discovery", disc)
	out, errs, code := ctl(t, "inspect", "-dir", dirB, "-ns", "sh", "-discovery", disc)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "3 record(s)")
	require.Contains(t, out, "rows [350, 900) of a")

	d, err := discovery.NewFile(disc)
	require.NoError(t, err)
	defer d.Close()
	tr := tcp.New(tcp.Config{})
	defer tr.Close()
	rs, err := engram.Open(context.Background(), engram.Config{Tables: map[string]engram.TableSpec{"a": {NumRows: rows, RowBytes: R}},
		Namespace: "sh", Remote: &engram.RemoteConfig{Transport: tr, Directory: d, BufferBytes: 4 << 20}})
	require.NoError(t, err)
	defer rs.Close()
	check := func() {
		const T, K = 40, 6
		ids := make([]int64, T*K)
		for i := range ids {
			ids[i] = rand.Int64N(rows)
		}
		buf, err := rs.NewBuffer(T * K * R)
		require.NoError(t, err)
		defer buf.Release()
		names := []string{"a", "a", "a", "a", "a", "a"}
		require.NoError(t, rs.Lookup(names, engram.IDs64(ids, T, K), engram.TokenMajor(buf.Bytes(), T, K, R), nil))
		for i, id := range ids {
			require.Equal(t, whole[id*R:(id+1)*R], buf.Bytes()[i*R:(i+1)*R], "row %d (id %d)", i, id)
		}
	}
	check()
	stopA() // its records go; the first shard's replica serves
	check()
	out, _, _ = ctl(t, "inspect", "-dir", dirB, "-ns", "sh", "-discovery", disc)
	require.Contains(t, out, "2 record(s)")

	// A shard flag that does not parse.
	_, errs, code = ctl(t, "create", "-dir", dirA, "-ns", "sh", "-table", "x:1:1:a")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "TABLE@FIRSTROW")
}

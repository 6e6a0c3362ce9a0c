package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/engram/snapshot"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
)

func ctl(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestWorkflow(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := ctl(t, "create", "-dir", dir, "-ns", "m", "-table", "emb:1000:264", "-table", "small:10:64")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "m/emb: 1000 rows x 264 B")

	// Redeclaring with another shape is refused; the same shape is fine.
	_, errs, code = ctl(t, "create", "-dir", dir, "-ns", "m", "-table", "emb:1001:264")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "already declared")
	_, _, code = ctl(t, "create", "-dir", dir, "-ns", "m", "-table", "emb:1000:264")
	require.Equal(t, 0, code)

	_, errs, code = ctl(t, "populate", "-dir", dir, "-ns", "m", "-table", "emb", "-gen", "42")
	require.Equal(t, 0, code, errs)
	_, errs, code = ctl(t, "populate", "-dir", dir, "-ns", "m", "-table", "emb", "-gen", "43")
	require.Equal(t, 1, code, "populate is create-only")
	require.Contains(t, errs, "already populated")

	// From a raw file: the size must match exactly.
	raw := filepath.Join(dir, "small.raw")
	rows := make([]byte, 10*64)
	pattern.Fill(rows, 7, 0)
	require.NoError(t, os.WriteFile(raw, rows[:100], 0o644))
	_, errs, code = ctl(t, "populate", "-dir", dir, "-ns", "m", "-table", "small", "-from", raw)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "needs exactly 640")
	require.NoError(t, os.WriteFile(raw, rows, 0o644))
	_, errs, code = ctl(t, "populate", "-dir", dir, "-ns", "m", "-table", "small", "-from", raw)
	require.Equal(t, 0, code, errs)

	out, errs, code = ctl(t, "inspect", "-dir", dir, "-ns", "m")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "emb")
	require.Contains(t, out, "checksum blocks")

	out, errs, code = ctl(t, "verify", "-dir", dir, "-ns", "m")
	require.Equal(t, 0, code, errs)
	require.Equal(t, 2, strings.Count(out, " ok ("))

	// lookup prints the generated rows: row 5 of emb is stream bytes 5*264...
	out, errs, code = ctl(t, "lookup", "-dir", dir, "-ns", "m", "-table", "emb", "-k", "2", "-ids", "5,-1")
	require.Equal(t, 0, code, errs)
	want := make([]byte, 264)
	pattern.Fill(want, 42, 5*264)
	require.Contains(t, out, "[0,0] emb id 5: "+hex.EncodeToString(want))
	require.Contains(t, out, "[0,1] emb id -1: skipped")
	_, errs, code = ctl(t, "lookup", "-dir", dir, "-ns", "m", "-table", "emb", "-ids", "1000")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "id out of range")

	out, errs, code = ctl(t, "bench", "-dir", dir, "-ns", "m", "-table", "emb", "-t", "64", "-k", "4", "-reps", "3")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "lookup / pack-only goodput")

	// A damaged file fails verify.
	path := filepath.Join(dir, "m", snapshot.FileName("emb"))
	require.NoError(t, os.Chmod(path, 0o644))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	fi, err := f.Stat()
	require.NoError(t, err)
	b := make([]byte, 1)
	_, err = f.ReadAt(b, fi.Size()-1)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{^b[0]}, fi.Size()-1)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	out, _, code = ctl(t, "verify", "-dir", dir, "-ns", "m", "-table", "emb")
	require.Equal(t, 1, code)
	require.Contains(t, out, "BAD")
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"create", "-ns", "m"},
		{"inspect", "-dir", "/tmp", "extra"},
	} {
		_, _, code := ctl(t, args...)
		require.Equal(t, 2, code, "%q", args)
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"create", "-dir", dir, "-table", "x:0:1"},
		{"create", "-dir", dir, "-table", "x:1"},
		{"create", "-dir", dir, "-table", "../x:1:1"},
		{"create", "-dir", dir},
		{"inspect", "-dir", dir, "-ns", "nothing"},
		{"populate", "-dir", dir, "-table", "x"},
	} {
		_, _, code := ctl(t, args...)
		require.Equal(t, 1, code, "%q", args)
	}
}

// TestVerifyDeclared checks that verify holds every declared table (one
// the namespace's tables.json lists) to its declaration: a table that is
// declared but has no snapshot file, or whose file holds another shape,
// fails the command and is named with the reason, in the whole-namespace
// form and with -table.
func TestVerifyDeclared(t *testing.T) {
	dir := t.TempDir()
	_, errs, code := ctl(t, "create", "-dir", dir, "-ns", "m", "-table", "emb:1000:264", "-table", "small:10:64", "-table", "shape:10:64")
	require.Equal(t, 0, code, errs)
	_, errs, code = ctl(t, "populate", "-dir", dir, "-ns", "m", "-table", "emb", "-gen", "1")
	require.Equal(t, 0, code, errs)
	// shape's file holds 11 rows, not the declared 10.
	other := snapshot.Spec{Name: "shape", NumRows: 11, RowBytes: 64}
	rows := make([]byte, other.Size())
	pattern.Fill(rows, 3, 0)
	require.NoError(t, snapshot.Create(filepath.Join(dir, "m"), other, rows, nil))

	for _, tc := range []struct {
		desc    string
		table   string
		code    int
		out     []string // lines of stdout, each holding all of these
		errText []string
	}{
		{"populated", "emb", 0, []string{"emb", " ok ("}, nil},
		{"declared, absent", "small", 1,
			[]string{"small", "MISSING", "declared in tables.json as 10 rows x 64 B, not populated", snapshot.FileName("small") + " is absent"},
			[]string{"small (declared, not populated)"}},
		{"declared, other shape", "shape", 1,
			[]string{"shape", "MISMATCH", "expected"},
			[]string{"shape (file differs from the declaration)"}},
		{"whole namespace", "", 1, nil,
			[]string{"2 of 3 declared tables failed", "small (declared, not populated)", "shape (file differs from the declaration)"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			args := []string{"verify", "-dir", dir, "-ns", "m"}
			if tc.table != "" {
				args = append(args, "-table", tc.table)
			}
			out, errs, code := ctl(t, args...)
			require.Equal(t, tc.code, code, "stdout: %s\nstderr: %s", out, errs)
			for _, s := range tc.out {
				require.Contains(t, out, s)
			}
			for _, s := range tc.errText {
				require.Contains(t, errs, s)
			}
			if tc.table == "" {
				require.Contains(t, out, "emb")
				require.Contains(t, out, " ok (")
				require.Contains(t, out, "small")
				require.Contains(t, out, "MISSING")
				require.Contains(t, out, "MISMATCH")
			}
		})
	}
}

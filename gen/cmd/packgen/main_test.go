package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/gen/packgen"
)

func TestRun(t *testing.T) {
	want, err := packgen.Generate()
	require.NoError(t, err)

	t.Run("file", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "pack_gen.go")
		require.NoError(t, os.WriteFile(out, []byte("stale"), 0o644))
		var stdout, stderr bytes.Buffer
		require.NoError(t, run([]string{"-o", out}, &stdout, &stderr))
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		require.Zero(t, stdout.Len())
		require.Zero(t, stderr.Len())
	})
	t.Run("stdout", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		require.NoError(t, run([]string{"-o", "-"}, &stdout, &stderr))
		require.Equal(t, string(want), stdout.String())
	})
	t.Run("extra-argument", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		require.ErrorContains(t, run([]string{"-o", "-", "x.go"}, &stdout, &stderr), "unexpected arguments")
		require.Zero(t, stdout.Len())
	})
	t.Run("unknown-flag", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		require.Error(t, run([]string{"-x"}, &stdout, &stderr))
		require.Contains(t, stderr.String(), "flag provided but not defined")
	})
	t.Run("help", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		require.ErrorIs(t, run([]string{"-h"}, &stdout, &stderr), flag.ErrHelp)
		require.Contains(t, stderr.String(), "output file")
	})
	t.Run("unwritable", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		out := filepath.Join(t.TempDir(), "missing", "pack_gen.go")
		require.Error(t, run([]string{"-o", out}, &stdout, &stderr))
	})
}

package main

import (
	"archive/zip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// writeTree creates files (slash paths relative to root) with their contents.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

func zipNames(t *testing.T, path string) []string {
	t.Helper()
	r, err := zip.OpenReader(path)
	require.NoError(t, err)
	defer r.Close()
	var names []string
	for _, f := range r.File {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	return names
}

func TestWriteLayout(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	gomod := "module example.com/Big/a\n\ngo 1.26.0\n"
	writeTree(t, filepath.Join(src, "a"), map[string]string{
		"go.mod":             gomod,
		"a.go":               "package a\n",
		"sub/sub.go":         "package sub\n",
		"nested/go.mod":      "module example.com/Big/a/nested\n",
		"nested/nested.go":   "package nested\n",
		".git/HEAD":          "ref: refs/heads/main\n",
		"testdata/blob.bin":  "\x01\x02",
		"vendor/x/vendor.go": "package x\n",
	})
	writeTree(t, filepath.Join(src, "nested"), map[string]string{
		"go.mod": "module example.com/Big/a/nested\n",
		"n.go":   "package nested\n",
	})
	require.NoError(t, run([]string{"-o", out,
		"example.com/Big/a@v0.0.0=" + filepath.Join(src, "a"),
		"example.com/Big/a/nested@v0.1.0=" + filepath.Join(src, "nested"),
	}, io.Discard))

	dir := filepath.Join(out, "example.com", "!big", "a", "@v")
	list, err := os.ReadFile(filepath.Join(dir, "list"))
	require.NoError(t, err)
	require.Equal(t, "v0.0.0\n", string(list))

	info, err := os.ReadFile(filepath.Join(dir, "v0.0.0.info"))
	require.NoError(t, err)
	var got struct {
		Version string
		Time    time.Time
	}
	require.NoError(t, json.Unmarshal(info, &got))
	require.Equal(t, "v0.0.0", got.Version)
	require.False(t, got.Time.IsZero())

	mod, err := os.ReadFile(filepath.Join(dir, "v0.0.0.mod"))
	require.NoError(t, err)
	require.Equal(t, gomod, string(mod))

	// The nested module, VCS and vendor directories stay out; the
	// prefix carries the unescaped path.
	require.Equal(t, []string{
		"example.com/Big/a@v0.0.0/a.go",
		"example.com/Big/a@v0.0.0/go.mod",
		"example.com/Big/a@v0.0.0/sub/sub.go",
		"example.com/Big/a@v0.0.0/testdata/blob.bin",
	}, zipNames(t, filepath.Join(dir, "v0.0.0.zip")))

	nested := filepath.Join(out, "example.com", "!big", "a", "nested", "@v")
	require.Equal(t, []string{
		"example.com/Big/a/nested@v0.1.0/go.mod",
		"example.com/Big/a/nested@v0.1.0/n.go",
	}, zipNames(t, filepath.Join(nested, "v0.1.0.zip")))
}

func TestWriteListsEveryVersion(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	writeTree(t, src, map[string]string{"go.mod": "module example.com/m\n", "m.go": "package m\n"})
	require.NoError(t, run([]string{"-o", out,
		"example.com/m@v0.2.0=" + src, "example.com/m@v0.10.0=" + src, "example.com/m@v0.2.0=" + src,
	}, io.Discard))
	list, err := os.ReadFile(filepath.Join(out, "example.com", "m", "@v", "list"))
	require.NoError(t, err)
	require.Equal(t, "v0.2.0\nv0.10.0\n", string(list))
}

func TestRunRejects(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"go.mod": "module example.com/other\n", "m.go": "package m\n"})
	for _, tc := range []struct {
		name string
		args []string
		err  error
	}{
		{"no output", []string{"example.com/m@v0.0.0=" + src}, ErrUsage},
		{"no modules", []string{"-o", t.TempDir()}, ErrUsage},
		{"no directory", []string{"-o", t.TempDir(), "example.com/m@v0.0.0"}, ErrUsage},
		{"no version", []string{"-o", t.TempDir(), "example.com/m=" + src}, ErrUsage},
		{"unknown flag", []string{"-x"}, ErrUsage},
		{"other module", []string{"-o", t.TempDir(), "example.com/m@v0.0.0=" + src}, ErrModulePath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, run(tc.args, io.Discard), tc.err)
		})
	}
	require.Error(t, run([]string{"-o", t.TempDir(), "example.com/m@latest=" + src}, io.Discard))
}

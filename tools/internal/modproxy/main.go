package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

var (
	// ErrUsage reports a malformed command line.
	ErrUsage = errors.New("modproxy: usage: modproxy -o DIR MODULE@VERSION=SRCDIR [...]")
	// ErrModulePath reports a source directory whose go.mod names another module.
	ErrModulePath = errors.New("modproxy: go.mod names another module")
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("modproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "directory to write the proxy into")
	if err := fs.Parse(args); err != nil {
		return ErrUsage
	}
	if *out == "" || fs.NArg() == 0 {
		return ErrUsage
	}
	srcs := make([]source, 0, fs.NArg())
	for _, arg := range fs.Args() {
		s, err := parseSource(arg)
		if err != nil {
			return err
		}
		srcs = append(srcs, s)
	}
	return write(*out, srcs, time.Now().UTC().Truncate(time.Second))
}

// source is one module version and the directory it is made from.
type source struct {
	mod module.Version
	dir string
}

// parseSource parses MODULE@VERSION=SRCDIR.
func parseSource(arg string) (source, error) {
	mv, dir, ok := strings.Cut(arg, "=")
	if !ok || dir == "" {
		return source{}, fmt.Errorf("%w (got %q)", ErrUsage, arg)
	}
	path, version, ok := strings.Cut(mv, "@")
	if !ok {
		return source{}, fmt.Errorf("%w (got %q)", ErrUsage, arg)
	}
	m := module.Version{Path: path, Version: version}
	if err := module.Check(path, version); err != nil {
		return source{}, fmt.Errorf("modproxy: %w", err)
	}
	return source{mod: m, dir: dir}, nil
}

// write writes every source's .info, .mod and .zip into out, and one list
// per module path.
func write(out string, srcs []source, at time.Time) error {
	versions := map[string][]string{}
	for _, s := range srcs {
		dir, err := versionDir(out, s.mod.Path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("modproxy: %w", err)
		}
		if err := writeVersion(dir, s, at); err != nil {
			return fmt.Errorf("modproxy: %s: %w", s.mod, err)
		}
		versions[dir] = append(versions[dir], s.mod.Version)
	}
	for dir, vs := range versions {
		slices.SortFunc(vs, semver.Compare)
		list := strings.Join(slices.Compact(vs), "\n") + "\n"
		if err := os.WriteFile(filepath.Join(dir, "list"), []byte(list), 0o644); err != nil {
			return fmt.Errorf("modproxy: %w", err)
		}
	}
	return nil
}

// versionDir is out/<escaped path>/@v.
func versionDir(out, path string) (string, error) {
	esc, err := module.EscapePath(path)
	if err != nil {
		return "", fmt.Errorf("modproxy: %w", err)
	}
	return filepath.Join(out, filepath.FromSlash(esc), "@v"), nil
}

func writeVersion(dir string, s source, at time.Time) error {
	esc, err := module.EscapeVersion(s.mod.Version)
	if err != nil {
		return err
	}
	base := filepath.Join(dir, esc)
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{s.mod.Version, at})
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".info", info, 0o644); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(s.dir, "go.mod"))
	if err != nil {
		return err
	}
	if got := modfile.ModulePath(gomod); got != s.mod.Path {
		return fmt.Errorf("%w: %s/go.mod says module %q", ErrModulePath, s.dir, got)
	}
	if err := os.WriteFile(base+".mod", gomod, 0o644); err != nil {
		return err
	}
	f, err := os.Create(base + ".zip")
	if err != nil {
		return err
	}
	if err := zip.CreateFromDir(f, s.mod, s.dir); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

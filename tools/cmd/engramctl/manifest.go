package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/scatterkit/scatterkit/engram"
)

// manifestName is the file in a namespace directory that declares its
// tables for engramctl.
const manifestName = "tables.json"

type manifestTable struct {
	NumRows  int64 `json:"num_rows"`
	RowBytes int   `json:"row_bytes"`
}

type manifest struct {
	Namespace string                   `json:"namespace"`
	Tables    map[string]manifestTable `json:"tables"`
}

func (m *manifest) specs() map[string]engram.TableSpec {
	out := make(map[string]engram.TableSpec, len(m.Tables))
	for name, t := range m.Tables {
		out[name] = engram.TableSpec{NumRows: t.NumRows, RowBytes: t.RowBytes}
	}
	return out
}

func (m *manifest) names() []string {
	var out []string
	for name := range m.Tables {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func manifestPath(dir, ns string) string { return filepath.Join(dir, ns, manifestName) }

func readManifest(dir, ns string) (*manifest, error) {
	b, err := os.ReadFile(manifestPath(dir, ns))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("namespace %q in %s has no %s: declare its tables with engramctl create", ns, dir, manifestName)
		}
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestPath(dir, ns), err)
	}
	if m.Namespace != ns {
		return nil, fmt.Errorf("%s: declares namespace %q, not %q", manifestPath(dir, ns), m.Namespace, ns)
	}
	if len(m.Tables) == 0 {
		return nil, fmt.Errorf("%s: declares no tables", manifestPath(dir, ns))
	}
	return &m, nil
}

// writeManifest replaces the manifest atomically (temp file, sync,
// rename).
func writeManifest(dir, ns string, m *manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	path := manifestPath(dir, ns)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tables-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// parseTableFlag parses NAME:ROWS:ROWBYTES.
func parseTableFlag(v string) (string, manifestTable, error) {
	parts := strings.Split(v, ":")
	if len(parts) != 3 {
		return "", manifestTable{}, fmt.Errorf("-table %q: want NAME:ROWS:ROWBYTES", v)
	}
	rows, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || rows < 1 {
		return "", manifestTable{}, fmt.Errorf("-table %q: rows must be a positive integer", v)
	}
	rb, err := strconv.Atoi(parts[2])
	if err != nil || rb < 1 {
		return "", manifestTable{}, fmt.Errorf("-table %q: row bytes must be a positive integer", v)
	}
	spec := engram.TableSpec{NumRows: rows, RowBytes: rb}
	if spec.Size() < 0 {
		return "", manifestTable{}, fmt.Errorf("-table %q: size overflows", v)
	}
	return parts[0], manifestTable{NumRows: rows, RowBytes: rb}, nil
}

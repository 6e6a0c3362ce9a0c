package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/engram/snapshot"
)

// manifestName is the file in a namespace directory that declares its
// tables for engramctl.
const manifestName = "tables.json"

type manifestTable struct {
	NumRows  int64   `json:"num_rows"`
	RowBytes int     `json:"row_bytes"`
	ShardOf  shardOf `json:"shard_of,omitzero"`
}

// shardOf says that a table holds rows [Lo, Lo+its rows) of a larger
// table spread over owners (engram.ShardOf).
type shardOf struct {
	Table string `json:"table"`
	Lo    int64  `json:"lo"`
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

// readManifest reads the namespace's manifest, after removing the
// temporary files that killed writers left in the namespace.
func readManifest(dir, ns string) (*manifest, error) {
	removeDeadTemps(filepath.Join(dir, ns))
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

// manifestWritten, when set (by tests), runs in writeManifest once the
// temporary file exists and before it replaces the manifest.
var manifestWritten func()

// manifestTempPrefix starts the name of writeManifest's temporary file,
// which ends in 16 hex digits.
const manifestTempPrefix = "." + manifestName + ".tmp-"

// writeManifest replaces the manifest atomically: a temporary file held
// under flock (so removeDeadTemps leaves it alone while this process
// lives), synced, renamed over the manifest.
func writeManifest(dir, ns string, m *manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	path := manifestPath(dir, ns)
	tmp, err := createLockedTemp(filepath.Dir(path))
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			os.Remove(tmp.Name())
		}
		tmp.Close() // after the rename: that releases the lock
	}()
	if manifestWritten != nil {
		manifestWritten()
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	renamed = true
	return nil
}

// createLockedTemp creates a fresh manifest temporary file in nsDir and
// takes its lock. removeDeadTemps can remove the file between the two, but
// never once it is locked, so a file that still has its name then is ours.
func createLockedTemp(nsDir string) (*os.File, error) {
	const attempts = 4
	for range attempts {
		name := filepath.Join(nsDir, fmt.Sprintf("%s%016x", manifestTempPrefix, rand.Uint64()))
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := lockFile(f, true); err != nil {
			f.Close()
			os.Remove(name)
			return nil, err
		}
		open, err1 := f.Stat()
		named, err2 := os.Lstat(name)
		if err1 == nil && err2 == nil && os.SameFile(open, named) {
			return f, nil
		}
		f.Close()
		if err := errors.Join(err1, err2); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%s: temporary manifest removed before it could be locked, %d times", nsDir, attempts)
}

// isManifestTemp reports whether name is one of writeManifest's temporary
// files.
func isManifestTemp(name string) bool {
	hexDigits, ok := strings.CutPrefix(name, manifestTempPrefix)
	if !ok || len(hexDigits) != 16 {
		return false
	}
	_, err := strconv.ParseUint(hexDigits, 16, 64)
	return err == nil
}

// removeDeadTemps removes the temporary files that writers killed midway
// left in the namespace directory nsDir: a table's (snapshot.CleanTemp)
// and the manifest's. Each is removed only when no process holds its
// lock, so a live writer's file stays. It is best effort: a file that
// cannot be removed (a read-only directory) stays, harmlessly, and the
// next command tries again.
func removeDeadTemps(nsDir string) {
	_, _ = snapshot.CleanTemp(nsDir)
	ents, err := os.ReadDir(nsDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || !isManifestTemp(e.Name()) {
			continue
		}
		path := filepath.Join(nsDir, e.Name())
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if lockFile(f, false) == nil {
			os.Remove(path)
		}
		f.Close()
	}
}

// parseTableFlag parses NAME:ROWS:ROWBYTES.
func parseTableFlag(v string) (string, manifestTable, error) {
	parts := strings.Split(v, ":")
	var of shardOf
	if len(parts) == 4 {
		// NAME:ROWS:ROWBYTES:TABLE@LO, a shard of TABLE from row LO.
		t, lo, ok := strings.Cut(parts[3], "@")
		n, err := strconv.ParseInt(lo, 10, 64)
		if !ok || err != nil || n < 0 || snapshot.ValidName(t) != nil {
			return "", manifestTable{}, fmt.Errorf("-table %q: a shard is NAME:ROWS:ROWBYTES:TABLE@FIRSTROW", v)
		}
		of = shardOf{Table: t, Lo: n}
		parts = parts[:3]
	}
	if len(parts) != 3 {
		return "", manifestTable{}, fmt.Errorf("-table %q: want NAME:ROWS:ROWBYTES or NAME:ROWS:ROWBYTES:TABLE@FIRSTROW", v)
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
	return parts[0], manifestTable{NumRows: rows, RowBytes: rb, ShardOf: of}, nil
}

package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// RemoveOptions tunes Remove; nil means all defaults.
type RemoveOptions struct {
	// FS is the file system; nil means OS.
	FS FS
}

// Remove unlinks the table name from dir and syncs the directory. An absent
// table fails with ErrNotExist (inside an [*OpError]). The file is not
// read, so a damaged table can be removed. Processes that have the table
// open keep a valid mapping until they Close it; the storage is freed then.
func Remove(dir, name string, opts *RemoveOptions) error {
	if err := ValidName(name); err != nil {
		return err
	}
	fsys := OS
	if opts != nil && opts.FS != nil {
		fsys = opts.FS
	}
	opErr := func(step string, err error) error {
		return &OpError{Op: "remove", Dir: dir, Name: name, Step: step, Err: err}
	}
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return opErr("open directory", err)
	}
	defer d.Close()
	if err := d.Remove(FileName(name)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrNotExist, err)
		}
		return opErr("unlink", err)
	}
	if err := d.Sync(); err != nil {
		return opErr("sync directory", err)
	}
	return nil
}

// List returns the specs of the tables published in dir, sorted by name.
// Each file named FileName(name) for a valid name has its header, name,
// size, checksum table and padding checked (not its rows: see Verify);
// anything else in dir, such as hidden temporary files, is ignored. When
// some table files fail the check, List returns the specs of the others
// together with an error joining one [*CorruptError] (or [*OpError]) per
// bad file.
func List(dir string) ([]Spec, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, &OpError{Op: "list", Dir: dir, Step: "read directory", Err: err}
	}
	var specs []Spec
	var errs []error
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), Ext)
		if !ok || ValidName(name) != nil {
			continue
		}
		spec, err := listOne(filepath.Join(dir, e.Name()), name)
		switch {
		case err == nil:
			specs = append(specs, spec)
		case errors.Is(err, ErrNotExist):
			// Removed since ReadDir: not a table any more.
		default:
			errs = append(errs, err)
		}
	}
	slices.SortFunc(specs, func(a, b Spec) int { return strings.Compare(a.Name, b.Name) })
	return specs, errors.Join(errs...)
}

func listOne(path, name string) (Spec, error) {
	f, err := openRead(path)
	if err != nil {
		return Spec{}, openFileError("list", path, name, err)
	}
	defer f.Close()
	h, _, err := checkFile(f, path, name, nil)
	return h.Spec, err
}

// tempTable returns the table name of a hidden temporary file name made by
// Create (".<name>.engram.tmp-<16 hex digits>"), or "" for any other name.
func tempTable(file string) string {
	rest, ok := strings.CutPrefix(file, ".")
	if !ok || len(rest) < 16 {
		return ""
	}
	for _, c := range rest[len(rest)-16:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
	}
	name, ok := strings.CutSuffix(rest[:len(rest)-16], Ext+tempInfix)
	if !ok || ValidName(name) != nil {
		return ""
	}
	return name
}

//go:build linux

package snapshot

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// pinSys holds the memory syscalls whose failures the tests inject.
type pinSys struct {
	mlock   func(b []byte) error
	madvise func(b []byte, advice int) error
}

var hostSys = pinSys{mlock: unix.Mlock, madvise: unix.Madvise}

// Open maps the table name in dir read-only and shared, after checking the
// header, the layout, the exact file size, the checksum table, that the
// padding before row 0 is zero and (unless opts.SkipRowChecksums) every
// row block's CRC32C, in one pass spread over up to GOMAXPROCS goroutines
// for large tables. With want not nil the
// file's spec must equal *want ([*SpecMismatchError]); want.Name must be
// name. Then it pins the rows as opts.Pin says. Errors: [*NameError],
// [*SpecError], [*OptionError], [*OpError] (ErrNotExist when absent),
// [*CorruptError] (ErrCorrupt, ErrTruncated, ErrVersion),
// [*SpecMismatchError], [*PinError]. On error nothing stays mapped.
func Open(dir, name string, want *Spec, opts *OpenOptions) (*Table, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if want != nil {
		if err := want.Validate(); err != nil {
			return nil, err
		}
		if want.Name != name {
			return nil, &SpecError{Spec: *want, Field: "Name", Reason: fmt.Sprintf("differs from the table being opened, %q", clip(name))}
		}
	}
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return openPath(filepath.Join(dir, FileName(name)), name, want, o, hostSys)
}

// Verify re-checks the table file at path in full: header, layout, size,
// checksum table, zero padding and every row block's CRC32C, and that the
// file name is FileName of the name in its header. It returns nil or the
// first problem found (see Open for the error types).
func Verify(path string) error {
	base := filepath.Base(path)
	name, ok := strings.CutSuffix(base, Ext)
	if !ok || ValidName(name) != nil {
		return &NameError{Name: base, Reason: "not a table file name (<name>" + Ext + ")"}
	}
	t, err := openPath(path, name, nil, OpenOptions{}, hostSys)
	if err != nil {
		return err
	}
	return t.Close()
}

func openPath(path, name string, want *Spec, o OpenOptions, sys pinSys) (*Table, error) {
	f, err := openRead(path)
	if err != nil {
		return nil, openFileError("open", path, name, err)
	}
	defer f.Close()
	h, sums, err := checkFile(f, path, name, want)
	if err != nil {
		return nil, err
	}
	// Map from the page holding row 0 (RowAlign makes that row 0's own
	// offset on every Linux page size) to the end of the file.
	start := h.RowOffset &^ int64(os.Getpagesize()-1)
	m, err := unix.Mmap(int(f.Fd()), start, int(h.FileSize-start), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, &OpError{Op: "open", Dir: filepath.Dir(path), Name: name, Step: "mmap",
			Err: &fs.PathError{Op: "mmap", Path: path, Err: err}}
	}
	rows := m[h.RowOffset-start:]
	t := &Table{Spec: h.Spec, Header: h, Path: path, Rows: rows[:len(rows):len(rows)], Pin: o.Pin, mapping: m}
	fail := func(err error) (*Table, error) {
		_ = unix.Munmap(m)
		return nil, err
	}
	if o.Pin != PinNone {
		// Start reading the whole file ahead; the pass below or mlock
		// then finds the pages in (or on their way to) the page cache.
		_ = sys.madvise(m, unix.MADV_WILLNEED)
	}
	if !o.SkipRowChecksums {
		if bad := checkRows(t.Rows, sums, &h, verifyWorkers(h.Spec.Size())); bad >= 0 {
			return fail(rowsError(path, t.Rows, sums, &h, bad))
		}
		t.Verified = true
	}
	if o.Pin != PinNone {
		if err := sys.mlock(m); err != nil {
			pe := &PinError{Path: path, Op: "mlock", Bytes: int64(len(m)), Err: err}
			if o.Pin == PinRequired {
				return fail(pe)
			}
			t.PinErr = pe
			populate(m, sys)
		} else {
			t.Locked = true
		}
	}
	return t, nil
}

// populate faults every page of m in: MADV_POPULATE_READ (Linux 5.14),
// else one read per page.
func populate(m []byte, sys pinSys) {
	if err := sys.madvise(m, unix.MADV_POPULATE_READ); err == nil {
		return
	}
	touchPages(m, os.Getpagesize())
}

// touchSink keeps the page reads of touchPages from being optimized away.
var touchSink atomic.Uint32

func touchPages(m []byte, page int) {
	var x byte
	for i := 0; i < len(m); i += page {
		x ^= m[i]
	}
	touchSink.Store(uint32(x))
}

func unmap(m []byte) error { return unix.Munmap(m) }

package snapshot

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// errInjected is the error faultFS injects.
var errInjected = errors.New("injected fault")

type faultKind int

const (
	faultErr     faultKind = iota + 1 // the call fails without acting (a Close still releases)
	faultShort                        // WriteAt writes half and reports success
	faultPartial                      // WriteAt writes half and fails
)

func (k faultKind) String() string {
	return [...]string{"none", "error", "short write", "partial write"}[k]
}

// faultFS wraps an FS, records every call and injects faults by call index.
type faultFS struct {
	inner        FS
	noTmpFile    bool              // CreateTemp reports O_TMPFILE unsupported
	hideExisting bool              // Exists always says no (a racing creator)
	faults       map[int]faultKind // call index -> fault
	spin         time.Duration     // busy-wait before each WriteAt (crash child)
	onWrite      func(p []byte, off int64)

	mu  sync.Mutex
	ops []string
}

func (f *faultFS) step(op string) (faultKind, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := len(f.ops)
	f.ops = append(f.ops, op)
	k := f.faults[i]
	if k == 0 {
		return 0, nil
	}
	return k, fmt.Errorf("%s (call %d, %v): %w", op, i, k, errInjected)
}

func (f *faultFS) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ops...)
}

func (f *faultFS) OpenDir(path string) (Dir, error) {
	if _, err := f.step("OpenDir"); err != nil {
		return nil, err
	}
	d, err := f.inner.OpenDir(path)
	if err != nil {
		return nil, err
	}
	return &faultDir{fs: f, inner: d}, nil
}

type faultDir struct {
	fs    *faultFS
	inner Dir
}

type faultFile struct {
	fs    *faultFS
	inner File
}

func (d *faultDir) Exists(name string) (bool, error) {
	if _, err := d.fs.step("Dir.Exists"); err != nil {
		return false, err
	}
	if d.fs.hideExisting {
		return false, nil
	}
	return d.inner.Exists(name)
}

func (d *faultDir) CreateTemp(perm os.FileMode) (File, error) {
	if d.fs.noTmpFile {
		return nil, fmt.Errorf("test: no O_TMPFILE: %w", errors.ErrUnsupported)
	}
	if _, err := d.fs.step("Dir.CreateTemp"); err != nil {
		return nil, err
	}
	f, err := d.inner.CreateTemp(perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: d.fs, inner: f}, nil
}

func (d *faultDir) CreateExclusive(name string, perm os.FileMode) (File, error) {
	if _, err := d.fs.step("Dir.CreateExclusive"); err != nil {
		return nil, err
	}
	f, err := d.inner.CreateExclusive(name, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: d.fs, inner: f}, nil
}

func (d *faultDir) Link(f File, name string) error {
	if _, err := d.fs.step("Dir.Link"); err != nil {
		return err
	}
	return d.inner.Link(f.(*faultFile).inner, name)
}

func (d *faultDir) Rename(oldname, newname string) error {
	if _, err := d.fs.step("Dir.Rename"); err != nil {
		return err
	}
	return d.inner.Rename(oldname, newname)
}

func (d *faultDir) Remove(name string) error {
	if _, err := d.fs.step("Dir.Remove"); err != nil {
		return err
	}
	return d.inner.Remove(name)
}

func (d *faultDir) Sync() error {
	if _, err := d.fs.step("Dir.Sync"); err != nil {
		return err
	}
	return d.inner.Sync()
}

func (d *faultDir) Close() error {
	_, err := d.fs.step("Dir.Close")
	if cerr := d.inner.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	for start := time.Now(); time.Since(start) < f.fs.spin; {
	}
	if f.fs.onWrite != nil {
		f.fs.onWrite(p, off)
	}
	k, err := f.fs.step("File.WriteAt")
	switch k {
	case faultErr:
		return 0, err
	case faultShort, faultPartial:
		n, werr := f.inner.WriteAt(p[:len(p)/2], off)
		if werr != nil {
			return n, werr
		}
		if k == faultShort {
			return n, nil
		}
		return n, err
	}
	return f.inner.WriteAt(p, off)
}

func (f *faultFile) Allocate(size int64) error {
	if _, err := f.fs.step("File.Allocate"); err != nil {
		return err
	}
	return f.inner.Allocate(size)
}

func (f *faultFile) Sync() error {
	if _, err := f.fs.step("File.Sync"); err != nil {
		return err
	}
	return f.inner.Sync()
}

func (f *faultFile) Close() error {
	_, err := f.fs.step("File.Close")
	if cerr := f.inner.Close(); err == nil {
		err = cerr
	}
	return err
}

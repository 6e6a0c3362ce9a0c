//go:build linux

package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// OpenDir opens path as a directory.
func (osFS) OpenDir(path string) (Dir, error) {
	fd, err := retry(func() (int, error) {
		return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return &osDir{fd: fd, path: path}, nil
}

type osDir struct {
	fd   int
	path string
	// procLink makes Link use the /proc path at once, as on kernels that
	// refuse AT_EMPTY_PATH to unprivileged callers (set by tests).
	procLink bool
	// beforeLock, when set (by tests), runs in CreateExclusive between
	// creating the file and locking it.
	beforeLock func()
}

type osFile struct {
	fd   int
	name string // for errors: the directory path and the file's name
}

func (d *osDir) pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: d.path + "/" + name, Err: err}
}

func (d *osDir) Exists(name string) (bool, error) {
	var st unix.Stat_t
	err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT):
		return false, nil
	}
	return false, d.pathErr("fstatat", name, err)
}

func (d *osDir) CreateTemp(perm os.FileMode) (File, error) {
	fd, err := retry(func() (int, error) {
		return unix.Openat(d.fd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, uint32(perm.Perm()))
	})
	if err != nil {
		// EOPNOTSUPP: a file system without O_TMPFILE; EISDIR: a kernel
		// without it (it sees O_DIRECTORY only).
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) {
			err = fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
		}
		return nil, d.pathErr("open O_TMPFILE", "", err)
	}
	return &osFile{fd: fd, name: d.path + "/(unnamed)"}, nil
}

// lockAttempts bounds how often CreateExclusive makes its file again after
// CleanTemp removed it before the lock was taken.
const lockAttempts = 4

func (d *osDir) CreateExclusive(name string, perm os.FileMode) (File, error) {
	for range lockAttempts {
		fd, err := retry(func() (int, error) {
			return unix.Openat(d.fd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, uint32(perm.Perm()))
		})
		if err != nil {
			return nil, d.pathErr("open", name, err)
		}
		if d.beforeLock != nil {
			d.beforeLock()
		}
		if _, err := retry(func() (int, error) { return 0, unix.Flock(fd, unix.LOCK_EX) }); err != nil {
			_ = unix.Close(fd)
			_ = unix.Unlinkat(d.fd, name, 0)
			return nil, d.pathErr("flock", name, err)
		}
		// Until the lock was taken, CleanTemp (which unlinks only files
		// whose lock it holds) could remove the file; from now on it
		// cannot. If the name still names this file, it is ours.
		ok, err := d.names(fd, name)
		if ok {
			return &osFile{fd: fd, name: d.path + "/" + name}, nil
		}
		_ = unix.Close(fd)
		if err != nil {
			return nil, d.pathErr("fstatat", name, err)
		}
	}
	return nil, d.pathErr("open", name, fmt.Errorf("removed before it could be locked, %d times", lockAttempts))
}

// names reports whether name in the directory is the file open as fd.
func (d *osDir) names(fd int, name string) (bool, error) {
	var open, named unix.Stat_t
	if err := unix.Fstat(fd, &open); err != nil {
		return false, err
	}
	if err := unix.Fstatat(d.fd, name, &named, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return open.Dev == named.Dev && open.Ino == named.Ino, nil
}

func (d *osDir) Link(f File, name string) error {
	of, ok := f.(*osFile)
	if !ok {
		return d.pathErr("linkat", name, fmt.Errorf("file %T was not made by this directory", f))
	}
	var err error = unix.ENOENT
	if !d.procLink {
		err = unix.Linkat(of.fd, "", d.fd, name, unix.AT_EMPTY_PATH)
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPERM) {
		// AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH on older kernels; the
		// /proc link works for any caller.
		err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(of.fd), d.fd, name, unix.AT_SYMLINK_FOLLOW)
	}
	if err != nil {
		return d.pathErr("linkat", name, err)
	}
	return nil
}

func (d *osDir) Rename(oldname, newname string) error {
	if err := unix.Renameat2(d.fd, oldname, d.fd, newname, unix.RENAME_NOREPLACE); err != nil {
		return &os.LinkError{Op: "renameat2", Old: d.path + "/" + oldname, New: d.path + "/" + newname, Err: err}
	}
	return nil
}

func (d *osDir) Remove(name string) error {
	if err := unix.Unlinkat(d.fd, name, 0); err != nil {
		return d.pathErr("unlinkat", name, err)
	}
	return nil
}

func (d *osDir) Sync() error {
	if err := unix.Fsync(d.fd); err != nil {
		return &fs.PathError{Op: "fsync", Path: d.path, Err: err}
	}
	return nil
}

func (d *osDir) Close() error {
	if err := unix.Close(d.fd); err != nil {
		return &fs.PathError{Op: "close", Path: d.path, Err: err}
	}
	return nil
}

func (f *osFile) WriteAt(p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.Pwrite(f.fd, p[done:], off+int64(done))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return done, &fs.PathError{Op: "pwrite", Path: f.name, Err: err}
		}
		if n == 0 {
			return done, &fs.PathError{Op: "pwrite", Path: f.name, Err: unix.EIO}
		}
		done += n
	}
	return done, nil
}

func (f *osFile) Allocate(size int64) error {
	_, err := retry(func() (int, error) { return 0, unix.Fallocate(f.fd, 0, 0, size) })
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			err = fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
		}
		return &fs.PathError{Op: "fallocate", Path: f.name, Err: err}
	}
	return nil
}

func (f *osFile) Sync() error {
	if _, err := retry(func() (int, error) { return 0, unix.Fsync(f.fd) }); err != nil {
		return &fs.PathError{Op: "fsync", Path: f.name, Err: err}
	}
	return nil
}

func (f *osFile) Close() error {
	if err := unix.Close(f.fd); err != nil {
		return &fs.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

// retry repeats a system call interrupted by a signal.
func retry(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

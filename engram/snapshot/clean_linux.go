//go:build linux

package snapshot

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// CleanTemp removes the hidden temporary files that a Create killed midway
// left in dir. They exist only where O_TMPFILE is unavailable: there Create
// writes ".<name>.engram.tmp-<hex>" and renames it into place. A writer
// holds an exclusive flock on its temporary file, so CleanTemp removes only
// files nobody holds: it never disturbs a running Create. (CleanTemp can
// remove a file a Create has just made and not yet locked; that Create
// sees it once it holds the lock and makes the file again.) It returns the
// names it removed and syncs the directory when there are any.
func CleanTemp(dir string) ([]string, error) {
	opErr := func(step string, err error) error {
		return &OpError{Op: "clean", Dir: dir, Step: step, Err: err}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, opErr("read directory", err)
	}
	dfd, err := retry(func() (int, error) {
		return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, opErr("open directory", &fs.PathError{Op: "open", Path: dir, Err: err})
	}
	defer unix.Close(dfd)
	var removed []string
	var errs []error
	for _, e := range ents {
		if tempTable(e.Name()) == "" {
			continue
		}
		ok, err := removeUnlocked(dfd, e.Name())
		if err != nil {
			errs = append(errs, opErr("remove "+e.Name(), &fs.PathError{Op: "unlinkat", Path: dir + "/" + e.Name(), Err: err}))
		} else if ok {
			removed = append(removed, e.Name())
		}
	}
	if len(removed) > 0 {
		if err := unix.Fsync(dfd); err != nil {
			errs = append(errs, opErr("sync directory", &fs.PathError{Op: "fsync", Path: dir, Err: err}))
		}
	}
	return removed, errors.Join(errs...)
}

// removeUnlocked unlinks name if no process holds its flock.
func removeUnlocked(dfd int, name string) (bool, error) {
	fd, err := retry(func() (int, error) {
		return unix.Openat(dfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	})
	if errors.Is(err, unix.ENOENT) {
		return false, nil // gone meanwhile
	}
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil // a live Create holds it
	} else if err != nil {
		return false, err
	}
	if err := unix.Unlinkat(dfd, name, 0); errors.Is(err, unix.ENOENT) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, nil
}

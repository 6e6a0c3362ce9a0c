//go:build linux

package main

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// errLocked is returned by lockFile without wait when another open file
// holds the lock.
var errLocked = errors.New("locked by another process")

// lockFile takes an exclusive flock on f, held until f is closed; without
// wait it fails with errLocked instead of waiting for the holder.
func lockFile(f *os.File, wait bool) error {
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return errLocked
		case err != nil:
			return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
		return nil
	}
}

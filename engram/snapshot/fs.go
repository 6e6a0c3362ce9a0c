package snapshot

import "os"

// FS is the seam over the file system calls that Create, CreateFrom and
// Remove make, so tests can inject I/O errors, short writes and crashes at
// every step. [OS] is the real one. Errors should wrap the system's error:
// the package tests them with errors.Is against fs.ErrExist,
// fs.ErrNotExist and errors.ErrUnsupported.
type FS interface {
	// OpenDir opens the directory that holds the tables.
	OpenDir(path string) (Dir, error)
}

// Dir is an open table directory. Names are file names inside it.
type Dir interface {
	// Exists reports whether name exists (as anything, symlinks unfollowed).
	Exists(name string) (bool, error)
	// CreateTemp creates an unnamed file in the directory (O_TMPFILE) that
	// Link can publish. It fails with an error matching
	// errors.ErrUnsupported where the file system cannot make one.
	CreateTemp(perm os.FileMode) (File, error)
	// CreateExclusive creates the named file, failing if it exists, and
	// holds an exclusive lock on it (flock) until the File is closed, so
	// CleanTemp knows it is in use. It returns only once the name is
	// locked and still names the file: one that CleanTemp removed before
	// the lock was taken is made again.
	CreateExclusive(name string, perm os.FileMode) (File, error)
	// Link gives the unnamed file f, made by CreateTemp, the name. It never
	// replaces: an existing name fails with an error matching fs.ErrExist.
	Link(f File, name string) error
	// Rename renames oldname to newname atomically without replacing
	// (renameat2 RENAME_NOREPLACE): an existing newname fails with an error
	// matching fs.ErrExist.
	Rename(oldname, newname string) error
	// Remove unlinks name; a missing name fails matching fs.ErrNotExist.
	Remove(name string) error
	// Sync makes the directory's entries durable (fsync).
	Sync() error
	// Close releases the directory.
	Close() error
}

// File is a file being written by Create.
type File interface {
	// WriteAt writes len(p) bytes at off (pwrite). It returns an error
	// when it writes fewer.
	WriteAt(p []byte, off int64) (int, error)
	// Allocate reserves size bytes of storage and sets the file size
	// (fallocate), so a full disk fails early. It may fail with an error
	// matching errors.ErrUnsupported, which Create ignores.
	Allocate(size int64) error
	// Sync makes the file's data durable (fsync).
	Sync() error
	// Close closes the file.
	Close() error
}

// OS is the real file system: Linux system calls through
// golang.org/x/sys/unix. Elsewhere its OpenDir fails with ErrNotSupported.
var OS FS = osFS{}

// osFS implements FS with system calls (fs_linux.go).
type osFS struct{}

//go:build !linux

package snapshot

// OpenDir fails with ErrNotSupported: the snapshot syscalls are Linux-only.
func (osFS) OpenDir(path string) (Dir, error) { return nil, ErrNotSupported }

// Open fails with ErrNotSupported: mapping and pinning are Linux-only.
func Open(dir, name string, want *Spec, opts *OpenOptions) (*Table, error) {
	return nil, ErrNotSupported
}

// Verify fails with ErrNotSupported: it maps the file like Open.
func Verify(path string) error { return ErrNotSupported }

// CleanTemp fails with ErrNotSupported.
func CleanTemp(dir string) ([]string, error) { return nil, ErrNotSupported }

func unmap(m []byte) error { return nil }

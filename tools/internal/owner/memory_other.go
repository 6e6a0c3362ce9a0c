//go:build !linux

package owner

import "fmt"

type mapping struct{ buf []byte }

func (m *mapping) unmap() error { return nil }

func mapFile(path string, writable bool) (*mapping, error) {
	return nil, fmt.Errorf("owner: mapping %s: %w", path, ErrNotSupported)
}

func mapAnon(size int, noHuge bool) (*mapping, error) {
	return nil, fmt.Errorf("owner: anonymous mapping: %w", ErrNotSupported)
}

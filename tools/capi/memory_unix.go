//go:build unix

package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// mapMemory returns n zeroed bytes of an anonymous private mapping:
// page-aligned, outside the Go heap, lazily backed.
func mapMemory(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("%w: mmap of %d bytes: %w", errNoMemory, n, err)
	}
	return b, nil
}

// unmapMemory unmaps what mapMemory returned.
func unmapMemory(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("capi: munmap of %d bytes: %w", len(b), err)
	}
	return nil
}

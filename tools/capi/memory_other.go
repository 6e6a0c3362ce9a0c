//go:build !unix

package main

// mapMemory is not supported: buffers are anonymous mappings.
func mapMemory(n int) ([]byte, error) { return nil, errNotSupported }

func unmapMemory(b []byte) error { return errNotSupported }

//go:build !amd64

package prefetch

import "unsafe"

// Lines does nothing here: there is no prefetch instruction
// behind it on this architecture.
func Lines(unsafe.Pointer, uintptr) {}

// Available: Lines issues prefetches on this architecture.
const Available = false

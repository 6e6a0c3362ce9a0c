package prefetch

import "unsafe"

// Lines asks the CPU to bring every 64-byte line of [p, p+n)
// into its caches (PREFETCHT0); it never faults, whatever the address.
//
//go:noescape
func Lines(p unsafe.Pointer, n uintptr)

// Available: Lines issues prefetches on this architecture.
const Available = true

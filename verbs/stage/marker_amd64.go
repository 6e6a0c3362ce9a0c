package stage

import "unsafe"

// begin, end and next are implemented in marker_amd64.s: argument moves,
// a 5-byte NOP and RET.

//go:noescape
func begin(id, stage uint64)

//go:noescape
func end(id, stage, bytes uint64)

//go:noescape
func next(id, from, to, bytes uint64)

// markerPCs returns the entry addresses of the ABI0 markers.
func markerPCs() (begin, end, next *byte)

// Entries returns the entry addresses of the begin, end and next markers
// in this process. A profiler that probes its own process uses them
// instead of the symbol table, which `go run` and `go test` strip.
func Entries() (begin, end, next uintptr) {
	b, e, n := markerPCs()
	return uintptr(unsafe.Pointer(b)), uintptr(unsafe.Pointer(e)), uintptr(unsafe.Pointer(n))
}

// Command capi is libscatterkit.so, the C ABI over the Engram store
// (package engram) that the Python package (tools/python) binds with
// ctypes. Build it with
//
//	go build -buildmode=c-shared -o libscatterkit.so ./capi
//
// from the tools module (scripts/build-capi.sh). The ABI, its error codes
// and its lifetime rules are docs/capi.md; the test suite keeps that page
// and the exported prototypes in step.
//
// Objects cross the boundary as handles (handles.go): a uint64 of kind,
// slot generation and slot index, resolved lock-free, so a freed, stale
// or wrong-kind handle fails SK_ECLOSED and no Go pointer ever reaches C.
// Every export is a thin cgo wrapper (exports.go, the only file that
// imports "C") over a plain Go function (open, lookup, newBuffer, ...)
// that the tests call directly; the wrapper recovers panics into SK_EIO
// and maps errors to codes (errors.go). A lookup checks every
// length, count and pointer that describes caller memory before making a
// slice over it, so engram's own check then bounds every access to what
// the caller described; in steady state it allocates nothing.
//
// Memory handed to C (sk_buffer_new) is never Go heap memory: a remote
// store's buffers are leases of its registered output arena (an mmap'd
// bufferpool arena), a local store's are anonymous mappings of their own.
package main

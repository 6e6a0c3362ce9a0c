// Command capi is libscatterkit.so, the C ABI over the Engram store
// (package engram) that the Python package (tools/python) binds with
// ctypes. Build it with
//
//	go build -buildmode=c-shared -o libscatterkit.so ./capi
//
// from the tools module (scripts/build-capi.sh); with `-tags cuda` (and
// cgo flags for CUDA's cuda.h and libcuda, scripts/gpu-build.sh) the same
// command builds libscatterkit_cuda.so, whose sk_cuda_* calls run device
// lookups through engram's Device seam on cudagather (device.go). The two
// libraries export one symbol set: the CUDA code is the same in both, and
// without the tag cudagather's own stub makes it SK_ENOTSUP. The ABI, its
// error codes and its lifetime rules are docs/capi.md; the test suite
// keeps that page and the exported prototypes of both libraries in step.
//
// Objects cross the boundary as handles (handles.go): a uint64 of kind,
// slot generation and slot index, resolved lock-free, so a freed, stale
// or wrong-kind handle fails SK_ECLOSED and no Go pointer ever reaches C.
// Every export is a thin cgo wrapper (exports.go; driver_cuda.go is the
// only other file that imports "C", for the three driver calls capi makes
// itself) over a plain Go function (open, lookup, newBuffer, ...)
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

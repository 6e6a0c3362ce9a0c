//go:build cuda

package cudagather

// (A file with //export may declare C in its preamble but define none:
// the host function's trampoline is in hostlookup.go.)

// #include <stdint.h>
import "C"

// skHostLookupRun is called by the driver's thread, through sk_hl_cb,
// when a stream reaches a host lookup's host function.
//
//export skHostLookupRun
func skHostLookupRun(h C.uintptr_t) { runHostLookup(uintptr(h)) }

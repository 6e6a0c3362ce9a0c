// Package cudaengram composes the Engram store and the transfer engine
// with the CUDA gather: it holds the compile-time proofs that
// *cudagather.Context satisfies engram.Device and *cudagather.DeviceBuffer
// engine.DeviceDst (the packages never import each other) and, behind the
// `cuda` build tag, the end-to-end tests of device lookups from a store's
// snapshots against the store's CPU lookup and of scatter READs into
// device memory against the same READ into host memory (run on a GPU
// machine by scripts/gpu-run.sh).
package cudaengram

import (
	"github.com/scatterkit/scatterkit/cudagather"
	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/verbs/engine"
)

// Device is the CUDA context as the store's device.
var _ engram.Device = (*cudagather.Context)(nil)

// DeviceDst is a device buffer as a scatter READ's destination.
var _ engine.DeviceDst = (*cudagather.DeviceBuffer)(nil)

// A device buffer is also a remote Engram lookup's destination
// (engram.Store.LookupDevice; the same interface).
var _ engram.DeviceDst = (*cudagather.DeviceBuffer)(nil)

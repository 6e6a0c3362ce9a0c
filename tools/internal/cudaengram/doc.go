// Package cudaengram composes the Engram store with the CUDA gather: it
// holds the compile-time proof that *cudagather.Context satisfies
// engram.Device (the two packages never import each other) and, behind the
// `cuda` build tag, the end-to-end test of device lookups from a store's
// snapshots against the store's CPU lookup (run on a GPU machine by
// scripts/gpu-run.sh).
package cudaengram

import (
	"github.com/scatterkit/scatterkit/cudagather"
	"github.com/scatterkit/scatterkit/engram"
)

// Device is the CUDA context as the store's device.
var _ engram.Device = (*cudagather.Context)(nil)

//go:build !cuda

package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoCUDA: the library without the cuda tag exports the CUDA calls;
// sk_cuda_available reports 0 devices and the others SK_ENOTSUP, whatever
// their arguments.
func TestNoCUDA(t *testing.T) {
	r := newRand(t)
	st, _ := populated(t, r, map[string]table{"a": {rows: 10, rowBytes: 8}})
	cols := newCols(t, st, "a")

	n, err := cudaAvailable()
	require.NoError(t, err)
	require.Zero(t, n)
	for _, flags := range []int32{0, cudaHost, cudaHost | cudaStrict, -1} {
		h, err := attach(st, 0, flags)
		requireCode(t, codeNotSup, err)
		require.Zero(t, h)
	}
	_, err = attach(0, -1, 0)
	requireCode(t, codeNotSup, err)
	requireCode(t, codeNotSup, detach(0))
	requireCode(t, codeNotSup, warmup(0, 0))
	requireCode(t, codeNotSup, status(0, 0, 1))
	a := deviceLookupArgs{cols: cols, t: 1, k: 1, ids: 8, idBits: 64, out: 64, outLen: 8, tStride: 8, kStride: 8}
	requireCode(t, codeNotSup, deviceLookup(&a))
	_, err = benchGraph(&a, 1)
	requireCode(t, codeNotSup, err)
	_, err = benchReplay(0, 1, 0, 1)
	requireCode(t, codeNotSup, err)
	require.Equal(t, 0, devices.len())
}

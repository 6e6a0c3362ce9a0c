package main

import (
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestDeviceLookupArgs covers what sk_cuda_lookup checks itself before any
// handle or device is touched (cudagather checks the output's bounds,
// strides and overlap).
func TestDeviceLookupArgs(t *testing.T) {
	offs := make([]int64, 4)
	good := func() deviceLookupArgs {
		return deviceLookupArgs{t: 8, k: 4, ids: 0x7f0000001000, idBits: 64, out: 0x7f0000100000, outLen: 8 * 4 * 264,
			tStride: 4 * 264, kStride: 264, offsets: unsafe.Pointer(&offs[0])}
	}
	for _, tc := range []struct {
		name string
		edit func(*deviceLookupArgs)
		arg  string // the ArgError's Arg; "" for no error
	}{
		{"good", func(a *deviceLookupArgs) {}, ""},
		{"no offsets", func(a *deviceLookupArgs) { a.offsets = nil }, ""},
		{"int32 ids at 4 bytes", func(a *deviceLookupArgs) { a.idBits, a.ids = 32, a.ids+4 }, ""},
		{"empty, no addresses", func(a *deviceLookupArgs) { a.t, a.ids, a.out, a.outLen = 0, 0, 0, 0 }, ""},
		{"k 0", func(a *deviceLookupArgs) { a.k, a.offsets = 0, nil }, ""},
		{"negative t", func(a *deviceLookupArgs) { a.t = -1 }, "t"},
		{"negative k", func(a *deviceLookupArgs) { a.k = -1 }, "k"},
		{"k over 64", func(a *deviceLookupArgs) { a.k, a.offsets = 65, nil }, "k"},
		{"t x k overflows", func(a *deviceLookupArgs) { a.t = math.MaxInt64 / 2 }, "t"},
		{"id bits 16", func(a *deviceLookupArgs) { a.idBits = 16 }, "id_bits"},
		{"negative out_len", func(a *deviceLookupArgs) { a.outLen = -1 }, "out_len"},
		{"NULL ids", func(a *deviceLookupArgs) { a.ids = 0 }, "ids"},
		{"int64 ids at 4 bytes", func(a *deviceLookupArgs) { a.ids += 4 }, "ids"},
		{"int32 ids at 2 bytes", func(a *deviceLookupArgs) { a.idBits, a.ids = 32, a.ids+2 }, "ids"},
		{"ids wrap", func(a *deviceLookupArgs) { a.ids = math.MaxUint64 - 7 }, "ids"},
		{"NULL out", func(a *deviceLookupArgs) { a.out = 0 }, "out"},
		{"out wraps", func(a *deviceLookupArgs) { a.out = math.MaxUint64 - 63 }, "out"},
		{"misaligned offsets", func(a *deviceLookupArgs) { a.offsets = unsafe.Add(a.offsets, 1) }, "offsets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := good()
			tc.edit(&a)
			err := a.check()
			if tc.arg == "" {
				require.NoError(t, err)
				return
			}
			var ae *ArgError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, tc.arg, ae.Arg, "%v", err)
			require.Equal(t, codeInval, classify(err))
		})
	}
}

package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStagedRamp: a staged READ's first chunks by its slots: none for one
// or two slots (nothing to overlap), C/2 for 4 to 7, C/4 then C/2 for 8
// or more; a step below the pool's smallest lease, or too small for a
// row, is left out.
func TestStagedRamp(t *testing.T) {
	const c, min = 256 << 10, 64 << 10
	for _, tc := range []struct {
		chunk, minLease, row int64
		slots                int
		want                 []int64
	}{
		{c, min, 0, 1, nil},
		{c, min, 0, 2, nil},
		{c, min, 0, 3, nil},
		{c, min, 0, 4, []int64{c / 2}},
		{c, min, 0, 7, []int64{c / 2}},
		{c, min, 0, 8, []int64{c / 4, c / 2}},
		{c, min, 0, 16, []int64{c / 4, c / 2}},
		{c, min, 0, 64, []int64{c / 4, c / 2}},
		{c, min, 200, 16, []int64{c / 4, c / 2}},
		{c, 128 << 10, 0, 16, []int64{c / 2}},   // C/4 below the smallest lease
		{c, min, 100 << 10, 16, []int64{c / 2}}, // C/4 holds no row
		{c, min, 200 << 10, 16, nil},            // nor C/2
		{min, min, 0, 16, nil},                  // C is the smallest lease
		{0, min, 0, 16, nil},
	} {
		sizes, n := stagedRamp(tc.chunk, tc.slots, tc.minLease, tc.row)
		got := sizes[:n]
		if tc.want == nil {
			require.Empty(t, got, "%+v", tc)
		} else {
			require.Equal(t, tc.want, got, "%+v", tc)
		}
	}
}

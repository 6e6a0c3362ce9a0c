package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs"
)

func TestVerifyDest(t *testing.T) {
	const seed, poison, poisonOff = 11, 12, 4096
	w := Workload{Name: "frag", Dir: verbs.OpRead, Small: Frags{100, 50}, Src: Random, Dst: Fragmented}
	r := newRand(t)
	p, err := w.Plan(r, 1<<20)
	require.NoError(t, err)
	good := make([]byte, p.DstExtent)
	pattern.Fill(good, poison, poisonOff)
	forEachFragment(p, func(_ int, s, d, n uint64) bool {
		pattern.Fill(good[d:d+n], seed, s)
		return true
	})
	require.Nil(t, verifyDest(p, good, streamSource{seed}, poison, poisonOff))
	for _, tc := range []struct {
		name     string
		at       uint64
		fragment int
	}{
		{"first fragment", 0, 0},
		{"inside a fragment", 7*200 + 33, 7},
		{"a gap", 7*200 + 150, -1},
		{"the trailing gap", p.DstExtent - 1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := append([]byte(nil), good...)
			bad[tc.at] ^= 0x81
			ve := verifyDest(p, bad, streamSource{seed}, poison, poisonOff)
			require.NotNil(t, ve)
			require.Equal(t, tc.fragment, ve.Fragment)
			require.Equal(t, tc.at, ve.Offset)
			require.Equal(t, good[tc.at], ve.Want)
			require.Equal(t, bad[tc.at], ve.Got)
			require.ErrorIs(t, ve, ErrVerify)
		})
	}
	// A destination left as it was (the operation did nothing) fails.
	untouched := make([]byte, p.DstExtent)
	pattern.Fill(untouched, poison, poisonOff)
	require.NotNil(t, verifyDest(p, untouched, streamSource{seed}, poison, poisonOff))
	// Bytes from the requester's memory are checked the same way.
	src := make([]byte, 1<<20)
	pattern.Fill(src, seed, 0)
	require.Nil(t, verifyDest(p, good, bytesSource(src), poison, poisonOff))
	src[p.Rows.SrcBase+uint64(p.Rows.ID(3))*100+5] ^= 1
	ve := verifyDest(p, good, bytesSource(src), poison, poisonOff)
	require.NotNil(t, ve)
	require.Equal(t, 3, ve.Fragment)
}

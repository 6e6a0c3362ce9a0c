package planfmt

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// bruteOverlap checks every pair of rows of a small lattice.
func bruteOverlap(t, k, a, b, r uint64) bool {
	for i1 := uint64(0); i1 < t; i1++ {
		for j1 := uint64(0); j1 < k; j1++ {
			p1 := i1*a + j1*b
			for i2 := uint64(0); i2 < t; i2++ {
				for j2 := uint64(0); j2 < k; j2++ {
					if i1 == i2 && j1 == j2 {
						continue
					}
					p2 := i2*a + j2*b
					if p1 < p2+r && p2 < p1+r {
						return true
					}
				}
			}
		}
	}
	return false
}

func TestLatticeOverlapExhaustiveSmall(t *testing.T) {
	for tt := uint64(1); tt <= 5; tt++ {
		for k := uint64(1); k <= 5; k++ {
			for a := uint64(0); a <= 24; a++ {
				for b := uint64(0); b <= 24; b++ {
					for r := uint64(1); r <= 9; r++ {
						want := bruteOverlap(tt, k, a, b, r)
						x, y, got := latticeOverlap(tt, k, a, b, r)
						if got != want {
							t.Fatalf("t=%d k=%d a=%d b=%d r=%d: got %v want %v", tt, k, a, b, r, got, want)
						}
						if got {
							pa, pb := x*a, y*b
							require.True(t, pa < pb+r && pb < pa+r, "witness (%d,0),(0,%d) does not overlap", x, y)
						}
					}
				}
			}
		}
	}
}

func TestLatticeOverlapRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for range 20000 {
		tt := 1 + rng.Uint64N(14)
		k := 1 + rng.Uint64N(14)
		r := 1 + rng.Uint64N(50)
		a := rng.Uint64N(400)
		b := rng.Uint64N(400)
		want := bruteOverlap(tt, k, a, b, r)
		_, _, got := latticeOverlap(tt, k, a, b, r)
		require.Equal(t, want, got, "t=%d k=%d a=%d b=%d r=%d", tt, k, a, b, r)
	}
}

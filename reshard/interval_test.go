package reshard

import (
	"math/rand/v2"
	"testing"
)

// TestIntersectBrute checks Intersect against a brute-force set
// intersection on random small progressions.
func TestIntersectBrute(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		a := Interval{Lo: r.Int64N(40), Step: 1 + r.Int64N(7)}
		a.Hi = a.Lo + r.Int64N(60)
		b := Interval{Lo: r.Int64N(40), Step: 1 + r.Int64N(7)}
		b.Hi = b.Lo + r.Int64N(60)
		got := a.Intersect(b)
		var want []int64
		for x := int64(0); x < 120; x++ {
			if a.Contains(x) && b.Contains(x) {
				want = append(want, x)
			}
		}
		var have []int64
		for i := range got.Len() {
			have = append(have, got.Lo+i*got.Step)
		}
		if len(have) != len(want) {
			t.Fatalf("%+v ∩ %+v = %+v: %v, want %v", a, b, got, have, want)
		}
		for i := range have {
			if have[i] != want[i] {
				t.Fatalf("%+v ∩ %+v = %+v: %v, want %v", a, b, got, have, want)
			}
		}
	}
}

func TestIntersectLarge(t *testing.T) {
	// Steps whose product overflows a naive multiplication of the
	// residues.
	a := Interval{Lo: 3, Hi: 1 << 62, Step: 1<<31 - 1}
	b := Interval{Lo: 5, Hi: 1 << 62, Step: 1<<31 + 11}
	got := a.Intersect(b)
	if got.Len() == 0 || !a.Contains(got.Lo) || !b.Contains(got.Lo) || got.Step != (1<<31-1)*(1<<31+11) {
		t.Fatalf("%+v", got)
	}
}

// TestIntersectHugeSteps: steps whose least common multiple exceeds
// int64 leave at most one common index, which Intersect must still find.
func TestIntersectHugeSteps(t *testing.T) {
	a := Interval{Lo: 0, Hi: 1 << 62, Step: 1<<35 + 1}
	b := Interval{Lo: 0, Hi: 1 << 62, Step: 1<<35 - 1}
	if got := a.Intersect(b); got != (Interval{Lo: 0, Hi: 1, Step: 1}) {
		t.Fatalf("%+v", got)
	}
	a.Lo, a.Hi = 1<<35+1, 1<<62 // no common index below 2^62
	if got := a.Intersect(b); got.Len() != 0 {
		t.Fatalf("%+v", got)
	}
}

package reshard

import (
	"math"
	"math/bits"
)

// Intersect returns the indices both intervals select, as one interval:
// the intersection of two arithmetic progressions is an arithmetic
// progression whose step is the least common multiple of theirs (or
// empty). Both intervals must have Step >= 1. It never overflows: when
// the common step exceeds int64, at most one index is common, and the
// result holds just it.
func (iv Interval) Intersect(o Interval) Interval {
	lo, hi := max(iv.Lo, o.Lo), min(iv.Hi, o.Hi)
	x, ok := firstCommon(canonical(iv), canonical(o))
	if !ok || iv.Len() == 0 || o.Len() == 0 {
		return Interval{Lo: lo, Hi: lo, Step: 1}
	}
	a, b := max(iv.Step, 1), max(o.Step, 1)
	h, l := bits.Mul64(uint64(a/gcd(a, b)), uint64(b))
	if h != 0 || l > math.MaxInt64 {
		return Interval{Lo: x, Hi: x + 1, Step: 1}
	}
	return Interval{Lo: x, Hi: hi, Step: int64(l)}
}

// firstCommon is the smallest index two canonical non-empty intervals
// both select. Unlike Interval.Intersect it never overflows, whatever the
// steps: a common index beyond int64 is no common index.
func firstCommon(x, y Interval) (int64, bool) {
	lo, hi := max(x.Lo, y.Lo), min(x.Hi, y.Hi)
	if hi <= lo {
		return 0, false
	}
	if x.Step == 1 && y.Step == 1 {
		return lo, true
	}
	if x.Step == 1 {
		x, y = y, x
	}
	if y.Step == 1 { // the first index of x at or after lo
		if r := (lo - x.Lo) % x.Step; r != 0 {
			if x.Step-r >= hi-lo {
				return 0, false
			}
			lo += x.Step - r
		}
		return lo, true
	}
	// Both stepped: i = x.Lo (mod A), i = y.Lo (mod B).
	A, B := x.Step, y.Step
	g := gcd(A, B)
	d := y.Lo - x.Lo
	if d%g != 0 {
		return 0, false
	}
	m := B / g
	t := mulmod(mod(d/g, m), modinv(mod(A/g, m), m), m)
	// i = x.Lo + A*t is the smallest common index >= x.Lo.
	h, p := bits.Mul64(uint64(A), uint64(t))
	if h != 0 || p > uint64(math.MaxInt64-x.Lo) {
		return 0, false
	}
	i := x.Lo + int64(p)
	if i < lo {
		h, l := bits.Mul64(uint64(A), uint64(m)) // the lcm: the period of common indices
		if h != 0 || l > math.MaxInt64 {
			return 0, false
		}
		if r := (lo - i) % int64(l); r != 0 {
			if int64(l)-r >= hi-lo {
				return 0, false
			}
			i = lo + int64(l) - r
		} else {
			i = lo
		}
	}
	return i, i < hi
}

// Contains reports whether the interval selects index x.
func (iv Interval) Contains(x int64) bool {
	return x >= iv.Lo && x < iv.Hi && iv.Step >= 1 && (x-iv.Lo)%iv.Step == 0
}

// Index is the position of x among the interval's indices (x must be one).
func (iv Interval) Index(x int64) int64 { return (x - iv.Lo) / iv.Step }

// Last is the interval's largest index (the interval must not be empty).
func (iv Interval) Last() int64 { return iv.Lo + (iv.Len()-1)*iv.Step }

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func mod(x, m int64) int64 {
	x %= m
	if x < 0 {
		x += m
	}
	return x
}

// mulmod is a*b mod m for 0 <= a, b < m, without overflow.
func mulmod(a, b, m int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return int64(bits.Rem64(hi, lo, uint64(m)))
}

// modinv is the inverse of a modulo m (gcd(a, m) = 1; m >= 1).
func modinv(a, m int64) int64 {
	if m == 1 {
		return 0
	}
	// Extended Euclid on (a, m).
	r0, r1 := a, m
	s0, s1 := int64(1), int64(0)
	for r1 != 0 {
		q := r0 / r1
		r0, r1 = r1, r0-q*r1
		s0, s1 = s1, s0-q*s1
	}
	return mod(s0, m)
}

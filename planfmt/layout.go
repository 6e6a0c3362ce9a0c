package planfmt

import "math/bits"

// latticeOverlap decides whether the rows of a [t, k] lattice overlap: row
// (i, j) occupies [i*a + j*b, +r). It returns a witness pair when they do:
// rows (x, 0) and (0, y) overlap (x or y may be zero; the pair is then row
// (0, 0) and its neighbour along the other axis).
//
// The caller guarantees (t-1)*a and (k-1)*b fit in 64 bits.
//
// Two rows (i1, j1) and (i2, j2) overlap when |dx*a - dy*b| < r with
// dx = |i1-i2| < t and dy = |j1-j2| < k, both differences taken with opposite
// signs or one of them zero (same-sign combinations only grow). So the layout
// is free of overlap exactly when
//
//   - a >= r (if t > 1) and b >= r (if k > 1), and
//   - min |x*a - y*b| over 1 <= x < t, 1 <= y < k is at least r.
//
// The minimum of |x*a - y*b| over such a box is reached at a convergent x/y
// of the continued fraction of b/a (best approximations of the second kind,
// read from both sides: a pair with a smaller value than convergent n needs
// x >= x(n+1) and y >= y(n+1)), so walking the convergents that fit in the box
// decides the question in O(log(max(a, b))) steps.
func latticeOverlap(t, k, a, b, r uint64) (x, y uint64, found bool) {
	if t > 1 && a < r {
		return 1, 0, true
	}
	if k > 1 && b < r {
		return 0, 1, true
	}
	if t <= 1 || k <= 1 {
		return 0, 0, false
	}
	maxX, maxY := t-1, k-1
	// Convergents p/q of b/a: p(n) = c(n)*p(n-1) + p(n-2), likewise q, with
	// p(-2), p(-1) = 0, 1 and q(-2), q(-1) = 1, 0. Here x = p and y = q.
	p0, p1 := uint64(0), uint64(1)
	q0, q1 := uint64(1), uint64(0)
	num, den := b, a
	for den != 0 {
		c := num / den
		num, den = den, num-c*den
		p, okp := mulAdd(c, p1, p0)
		q, okq := mulAdd(c, q1, q0)
		if !okp || !okq || p > maxX || q > maxY {
			break
		}
		p0, p1 = p1, p
		q0, q1 = q1, q
		if p == 0 || q == 0 {
			continue // on an axis: covered by the stride checks above
		}
		xa, yb := p*a, q*b
		d := xa - yb
		if yb > xa {
			d = yb - xa
		}
		if d < r {
			return p, q, true
		}
	}
	return 0, 0, false
}

// bytesFor returns the fewest bytes (at least 1) that hold v.
func bytesFor(v uint64) int {
	return max(1, (bits.Len64(v)+7)/8)
}

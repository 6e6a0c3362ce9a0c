package report

// Quantile returns the q-quantile (0 <= q <= 1) of a histogram in
// nanoseconds, interpolated linearly inside the bucket that holds it; 0 for
// an empty histogram.
func Quantile(h *[Buckets]uint64, q float64) float64 {
	var total uint64
	for _, c := range h {
		total += c
	}
	if total == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := q * float64(total) // the rank-th of total, 0-based fractional
	var seen uint64
	for i, c := range h {
		if c == 0 {
			continue
		}
		if float64(seen+c) >= rank {
			lo, hi := float64(Lower(i)), float64(Upper(i))
			if i == Buckets-1 {
				hi = lo * 1.25
			}
			frac := (rank - float64(seen)) / float64(c)
			return lo + frac*(hi-lo)
		}
		seen += c
	}
	return float64(Lower(Buckets - 1))
}

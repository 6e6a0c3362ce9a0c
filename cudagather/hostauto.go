package cudagather

import "math/bits"

// HostAuto's choice among a host lookup's paths, from the tables'
// calibrations (HostCalibration). Pure arithmetic, built with or without
// CUDA, so that its decisions are tested on any machine.

// calibrationRows are the probe sizes CalibrateHost measures for rows of
// r bytes: 262,144 rows (what a production step asks: 98,304 to 196,608
// rows are common), or as many as 128 MiB of output holds, at least 64,
// and a sixteenth and a quarter of that. Below a few tens of thousands of
// rows zero-copy wins by its fixed cost alone; the largest size is where
// the curves' slopes matter.
func calibrationRows(r int64) [3]int64 {
	hi := min(int64(262144), max((128<<20)/max(r, 1), 64))
	return [3]int64{max(hi/16, 4), max(hi/4, 16), hi}
}

// maxSetTables bounds the distinct tables a lookup's calibration class is
// told apart by; past it, further tables add their spans undeduplicated
// (a larger span: a class no faster than the true one).
const maxSetTables = 16

// tableSet is the distinct tables of a lookup's columns: what one
// calibration stands for. A zero-copy lookup's cost depends on the span
// the device translates, which is the union of its tables (two tables of
// 16 GiB read in one lookup cost as one of 32 GiB), so a lookup is priced
// by the calibration of its set's class, not of each table alone.
type tableSet struct {
	t    [maxSetTables]*Table
	n    int
	span uint64 // bytes: the sum of the distinct tables' spans
}

// setOf is the distinct tables of tabs, in first-use order; it does not
// allocate.
func setOf(tabs []*Table) (s tableSet) {
next:
	for _, t := range tabs {
		for _, u := range s.t[:s.n] {
			if u == t {
				continue next
			}
		}
		s.span += uint64(t.rows) * uint64(t.rowBytes)
		if s.n < maxSetTables {
			s.t[s.n] = t
			s.n++
		}
	}
	return s
}

// key is the set's calibration class: its row size (the first table's:
// a lookup's tables share one) and the power of two of its span.
func (s *tableSet) key() calKey {
	if s.n == 0 {
		return calKey{}
	}
	return calKey{rowBytes: s.t[0].rowBytes, spanLog2: bits.Len64(s.span)}
}

// hostFigures are a lookup's columns' calibrations averaged (each column
// is a share of the rows) at the first column's probe sizes: the time
// of each path at each size, and the largest of the columns' split
// factors.
type hostFigures struct {
	rows, z, s [3]float64
	split      float64 // 1 where no column measured it
	columns    int
	err        error
}

// add accumulates one column's calibration, evaluated at the first
// column's probe sizes (which are the same for every column of one row
// size; a calibration of other sizes is interpolated to them).
func (f *hostFigures) add(cal HostCalibration) {
	if f.columns == 0 {
		for i, n := range cal.Rows {
			f.rows[i] = float64(n)
		}
	}
	for i, n := range f.rows {
		z, s := cal.Predict(int64(n))
		f.z[i] += z.Seconds()
		f.s[i] += s.Seconds()
	}
	f.split = max(f.split, cal.SplitFactor)
	f.columns++
}

// done turns the sums into averages.
func (f *hostFigures) done() {
	if f.columns > 0 {
		k := float64(f.columns)
		for i := range f.z {
			f.z[i] /= k
			f.s[i] /= k
		}
	}
	if f.split == 0 {
		f.split = 1
	}
}

// zero and staged are the predicted times, in seconds, of n rows on each
// path.
func (f *hostFigures) zero(n float64) float64   { return interpolate(&f.rows, &f.z, n) }
func (f *hostFigures) staged(n float64) float64 { return interpolate(&f.rows, &f.s, n) }

// choose is the fastest predicted path for r's n rows: a split (its
// zero-copy tokens tz, where both parts take equal predicted times, at
// least one token each way; not for strict lookups) when it beats both
// others by 5%, else staged or zero-copy. tz is the split's even when it
// is not chosen.
func (f hostFigures) choose(r *Request, n int64) (HostPath, int) {
	nf := float64(n)
	zero, staged := f.zero(nf), f.staged(nf)
	tz := f.balance(r)
	split := f.splitTime(r, tz) * max(f.split, 0.5)
	switch {
	case !r.Strict && r.T >= 2 && split < 0.95*min(zero, staged):
		return HostSplit, tz
	case staged < zero:
		return HostStaged, tz
	}
	return HostZeroCopy, tz
}

// balance is the split's zero-copy tokens: the fewest, at least one and
// leaving one staged, whose zero-copy part's predicted time reaches the
// staged part's (zero-copy's time grows and staged's shrinks with them),
// or the one before it where that one's longer part is shorter.
func (f hostFigures) balance(r *Request) int {
	if r.T < 2 {
		return 1
	}
	k := float64(r.K)
	part := func(tz int) (z, s float64) {
		return f.zero(float64(tz) * k), f.staged(float64(r.T-tz) * k)
	}
	lo, hi := 1, r.T-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if z, s := part(mid); z < s {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo > 1 && f.splitTime(r, lo-1) < f.splitTime(r, lo) {
		return lo - 1
	}
	return lo
}

// splitTime is what a split of r with tz zero-copy tokens takes by its
// parts' curves alone: the longer of the two, run at once.
func (f hostFigures) splitTime(r *Request, tz int) float64 {
	k := float64(r.K)
	return max(f.zero(float64(tz)*k), f.staged(float64(r.T-tz)*k))
}

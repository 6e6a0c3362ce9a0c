package cudagather

import "time"

// Table is a table a context's lookups read: NumRows rows of RowBytes
// bytes, either host memory registered and mapped into the device's
// address space (Context.RegisterHost) or device memory
// (Context.Upload). Close it only when no pending work reads it.
type Table struct {
	c        *Context
	ptr      DevPtr // device address of row 0
	rows     int64
	rowBytes int
	host     []byte           // the registered host memory (host tables)
	cal      *HostCalibration // host tables: CalibrateHost's figures (under c.mu)
	slice    int64            // host tables registered in slices of this many bytes (0: whole)
}

// Rows returns the table's row count.
func (t *Table) Rows() int64 { return t.rows }

// RowBytes returns the table's row size.
func (t *Table) RowBytes() int { return t.rowBytes }

// Host reports whether the table is registered host memory (zero-copy).
func (t *Table) Host() bool { return t.host != nil }

// DevPtr returns the device address of row 0 (0 once closed).
func (t *Table) DevPtr() DevPtr { return t.ptr }

// HostCalibration is what CalibrateHost measured for one host table on
// this machine: the times of lookups of random rows spread over the whole
// table, at three sizes, on each path. A path's time is not a line in the
// rows: zero-copy's per-row cost grows with the rows in flight (the
// device's translations of host pages miss more, up to about 31 ns a row
// on the H200 at 32 GiB, where 4,096 rows take 7 ns each), so Predict
// interpolates between the measured sizes instead of fitting one line.
type HostCalibration struct {
	// Rows are the probe sizes, ascending (the largest is 262,144 rows,
	// or fewer where that would take more than 128 MiB of output).
	Rows [3]int64
	// ZeroCopy is the median time of a HostZeroCopy lookup of each probe
	// size; Staged of a HostStaged one (ids read back, the CPU gather with
	// the context's workers, the copies, the placing pass), each measured
	// to the stream's completion.
	ZeroCopy, Staged [3]time.Duration
	// SplitFactor is a HostSplit lookup's measured time, at the largest
	// probe size, over the time its two parts predict (the longer of the
	// two at its tokens): they run at once on one PCIe link and one host
	// memory, and the split is priced at its parts' time times this (0:
	// not measured, taken as 1).
	SplitFactor float64
}

// Predict returns the predicted time of a lookup of n rows from the
// table on each path: between two probe sizes, the straight line through
// their times; past the largest, the last two's slope; below the
// smallest, the larger of the first two's line and the first time scaled
// by n (a cost that grows faster than the rows, as zero-copy's does,
// would otherwise be predicted below zero).
func (h HostCalibration) Predict(n int64) (zeroCopy, staged time.Duration) {
	var rows, z, s [3]float64
	for i := range rows {
		rows[i], z[i], s[i] = float64(h.Rows[i]), h.ZeroCopy[i].Seconds(), h.Staged[i].Seconds()
	}
	at := float64(n)
	return time.Duration(interpolate(&rows, &z, at) * 1e9), time.Duration(interpolate(&rows, &s, at) * 1e9)
}

// interpolate is the piecewise-linear curve through (rows[i], ts[i]) at n
// (see HostCalibration.Predict); rows ascending, distinct. Slopes below
// zero (a noisy probe) are taken as zero.
func interpolate(rows, ts *[3]float64, n float64) float64 {
	i := 0
	if n > rows[1] {
		i = 1
	}
	dr := rows[i+1] - rows[i]
	if !(dr > 0) {
		return max(ts[2], 0)
	}
	slope := max((ts[i+1]-ts[i])/dr, 0)
	v := ts[i] + slope*(n-rows[i])
	if n < rows[0] && rows[0] > 0 {
		v = max(v, ts[0]*n/rows[0])
	}
	return max(v, 0)
}

// calKey is a class of host tables that one calibration stands for: the
// same row size and a span (rows x row size) of the same power of two,
// which is what sets the translation costs the paths pay.
type calKey struct {
	rowBytes int
	spanLog2 int
}

// classOf is the calibration class of lookups of t alone.
func classOf(t *Table) calKey {
	set := tableSet{n: 1, span: uint64(t.rows) * uint64(t.rowBytes)}
	set.t[0] = t
	return set.key()
}

package cudagather

import (
	"math/bits"
	"time"
)

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
// this machine: the time of a lookup of n random rows spread over the
// whole table, as fixed + n*PerRow, on each path.
type HostCalibration struct {
	// ZeroCopyFixed and ZeroCopyPerRow fit HostZeroCopy lookups (the
	// device translating the table's pages as it reads).
	ZeroCopyFixed  time.Duration
	ZeroCopyPerRow float64 // seconds
	// StagedFixed and StagedPerRow fit HostStaged lookups (ids read back,
	// the CPU gather with the context's workers, the copies, the placing
	// pass), measured to the stream's completion.
	StagedFixed  time.Duration
	StagedPerRow float64 // seconds
	// SplitFactor is a HostSplit lookup's measured time over the time its
	// two parts predict (the longer of the two lines above at its
	// tokens): they run at once on one PCIe link and one host memory, and
	// the split is priced at its parts' time times this (0: not measured,
	// taken as 1).
	SplitFactor float64
	// Rows are the two probe sizes the lines were fitted through.
	Rows [2]int64
}

// Predict returns the predicted time of a lookup of n rows from the
// table on each path.
func (h HostCalibration) Predict(n int64) (zeroCopy, staged time.Duration) {
	z := h.ZeroCopyFixed + time.Duration(float64(n)*h.ZeroCopyPerRow*1e9)
	s := h.StagedFixed + time.Duration(float64(n)*h.StagedPerRow*1e9)
	return z, s
}

// calKey is a class of host tables that one calibration stands for: the
// same row size and a span (rows x row size) of the same power of two,
// which is what sets the translation costs the paths pay.
type calKey struct {
	rowBytes int
	spanLog2 int
}

// classOf is t's calibration class.
func classOf(t *Table) calKey {
	return calKey{rowBytes: t.rowBytes, spanLog2: bits.Len64(uint64(t.rows) * uint64(t.rowBytes))}
}

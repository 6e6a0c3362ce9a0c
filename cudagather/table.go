package cudagather

// Table is a table a context's lookups read: NumRows rows of RowBytes
// bytes, either host memory registered and mapped into the device's
// address space (Context.RegisterHost) or device memory
// (Context.Upload). Close it only when no pending work reads it.
type Table struct {
	c        *Context
	ptr      DevPtr // device address of row 0
	rows     int64
	rowBytes int
	host     []byte // the registered host memory (host tables)
}

// Rows returns the table's row count.
func (t *Table) Rows() int64 { return t.rows }

// RowBytes returns the table's row size.
func (t *Table) RowBytes() int { return t.rowBytes }

// Host reports whether the table is registered host memory (zero-copy).
func (t *Table) Host() bool { return t.host != nil }

// DevPtr returns the device address of row 0 (0 once closed).
func (t *Table) DevPtr() DevPtr { return t.ptr }

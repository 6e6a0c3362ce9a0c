package lookup

import (
	"fmt"
	"unsafe"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
)

// Request is one Engram lookup as its caller gives it, local or remote:
// ids shaped [T,K] (row-major: id (t, k) is IDs[t*K+k]), one table per
// column by name, rows landing in Out at Off + t*TStride + k*KStride.
//
// Token-major [T,K,R] output: TStride = K*R, KStride = R. Head-major
// [K,T,R]: TStride = R, KStride = T*R. Any other non-negative strides
// under which no two rows overlap work too (padding between tokens, say).
// A Request may be reused for the next call; nothing keeps it.
type Request struct {
	// Tables names the table of each column (K names; names may repeat).
	// Every table must have the same row size R.
	Tables []string
	// Offsets, nil or K values, are subtracted from each column's ids
	// (global id - offset = table row).
	Offsets []int64
	// IDs32 or IDs64 (at most one of them set) are the T*K ids. Id -1
	// leaves its output row untouched; any other id minus its column's
	// offset must be a row of the column's table.
	IDs32 []int32
	IDs64 []int64
	// T and K are the id array's shape.
	T, K int
	// Out is the output buffer; for a remote lookup it must lie in the
	// registered memory the owner writes (see [Tables]).
	Out []byte
	// Off is the byte offset of row (0, 0) in Out; TStride and KStride
	// the bytes between tokens and between columns.
	Off, TStride, KStride int
	// DeviceLen, instead of Out, makes the output device memory of that
	// many bytes, which this package never touches: the rows must lie in
	// it, and only a remote owner's tables take one (the remote path
	// stages the rows and copies them on).
	DeviceLen int
}

// Tables is where the tables a [Request] names are: a local store's
// mapped rows, or a remote owner's tables.
type Tables interface {
	// Column returns the column that reads the named table, with its
	// Rows (local tables only), NumRows and RowBytes set and Offset 0,
	// or the error to report for the name (a [*TableError]).
	Column(name string) (Column, error)
	// Arena is nil for local tables. For a remote owner's tables it is
	// the registered memory the owner may write: the output must lie in
	// it ([ErrUnregisteredOutput]), the columns' Rows are not read, and
	// offsets must not be negative.
	Arena() []byte
}

// Checked is a lookup that passed the check: its columns resolved, its
// ids and output validated, ready to run on the path its [Tables] are on
// ([Engine.Run] for local tables, the remote client's Run for a remote
// owner's), which check nothing again. Only the check makes one: the zero
// value is an empty lookup.
type Checked struct {
	cols     []Column
	ids32    []int32
	ids64    []int64
	t, k     int
	out      Output
	rowBytes int
	arena    []byte
}

// Check validates r in full against tables, having written nothing, and
// returns it as a [Checked]. It reports the first failure of, in this
// order: the shape ([*ShapeError]: both id types set, the [T,K] shape
// against the ids and the table names, the offsets); each name, through
// tables.Column (its error as it is, a [*TableError]); then the rules
// that [Check] lists, on the resolved columns. A remote owner's tables add
// three rules: no negative offset (a [*ColumnError] wrapping ErrShape,
// with the columns), the output inside the arena (a [*BufferError], before
// the output layout) and no negative stride (an [*OutputError], even one
// a dimension of size 1 does not use).
//
// cols is scratch for the K resolved columns (it grows when it is
// shorter); the Checked refers to it, and to r's ids and output, until
// the lookup has run. It does not allocate unless it returns an error or
// cols is short.
func (r *Request) Check(tables Tables, cols []Column) (Checked, error) {
	n := len(r.IDs32) + len(r.IDs64)
	shape := func(reason string) error {
		return &ShapeError{T: r.T, K: r.K, IDs: n, Columns: len(r.Tables), Reason: reason}
	}
	if r.IDs32 != nil && r.IDs64 != nil {
		return Checked{}, shape("both int32 and int64 ids")
	}
	if err := checkShape(len(r.Tables), n, r.T, r.K); err != nil {
		return Checked{}, err
	}
	if r.Offsets != nil && len(r.Offsets) != r.K {
		return Checked{}, shape(fmt.Sprintf("%d offsets", len(r.Offsets)))
	}
	if r.DeviceLen < 0 || (r.DeviceLen > 0 && r.Out != nil) {
		return Checked{}, &BufferError{Len: len(r.Out), Reason: fmt.Sprintf("a device output of %d bytes and a host buffer", r.DeviceLen)}
	}
	if r.DeviceLen > 0 && tables.Arena() == nil {
		return Checked{}, &BufferError{Len: r.DeviceLen, Reason: "a device output needs a remote store's tables (local tables are read on the device through a device attachment)"}
	}
	if cap(cols) < r.K {
		cols = make([]Column, r.K)
	}
	cols = cols[:r.K]
	for k, name := range r.Tables {
		var col Column
		if k > 0 && name == r.Tables[k-1] {
			col = cols[k-1] // a repeated name (the common case) is resolved once
		} else {
			var err error
			if col, err = tables.Column(name); err != nil {
				return Checked{}, err
			}
			col.Name = name
		}
		col.Offset = 0
		if r.Offsets != nil {
			col.Offset = r.Offsets[k]
		}
		cols[k] = col
	}
	c := Checked{cols: cols, ids32: r.IDs32, ids64: r.IDs64, t: r.T, k: r.K,
		out: Output{Buf: r.Out, Off: r.Off, TStride: r.TStride, KStride: r.KStride, DeviceLen: r.DeviceLen}, arena: tables.Arena()}
	if err := c.check(); err != nil {
		return Checked{}, err
	}
	return c, nil
}

// checkedOf is a Checked of already resolved columns, not yet checked.
func checkedOf[I pack.ID](cols []Column, ids []I, t, k int, out Output) Checked {
	c := Checked{cols: cols, t: t, k: k, out: out}
	c.ids32, c.ids64 = eraseIDs(ids)
	return c
}

// Columns returns the resolved columns, offsets applied.
func (c *Checked) Columns() []Column { return c.cols }

// IDs returns the ids: one of the two is set (both nil for an empty
// lookup).
func (c *Checked) IDs() ([]int32, []int64) { return c.ids32, c.ids64 }

// Shape returns T and K.
func (c *Checked) Shape() (t, k int) { return c.t, c.k }

// Output returns the output.
func (c *Checked) Output() Output { return c.out }

// Device reports whether the output is device memory (Request.DeviceLen).
func (c *Checked) Device() bool { return c.out.DeviceLen > 0 }

// RowBytes returns the row size R every column shares (0 without
// columns).
func (c *Checked) RowBytes() int { return c.rowBytes }

// Arena returns the arena the request was checked against (nil for local
// tables).
func (c *Checked) Arena() []byte { return c.arena }

// ArenaOffset returns the output buffer's byte offset in the arena (0
// for local tables or an empty lookup).
func (c *Checked) ArenaOffset() uint64 {
	if c.arena == nil || c.t == 0 || c.k == 0 || c.out.DeviceLen > 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(c.out.Buf))) - uintptr(unsafe.Pointer(unsafe.SliceData(c.arena))))
}

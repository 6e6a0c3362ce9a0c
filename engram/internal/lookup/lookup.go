package lookup

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
)

// inlineState is the per-call state of a lookup of at most inlineCols
// columns that does not split, when the engine's scratch is busy: it lives
// on the caller's stack, so that such lookups run concurrently.
type inlineState struct {
	colGroup [inlineCols]int32
	groups   [inlineCols]group
	tasks    [inlineCols]task
	slots    [2 * inlineCols]int32
}

// Lookup copies, for every id (t, k) of the [T,K] ids (id (t, k) is
// ids[t*K+k]) but -1, row id-cols[k].Offset of column k's table to output
// row (t, k) of out. An id -1 leaves its output row untouched. It runs
// [Check] first and writes nothing when that fails, then [Engine.Run]. It
// is synchronous; a nil engine runs every lookup on the caller's
// goroutine.
//
// It does not allocate in steady state, except with a nil engine for more
// than 64 columns.
func Lookup[I pack.ID](e *Engine, cols []Column, ids []I, t, k int, out Output) error {
	c := checkedOf(cols, ids, t, k, out)
	if err := c.check(); err != nil {
		return err
	}
	return e.Run(&c)
}

// Run copies the rows of a lookup checked against local tables, checking
// nothing again; it returns [ErrClosed] on a closed engine (and refuses,
// with [ErrTable], a lookup checked against a remote owner's tables,
// whose rows are not here).
//
// The columns are grouped by table (columns whose Rows start at the same
// address) and offset. A group whose columns
// k0, k0+d, ... form one strided layout with its outputs (T = 1, or every
// d-th column of a token-major output) is one pack gather of all its rows
// (a single table for all columns of a dense [T,K,R] output is one gather
// of T*K rows); a group of many columns and few tokens is one gather per
// token and arithmetic run of its columns; any other group is one gather
// per column. A large lookup splits over the engine's goroutines (see
// [Engine]).
//
// It does not allocate in steady state, except with a nil engine for more
// than 64 columns.
func (e *Engine) Run(c *Checked) error {
	if c.arena != nil {
		return errRemoteRows
	}
	if e != nil && e.closed.Load() {
		return ErrClosed
	}
	if c.t == 0 || c.k == 0 {
		return nil
	}
	if c.ids64 != nil {
		return run(e, c.cols, c.ids64, c.t, c.k, c.rowBytes, c.out)
	}
	return run(e, c.cols, c.ids32, c.t, c.k, c.rowBytes, c.out)
}

// errRemoteRows is Run's answer to a lookup checked against a remote
// owner's tables.
var errRemoteRows = fmt.Errorf("%w: checked against a remote owner's tables, whose rows are not here", ErrTable)

// run is Run of a checked lookup of at least one row.
func run[I pack.ID](e *Engine, cols []Column, ids []I, t, k, rowBytes int, out Output) error {
	n := e.splits(t*k, rowBytes)
	if n < 2 {
		// A small lookup plans in the engine's scratch when no other call
		// holds it (no state to clear), else on its own stack.
		if e != nil && e.mu.TryLock() {
			defer e.mu.Unlock()
			s := &e.scratch
			s.grow(k)
			return lookupSerial(cols, ids, t, k, rowBytes, out, &s.plan, !e.noTouch)
		}
		if k <= inlineCols {
			var st inlineState
			p := plan{colGroup: st.colGroup[:k], groups: st.groups[:k], tasks: st.tasks[:k], slots: st.slots[:]}
			return lookupSerial(cols, ids, t, k, rowBytes, out, &p, e == nil || !e.noTouch)
		}
		if e == nil {
			var s scratch
			s.grow(k)
			return lookupSerial(cols, ids, t, k, rowBytes, out, &s.plan, true)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return ErrClosed
	}
	s := &e.scratch
	s.grow(k)
	if n < 2 {
		return lookupSerial(cols, ids, t, k, rowBytes, out, &s.plan, !e.noTouch)
	}
	tasks := s.plan.build(cols, t, k, rowBytes, out)
	if len(tasks) == 1 {
		tk := &tasks[0]
		col := &cols[tk.col]
		l := pack.Layout{Rows: tk.rows, RowBytes: rowBytes, Off: tk.outOff, Stride: tk.stride,
			IDStride: tk.idStride, Bias: col.Offset}
		if pack.ParallelGatherUnchecked(e.pw, out.Buf, col.Rows, ids[tk.idOff:], l) != nil {
			return ErrClosed // unreachable: Close waits for mu before closing the pack workers
		}
		return nil
	}
	sp := split{buf: out.Buf, cols: cols, rowBytes: rowBytes, tasks: tasks}
	sp.ids32, sp.ids64 = eraseIDs(ids)
	return e.run(&sp, n)
}

// lookupSerial plans and runs a checked lookup on the caller's goroutine.
// With touch set, a lookup cut into many small gathers reads its rows
// once first (see touchRows).
func lookupSerial[I pack.ID](cols []Column, ids []I, t, k, rowBytes int, out Output, p *plan, touch bool) error {
	tasks := p.build(cols, t, k, rowBytes, out)
	if touch && len(tasks) > 1 && t*k <= touchRowsPerTask*len(tasks) && t*k*rowBytes <= touchBytes {
		runtime.KeepAlive(touchRows(cols, ids, rowBytes, tasks))
	}
	for i := range tasks {
		tk := &tasks[i]
		col := &cols[tk.col]
		pack.GatherUnchecked(out.Buf, col.Rows, ids[tk.idOff:], pack.Layout{Rows: tk.rows, RowBytes: rowBytes,
			Off: tk.outOff, Stride: tk.stride, IDStride: tk.idStride, Bias: col.Offset})
	}
	return nil
}

// eraseIDs returns ids as int32 or int64 ids (the other result nil), for
// the non-generic split.
func eraseIDs[I pack.ID](ids []I) ([]int32, []int64) {
	var zero I
	p := unsafe.Pointer(unsafe.SliceData(ids))
	if unsafe.Sizeof(zero) == 4 {
		return unsafe.Slice((*int32)(p), len(ids)), nil
	}
	return nil, unsafe.Slice((*int64)(p), len(ids))
}

// When a small lookup is cut into gathers of a few rows each (distinct
// tables, one or a few tokens), every gather is a pack call whose fixed
// cost is several times a row's copy, and the misses of a row that is not
// in cache hardly overlap with those of the next one. touchRows first
// reads one byte of every cache line of every row in a tight loop, where
// the misses overlap, and the gathers then copy rows from cache.
// BenchmarkTouch measures it: from the benchmark table (out of cache),
// T=1 and T=4 with K=24 distinct tables ran 1.4-1.7x faster; from a
// cached table the pass costs up to about 20%. It runs when the gathers
// average at most touchRowsPerTask rows and the rows total at most
// touchBytes (they stay in cache until copied).
const (
	touchRowsPerTask = 8
	touchBytes       = 256 << 10
)

// touchRows reads one byte of every 64-byte line of the rows of tasks
// and returns their XOR, which the caller keeps alive so that the reads
// are not optimized away.
func touchRows[I pack.ID](cols []Column, ids []I, rowBytes int, tasks []task) byte {
	var sink byte
	for i := range tasks {
		tk := &tasks[i]
		col := &cols[tk.col]
		base := unsafe.Pointer(unsafe.SliceData(col.Rows))
		for j, at := 0, tk.idOff; j < tk.rows; j, at = j+1, at+tk.idStride {
			id := int64(ids[at])
			if id == -1 {
				continue
			}
			row := unsafe.Add(base, (id-col.Offset)*int64(rowBytes))
			for off := 0; off < rowBytes; off += 64 {
				sink ^= *(*byte)(unsafe.Add(row, off))
			}
		}
	}
	return sink
}

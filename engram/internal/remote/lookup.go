package remote

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

// Request is one lookup: ids shaped [T,K] (row-major: IDs[t*K+k]), one
// table per column, rows landing in Out at Off + t*TStride + k*KStride.
// A Request may be reused for the next call (change IDs, Out, ...);
// Lookup does not keep it.
//
// Token-major [T,K,R] output: TStride = K*R, KStride = R. Head-major
// [K,T,R]: TStride = R, KStride = T*R. Any other non-negative strides under
// which no two rows overlap work too (padding between tokens, say).
type Request[I int32 | int64] struct {
	// Tables names the table of each column (K names; names may repeat).
	// Every table must have the same row size R.
	Tables []string
	// IDs are the T*K ids. Id -1 leaves its output row untouched; any
	// other id minus its column's offset must be a row of the table.
	IDs []I
	// T and K are the id array's shape.
	T, K int
	// Offsets, nil or K values >= 0, are subtracted from each column's ids
	// (global id - offset = table row).
	Offsets []int64
	// Out is the output buffer: it must lie inside the client's
	// registered arena (a slice of an Output's Bytes).
	Out []byte
	// Off is the byte offset of row (0,0) in Out; TStride and KStride the
	// bytes between tokens and between columns.
	Off, TStride, KStride int
}

// Lookup reads the rows r names from the owner into r.Out. It validates
// the whole request first and returns a typed error, having written
// nothing, when any part is invalid (*ArgError, *TableError, *IDError,
// *ArenaError). It then lowers the request into one fixed-row scatter
// operation per evenly spaced run of columns sharing a table and offset
// (one operation when all K columns name one table at one offset; see the
// package doc), submits them all and waits for all; a failure is a
// *TransferError, after which the output bytes the request names are
// undefined.
func Lookup[I int32 | int64](ctx context.Context, c *Client, r *Request[I]) error {
	q := shape{tables: r.Tables, offsets: r.Offsets, t: r.T, k: r.K,
		out: r.Out, off: r.Off, ts: r.TStride, ks: r.KStride}
	if unsafe.Sizeof(I(0)) == 4 {
		q.ids32 = unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(r.IDs))), len(r.IDs))
	} else {
		q.ids64 = unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(r.IDs))), len(r.IDs))
	}
	return c.lookup(ctx, &q)
}

// shape is a Request with its ids as whichever slice type they are.
type shape struct {
	tables      []string
	offsets     []int64
	t, k        int
	ids32       []int32
	ids64       []int64
	out         []byte
	off, ts, ks int
}

func (q *shape) nIDs() int { return len(q.ids32) + len(q.ids64) }

func (q *shape) offset(k int) int64 {
	if q.offsets == nil {
		return 0
	}
	return q.offsets[k]
}

// run is an evenly spaced run of columns of one table and offset: columns
// c0, c0+s, ..., c0+(n-1)*s. Its plan reads its ids as [T,n], or, when
// transposed, as [n,T] (column by column).
type run struct {
	table      int
	offset     int64
	c0, n, s   int
	zeroCopy   bool
	transposed bool
	ids32      []int32
	ids64      []int64
}

// lookupState is the reusable storage of one lookup in progress.
type lookupState struct {
	col   []int  // table index per column
	done  []bool // column already grouped
	group []int
	runs  []run
	s32   []int32 // compacted ids
	s64   []int64
	plans []planfmt.Plan
	ops   []engine.ScatterOp
	opers []*engine.Operation
	errs  []error
	spans []uint64 // one completion span per operation
	full  planfmt.Plan
}

func (c *Client) getState() *lookupState {
	select {
	case st := <-c.states:
		return st
	default:
		return new(lookupState)
	}
}

// putState drops the references to the caller's memory and keeps st.
func (c *Client) putState(st *lookupState) {
	for i := range st.runs {
		st.runs[i].ids32, st.runs[i].ids64 = nil, nil
	}
	for i := range st.plans {
		st.plans[i].Rows.IDs32, st.plans[i].Rows.IDs64 = nil, nil
	}
	clear(st.ops)
	clear(st.errs)
	select {
	case c.states <- st:
	default:
	}
}

func (c *Client) lookup(ctx context.Context, q *shape) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		c.stats.failed.Add(1)
		return fmt.Errorf("remote: lookup: %w", ErrClosed)
	}
	st := c.getState()
	defer c.putState(st)
	err := c.lower(st, q)
	if err == nil && len(st.runs) > 0 {
		if err = ctx.Err(); err != nil {
			err = fmt.Errorf("remote: lookup: %w", err)
		} else {
			err = c.execute(ctx, st)
		}
	}
	if err != nil {
		c.stats.failed.Add(1)
		return err
	}
	c.stats.lookups.Add(1)
	return nil
}

// lower validates q and lowers it into st.runs, st.plans and st.ops.
// A request with no rows leaves st.runs empty.
func (c *Client) lower(st *lookupState, q *shape) error {
	// Each rejection also wraps the lookup core's sentinel of its kind, so
	// callers test remote and local lookups with the same errors.Is.
	bad := func(field, reason string) error {
		kind := lookup.ErrShape
		switch field {
		case "Off", "TStride/KStride", "Out":
			kind = lookup.ErrOutput
		case "RowBytes":
			kind = lookup.ErrRowBytes
		}
		return &ArgError{Field: field, Reason: reason, Err: kind}
	}
	st.runs = st.runs[:0]
	switch {
	case q.t < 0 || q.k < 0:
		return bad("T/K", fmt.Sprintf("[%d,%d]: negative", q.t, q.k))
	case len(q.tables) != q.k:
		return bad("Tables", fmt.Sprintf("%d names for K = %d", len(q.tables), q.k))
	case q.offsets != nil && len(q.offsets) != q.k:
		return bad("Offsets", fmt.Sprintf("%d offsets for K = %d", len(q.offsets), q.k))
	case q.k == 0 && q.nIDs() != 0,
		q.k > 0 && (q.t > q.nIDs()/q.k || q.t*q.k != q.nIDs()):
		return bad("IDs", fmt.Sprintf("%d ids for [%d,%d]", q.nIDs(), q.t, q.k))
	case q.off < 0:
		return bad("Off", fmt.Sprintf("%d: negative", q.off))
	case q.ts < 0 || q.ks < 0:
		return bad("TStride/KStride", fmt.Sprintf("%d/%d: negative", q.ts, q.ks))
	}
	for k, o := range q.offsets {
		if o < 0 {
			return bad(fmt.Sprintf("Offsets[%d]", k), fmt.Sprintf("%d: negative", o))
		}
	}
	st.col = grow(st.col, q.k)
	rowBytes := 0
	for k, name := range q.tables {
		i, ok := c.index[name]
		if !ok {
			return &TableError{Column: k, Name: name}
		}
		st.col[k] = i
		if rb := c.specs[i].RowBytes; k == 0 {
			rowBytes = rb
		} else if rb != rowBytes {
			return bad("RowBytes", fmt.Sprintf("table %q has %d-byte rows, %q %d: one output needs one row size",
				q.tables[0], rowBytes, name, rb))
		}
	}
	if q.t == 0 || q.k == 0 {
		return nil
	}
	localOff, err := c.inArena(q.out)
	if err != nil {
		return err
	}
	R := uint64(rowBytes)
	if end, ok := layoutEnd(q, R); !ok || end > uint64(len(q.out)) {
		return bad("Out", fmt.Sprintf("rows [%d,%d] of %d bytes at offset %d with strides %d/%d reach past the output's %d bytes",
			q.t, q.k, R, q.off, q.ts, q.ks, len(q.out)))
	}
	// Overlap of the whole output layout, decided by planfmt from the
	// strides alone (the ids are not read).
	st.full = planfmt.Plan{Form: planfmt.FormRows, SrcExtent: R, DstExtent: uint64(len(q.out)),
		Rows: planfmt.Rows{RowSize: R, TableRows: 1, IDs32: q.ids32, IDs64: q.ids64, DstBase: uint64(q.off),
			Layout: planfmt.Layout{Kind: planfmt.LayoutStrided, Cols: uint64(q.k), RowStride: uint64(q.ts), ColStride: uint64(q.ks)}}}
	_, err = planfmt.EncodedPlanSize(&st.full)
	st.full = planfmt.Plan{}
	if err != nil {
		return &ArgError{Field: "TStride/KStride", Reason: "output rows overlap", Err: errors.Join(lookup.ErrOutput, err)}
	}
	c.group(st, q, R)
	if err := c.compact(st, q); err != nil {
		st.runs = st.runs[:0]
		return err
	}
	c.plan(st, q, R, localOff)
	return nil
}

// grow returns s with length n, reusing its storage when it can.
func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n, n+n/4)
	}
	return s[:n]
}

// inArena returns out's offset in the arena, or an *ArenaError.
func (c *Client) inArena(out []byte) (uint64, error) {
	if len(out) == 0 {
		return 0, &ArenaError{Len: 0, Reason: "empty output"}
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(c.arena)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(out)))
	if p < base || p-base >= uintptr(len(c.arena)) || uintptr(len(out)) > uintptr(len(c.arena))-(p-base) {
		return 0, &ArenaError{Len: len(out), Reason: "not inside the client's registered output arena (lease it with NewOutput)"}
	}
	return uint64(p - base), nil
}

// layoutEnd returns the end of the last byte q's layout touches,
// off + (T-1)*TStride + (K-1)*KStride + R, and false on overflow.
func layoutEnd(q *shape, r uint64) (uint64, bool) {
	hi1, a := bits.Mul64(uint64(q.t-1), uint64(q.ts))
	hi2, b := bits.Mul64(uint64(q.k-1), uint64(q.ks))
	if hi1 != 0 || hi2 != 0 {
		return 0, false
	}
	end, c1 := bits.Add64(uint64(q.off), a, 0)
	end, c2 := bits.Add64(end, b, 0)
	end, c3 := bits.Add64(end, r, 0)
	return end, c1|c2|c3 == 0
}

// group splits the columns into runs: columns of one (table, offset), in
// column order, cut into evenly spaced runs.
//
// A run whose rows are contiguous down a column but not along a token (a
// head-major output: TStride = R) is transposed: its plan walks the rows
// column by column, so consecutive rows land next to each other and the
// owner can write each column in one bulk transfer instead of one per row
// (the engine gathers only plans whose destination runs hold several rows).
// That costs a copy of the ids, not made when the mode is forced direct or
// the arena is not exposed (nothing can be gathered then).
func (c *Client) group(st *lookupState, q *shape, r uint64) {
	st.done = grow(st.done, q.k)
	clear(st.done)
	for k0 := range q.k {
		if st.done[k0] {
			continue
		}
		tbl, off := st.col[k0], q.offset(k0)
		g := st.group[:0]
		for k := k0; k < q.k; k++ {
			if !st.done[k] && st.col[k] == tbl && q.offset(k) == off {
				g = append(g, k)
				st.done[k] = true
			}
		}
		st.group = g
		for i := 0; i < len(g); {
			j, s := i, 1
			if i+1 < len(g) {
				s, j = g[i+1]-g[i], i+1
				for j+1 < len(g) && g[j+1]-g[j] == s {
					j++
				}
			}
			n := j - i + 1
			transposed := c.exposed && c.mode != engine.ModeDirect && q.t > 1 && n > 1 &&
				uint64(q.ts) == r && uint64(s*q.ks) != r
			st.runs = append(st.runs, run{table: tbl, offset: off, c0: g[i], n: n, s: s,
				zeroCopy: n == q.k && off == 0 && !transposed, transposed: transposed})
			i = j + 1
		}
	}
}

// compact validates every id and gives each run its ids: the caller's
// array for a zero-copy run, else compacted, offset-adjusted ids in the
// scratch (int32 when the table's rows fit).
func (c *Client) compact(st *lookupState, q *shape) error {
	need32, need64 := 0, 0
	for i := range st.runs {
		r := &st.runs[i]
		if r.zeroCopy {
			continue
		}
		if c.specs[r.table].NumRows <= math.MaxInt32 {
			need32 += q.t * r.n
		} else {
			need64 += q.t * r.n
		}
	}
	st.s32 = grow(st.s32, need32)
	st.s64 = grow(st.s64, need64)
	at32, at64 := 0, 0
	for i := range st.runs {
		r := &st.runs[i]
		rows := c.specs[r.table].NumRows
		bad := -1
		switch {
		case r.zeroCopy && q.ids32 != nil:
			r.ids32, bad = q.ids32, checkIDs(q.ids32, rows)
		case r.zeroCopy:
			r.ids64, bad = q.ids64, checkIDs(q.ids64, rows)
		case rows <= math.MaxInt32:
			r.ids32 = st.s32[at32 : at32+q.t*r.n]
			at32 += q.t * r.n
			if q.ids32 != nil {
				bad = compactIDs(r.ids32, q.ids32, q.t, q.k, r, rows)
			} else {
				bad = compactIDs(r.ids32, q.ids64, q.t, q.k, r, rows)
			}
		default:
			r.ids64 = st.s64[at64 : at64+q.t*r.n]
			at64 += q.t * r.n
			if q.ids32 != nil {
				bad = compactIDs(r.ids64, q.ids32, q.t, q.k, r, rows)
			} else {
				bad = compactIDs(r.ids64, q.ids64, q.t, q.k, r, rows)
			}
		}
		if bad >= 0 {
			var id int64
			if q.ids32 != nil {
				id = int64(q.ids32[bad])
			} else {
				id = q.ids64[bad]
			}
			return &IDError{Token: bad / q.k, Column: bad % q.k, ID: id, Offset: r.offset,
				Table: c.specs[r.table].Name, Rows: rows}
		}
	}
	return nil
}

// checkIDs returns the index of the first id that is neither -1 nor in
// [0, rows), or -1.
func checkIDs[S int32 | int64](ids []S, rows int64) int {
	for i, id := range ids {
		if id != -1 && (id < 0 || int64(id) >= rows) {
			return i
		}
	}
	return -1
}

// compactIDs copies the ids of run ru's columns (c0, c0+s, ..., n of them)
// of the [t,k] array src into dst, as [t,n] or, transposed, [n,t], minus
// the run's offset, keeping -1. It returns the src index of the first
// invalid id, or -1.
func compactIDs[D, S int32 | int64](dst []D, src []S, t, k int, ru *run, rows int64) int {
	c0, n, s, off := ru.c0, ru.n, ru.s, ru.offset
	dt, dj := n, 1
	if ru.transposed {
		dt, dj = 1, t
	}
	for tt := range t {
		row := src[tt*k : tt*k+k]
		at := tt * dt
		for j := range n {
			id := int64(row[c0+j*s])
			switch {
			case id == -1:
				dst[at] = -1
			case id < off || id-off >= rows:
				return tt*k + c0 + j*s
			default:
				dst[at] = D(id - off)
			}
			at += dj
		}
	}
	return -1
}

// plan fills one fixed-row plan and scatter operation per run.
func (c *Client) plan(st *lookupState, q *shape, r uint64, localOff uint64) {
	n := len(st.runs)
	st.plans = grow(st.plans, n)
	st.ops = grow(st.ops, n)
	st.opers = grow(st.opers, n)
	st.errs = grow(st.errs, n)
	st.spans = grow(st.spans, n)
	for i := range st.runs {
		ru := &st.runs[i]
		spec := &c.specs[ru.table]
		p := &st.plans[i]
		p.Form = planfmt.FormRows
		p.SrcExtent = uint64(spec.Bytes())
		p.DstExtent = uint64(len(q.out))
		p.Ranges, p.CompletionEnds = nil, nil
		lay := planfmt.Layout{Kind: planfmt.LayoutStrided, Cols: uint64(ru.n),
			RowStride: uint64(q.ts), ColStride: uint64(ru.s * q.ks)}
		if ru.transposed {
			lay.Cols, lay.RowStride, lay.ColStride = uint64(q.t), lay.ColStride, lay.RowStride
		}
		p.Rows = planfmt.Rows{RowSize: r, TableRows: uint64(spec.NumRows), IDs32: ru.ids32, IDs64: ru.ids64,
			DstBase: uint64(q.off + ru.c0*q.ks), Layout: lay}
		st.ops[i] = engine.ScatterOp{Conn: c.conn, Dir: verbs.OpRead, Remote: c.remote[ru.table],
			Local: c.local, LocalOff: localOff, Plan: p, Mode: c.mode, SpanBytes: st.spans[i : i : i+1]}
	}
}

// execute submits every operation but the last, runs the last on this
// goroutine (Engine.Do), then waits for the others. It returns the first
// failure in operation order.
func (c *Client) execute(ctx context.Context, st *lookupState) error {
	n := len(st.runs)
	submitted := 0
	stopped := false
	for i := range n - 1 {
		op, err := c.engine.Submit(ctx, &st.ops[i])
		if err != nil {
			st.errs[i], stopped = err, true
			break
		}
		st.opers[i] = op
		submitted++
	}
	if !stopped {
		res, err := c.engine.Do(ctx, &st.ops[n-1])
		c.count(&res, err)
		st.errs[n-1] = err
	}
	for i := range submitted {
		// The operation is bounded by ctx itself (Submit's); waiting
		// without a deadline lets it finish before its state is reused.
		res, err := st.opers[i].Wait(context.Background())
		st.opers[i] = nil
		c.count(&res, err)
		st.errs[i] = err
	}
	for i, err := range st.errs[:n] {
		if err != nil {
			ru := &st.runs[i]
			return &TransferError{Table: c.specs[ru.table].Name, Columns: ru.n, Err: err}
		}
	}
	return nil
}

// count records an operation's outcome.
func (c *Client) count(res *engine.Result, err error) {
	s := &c.stats
	if err != nil {
		var oe *engine.OpError
		if errors.As(err, &oe) {
			s.ops.Add(1)
		}
		return
	}
	s.ops.Add(1)
	s.bytes.Add(res.Bytes)
	switch res.Mode {
	case engine.ModeGather:
		s.gather.Add(1)
	case engine.ModeHybrid:
		s.hybrid.Add(1)
	default:
		s.direct.Add(1)
	}
	if res.Fallback != engine.FallbackNone {
		s.fallbacks.Add(1)
	}
}

package remote

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

// Lookup checks r against c's tables ([lookup.Request.Check]: every
// rule, the output inside the client's arena included), having written
// nothing when it fails, then runs it ([Run]). A request that fails the
// check returns the lookup core's typed error and counts as failed in
// Stats.
func Lookup(ctx context.Context, c *Client, r *lookup.Request) error {
	st := c.getState()
	defer c.putState(st)
	st.cols = grow(st.cols, len(r.Tables))
	q, err := r.Check(c, st.cols)
	if err != nil {
		c.stats.failed.Add(1)
		return err
	}
	return c.lookup(ctx, st, &q, nil)
}

// Run reads the rows of a lookup checked against c's tables (Check with c
// as the tables, or a view that resolves the same names to the same
// specs) from the owner into its output, checking nothing again. It lowers
// the lookup into one fixed-row scatter operation per evenly spaced run of
// columns sharing a table and offset (one operation when all K columns
// name one table at one offset; see the package doc), submits them all
// and waits for all; a failure is a *TransferError, after which the output
// bytes the request names are undefined.
func Run(ctx context.Context, c *Client, q *lookup.Checked) error {
	if q.Device() {
		return &lookup.BufferError{Len: q.Output().Len(), Reason: "a device output: run it with RunDevice"}
	}
	st := c.getState()
	defer c.putState(st)
	return c.lookup(ctx, st, q, nil)
}

// RunDevice reads the rows of a lookup checked with a device output
// (lookup.Request.DeviceLen) into dst, whose length it was checked
// against: each operation Run would submit runs as an Engine.DoDevice,
// its bytes landing in a bounce lease of the client's output arena and
// copied on to dst piece by piece (dst.CopyIn: a device stream's order)
// while later pieces transfer; nothing is staged whole. A sharded
// lookup's parts run at once, each through its own bounce lease, and a
// failed part is read again from its shard's next replica as in Run. It
// returns once every copy has finished. A failure is a *TransferError
// (or a *ShardError), after which the device bytes the request names are
// undefined; rows whose id is -1 are never written.
func RunDevice(ctx context.Context, c *Client, q *lookup.Checked, dst engine.DeviceDst) error {
	if !q.Device() || dst == nil {
		return &ArgError{Field: "dst", Reason: "RunDevice needs a lookup checked with a device output and its destination"}
	}
	if got, want := dst.DeviceLen(), uint64(q.Output().Len()); got < want {
		return &lookup.BufferError{Len: int(min(got, uint64(math.MaxInt))), Reason: fmt.Sprintf("device destination of %d bytes for an output checked at %d", got, want)}
	}
	st := c.getState()
	defer c.putState(st)
	return c.lookup(ctx, st, q, dst)
}

// CountRejected counts, in Stats.Failed, a lookup of c's tables that its
// caller's check rejected before Run.
func (c *Client) CountRejected() { c.stats.failed.Add(1) }

// Column returns the column of the named table (lookup.Tables): its
// spec, no rows (they are the owner's).
func (c *Client) Column(name string) (lookup.Column, error) {
	i, ok := c.index[name]
	if !ok {
		return lookup.Column{}, &lookup.TableError{Table: name, Op: "lookup", Err: lookup.ErrUnknownTable}
	}
	return lookup.Column{NumRows: c.specs[i].NumRows, RowBytes: c.specs[i].RowBytes}, nil
}

// Arena returns the client's registered output arena (lookup.Tables):
// every Output lies in it, and a lookup's output must.
func (c *Client) Arena() []byte { return c.arena }

// shape is a checked lookup as lowering reads it: its strides are not
// negative (the check's remote rules).
type shape struct {
	cols        []lookup.Column
	t, k        int
	ids32       []int32
	ids64       []int64
	outLen      int // the output's length (a host buffer's or a device output's)
	off, ts, ks int
}

func (q *shape) offset(k int) int64 { return q.cols[k].Offset }

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
	cols  []lookup.Column // Lookup's resolved columns
	col   []int           // table index per column
	done  []bool          // column already grouped
	group []int
	runs  []run
	s32   []int32 // compacted ids
	s64   []int64
	plans []planfmt.Plan
	ops   []engine.ScatterOp
	opers []*engine.Operation
	errs  []error
	spans []uint64 // one completion span per operation

	// A device lookup's destination (RunDevice), its parts' results and
	// errors.
	dev      engine.DeviceDst
	devRes   []engine.DeviceResult
	devErrs  []error
	devParts []engine.Result // devRes' Results, as runParts reads them
	dshape   shape           // the device lookup's shape (its rows' places)
	druns    [][2]uint64     // a small device lookup's rows as copy runs

	// Sharded lookups: each run's plan cut by its table's shards, the
	// parts of the group, and where each part reads from.
	splitters []planfmt.Splitter
	parts     []engine.ScatterOp
	where     []partPlace
}

// partPlace is a part of a sharded lookup: its run, its shard and the
// replica it reads from.
type partPlace struct {
	run     int
	shard   *placement
	replica int32
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
	clear(st.parts)
	clear(st.where)
	clear(st.devErrs)
	st.dev, st.dshape = nil, shape{}
	select {
	case c.states <- st:
	default:
	}
}

func (c *Client) lookup(ctx context.Context, st *lookupState, q *lookup.Checked, dev engine.DeviceDst) error {
	st.dev = dev
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		c.stats.failed.Add(1)
		return fmt.Errorf("engram: lookup: %w", ErrClosed)
	}
	err := c.lower(st, q)
	if err == nil && len(st.runs) > 0 {
		if err = ctx.Err(); err != nil {
			err = fmt.Errorf("engram: lookup: %w", err)
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

// lower lowers the checked lookup q into st.runs, st.plans and st.ops. A
// lookup with no rows leaves st.runs empty. It fails only for a lookup
// checked against other tables than c's: a name c does not serve, or
// another arena.
func (c *Client) lower(st *lookupState, q *lookup.Checked) error {
	st.runs = st.runs[:0]
	t, k := q.Shape()
	if t == 0 || k == 0 {
		return nil
	}
	if arena := q.Arena(); unsafe.SliceData(arena) != unsafe.SliceData(c.arena) || len(arena) != len(c.arena) {
		return &lookup.BufferError{Len: len(q.Output().Buf), Reason: "checked against another client's output memory"}
	}
	cols := q.Columns()
	st.col = grow(st.col, k)
	for j := range cols {
		if j > 0 && cols[j].Name == cols[j-1].Name {
			st.col[j] = st.col[j-1]
			continue
		}
		i, ok := c.index[cols[j].Name]
		if !ok {
			return &lookup.TableError{Table: cols[j].Name, Op: "lookup", Err: lookup.ErrUnknownTable}
		}
		st.col[j] = i
	}
	out := q.Output()
	sh := shape{cols: cols, t: t, k: k, outLen: out.Len(), off: out.Off, ts: out.TStride, ks: out.KStride}
	sh.ids32, sh.ids64 = q.IDs()
	r := uint64(q.RowBytes())
	c.group(st, &sh, r)
	c.compact(st, &sh)
	c.plan(st, &sh, r, q.ArenaOffset()) // 0 for a device output: its plans are in its own terms
	if st.dev != nil {
		st.dshape = sh
	}
	return nil
}

// grow returns s with length n, reusing its storage when it can.
func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n, n+n/4)
	}
	return s[:n]
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

// compact gives each run its ids: the caller's array for a zero-copy run,
// else compacted, offset-adjusted ids in the scratch (int32 when the
// table's rows fit). The ids are checked: each is -1 or, less its
// column's offset, a row of the table.
func (c *Client) compact(st *lookupState, q *shape) {
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
		switch {
		case r.zeroCopy && q.ids32 != nil:
			r.ids32 = q.ids32
		case r.zeroCopy:
			r.ids64 = q.ids64
		case c.specs[r.table].NumRows <= math.MaxInt32:
			r.ids32 = st.s32[at32 : at32+q.t*r.n]
			at32 += q.t * r.n
			if q.ids32 != nil {
				compactIDs(r.ids32, q.ids32, q.t, q.k, r)
			} else {
				compactIDs(r.ids32, q.ids64, q.t, q.k, r)
			}
		default:
			r.ids64 = st.s64[at64 : at64+q.t*r.n]
			at64 += q.t * r.n
			if q.ids32 != nil {
				compactIDs(r.ids64, q.ids32, q.t, q.k, r)
			} else {
				compactIDs(r.ids64, q.ids64, q.t, q.k, r)
			}
		}
	}
}

// compactIDs copies the checked ids of run ru's columns (c0, c0+s, ..., n
// of them) of the [t,k] array src into dst, as [t,n] or, transposed,
// [n,t], minus the run's offset, keeping -1.
func compactIDs[D, S int32 | int64](dst []D, src []S, t, k int, ru *run) {
	c0, n, s, off := ru.c0, ru.n, ru.s, ru.offset
	dt, dj := n, 1
	if ru.transposed {
		dt, dj = 1, t
	}
	for tt := range t {
		row := src[tt*k : tt*k+k]
		at := tt * dt
		for j := range n {
			if id := int64(row[c0+j*s]); id == -1 {
				dst[at] = -1
			} else {
				dst[at] = D(id - off)
			}
			at += dj
		}
	}
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
		p.DstExtent = uint64(q.outLen)
		p.Ranges, p.CompletionEnds = nil, nil
		lay := planfmt.Layout{Kind: planfmt.LayoutStrided, Cols: uint64(ru.n),
			RowStride: uint64(q.ts), ColStride: uint64(ru.s * q.ks)}
		if ru.transposed {
			lay.Cols, lay.RowStride, lay.ColStride = uint64(q.t), lay.ColStride, lay.RowStride
		}
		p.Rows = planfmt.Rows{RowSize: r, TableRows: uint64(spec.NumRows), IDs32: ru.ids32, IDs64: ru.ids64,
			DstBase: uint64(q.off + ru.c0*q.ks), Layout: lay}
		st.ops[i] = engine.ScatterOp{Dir: verbs.OpRead, Local: c.local, LocalOff: localOff, Plan: p, Mode: c.mode,
			SpanBytes: st.spans[i : i : i+1]}
		if !c.sharded {
			st.ops[i].Conn, st.ops[i].Remote = c.conn, c.remote[ru.table]
		}
	}
}

// execute submits every operation but the last, runs the last on this
// goroutine (Engine.Do), then waits for the others. It returns the first
// failure in operation order.
func (c *Client) execute(ctx context.Context, st *lookupState) error {
	if st.dev != nil {
		return c.executeDevice(ctx, st)
	}
	if c.sharded {
		return c.executeSharded(ctx, st)
	}
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

// executeSharded runs a lookup of sharded tables as one engine group: each
// run's plan is cut by its table's shards (planfmt.Splitter), and every
// shard's part with rows in it reads from its shard's live replica, all at
// once. Parts that fail are read again from their shard's next replica,
// the failed one marked down for this Client, until every part has
// succeeded; a shard with no replica left fails the lookup with a
// *ShardError naming it. The caller's ctx ending fails it as it is.
func (c *Client) executeSharded(ctx context.Context, st *lookupState) error {
	return c.runParts(ctx, st, false)
}

// cutParts fills st.parts and st.where with the lookup's parts: each
// run's plan whole for a table of one shard, else cut by its shards,
// parts without rows left out.
func (c *Client) cutParts(st *lookupState) error {
	st.parts, st.where = st.parts[:0], st.where[:0]
	if len(st.splitters) < len(st.runs) {
		st.splitters = make([]planfmt.Splitter, len(st.runs))
	}
	for i := range st.runs {
		ru := &st.runs[i]
		if !c.sharded {
			op := st.ops[i]
			op.SpanBytes = nil
			st.parts = append(st.parts, op)
			st.where = append(st.where, partPlace{run: i})
			continue
		}
		lay := &c.layouts[ru.table]
		if len(lay.shards) == 1 {
			op := st.ops[i]
			op.SpanBytes = nil
			st.parts = append(st.parts, op)
			st.where = append(st.where, partPlace{run: i, shard: lay.shards[0]})
			continue
		}
		shards, err := st.splitters[i].Split(&st.plans[i], lay.cuts)
		if err != nil { // the ids were checked, the cuts are on rows: not expected
			return &TransferError{Table: c.specs[ru.table].Name, Columns: ru.n, Err: err}
		}
		for k := range shards {
			if shards[k].Bytes == 0 {
				continue
			}
			op := st.ops[i]
			op.Plan, op.SpanBytes = &shards[k].Plan, nil
			st.parts = append(st.parts, op)
			st.where = append(st.where, partPlace{run: i, shard: lay.shards[k]})
		}
	}
	return nil
}

// runParts runs a sharded lookup's parts all at once (one engine group,
// or with device set one DoDevice each: doDevice), failing as an
// *engine.GroupError naming the failed parts, until every part has
// succeeded, each failed part read again from its shard's next replica.
func (c *Client) runParts(ctx context.Context, st *lookupState, device bool) error {
	if err := c.cutParts(st); err != nil {
		return err
	}
	if len(st.parts) == 0 {
		return nil // every id -1
	}
	for {
		for j := range st.parts {
			w := &st.where[j]
			w.replica = w.shard.live.Load()
			if int(w.replica) >= len(w.shard.replicas) {
				return c.shardErr(w, nil)
			}
			rp := &w.shard.replicas[w.replica]
			st.parts[j].Conn, st.parts[j].Remote = c.owners[rp.owner].conn, rp.info
		}
		var res []engine.Result
		var err error
		if device {
			res, err = c.doDevice(ctx, st, st.parts)
		} else {
			var gr engine.GroupResult
			gr, err = c.engine.DoGroup(ctx, st.parts)
			res = gr.Parts
		}
		c.countParts(res, err)
		if err == nil {
			return nil
		}
		var ge *engine.GroupError
		if !errors.As(err, &ge) || ctx.Err() != nil {
			ru := &st.runs[st.where[0].run]
			if ge != nil {
				ru = &st.runs[st.where[ge.Part].run]
			}
			return &TransferError{Table: c.specs[ru.table].Name, Columns: ru.n, Err: err}
		}
		// Retry the failed parts, each on its shard's next replica.
		keep := 0
		for k, j := range ge.Failed {
			w := st.where[j]
			w.shard.live.CompareAndSwap(w.replica, w.replica+1)
			if int(w.shard.live.Load()) >= len(w.shard.replicas) {
				return c.shardErr(&w, ge.Errs[k])
			}
			st.parts[keep], st.where[keep] = st.parts[j], w
			keep++
		}
		clear(st.parts[keep:])
		st.parts, st.where = st.parts[:keep], st.where[:keep]
	}
}

// countParts counts each part's outcome: its result, failed when err (an
// *engine.GroupError) names it.
func (c *Client) countParts(res []engine.Result, err error) {
	var ge *engine.GroupError
	errors.As(err, &ge)
	for j := range res {
		var perr error
		if ge != nil {
			if k := slices.Index(ge.Failed, j); k >= 0 {
				perr = ge.Errs[k]
			}
		}
		c.count(&res[j], perr)
	}
}

// executeDevice runs a device lookup's operations (RunDevice): every run,
// or every shard's part of a sharded lookup, as an Engine.DoDevice into
// st.dev through a bounce lease of its own, all at once (the last on this
// goroutine). A one-owner lookup fails with the first failed run's
// *TransferError; a sharded one retries its failed parts on their
// shards' next replicas (runParts).
func (c *Client) executeDevice(ctx context.Context, st *lookupState) error {
	if n := st.dshape.outLen; uint64(n) <= c.devWindow {
		if lease, err := c.staging.Pool().TryAcquire(n); err == nil {
			defer lease.Release()
			return c.executeDeviceSmall(ctx, st, lease)
		}
		// No lease of the output's size free: the pieces' bounces below.
	}
	if c.sharded {
		return c.runParts(ctx, st, true)
	}
	if err := c.cutParts(st); err != nil {
		return err
	}
	res, err := c.doDevice(ctx, st, st.parts)
	c.countParts(res, err)
	var ge *engine.GroupError
	if errors.As(err, &ge) {
		ru := &st.runs[st.where[ge.Part].run]
		return &TransferError{Table: c.specs[ru.table].Name, Columns: ru.n, Err: ge.Err}
	}
	if err != nil {
		ru := &st.runs[0]
		return &TransferError{Table: c.specs[ru.table].Name, Columns: ru.n, Err: err}
	}
	return nil
}

// executeDeviceSmall runs a device lookup whose output fits one window
// as a lookup into host memory (every operation, sharded ones with their
// replica retries, as execute runs them) into lease, an arena lease laid
// out as the device output, then copies the rows that were read (not the
// -1 ones) on to the device in one DeviceDst.CopyIn, adjacent rows
// merged, and waits for it: one copy instead of a bounce per operation.
func (c *Client) executeDeviceSmall(ctx context.Context, st *lookupState, lease bufferpool.Lease) error {
	for i := range st.ops {
		st.ops[i].LocalOff = uint64(lease.Offset())
	}
	dev := st.dev
	st.dev = nil // execute's host paths
	err := c.execute(ctx, st)
	st.dev = dev
	if err != nil {
		return err
	}
	st.druns = deviceRuns(st.druns[:0], &st.dshape, uint64(st.dshape.cols[0].RowBytes))
	if len(st.druns) == 0 {
		return nil
	}
	fail := func(err error) error {
		ru := &st.runs[0]
		return &TransferError{Table: c.specs[ru.table].Name, Columns: ru.n, Err: &engine.DeviceError{Copy: true, Err: err}}
	}
	wait, err := dev.CopyIn(0, lease.Bytes()[:st.dshape.outLen], st.druns)
	if err != nil {
		return fail(err)
	}
	if err := wait(); err != nil {
		return fail(err)
	}
	return nil
}

// deviceRuns appends the destination runs of q's rows whose id is not -1
// (r bytes each), in destination order, adjacent ones merged.
func deviceRuns(runs [][2]uint64, q *shape, r uint64) [][2]uint64 {
	id := func(t, k int) int64 {
		if q.ids64 != nil {
			return q.ids64[t*q.k+k]
		}
		return int64(q.ids32[t*q.k+k])
	}
	add := func(t, k int) {
		if id(t, k) == -1 {
			return
		}
		at := uint64(q.off + t*q.ts + k*q.ks)
		runs = append(runs, [2]uint64{at, r})
	}
	// The outer loop over the larger stride: destination order for the
	// dense and padded layouts; any other is sorted below.
	if q.k > 1 && (q.t == 1 || q.ks > q.ts) {
		for k := range q.k {
			for t := range q.t {
				add(t, k)
			}
		}
	} else {
		for t := range q.t {
			for k := range q.k {
				add(t, k)
			}
		}
	}
	byOff := func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) }
	if !slices.IsSortedFunc(runs, byOff) {
		slices.SortFunc(runs, byOff)
	}
	out := runs[:0]
	for _, ru := range runs {
		if n := len(out); n > 0 && out[n-1][0]+out[n-1][1] == ru[0] {
			out[n-1][1] += ru[1]
			continue
		}
		out = append(out, ru)
	}
	return out
}

// doDevice runs parts at once, each an Engine.DoDevice into st.dev
// through a bounce lease of the output arena sized to it (bounceShape), as
// many at a time as the arena gives bounces for: a part whose lease the
// arena cannot give waits for a running part to end, and fails the lookup
// with ErrExhausted (a plain error, not a part's: no replica is to blame)
// only when none is running. It returns each part's result and, when
// some failed, an *engine.GroupError naming them (the last part to start
// runs on this goroutine).
func (c *Client) doDevice(ctx context.Context, st *lookupState, parts []engine.ScatterOp) ([]engine.Result, error) {
	n := len(parts)
	st.devRes = grow(st.devRes, n)
	st.devErrs = grow(st.devErrs, n)
	st.devParts = grow(st.devParts, n)
	res := st.devParts
	ended := make(chan int, n)
	running := 0
	var exhausted error
	for j := range parts {
		window, depth := bounceShape(parts[j].Plan.DstExtent, c.devWindow)
		var lease bufferpool.Lease
		for {
			var err error
			if lease, err = c.staging.Pool().TryAcquire(int(window) * depth); err == nil {
				break
			}
			if running == 0 {
				exhausted = fmt.Errorf("engram: bounce of %d x %d bytes for a device lookup: %w (%w)", depth, window, ErrExhausted, err)
				break
			}
			<-ended
			running--
		}
		if exhausted != nil {
			break
		}
		one := func() {
			defer lease.Release()
			d := engine.DeviceOp{Op: parts[j], Device: st.dev, Window: window, Depth: depth}
			d.Op.Local, d.Op.LocalOff = c.local, uint64(lease.Offset())
			st.devRes[j], st.devErrs[j] = c.engine.DoDevice(ctx, &d)
		}
		if j == n-1 {
			one()
			continue
		}
		running++
		go func() {
			one()
			ended <- j
		}()
	}
	for ; running > 0; running-- {
		<-ended
	}
	if exhausted != nil {
		return nil, exhausted
	}
	var ge *engine.GroupError
	for j := range parts {
		res[j] = st.devRes[j].Result
		var ie *engine.InvalidOpError
		if errors.As(st.devErrs[j], &ie) {
			return res, st.devErrs[j] // this side's to fix, no replica's
		}
		if err := st.devErrs[j]; err != nil {
			if ge == nil {
				ge = &engine.GroupError{Part: j, Err: err}
			}
			ge.Failed, ge.Errs = append(ge.Failed, j), append(ge.Errs, err)
		}
	}
	if ge != nil {
		return res, ge
	}
	return res, nil
}

// bounceShape is a device part's bounce slots for a destination extent of
// ext bytes: engine.DefaultDeviceDepth windows of window bytes, or two of
// ext (rounded up to OutputAlign) when it fits one window.
func bounceShape(ext, window uint64) (uint64, int) {
	if ext >= window {
		return window, engine.DefaultDeviceDepth
	}
	w := (max(ext, 1) + OutputAlign - 1) / OutputAlign * OutputAlign
	return w, 2
}

// shardErr is the error of a lookup whose shard w has no replica left.
func (c *Client) shardErr(w *partPlace, last error) error {
	table := ""
	for i := range c.layouts {
		if slices.Contains(c.layouts[i].shards, w.shard) {
			table = c.specs[i].Name
		}
	}
	addrs := make([]string, len(w.shard.replicas))
	for i, rp := range w.shard.replicas {
		addrs[i] = c.owners[rp.owner].addr
	}
	return &ShardError{Table: table, Lo: w.shard.lo, Hi: w.shard.hi, Addrs: addrs, Err: last}
}

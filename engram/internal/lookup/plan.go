package lookup

import "unsafe"

// task is one pack gather of a validated lookup: rows rows of column col's
// table, id i at ids[idOff+i*idStride] going to output byte outOff +
// i*stride. Strides are at least 1 (the row size for the output) even for
// a single row, so that pack never replaces them.
type task struct {
	col      int
	rows     int
	idOff    int
	idStride int
	outOff   int
	stride   int
}

// group is the set of columns that read one table (the same Rows
// pointer) with one offset. Pass one of planning learns its shape; both
// passes split its column indices, in order, greedily into arithmetic runs.
// Column indices fit in int32: checkShape rejects K above MaxInt32.
type group struct {
	ptr  uintptr // the table's first byte, for the grouping key only
	off  int64   // the offset
	col  int32   // first column, whose table and offset the group reads
	end  int32   // last column
	m    int32   // columns
	step int32   // distance from the first column to the second
	runs int32   // arithmetic runs
	mode int8    // how the group becomes tasks

	// The current run.
	last    int32 // last column added
	runLen  int32 // columns
	runStep int32 // step, once the run has two columns
	runHead int32 // first column
}

// How a group's columns become tasks.
const (
	// modeColumns: one task per column, T rows each.
	modeColumns int8 = iota
	// modeOne: one task for the whole group. Its columns form one
	// arithmetic run k0, k0+d, ..., and either T is 1 or the run covers
	// every d-th column (m*d == K) of an output whose TStride is
	// K*KStride: then id (t, k0+j*d) is ids[k0+(t*m+j)*d] and goes to
	// Off+k0*KStride+(t*m+j)*d*KStride, one strided layout of T*m rows.
	modeOne
	// modeTokens: one task per token and run, when T*runs < m (a few
	// tokens of many columns, e.g. a small head-major call).
	modeTokens
)

// plan is the per-call state of a lookup: colGroup and groups of K
// entries each, tasks up to K (every mode makes at most as many tasks as
// its group has columns), and slots, a hash table of the groups by key
// (slotsFor(K) entries at least, each a group index plus one).
type plan struct {
	colGroup []int32
	groups   []group
	tasks    []task
	slots    []int32
}

// slotsFor returns the hash table size for k columns.
func slotsFor(k int) int {
	n := 2
	for n < 2*k {
		n *= 2
	}
	return n
}

// sameTable reports whether two columns read the same rows with the same
// offset (all columns of a call have one row size): their gathers are
// interchangeable, whatever each column's row count (the ids are checked
// per column).
func sameTable(a, b *Column) bool {
	return unsafe.SliceData(a.Rows) == unsafe.SliceData(b.Rows) && a.Offset == b.Offset
}

// groupOf returns the group of column c, adding one when the column's key
// is new.
func (p *plan) groupOf(cols []Column, c int, groups []group) (int, []group) {
	if c > 0 && sameTable(&cols[c], &cols[c-1]) {
		return int(p.colGroup[c-1]), groups
	}
	ptr := uintptr(unsafe.Pointer(unsafe.SliceData(cols[c].Rows)))
	off := cols[c].Offset
	mask := uint64(len(p.slots) - 1)
	h := (uint64(ptr)*0x9e3779b97f4a7c15 ^ uint64(off)*0xc2b2ae3d27d4eb4f) >> 29
	for i := h & mask; ; i = (i + 1) & mask {
		g := p.slots[i] - 1
		if g < 0 {
			p.slots[i] = int32(len(groups)) + 1
			return len(groups), append(groups, group{ptr: ptr, off: off, col: int32(c)})
		}
		if groups[g].ptr == ptr && groups[g].off == off {
			return int(g), groups
		}
	}
}

// build groups the columns of a validated call (t, k >= 1) and cuts them
// into tasks, which it returns (a prefix of p.tasks).
func (p *plan) build(cols []Column, t, k, rowBytes int, out Output) []task {
	if oneTable(cols) {
		return p.buildOne(t, k, rowBytes, out)
	}
	p.slots = p.slots[:slotsFor(k)]
	clear(p.slots)
	groups := p.groups[:0]
	for c := range k {
		var g int
		g, groups = p.groupOf(cols, c, groups)
		p.colGroup[c] = int32(g)
		gr := &groups[g]
		if gr.add(int32(c)) {
			gr.runs++
		}
		gr.m++
		gr.end = int32(c)
		if gr.m == 2 {
			gr.step = int32(c) - gr.col
		}
	}
	for i := range groups {
		gr := &groups[i]
		m, runs := int(gr.m), int(gr.runs)
		switch {
		case m == 1:
			gr.mode = modeColumns
		case runs == 1 && (t == 1 || (m*int(gr.step) == k && out.TStride == k*out.KStride)):
			gr.mode = modeOne
		case t*runs < m:
			gr.mode = modeTokens
		default:
			gr.mode = modeColumns
		}
		gr.last, gr.runLen, gr.runStep, gr.runHead = 0, 0, 0, 0
	}
	tasks := p.tasks[:0]
	for c := range k {
		gr := &groups[p.colGroup[c]]
		switch gr.mode {
		case modeColumns:
			tasks = append(tasks, newTask(c, t, c, k, out.Off+c*out.KStride, out.TStride, rowBytes))
		case modeOne:
			if c == int(gr.col) {
				step := int(gr.step)
				tasks = append(tasks, newTask(c, t*int(gr.m), c, step, out.Off+c*out.KStride, step*out.KStride, rowBytes))
			}
		case modeTokens:
			if gr.runLen > 0 && !gr.extends(int32(c)) {
				tasks = gr.emitRun(tasks, t, k, rowBytes, out)
			}
			gr.add(int32(c))
			if c == int(gr.end) {
				tasks = gr.emitRun(tasks, t, k, rowBytes, out)
			}
		}
	}
	return tasks
}

// oneTable reports whether all columns read one table with one offset.
func oneTable(cols []Column) bool {
	for j := 1; j < len(cols); j++ {
		if !sameTable(&cols[j], &cols[0]) {
			return false
		}
	}
	return true
}

// buildOne is build for columns that all read one table with one offset:
// a single group whose columns are one run of step 1, planned without the
// per-column bookkeeping.
func (p *plan) buildOne(t, k, rowBytes int, out Output) []task {
	tasks := p.tasks[:0]
	switch {
	case k > 1 && (t == 1 || out.TStride == k*out.KStride): // modeOne
		return append(tasks, newTask(0, t*k, 0, 1, out.Off, out.KStride, rowBytes))
	case t < k: // modeTokens
		for tok := range t {
			tasks = append(tasks, newTask(0, k, tok*k, 1, out.Off+tok*out.TStride, out.KStride, rowBytes))
		}
	default: // modeColumns
		for c := range k {
			tasks = append(tasks, newTask(c, t, c, k, out.Off+c*out.KStride, out.TStride, rowBytes))
		}
	}
	return tasks
}

// add appends column c to the current run, or starts a new run with it
// (and then returns true).
func (g *group) add(c int32) bool {
	started := false
	switch {
	case g.runLen == 1:
		g.runStep, g.runLen = c-g.last, 2
	case g.runLen > 1 && c-g.last == g.runStep:
		g.runLen++
	default:
		g.runHead, g.runLen, g.runStep = c, 1, 0
		started = true
	}
	g.last = c
	return started
}

// extends reports whether column c continues the current run.
func (g *group) extends(c int32) bool {
	return g.runLen == 1 || c-g.last == g.runStep
}

// emitRun appends one task per token for the current run.
func (g *group) emitRun(tasks []task, t, k, rowBytes int, out Output) []task {
	head, step := int(g.runHead), int(g.runStep)
	for tok := range t {
		tasks = append(tasks, newTask(int(g.col), int(g.runLen), tok*k+head, step,
			out.Off+tok*out.TStride+head*out.KStride, step*out.KStride, rowBytes))
	}
	return tasks
}

// newTask returns a task with its strides made valid for a single row.
func newTask(col, rows, idOff, idStride, outOff, stride, rowBytes int) task {
	if rows <= 1 {
		idStride, stride = 1, rowBytes
	}
	return task{col: col, rows: rows, idOff: idOff, idStride: idStride, outOff: outOff, stride: stride}
}

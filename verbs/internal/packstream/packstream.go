package packstream

import (
	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/scatterkit/scatterkit/planfmt"
)

// The packed stream of a plan is its payload bytes in plan order (planfmt:
// Run.Stream and Completion.Stream are offsets into it). Both sides cut it
// into chunks: the owner packs READ chunks into staging, the requester
// packs WRITE waves. These cursors walk a plan's fragments and runs chunk
// by chunk, in one pass over the whole plan.

// rowCursor packs the rows of a fixed-row plan, a chunk at a time.
type RowCursor struct {
	Table   []byte // the source extent's table: rows of rowSize bytes
	RowSize int
	IDs32   []int32
	IDs64   []int64
	next    int  // first id of the next chunk
	skips   bool // the plan has -1 ids
	Workers *pack.Workers
	// parallelMin is the smallest chunk (bytes) packed with workers.
	ParallelMin int
}

// init points c at plan p whose source extent is src. The ids, table and
// window must have been validated (planfmt decode or Normalize, and the
// caller's bounds checks): the pack loops run unchecked.
func (c *RowCursor) Init(p *planfmt.Plan, src []byte, skips bool) {
	r := &p.Rows
	c.RowSize = int(r.RowSize)
	c.Table = src[r.SrcBase : r.SrcBase+r.TableRows*r.RowSize]
	c.IDs32, c.IDs64 = r.IDs32, r.IDs64
	c.next = 0
	c.skips = skips
}

func (c *RowCursor) len() int { return max(len(c.IDs32), len(c.IDs64)) }

func (c *RowCursor) Done() bool { return c.next >= c.len() }

// packInto packs the next ids, as many as dst holds whole rows, densely
// (-1 ids take no room) and returns the bytes written.
func (c *RowCursor) PackInto(dst []byte) int {
	n := min(len(dst)/c.RowSize, c.len()-c.next)
	lo := c.next
	c.next += n
	w := c.Workers
	if n*c.RowSize+c.RowSize <= c.ParallelMin {
		w = nil // (a chunk of parallelMin bytes holds one row less than fits)
	}
	if len(c.IDs32) != 0 {
		return PackRows(dst, c.Table, c.IDs32[lo:lo+n], c.RowSize, c.skips, w)
	}
	return PackRows(dst, c.Table, c.IDs64[lo:lo+n], c.RowSize, c.skips, w)
}

// packRows gathers the rows named by ids into dst densely, skipping -1
// ids, and returns the bytes written. The request must be valid (see
// rowCursor.init).
func PackRows[I pack.ID](dst, table []byte, ids []I, r int, skips bool, w *pack.Workers) int {
	if !skips {
		l := pack.Layout{Rows: len(ids), RowBytes: r}
		if w != nil {
			// ParallelGatherUnchecked fails only on closed workers,
			// which the owner closes after its last command.
			if pack.ParallelGatherUnchecked(w, dst, table, ids, l) == nil {
				return len(ids) * r
			}
		}
		pack.GatherUnchecked(dst, table, ids, l)
		return len(ids) * r
	}
	out := 0
	for i := 0; i < len(ids); {
		for i < len(ids) && ids[i] < 0 {
			i++
		}
		j := i
		for j < len(ids) && ids[j] >= 0 {
			j++
		}
		if j > i {
			pack.GatherUnchecked(dst[out:], table, ids[i:j], pack.Layout{Rows: j - i, RowBytes: r})
			out += (j - i) * r
		}
		i = j
	}
	return out
}

// rangeCursor packs (or unpacks) a list of ranges a chunk at a time,
// splitting ranges at chunk edges.
type RangeCursor struct {
	rs  []planfmt.Range
	i   int
	off uint64 // bytes of rs[i] already done
}

func (c *RangeCursor) Init(rs []planfmt.Range) { *c = RangeCursor{rs: rs} }

func (c *RangeCursor) Done() bool {
	for c.i < len(c.rs) && c.off >= c.rs[c.i].Len {
		c.i, c.off = c.i+1, 0
	}
	return c.i >= len(c.rs)
}

// packInto copies the next source bytes (src is the source extent) into
// dst until it is full or the ranges end, and returns the bytes written.
func (c *RangeCursor) PackInto(dst, src []byte) int {
	out := 0
	for out < len(dst) && !c.Done() {
		r := &c.rs[c.i]
		n := min(r.Len-c.off, uint64(len(dst)-out))
		s := r.Src + c.off
		out += copy(dst[out:], src[s:s+n])
		c.off += n
	}
	return out
}

// scatterFrom copies chunk (the packed stream bytes [at, at+len(chunk)))
// into dst (the destination extent) following the ranges' destinations.
// The ranges' sources must be the stream offsets, in increasing order
// (how the owner checks WRITE commands): it stops at the chunk's end and
// resumes there with the next chunk.
func (c *RangeCursor) ScatterFrom(dst, chunk []byte, at uint64) {
	end := at + uint64(len(chunk))
	for !c.Done() {
		r := &c.rs[c.i]
		s := r.Src + c.off
		if s >= end {
			return
		}
		n := min(r.Len-c.off, end-s)
		d := r.Dst + c.off
		copy(dst[d:d+n], chunk[s-at:s-at+n])
		c.off += n
	}
}

// runCursor walks destination runs, which tile the packed stream in
// order, chunk by chunk.
type RunCursor struct {
	Runs []planfmt.Run
	i    int
}

// each calls fn for every piece of a run inside the stream bytes [s0, s1):
// dst is the piece's destination offset, at its stream offset, n bytes.
func (c *RunCursor) Each(s0, s1 uint64, fn func(dst, at, n uint64)) {
	for c.i < len(c.Runs) {
		r := &c.Runs[c.i]
		if r.Stream >= s1 {
			return
		}
		lo, hi := max(s0, r.Stream), min(s1, r.Stream+r.Len)
		if hi > lo {
			fn(r.Dst+(lo-r.Stream), lo, hi-lo)
		}
		if r.Stream+r.Len > s1 {
			return
		}
		c.i++
	}
}

// appendRuns appends the destination runs of ranges rs, whose packed
// stream is their payload in order: consecutive ranges whose destinations
// touch share a run.
func AppendRuns(runs []planfmt.Run, rs []planfmt.Range) []planfmt.Run {
	var stream uint64
	for _, r := range rs {
		if r.Len == 0 {
			continue
		}
		if n := len(runs); n > 0 && runs[n-1].Dst+runs[n-1].Len == r.Dst {
			runs[n-1].Len += r.Len
		} else {
			runs = append(runs, planfmt.Run{Dst: r.Dst, Stream: stream, Len: r.Len})
		}
		stream += r.Len
	}
	return runs
}

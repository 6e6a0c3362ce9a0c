package packstream

import (
	"sync"

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
	// Workers, when set, packs a chunk of at least ParallelMin bytes on
	// several goroutines: the chunk's ranges cut into pieces of about
	// equal bytes (a piece may start inside a range), one per goroutine.
	Workers     *pack.Workers
	ParallelMin int
}

// splits holds the rangeSplit states of chunks being packed in parallel:
// taken for one chunk and put back, so neither a cursor nor its split
// escapes to the heap per command.
var splits = sync.Pool{New: func() any { return new(rangeSplit) }}

// minPieceBytes is the fewest bytes a goroutine of a split range chunk
// copies: below it the fork and join cost more than the copy saves.
const minPieceBytes = 64 << 10

// maxPieces bounds a range chunk's split (and its reused cut storage).
const maxPieces = 64

// rangeCut is where a piece of a split chunk starts: range i, off bytes
// into it, out bytes into the chunk.
type rangeCut struct {
	i   int
	off uint64
	out int
}

// rangeSplit is one chunk's pieces, run by pack.Workers.Run.
type rangeSplit struct {
	rs       []planfmt.Range
	dst, src []byte
	cuts     [maxPieces + 1]rangeCut // cuts[k] is the chunk's end
}

// RunChunk copies piece j: from cuts[j] to cuts[j+1].
func (s *rangeSplit) RunChunk(j int) {
	a, b := s.cuts[j], s.cuts[j+1]
	out, i, off := a.out, a.i, a.off
	for out < b.out {
		r := &s.rs[i]
		n := min(r.Len-off, uint64(b.out-out))
		src := r.Src + off
		out += copy(s.dst[out:], s.src[src:src+n])
		i, off = i+1, 0
	}
}

// Init points c at rs, keeping its Workers and ParallelMin.
func (c *RangeCursor) Init(rs []planfmt.Range) {
	w, pmin := c.Workers, c.ParallelMin
	*c = RangeCursor{rs: rs, Workers: w, ParallelMin: pmin}
}

func (c *RangeCursor) Done() bool {
	for c.i < len(c.rs) && c.off >= c.rs[c.i].Len {
		c.i, c.off = c.i+1, 0
	}
	return c.i >= len(c.rs)
}

// packInto copies the next source bytes (src is the source extent) into
// dst until it is full or the ranges end, and returns the bytes written.
func (c *RangeCursor) PackInto(dst, src []byte) int {
	if c.Workers != nil && len(dst) >= max(c.ParallelMin, 2*minPieceBytes) {
		if n, ok := c.packSplit(dst, src); ok {
			return n
		}
	}
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

// packSplit is PackInto on c.Workers: one walk over the chunk's ranges
// finds the bytes to pack and the cuts between pieces of about equal
// bytes, the pieces are copied in parallel, and the cursor moves past the
// chunk. ok is false (nothing done) when the chunk is too small to split
// or the workers are closed.
func (c *RangeCursor) packSplit(dst, src []byte) (int, bool) {
	// The chunk's bytes: up to len(dst), fewer at the plan's end; (ei,
	// eo) is where the cursor stands after them.
	want := uint64(len(dst))
	var n uint64
	ei, eo := c.i, c.off
	for ei < len(c.rs) && n < want {
		l := min(c.rs[ei].Len-eo, want-n)
		n += l
		if eo+l < c.rs[ei].Len {
			eo += l
			break
		}
		ei, eo = ei+1, 0
	}
	k := min(c.Workers.Len(), maxPieces, int(n/minPieceBytes))
	if k < 2 {
		return 0, false
	}
	sp := splits.Get().(*rangeSplit)
	defer splits.Put(sp)
	sp.rs, sp.dst, sp.src = c.rs, dst, src
	// Cut at multiples of n/k bytes, inside the ranges where they fall.
	var out uint64
	i, off := c.i, c.off
	for j := range k {
		target := n * uint64(j) / uint64(k)
		for i < len(c.rs) && out+(c.rs[i].Len-off) <= target {
			out += c.rs[i].Len - off
			i, off = i+1, 0
		}
		sp.cuts[j] = rangeCut{i: i, off: off + (target - out), out: int(target)}
	}
	sp.cuts[k] = rangeCut{out: int(n)}
	err := c.Workers.Run(k, k, sp)
	sp.rs, sp.dst, sp.src = nil, nil, nil
	if err != nil {
		return 0, false
	}
	c.i, c.off = ei, eo
	return int(n), true
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

// normParallel is a pack.Workers as a planfmt.Parallel (pack.Workers.Run
// takes pack's own Chunks type, which planfmt's pieces satisfy).
type normParallel struct{ w *pack.Workers }

func (p normParallel) Len() int { return p.w.Len() }

func (p normParallel) Run(k, n int, c planfmt.Chunks) error { return p.w.Run(k, n, c) }

// NormParallel returns w as the planfmt.Parallel of NormalizeParallel, or
// nil for nil w (serial normalization).
func NormParallel(w *pack.Workers) planfmt.Parallel {
	if w == nil {
		return nil
	}
	return normParallel{w}
}

// ScatterRows copies chunk, the packed rows of the carrying ids (not -1)
// of ids[lo:hi] in order, to their places in dst (the destination extent)
// by r's layout, and returns the bytes of chunk it used. ids are r's ids
// (IDs32 or IDs64, whole): a row's place follows from its index in them,
// so no destination runs need be built first. r must have normalized
// (planfmt.Normalize checked every place against the extent) and chunk
// must hold the rows; like the pack loops, it checks nothing else.
func ScatterRows[I pack.ID](dst, chunk []byte, r *planfmt.Rows, ids []I, lo, hi int) int {
	rs := r.RowSize
	// Index i lands at DstBase + (i/cols)*a + (i%cols)*b.
	cols, a, b := uint64(max(len(ids), 1)), uint64(0), rs
	if r.Layout.Kind == planfmt.LayoutStrided {
		cols, a, b = r.Layout.Cols, r.Layout.RowStride, r.Layout.ColStride
	}
	c := uint64(lo) % cols
	base := r.DstBase + uint64(lo)/cols*a
	d := base + c*b
	at := uint64(0)
	for _, id := range ids[lo:hi] {
		if id >= 0 {
			copy(dst[d:d+rs], chunk[at:at+rs])
			at += rs
		}
		if c++; c == cols {
			c, base = 0, base+a
			d = base
		} else {
			d += b
		}
	}
	return int(at)
}

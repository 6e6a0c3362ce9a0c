package planfmt

import (
	"math"
	"math/bits"
	"unsafe"
)

// Summary summarises a normalized plan: the bytes, fragments and spans that
// the cost model reads (S, N and M of a costmodel.Geometry), and what else
// Normalize learns on the way (skipped fragments, runs, span lengths,
// bounds, completions).
type Summary struct {
	Bytes     uint64 // S: payload bytes
	Fragments uint64 // N: fragments that carry bytes
	Skipped   uint64 // fragments that carry none: -1 ids, zero-length ranges
	Spans     uint64 // M: spans after coalescing
	Runs      uint64 // contiguous destination runs

	// SpanLog2[b] counts spans whose length lies in [2^b, 2^(b+1)).
	SpanLog2 [64]uint64

	// SrcLo, SrcHi and DstLo, DstHi bound the touched bytes: every payload
	// byte lies in [SrcLo, SrcHi) of the source extent and [DstLo, DstHi) of
	// the destination extent. All four are zero when Bytes is zero.
	SrcLo, SrcHi uint64
	DstLo, DstHi uint64

	Completions int // completion spans (at least 1 for a non-empty plan)
}

// Geometry is Summary's old name, which said the same as the cost model's
// costmodel.Geometry (S, N, M) and held more.
//
// Deprecated: use Summary. Geometry is kept for one release.
type Geometry = Summary

// Completion describes one completion span after normalization. Fragment,
// span and run ranges are half-open ordinals in plan order; spans and runs
// never cross a completion boundary. Stream is the offset of this completion
// span's first payload byte in the packed stream (all payload bytes in plan
// order), so an owner that packs the whole plan finds its bytes at
// [Stream, Stream+Bytes).
type Completion struct {
	FragStart, FragEnd int
	SpanStart, SpanEnd int
	RunStart, RunEnd   int
	Stream, Bytes      uint64
}

// Normalized is the result of Normalize: the plan's summary, its completion
// spans, and iterators over coalesced spans and destination runs. It is meant
// to be reused: Normalize keeps its storage and allocates only when a plan
// needs more than it has held before.
//
// For the ranges form, spans and runs are stored. For the fixed-row form they
// are not (that would expand the plan into per-row structs); the iterators
// walk the ids again, so the ids must not change between Normalize and
// iteration.
type Normalized struct {
	form    Form
	summary Summary
	comps   []Completion

	spans []Span // FormRanges
	runs  []Run  // FormRanges

	sortA, sortB []dstSpan // FormRanges overlap check, when destinations arrive unsorted

	rows  Rows // FormRows: the plan's descriptor (slice headers, not ids)
	shape rowShape

	// NormalizeParallel's split: at most workers blocks of at least
	// minBlock ids per completion span (workers 1: serial), run by par;
	// the blocks' results and the job that runs them.
	workers, minBlock int
	par               Parallel
	blocks            []rowBlock
	job               rowJob
}

// Chunks is work cut into numbered pieces that a Parallel runs, each
// exactly once, in any order.
type Chunks interface {
	RunChunk(i int)
}

// Parallel runs pieces 0 to n-1 of c on up to k goroutines, the caller's
// included, and returns when all have run; Len is how many goroutines it
// has. bufferpool/pack's Workers is one (through an adapter: its Run takes
// its own Chunks type). An error means nothing ran (it is closed).
type Parallel interface {
	Len() int
	Run(k, n int, c Chunks) error
}

// Span is a coalesced piece of the plan: Len bytes from source offset Src to
// destination offset Dst.
type Span struct {
	Src, Dst, Len uint64
}

// Run is a contiguous destination run: Len bytes landing at Dst, taken from
// the packed stream (payload bytes in plan order) at offset Stream.
type Run struct {
	Dst, Len, Stream uint64
}

// Footprint returns the bytes of storage n keeps for reuse (completion
// spans, coalesced spans, runs and the overlap check's sort buffers, at
// their capacity).
func (n *Normalized) Footprint() int64 {
	return int64(cap(n.comps))*int64(unsafe.Sizeof(Completion{})) + int64(cap(n.spans))*int64(unsafe.Sizeof(Span{})) +
		int64(cap(n.runs))*int64(unsafe.Sizeof(Run{})) + int64(cap(n.sortA)+cap(n.sortB))*int64(unsafe.Sizeof(dstSpan{}))
}

// Summary returns the summary computed by the last successful Normalize.
func (n *Normalized) Summary() Summary { return n.summary }

// Geometry returns the summary computed by the last successful Normalize.
//
// Deprecated: use Summary. Geometry is kept for one release.
func (n *Normalized) Geometry() Summary { return n.summary }

// Form returns the form of the normalized plan.
func (n *Normalized) Form() Form { return n.form }

// Completions returns the completion spans; the slice is owned by n and valid
// until the next Normalize.
func (n *Normalized) Completions() []Completion { return n.comps }

func (n *Normalized) reset() {
	n.form = 0
	n.summary = Summary{}
	n.comps = n.comps[:0]
	n.spans = n.spans[:0]
	n.runs = n.runs[:0]
	n.rows = Rows{}
	n.shape = rowShape{}
}

// Normalize validates p and summarises it into dst in O(N) time, reading each
// fragment a small constant number of times in tight loops:
//
//   - every fragment is checked against the source and destination extents
//     (and, for rows, every id against the table);
//   - destinations must not overlap. For rows this follows from the layout
//     and is decided in O(log stride) from the strides. For ranges it is one
//     comparison per range when the carrying ranges arrive sorted by
//     destination (the common case); otherwise Normalize radix-sorts their
//     (destination, end) pairs: still O(N), but one more pass per byte
//     position in which the destinations differ (3 when they differ only in
//     their low 24 bits, 8 at most) and 32 bytes of scratch per range, kept
//     in dst. A shuffled plan from a hostile peer cannot make it O(N log N);
//   - carrying fragments that follow each other in plan order and are
//     adjacent in both source and destination are coalesced into spans (for
//     rows: consecutive ids whose destinations are also consecutive);
//     fragments that carry nothing (-1 ids, zero-length ranges) neither join
//     nor break spans or runs; spans and runs never cross a completion
//     boundary;
//   - contiguous destination runs, the Summary and per-completion byte
//     counts are computed.
//
// It allocates nothing once dst's storage has grown to the plan's size. On
// error dst is left empty and p is unchanged.
func Normalize(dst *Normalized, p *Plan) error {
	return normalize(dst, p, nil, 1, 0)
}

// ParallelMinBlock is the fewest ids NormalizeParallel gives one goroutine:
// below it (about 50 us of work on a server core) starting the goroutine
// costs more than it saves.
const ParallelMinBlock = 16 << 10

// NormalizeParallel is Normalize with the per-id passes of a rows plan (id
// validation, span and run counting) split over par's goroutines, in
// blocks of at least ParallelMinBlock ids of one completion span: the
// planning cost of a large lookup (about 2-4 ns an id on one core)
// divided among cores. The result, and the error for a bad plan, are
// Normalize's exactly. A ranges plan, a plan smaller than two blocks, and
// a nil par or one of fewer than two goroutines take the serial path; so
// does a block split that par refuses (closed). It allocates nothing once
// dst's storage has grown.
func NormalizeParallel(dst *Normalized, p *Plan, par Parallel) error {
	if par == nil || par.Len() < 2 {
		return normalize(dst, p, nil, 1, 0)
	}
	return normalize(dst, p, par, par.Len(), ParallelMinBlock)
}

func normalize(dst *Normalized, p *Plan, par Parallel, workers, minBlock int) error {
	dst.par, dst.workers, dst.minBlock = par, max(workers, 1), max(minBlock, 1)
	defer func() { dst.par = nil }()
	dst.reset()
	var err error
	switch p.Form {
	case FormRows:
		err = dst.normRows(p)
	case FormRanges:
		err = dst.normRanges(p)
	default:
		err = invalid("Form", "unknown form "+p.Form.String())
	}
	if err != nil {
		dst.reset()
		return err
	}
	dst.form = p.Form
	dst.summary.Completions = len(dst.comps)
	return nil
}

// groupEnds returns the completion ends to iterate: the plan's, or a single
// end covering all n fragments.
func groupEnds(ends []uint32, n int, one *[1]uint32) []uint32 {
	if len(ends) != 0 {
		return ends
	}
	if n == 0 {
		return nil
	}
	one[0] = uint32(n)
	return one[:]
}

func (n *Normalized) normRows(p *Plan) error {
	s, err := p.checkRows()
	if err != nil {
		return err
	}
	if err := checkEnds(p.CompletionEnds, s.n); err != nil {
		return err
	}
	n.rows = p.Rows
	n.shape = s
	var one [1]uint32
	ends := groupEnds(p.CompletionEnds, s.n, &one)
	if len(p.Rows.IDs32) != 0 {
		return normRowIDs(n, p.Rows.IDs32, &p.Rows, s, ends)
	}
	return normRowIDs(n, p.Rows.IDs64, &p.Rows, s, ends)
}

// noEnd marks "no carrying row yet" in prevEnd: a real row end is at most
// the destination extent and a row starts at least 1 byte before it, so no
// dst can equal it.
const noEnd = math.MaxUint64

// normRowIDs is the fixed-row normalization. Everything that does not depend
// on an id was checked by checkRows. Per completion span it runs two narrow
// loops, each small enough to live in registers: scanRowIDs (validation,
// id bounds, skips) and walkRowSpans (coalescing, runs); only a completion
// span in which rows actually coalesced is walked again for the span-length
// histogram. Then rowDstBounds finds the touched destination bytes.
func normRowIDs[T int32 | int64](n *Normalized, ids []T, r *Rows, s rowShape, ends []uint32) error {
	g := &n.summary
	rs := s.rowSize
	var (
		start                int
		stream               uint64
		skipped, spans, runs uint64
		multi                uint64 // spans already in the histogram; the others are one row long
		minID                = uint64(math.MaxUint64)
		maxID1               uint64 // largest carrying id + 1
	)
	for _, e := range ends {
		end := int(e)
		var lo, hi1, skip, ru, ext uint64
		bad := -1
		if blocks := min(n.workers, (end-start)/n.minBlock); blocks > 1 {
			lo, hi1, skip, ru, ext, bad = normRowBlocks(n, ids, r, s, start, end, blocks)
		} else {
			var b int
			lo, hi1, skip, b = scanRowIDs(ids[start:end], r.TableRows)
			if b >= 0 {
				bad = start + b
			} else {
				ru, ext = walkRowSpans(ids, s, r.DstBase, start, end, skip == 0, noEnd, 0)
			}
		}
		if bad >= 0 {
			return &BoundsError{Index: bad, Field: "id", Off: uint64(int64(ids[bad])), Limit: r.TableRows}
		}
		minID, maxID1 = min(minID, lo), max(maxID1, hi1)
		carrying := uint64(end-start) - skip
		sp := carrying - ext
		if ext != 0 {
			spanHist(ids, r, s, start, end, &g.SpanLog2)
			multi += sp
		}
		bytes := carrying * rs
		n.comps = append(n.comps, Completion{
			FragStart: start, FragEnd: end,
			SpanStart: int(spans), SpanEnd: int(spans + sp),
			RunStart: int(runs), RunEnd: int(runs + ru),
			Stream: stream, Bytes: bytes,
		})
		skipped, spans, runs = skipped+skip, spans+sp, runs+ru
		stream += bytes
		start = end
	}
	if ones := spans - multi; ones != 0 {
		g.SpanLog2[bits.Len64(rs)-1] += ones
	}
	carried := uint64(s.n) - skipped
	g.Fragments = carried
	g.Skipped = skipped
	g.Bytes = carried * rs
	g.Spans = spans
	g.Runs = runs
	if carried != 0 {
		g.SrcLo, g.SrcHi = r.SrcBase+minID*rs, r.SrcBase+maxID1*rs
		g.DstLo, g.DstHi = rowDstBounds(ids, s, r.DstBase)
	}
	return nil
}

// rowBlock is one block of a completion span that normRowBlocks hands a
// goroutine: its fragments, and what scanRowIDs and walkRowSpans found in
// them (bad: the absolute index of its first invalid id, or -1).
type rowBlock struct {
	start, end             int
	lo, hi1, skip, ru, ext uint64
	bad                    int
}

// normRowBlocks is the per-id work of completion span [start, end) split
// into blocks contiguous blocks, run by n.par (on the caller when it
// refuses): each validates its ids and walks its spans from the state the
// serial walk would enter it with (the last carrying row before it in the
// span), so the sums are the serial walk's, exactly. bad is the first
// invalid id of the span, or -1.
func normRowBlocks[T int32 | int64](n *Normalized, ids []T, r *Rows, s rowShape, start, end, blocks int) (lo, hi1, skip, ru, ext uint64, bad int) {
	if cap(n.blocks) < blocks {
		n.blocks = make([]rowBlock, blocks)
	}
	bs := n.blocks[:blocks]
	per := (end - start) / blocks
	for i := range bs {
		bs[i] = rowBlock{start: start + i*per, end: start + (i+1)*per}
	}
	bs[blocks-1].end = end
	j := &n.job
	*j = rowJob{blocks: bs, r: r, s: s, spanStart: start}
	switch v := any(ids).(type) {
	case []int32:
		j.ids32 = v
	case []int64:
		j.ids64 = v
	}
	if n.par.Run(blocks, blocks, j) != nil {
		for i := range bs {
			j.RunChunk(i)
		}
	}
	*j = rowJob{}
	lo, bad = math.MaxUint64, -1
	for i := range bs {
		b := &bs[i]
		if b.bad >= 0 {
			return 0, 0, 0, 0, 0, b.bad // blocks are in order: the first is the span's first
		}
		lo, hi1 = min(lo, b.lo), max(hi1, b.hi1)
		skip, ru, ext = skip+b.skip, ru+b.ru, ext+b.ext
	}
	return lo, hi1, skip, ru, ext, -1
}

// rowJob is normRowBlocks' work as Chunks: piece i is block i.
type rowJob struct {
	blocks    []rowBlock
	ids32     []int32
	ids64     []int64
	r         *Rows
	s         rowShape
	spanStart int
}

// RunChunk validates and walks block i.
func (j *rowJob) RunChunk(i int) {
	if j.ids32 != nil {
		normRowBlock(&j.blocks[i], j.ids32, j.r, j.s, j.spanStart)
	} else {
		normRowBlock(&j.blocks[i], j.ids64, j.r, j.s, j.spanStart)
	}
}

// normRowBlock validates and walks one block of a completion span that
// starts at spanStart.
func normRowBlock[T int32 | int64](b *rowBlock, ids []T, r *Rows, s rowShape, spanStart int) {
	lo, hi1, skip, bad := scanRowIDs(ids[b.start:b.end], r.TableRows)
	if bad >= 0 {
		b.bad = b.start + bad
		return
	}
	b.lo, b.hi1, b.skip, b.bad = lo, hi1, skip, -1
	prevEnd, prevID := uint64(noEnd), uint64(0)
	for j := b.start - 1; j >= spanStart; j-- {
		if ids[j] >= 0 {
			dst, _, _ := rowDst(r, s, j)
			prevEnd, prevID = dst+s.rowSize, uint64(ids[j])
			break
		}
	}
	b.ru, b.ext = walkRowSpans(ids, s, r.DstBase, b.start, b.end, skip == 0, prevEnd, prevID)
}

// scanRowIDs validates ids (each -1 or below tableRows) and returns the
// smallest carrying id (math.MaxUint64 if none), the largest carrying id plus
// one (0 if none) and the number of -1s; bad is the index of the first
// invalid id, or -1. With x = id+1, valid ids map to [1, tableRows] and -1 to
// 0, so a running max validates without a branch per id, and x-1 (which wraps
// to the maximum for -1) gives the smallest id.
func scanRowIDs[T int32 | int64](ids []T, tableRows uint64) (lo, hi1, skipped uint64, bad int) {
	mx, mn := uint64(0), uint64(math.MaxUint64)
	mx1, mn1 := mx, mn // a second pair of accumulators halves the dependency chains
	rest := ids
	for len(rest) >= 2 {
		v := (*[2]T)(rest)
		x, y := uint64(int64(v[0])+1), uint64(int64(v[1])+1)
		mx, mx1 = max(mx, x), max(mx1, y)
		mn, mn1 = min(mn, x-1), min(mn1, y-1)
		if v[0] < 0 || v[1] < 0 {
			skipped += uint64(int64(v[0]))>>63 + uint64(int64(v[1]))>>63
		}
		rest = rest[2:]
	}
	for _, id := range rest {
		x := uint64(int64(id) + 1)
		mx, mn = max(mx, x), min(mn, x-1)
		if id < 0 {
			skipped++
		}
	}
	mx, mn = max(mx, mx1), min(mn, mn1)
	if mx > tableRows {
		return 0, 0, 0, firstBadID(ids, tableRows)
	}
	return mn, mx, skipped, -1
}

// walkRowSpans counts, over fragments [start, end), the carrying rows that
// extend the previous span (ext) and the destination runs. Every carrying row
// that does not extend a span starts one, so spans = carrying rows - ext.
//
// dense says that no id in [start, end) is -1; with a packed lattice row
// (column stride equal to the row size) walkSegment then takes its
// branch-free path.
//
// prevEnd and prevID are the state entering start: the end of the last
// carrying row's destination before it and that row's id (noEnd and 0 at
// a completion span's start).
func walkRowSpans[T int32 | int64](ids []T, s rowShape, dstBase uint64, start, end int, dense bool, prevEnd, prevID uint64) (runs, ext uint64) {
	k := int(s.k)
	rowStart := start - start%k
	rowBase := dstBase + uint64(start/k)*s.a
	for i := start; i < end; {
		if i == rowStart+k {
			rowStart += k
			rowBase += s.a
		}
		segEnd := min(end, rowStart+k)
		var r, e uint64
		seg, dst := ids[i:segEnd], rowBase+uint64(i-rowStart)*s.b
		switch {
		case s.b != s.rowSize:
			prevEnd, prevID, r, e = walkSegment(seg, dst, s.b, s.rowSize, prevEnd, prevID)
		case dense:
			prevEnd, prevID, r, e, _ = walkDenseSegment(seg, dst, s.rowSize, prevEnd, prevID, false)
		default:
			// Blocks of denseBlock ids take the branch-free walk unless
			// they hold a -1, so a few -1s (a lookup's padding) cost only
			// their own blocks the walk one id at a time.
			for len(seg) > 0 {
				blk := seg[:min(len(seg), denseBlock)]
				pe, pid, br, be, neg := walkDenseSegment(blk, dst, s.rowSize, prevEnd, prevID, true)
				if neg {
					pe, pid, br, be = walkSegment(blk, dst, s.b, s.rowSize, prevEnd, prevID)
				}
				prevEnd, prevID, r, e = pe, pid, r+br, e+be
				seg, dst = seg[len(blk):], dst+uint64(len(blk))*s.b
			}
		}
		runs, ext = runs+r, ext+e
		i = segEnd
	}
	return runs, ext
}

// denseBlock is how many ids walkRowSpans hands walkDenseSegment at once
// in a completion span that holds -1s: small enough that a -1 sends only a
// few ids to the slow walk, large enough that each block's setup is noise.
const denseBlock = 64

// walkSegment is walkRowSpans' inner loop over one lattice row, kept small
// so its state stays in registers.
func walkSegment[T int32 | int64](ids []T, dst, b, rs, prevEnd, prevID uint64) (uint64, uint64, uint64, uint64) {
	var runs, ext uint64
	for _, id := range ids {
		if id >= 0 {
			u := uint64(id)
			if dst != prevEnd {
				runs++
			} else if u == prevID+1 {
				ext++
			}
			prevID = u
			prevEnd = dst + rs
		}
		dst += b
	}
	return prevEnd, prevID, runs, ext
}

// walkDenseSegment is walkSegment for a lattice row of carrying ids whose
// destinations are back to back (column stride = row size): only the first
// row can start a run, and a row extends its span exactly when its id
// follows the previous one. Counting that without a branch per id keeps
// random ids, which almost never follow each other, from costing a
// misprediction check chain: the loop is a compare and an add per id, with
// two accumulators to split the dependency chain. ids is not empty. With
// check set it also ORs the ids together and reports (neg) whether any is
// -1, in which case its other results are not those of the segment and
// the caller walks it with walkSegment.
func walkDenseSegment[T int32 | int64](ids []T, dst, rs, prevEnd, prevID uint64, check bool) (uint64, uint64, uint64, uint64, bool) {
	if check {
		var or0, or1 T
		i := 0
		for ; i+1 < len(ids); i += 2 {
			or0 |= ids[i]
			or1 |= ids[i+1]
		}
		if i < len(ids) {
			or0 |= ids[i]
		}
		if or0|or1 < 0 {
			return 0, 0, 0, 0, true
		}
	}
	var runs, ext uint64
	if dst != prevEnd {
		runs = 1
	} else {
		ext = b2u(uint64(ids[0]) == prevID+1)
	}
	var e0, e1 uint64
	i := 1
	for ; i+1 < len(ids); i += 2 {
		a, b, c := ids[i-1], ids[i], ids[i+1]
		e0 += b2u(b == a+1)
		e1 += b2u(c == b+1)
	}
	if i < len(ids) {
		e0 += b2u(ids[i] == ids[i-1]+1)
	}
	last := len(ids) - 1
	return dst + uint64(last)*rs + rs, uint64(ids[last]), runs, ext + e0 + e1, false
}

// b2u is 1 for true and 0 for false; the compiler turns it into a flag
// move, not a branch.
func b2u(b bool) uint64 {
	var x uint64
	if b {
		x = 1
	}
	return x
}

// spanHist adds the lengths of the spans of fragments [start, end) to hist.
// Normalize calls it only when some span holds more than one row.
func spanHist[T int32 | int64](ids []T, r *Rows, s rowShape, start, end int, hist *[64]uint64) {
	rowSpans(ids, r, s, start, end, func(_, _, n uint64) bool {
		hist[bits.Len64(n)-1]++
		return true
	})
}

// rowDstBounds returns [lo, hi) of the destination bytes of the carrying rows
// (there is at least one). When positions increase in plan order (one
// lattice row, or token rows that do not interleave) the first and last
// carrying rows decide it; otherwise every carrying row is visited.
func rowDstBounds[T int32 | int64](ids []T, s rowShape, dstBase uint64) (lo, hi uint64) {
	dstOf := func(i int) uint64 {
		return dstBase + uint64(i)/s.k*s.a + uint64(i)%s.k*s.b
	}
	if s.t <= 1 || s.a >= (s.k-1)*s.b+s.rowSize {
		first, last := 0, len(ids)-1
		for ids[first] < 0 {
			first++
		}
		for ids[last] < 0 {
			last--
		}
		return dstOf(first), dstOf(last) + s.rowSize
	}
	lo = math.MaxUint64
	k := int(s.k)
	rowBase := dstBase
	for t := 0; t < len(ids); t += k {
		dst := rowBase
		for _, id := range ids[t : t+k] {
			if id >= 0 {
				lo, hi = min(lo, dst), max(hi, dst)
			}
			dst += s.b
		}
		rowBase += s.a
	}
	return lo, hi + s.rowSize
}

func (n *Normalized) normRanges(p *Plan) error {
	rs := p.Ranges
	if uint64(len(rs)) > maxFragments {
		return invalid("Ranges", "more than 2^32-1 ranges")
	}
	if err := checkEnds(p.CompletionEnds, len(rs)); err != nil {
		return err
	}
	var one [1]uint32
	ends := groupEnds(p.CompletionEnds, len(rs), &one)
	g := &n.summary
	var (
		start    int
		sorted   = true
		prevEnd  uint64
		minSrc   = uint64(math.MaxUint64)
		maxSrc   uint64
		minDst   = uint64(math.MaxUint64)
		maxDst   uint64
		stream   uint64
		carrying int
	)
	for _, e := range ends {
		end := int(e)
		spanStart, runStart := len(n.spans), len(n.runs)
		groupStream := stream
		var span Span
		var run Run
		open := false
		for i, r := range rs[start:end] {
			se, ok := add3(r.Src, r.Len, 0)
			if !ok || se > p.SrcExtent {
				return &BoundsError{Index: start + i, Field: "src", Off: r.Src, Len: r.Len, Limit: p.SrcExtent}
			}
			de, ok := add3(r.Dst, r.Len, 0)
			if !ok || de > p.DstExtent {
				return &BoundsError{Index: start + i, Field: "dst", Off: r.Dst, Len: r.Len, Limit: p.DstExtent}
			}
			if r.Len == 0 {
				g.Skipped++
				continue
			}
			carrying++
			if r.Dst < prevEnd {
				sorted = false
			}
			prevEnd = de
			minSrc, maxSrc = min(minSrc, r.Src), max(maxSrc, se)
			minDst, maxDst = min(minDst, r.Dst), max(maxDst, de)
			switch {
			case open && r.Dst == run.Dst+run.Len:
				run.Len += r.Len
				if r.Src == span.Src+span.Len {
					span.Len += r.Len
				} else {
					n.addSpan(span)
					span = Span{r.Src, r.Dst, r.Len}
				}
			default:
				if open {
					n.addSpan(span)
					n.runs = append(n.runs, run)
				}
				span = Span{r.Src, r.Dst, r.Len}
				run = Run{Dst: r.Dst, Len: r.Len, Stream: stream}
				open = true
			}
			stream += r.Len
		}
		if open {
			n.addSpan(span)
			n.runs = append(n.runs, run)
		}
		n.comps = append(n.comps, Completion{
			FragStart: start, FragEnd: end,
			SpanStart: spanStart, SpanEnd: len(n.spans),
			RunStart: runStart, RunEnd: len(n.runs),
			Stream: groupStream, Bytes: stream - groupStream,
		})
		start = end
	}
	if !sorted {
		if err := n.checkRangeOverlap(rs, carrying); err != nil {
			return err
		}
	}
	g.Fragments = uint64(carrying)
	g.Bytes = stream
	g.Spans = uint64(len(n.spans))
	g.Runs = uint64(len(n.runs))
	if stream != 0 {
		g.SrcLo, g.SrcHi = minSrc, maxSrc
		g.DstLo, g.DstHi = minDst, maxDst
	}
	return nil
}

func (n *Normalized) addSpan(s Span) {
	n.spans = append(n.spans, s)
	n.summary.SpanLog2[bits.Len64(s.Len)-1]++
}

// dstSpan is a carrying range's destination bytes [dst, end).
type dstSpan struct{ dst, end uint64 }

// spanDst is RadixSort's key of a dstSpan: its start.
func spanDst(s *dstSpan) *uint64 { return &s.dst }

// checkRangeOverlap sorts the destinations of the carrying ranges and checks
// neighbours: with starts sorted, some pair overlaps exactly when a range
// starts before the furthest end seen so far. The sort is RadixSort, so
// an owner facing a hostile, shuffled plan still spends O(N).
func (n *Normalized) checkRangeOverlap(rs []Range, carrying int) error {
	a := grow(n.sortA, carrying)[:0]
	for _, r := range rs {
		if r.Len != 0 {
			a = append(a, dstSpan{r.Dst, r.Dst + r.Len})
		}
	}
	n.sortA, n.sortB = a, grow(n.sortB, carrying)
	sorted := RadixSort(a, n.sortB, spanDst)
	far := sorted[0]
	for _, s := range sorted[1:] {
		if s.dst < far.end {
			return overlapBetween(rs, far, s)
		}
		if s.end > far.end {
			far = s
		}
	}
	return nil
}

// overlapBetween builds the error for two overlapping destination spans,
// finding the ranges they came from (error path only: a linear search).
func overlapBetween(rs []Range, a, b dstSpan) error {
	find := func(s dstSpan, not int) int {
		for i, r := range rs {
			if i != not && r.Len != 0 && r.Dst == s.dst && r.Dst+r.Len == s.end {
				return i
			}
		}
		return -1
	}
	i := find(a, -1)
	j := find(b, i)
	return &OverlapError{First: i, Second: j, FirstDst: a.dst, FirstLen: a.end - a.dst, SecondDst: b.dst, SecondLen: b.end - b.dst}
}

// ForEachSpan calls fn for every coalesced span in plan order (completion
// span by completion span) until fn returns false.
func (n *Normalized) ForEachSpan(fn func(src, dst, length uint64) bool) {
	for j := range n.comps {
		if !n.ForEachSpanIn(j, fn) {
			return
		}
	}
}

// ForEachSpanIn calls fn for every coalesced span of completion span j until
// fn returns false, and reports whether it ran to the end.
func (n *Normalized) ForEachSpanIn(j int, fn func(src, dst, length uint64) bool) bool {
	c := n.comps[j]
	if n.form == FormRanges {
		for _, s := range n.spans[c.SpanStart:c.SpanEnd] {
			if !fn(s.Src, s.Dst, s.Len) {
				return false
			}
		}
		return true
	}
	if len(n.rows.IDs32) != 0 {
		return rowSpans(n.rows.IDs32, &n.rows, n.shape, c.FragStart, c.FragEnd, fn)
	}
	return rowSpans(n.rows.IDs64, &n.rows, n.shape, c.FragStart, c.FragEnd, fn)
}

// ForEachRun calls fn for every contiguous destination run in plan order
// until fn returns false. stream is the run's offset in the packed stream.
func (n *Normalized) ForEachRun(fn func(dst, stream, length uint64) bool) {
	if n.form == FormRanges {
		for _, r := range n.runs {
			if !fn(r.Dst, r.Stream, r.Len) {
				return
			}
		}
		return
	}
	for _, c := range n.comps {
		var ok bool
		if len(n.rows.IDs32) != 0 {
			ok = rowRuns(n.rows.IDs32, &n.rows, n.shape, c, fn)
		} else {
			ok = rowRuns(n.rows.IDs64, &n.rows, n.shape, c, fn)
		}
		if !ok {
			return
		}
	}
}

// rowDst returns the destination of fragment i and its lattice column.
func rowDst(r *Rows, s rowShape, i int) (dst, col, rowBase uint64) {
	t, c := uint64(i)/s.k, uint64(i)%s.k
	rowBase = r.DstBase + t*s.a
	return rowBase + c*s.b, c, rowBase
}

func rowSpans[T int32 | int64](ids []T, r *Rows, s rowShape, start, end int, fn func(src, dst, length uint64) bool) bool {
	if start == end {
		return true
	}
	rs := r.RowSize
	dst, col, rowBase := rowDst(r, s, start)
	var cur Span
	open := false
	var prevID uint64
	for _, id := range ids[start:end] {
		if id >= 0 {
			u := uint64(id)
			if open && u == prevID+1 && dst == cur.Dst+cur.Len {
				cur.Len += rs
			} else {
				if open && !fn(cur.Src, cur.Dst, cur.Len) {
					return false
				}
				cur = Span{Src: r.SrcBase + u*rs, Dst: dst, Len: rs}
				open = true
			}
			prevID = u
		}
		col++
		dst += s.b
		if col == s.k {
			col = 0
			rowBase += s.a
			dst = rowBase
		}
	}
	return !open || fn(cur.Src, cur.Dst, cur.Len)
}

func rowRuns[T int32 | int64](ids []T, r *Rows, s rowShape, c Completion, fn func(dst, stream, length uint64) bool) bool {
	if c.FragStart == c.FragEnd || c.Bytes == 0 {
		return true
	}
	if c.RunEnd-c.RunStart == 1 {
		// One run (Normalize counted them): it starts at the first
		// carrying row and holds every byte of the completion span, so
		// the ids need not be walked (a packed output's common case).
		i := c.FragStart
		for ids[i] < 0 {
			i++
		}
		dst, _, _ := rowDst(r, s, i)
		return fn(dst, c.Stream, c.Bytes)
	}
	rs := r.RowSize
	dst, col, rowBase := rowDst(r, s, c.FragStart)
	var cur Run
	open := false
	stream := c.Stream
	for _, id := range ids[c.FragStart:c.FragEnd] {
		if id >= 0 {
			if open && dst == cur.Dst+cur.Len {
				cur.Len += rs
			} else {
				if open && !fn(cur.Dst, cur.Stream, cur.Len) {
					return false
				}
				cur = Run{Dst: dst, Len: rs, Stream: stream}
				open = true
			}
			stream += rs
		}
		col++
		dst += s.b
		if col == s.k {
			col = 0
			rowBase += s.a
			dst = rowBase
		}
	}
	return !open || fn(cur.Dst, cur.Stream, cur.Len)
}

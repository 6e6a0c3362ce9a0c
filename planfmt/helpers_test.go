package planfmt

import (
	"errors"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// newRand returns a generator seeded from PLANFMT_SEED or a fresh seed, and
// logs the seed so a failure can be replayed.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv("PLANFMT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("PLANFMT_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with PLANFMT_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// randTableRows returns a table row count whose id width is w.
func randTableRows(rng *rand.Rand, w int) uint64 {
	if w == 1 {
		return 1 + rng.Uint64N(255)
	}
	lo := uint64(1) << (8 * (w - 1))
	hi := uint64(1)<<(8*w) - 1
	if w == 8 {
		hi = math.MaxInt64
	}
	return lo + rng.Uint64N(hi-lo+1)
}

// randIDs fills n ids below tableRows: runs of consecutive ids (so spans
// coalesce), random ids and a share of -1.
func randIDs(rng *rand.Rand, n int, tableRows uint64, skip float64) []int64 {
	ids := make([]int64, n)
	prev := int64(-1)
	for i := range ids {
		switch {
		case tableRows == 0 || rng.Float64() < skip:
			ids[i] = -1
			continue
		case prev >= 0 && uint64(prev+1) < tableRows && rng.IntN(3) == 0:
			ids[i] = prev + 1
		case rng.IntN(8) == 0:
			ids[i] = int64(tableRows - 1 - rng.Uint64N(min(tableRows, 3)))
		default:
			ids[i] = int64(rng.Uint64N(tableRows))
		}
		prev = ids[i]
	}
	return ids
}

type layoutStyle int

const (
	styleContiguous layoutStyle = iota
	styleTokenMajor
	styleHeadMajor
	styleInterleaved
	styleOneCol
	numStyles
)

// randRowsPlan returns a valid fixed-row plan.
func randRowsPlan(rng *rand.Rand) *Plan {
	w := 1 + rng.IntN(8)
	tableRows := randTableRows(rng, w)
	if rng.IntN(20) == 0 {
		tableRows = 0
	}
	rowSize := uint64(1 + rng.IntN(300))
	if tableRows != 0 {
		rowSize = min(rowSize, math.MaxUint64/4/tableRows)
		rowSize = max(rowSize, 1)
	}
	p := &Plan{Form: FormRows}
	r := &p.Rows
	r.RowSize = rowSize
	r.TableRows = tableRows
	r.SrcBase = rng.Uint64N(1000)
	p.SrcExtent = r.SrcBase + tableRows*rowSize + rng.Uint64N(100)

	style := layoutStyle(rng.IntN(int(numStyles)))
	k := uint64(1 + rng.IntN(6))
	t := uint64(rng.IntN(30))
	n := t * k
	var span uint64 // (t-1)*a + (k-1)*b + R, the destination footprint
	switch style {
	case styleContiguous:
		n = uint64(rng.IntN(200))
		span = n * rowSize
	case styleTokenMajor:
		b := rowSize + rng.Uint64N(3)
		a := k*b + rng.Uint64N(5)
		r.Layout = Layout{Kind: LayoutStrided, Cols: k, RowStride: a, ColStride: b}
		span = latticeSpan(t, k, a, b, rowSize)
	case styleHeadMajor:
		a := rowSize + rng.Uint64N(3)
		b := t*a + rng.Uint64N(5)
		r.Layout = Layout{Kind: LayoutStrided, Cols: k, RowStride: a, ColStride: b}
		span = latticeSpan(t, k, a, b, rowSize)
	case styleInterleaved:
		a, b := rowSize*3+rng.Uint64N(rowSize+1), rowSize*2+rng.Uint64N(rowSize+1)
		for range 50 {
			if _, _, bad := latticeOverlap(t, k, a, b, rowSize); !bad {
				break
			}
			a, b = rowSize+rng.Uint64N(4*rowSize), rowSize+rng.Uint64N(4*rowSize)
		}
		if _, _, bad := latticeOverlap(t, k, a, b, rowSize); bad {
			a, b = k*rowSize, rowSize
		}
		r.Layout = Layout{Kind: LayoutStrided, Cols: k, RowStride: a, ColStride: b}
		span = latticeSpan(t, k, a, b, rowSize)
	case styleOneCol:
		a := rowSize + rng.Uint64N(4)
		r.Layout = Layout{Kind: LayoutStrided, Cols: 1, RowStride: a, ColStride: rng.Uint64N(3)}
		n = t
		span = latticeSpan(t, 1, a, 0, rowSize)
	}
	r.DstBase = rng.Uint64N(500)
	p.DstExtent = r.DstBase + span + rng.Uint64N(50)
	ids := randIDs(rng, int(n), tableRows, []float64{0, 0.05, 0.5}[rng.IntN(3)])
	if tableRows <= math.MaxInt32+1 && rng.IntN(2) == 0 {
		r.IDs32 = make([]int32, len(ids))
		for i, id := range ids {
			r.IDs32[i] = int32(id)
		}
	} else {
		r.IDs64 = ids
	}
	p.CompletionEnds = randEnds(rng, int(n))
	return p
}

func latticeSpan(t, k, a, b, r uint64) uint64 {
	if t == 0 || k == 0 {
		return 0
	}
	return (t-1)*a + (k-1)*b + r
}

// randEnds returns no ends (one completion span) or a random partition.
func randEnds(rng *rand.Rand, n int) []uint32 {
	if n == 0 || rng.IntN(2) == 0 {
		return nil
	}
	var ends []uint32
	for e := 0; e < n; {
		e += 1 + rng.IntN(max(1, n/3))
		e = min(e, n)
		ends = append(ends, uint32(e))
	}
	return ends
}

// randLen draws a fragment length: mostly small, sometimes large, sometimes 0.
func randLen(rng *rand.Rand) uint64 {
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1:
		return 1 + rng.Uint64N(1<<20)
	case 2:
		return 1 + rng.Uint64N(5000)
	}
	return 1 + rng.Uint64N(300)
}

// randRangesPlan returns a valid ranges plan (no overlap, in bounds).
func randRangesPlan(rng *rand.Rand) *Plan {
	n := rng.IntN(200)
	if rng.IntN(10) == 0 {
		n = rng.IntN(3)
	}
	p := &Plan{Form: FormRanges, Ranges: make([]Range, n)}
	srcSeq := rng.IntN(4) == 0
	dstBase := rng.Uint64N(1 << 40)
	if rng.IntN(2) == 0 {
		dstBase = rng.Uint64N(100)
	}
	srcBase := rng.Uint64N(1 << 20)
	// Destinations: disjoint slots in increasing order with random gaps
	// (often zero, so runs form), then maybe shuffled.
	d, s := dstBase, srcBase
	for i := range p.Ranges {
		l := randLen(rng)
		if rng.IntN(3) != 0 {
			d += rng.Uint64N(64)
		}
		p.Ranges[i] = Range{Dst: d, Len: l}
		d += l
		if srcSeq || rng.IntN(3) == 0 {
			p.Ranges[i].Src = s
		} else {
			p.Ranges[i].Src = rng.Uint64N(1 << 36)
		}
		s = p.Ranges[i].Src + l
	}
	if rng.IntN(4) == 0 {
		rng.Shuffle(n, func(i, j int) {
			p.Ranges[i].Dst, p.Ranges[j].Dst = p.Ranges[j].Dst, p.Ranges[i].Dst
			p.Ranges[i].Len, p.Ranges[j].Len = p.Ranges[j].Len, p.Ranges[i].Len
		})
	}
	for _, r := range p.Ranges {
		p.SrcExtent = max(p.SrcExtent, r.Src+r.Len)
		p.DstExtent = max(p.DstExtent, r.Dst+r.Len)
	}
	p.SrcExtent += rng.Uint64N(10)
	p.DstExtent += rng.Uint64N(10)
	p.CompletionEnds = randEnds(rng, n)
	return p
}

func randPlan(rng *rand.Rand) *Plan {
	if rng.IntN(2) == 0 {
		return randRowsPlan(rng)
	}
	return randRangesPlan(rng)
}

// frag is one fragment in plan order, as the reference sees it.
type frag struct {
	src, dst, n uint64
	carry       bool
}

// refDst places fragment i of a fixed-row plan, straight from the Layout
// definition (not from the canonical lattice the package uses).
func refDst(r *Rows, i int) uint64 {
	if r.Layout.Kind == LayoutContiguous {
		return r.DstBase + uint64(i)*r.RowSize
	}
	t, k := uint64(i)/r.Layout.Cols, uint64(i)%r.Layout.Cols
	return r.DstBase + t*r.Layout.RowStride + k*r.Layout.ColStride
}

// refFrags expands a valid plan into fragments.
func refFrags(p *Plan) []frag {
	if p.Form == FormRanges {
		out := make([]frag, len(p.Ranges))
		for i, r := range p.Ranges {
			out[i] = frag{r.Src, r.Dst, r.Len, r.Len != 0}
		}
		return out
	}
	r := &p.Rows
	out := make([]frag, r.Len())
	for i := range out {
		id := r.ID(i)
		out[i] = frag{dst: refDst(r, i), n: r.RowSize}
		if id >= 0 {
			out[i].src = r.SrcBase + uint64(id)*r.RowSize
			out[i].carry = true
		}
	}
	return out
}

// refResult is what the reference normalizer computes.
type refResult struct {
	geom  Summary
	spans []Span
	runs  []Run
	comps []Completion
}

// refNormalize is a slow, obvious normalizer for valid plans: it expands
// every fragment and merges neighbours.
func refNormalize(p *Plan) refResult {
	var res refResult
	fr := refFrags(p)
	ends := p.CompletionEnds
	if len(ends) == 0 && len(fr) > 0 {
		ends = []uint32{uint32(len(fr))}
	}
	g := &res.geom
	var stream uint64
	start := 0
	first := true
	for _, e := range ends {
		c := Completion{FragStart: start, FragEnd: int(e), SpanStart: len(res.spans), RunStart: len(res.runs), Stream: stream}
		havePrev := false
		for _, f := range fr[start:e] {
			if !f.carry {
				g.Skipped++
				continue
			}
			g.Fragments++
			g.Bytes += f.n
			if first {
				g.SrcLo, g.SrcHi, g.DstLo, g.DstHi = f.src, f.src+f.n, f.dst, f.dst+f.n
				first = false
			}
			g.SrcLo, g.SrcHi = min(g.SrcLo, f.src), max(g.SrcHi, f.src+f.n)
			g.DstLo, g.DstHi = min(g.DstLo, f.dst), max(g.DstHi, f.dst+f.n)
			ls, lr := len(res.spans)-1, len(res.runs)-1
			if havePrev && res.runs[lr].Dst+res.runs[lr].Len == f.dst {
				res.runs[lr].Len += f.n
				if res.spans[ls].Src+res.spans[ls].Len == f.src {
					res.spans[ls].Len += f.n
				} else {
					res.spans = append(res.spans, Span{f.src, f.dst, f.n})
				}
			} else {
				res.spans = append(res.spans, Span{f.src, f.dst, f.n})
				res.runs = append(res.runs, Run{Dst: f.dst, Len: f.n, Stream: stream})
			}
			havePrev = true
			stream += f.n
		}
		c.SpanEnd, c.RunEnd, c.Bytes = len(res.spans), len(res.runs), stream-c.Stream
		res.comps = append(res.comps, c)
		start = int(e)
	}
	for _, s := range res.spans {
		g.SpanLog2[bits.Len64(s.Len)-1]++
	}
	g.Spans, g.Runs, g.Completions = uint64(len(res.spans)), uint64(len(res.runs)), len(res.comps)
	return res
}

// refCheck returns the sentinel the package must report for p, or nil, by
// brute force: bounds of every fragment, then pairwise destination overlap
// (for rows: of every lattice slot, skipped or not).
func refCheck(p *Plan) error {
	if p.Form == FormRows {
		r := &p.Rows
		if r.TableRows*r.RowSize/r.RowSize != r.TableRows || r.SrcBase+r.TableRows*r.RowSize > p.SrcExtent {
			return ErrBounds
		}
		n := r.Len()
		for i := range n {
			if refDst(r, i)+r.RowSize > p.DstExtent {
				return ErrBounds
			}
		}
		for i := range n {
			for j := i + 1; j < n; j++ {
				a, b := refDst(r, i), refDst(r, j)
				if a < b+r.RowSize && b < a+r.RowSize {
					return ErrOverlap
				}
			}
		}
		for i := range n {
			if id := r.ID(i); id < -1 || (id >= 0 && uint64(id) >= r.TableRows) {
				return ErrBounds
			}
		}
		return nil
	}
	for _, r := range p.Ranges {
		if r.Src+r.Len < r.Src || r.Src+r.Len > p.SrcExtent || r.Dst+r.Len < r.Dst || r.Dst+r.Len > p.DstExtent {
			return ErrBounds
		}
	}
	for i, a := range p.Ranges {
		for _, b := range p.Ranges[i+1:] {
			if a.Len != 0 && b.Len != 0 && a.Dst < b.Dst+b.Len && b.Dst < a.Dst+a.Len {
				return ErrOverlap
			}
		}
	}
	return nil
}

// planView is a Plan with its ids as int64 and its storage stripped, for
// comparing plans whatever slice holds the ids.
type planView struct {
	Form                 Form
	SrcExtent, DstExtent uint64
	Ranges               []Range
	RowSize, SrcBase     uint64
	TableRows, DstBase   uint64
	Layout               Layout
	IDs                  []int64
	Ends                 []uint32
}

func viewOf(p *Plan) planView {
	v := planView{Form: p.Form, SrcExtent: p.SrcExtent, DstExtent: p.DstExtent}
	if len(p.CompletionEnds) != 0 {
		v.Ends = p.CompletionEnds
	}
	if p.Form == FormRanges {
		if len(p.Ranges) != 0 {
			v.Ranges = p.Ranges
		}
		return v
	}
	r := &p.Rows
	v.RowSize, v.SrcBase, v.TableRows, v.DstBase, v.Layout = r.RowSize, r.SrcBase, r.TableRows, r.DstBase, r.Layout
	for i := range r.Len() {
		v.IDs = append(v.IDs, r.ID(i))
	}
	return v
}

// sentinelOf returns the package sentinel err wraps.
func sentinelOf(err error) error {
	for _, s := range []error{ErrInvalid, ErrBounds, ErrOverlap, ErrCorrupt, ErrTruncated, ErrVersion, ErrChecksum, ErrTooLarge} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

package planfmt

import (
	"slices"
	"strconv"
)

// DstPiece is one piece of a plan cut by DstCutter.Cut: the fragments landing
// in one window of the destination extent.
type DstPiece struct {
	// Off is where the window starts in the original destination extent.
	Off uint64
	// Plan's destination extent is the window (offsets rebased to it), at
	// most the size asked for (more only when one token row or one range
	// piece of a rows plan is larger: see Cut); its source extent is the
	// original's. It has no completion spans.
	Plan Plan
	// Bytes and Fragments count what the window carries (ids that are not
	// -1, range pieces).
	Bytes     uint64
	Fragments int
}

// DstCutter cuts plans by their destination into windows of bounded size,
// for an operation that lands through a bounded bounce buffer (a READ into
// device memory, each window staged in registered host memory and copied
// on). It keeps its windows' storage for the next Cut; it is not safe for
// concurrent use.
type DstCutter struct {
	wins   []DstPiece
	norm   Normalized
	ranges []Range // the ranges form's pieces, window after window
	sorted []Range
	keys   []pieceKey
	ids32  []int32 // a head-major rows plan's ids, window after window
	ids64  []int64
}

// Cut checks p as the engine checks a plan (bounds, ids, overlap,
// completion ends) and cuts its destination into windows of at most size
// bytes, in destination order; windows where nothing lands are left out.
//
//   - Ranges: the extent is cut every size bytes and every range into its
//     pieces, one per window it crosses.
//   - Rows, contiguous layout: every window holds a slice of the ids
//     (size/RowSize rows, at least one).
//   - Rows, token-major strided layout (a token's Cols rows within its
//     RowStride): a window holds whole tokens (size/RowStride, at least
//     one), or, when one token is larger than size, a slice of one
//     token's columns (so a window is larger than size only when one row
//     is).
//   - Rows, head-major strided layout (a column's rows within ColStride):
//     a window holds a run of tokens of one column, as a one-column plan.
//
// Other strided layouts (columns and tokens interleaved) are an
// *InvalidError. The returned windows, and their plans' ids and ranges,
// belong to the DstCutter until its next Cut (contiguous and token-major
// windows share the ids of p, which must not change meanwhile).
func (w *DstCutter) Cut(p *Plan, size uint64) ([]DstPiece, error) {
	if p == nil {
		return nil, invalid("plan", "nil")
	}
	if size == 0 {
		return nil, invalid("size", "0")
	}
	if err := Normalize(&w.norm, p); err != nil {
		return nil, err
	}
	w.wins = w.wins[:0]
	if p.Form == FormRanges {
		if err := w.cutRanges(p, size); err != nil {
			return nil, err
		}
		return w.wins, nil
	}
	r := &p.Rows
	if r.Len() == 0 {
		return w.wins, nil
	}
	switch l := r.Layout; {
	case l.Kind == LayoutContiguous:
		cutRows(w, p, max(1, size/r.RowSize), 1, r.RowSize)
	case l.Cols >= 1 && (l.Cols-1)*l.ColStride+r.RowSize <= l.RowStride:
		if l.Cols > 1 && (l.Cols-1)*l.ColStride+r.RowSize > size {
			// One token is larger than a window: its columns in slices.
			cutTokenColumns(w, p, max(1, size/max(l.ColStride, r.RowSize)))
			break
		}
		cutRows(w, p, max(1, size/l.RowStride), l.Cols, l.RowStride)
	default:
		tokens := uint64(r.Len()) / l.Cols
		if tokens == 0 || (tokens-1)*l.RowStride+r.RowSize > l.ColStride {
			return nil, invalid("Rows.Layout", "strided layout whose tokens and columns interleave in the destination: no window holds whole tokens or whole column runs")
		}
		// A single token may have any RowStride (0 included): per is then 1.
		per := max(1, size/max(l.RowStride, r.RowSize))
		if len(r.IDs32) != 0 {
			w.ids32 = slices.Grow(w.ids32[:0], r.Len())[:r.Len()]
			cutColumns(w, p, r.IDs32, w.ids32, per, func(pl *Plan, ids []int32) { pl.Rows.IDs32 = ids })
		} else {
			w.ids64 = slices.Grow(w.ids64[:0], r.Len())[:r.Len()]
			cutColumns(w, p, r.IDs64, w.ids64, per, func(pl *Plan, ids []int64) { pl.Rows.IDs64 = ids })
		}
	}
	return w.wins, nil
}

// add appends a window, reusing the storage of the one it replaces.
func (w *DstCutter) add() *DstPiece {
	if len(w.wins) < cap(w.wins) {
		w.wins = w.wins[:len(w.wins)+1]
	} else {
		w.wins = append(w.wins, DstPiece{})
	}
	win := &w.wins[len(w.wins)-1]
	win.Off, win.Bytes, win.Fragments = 0, 0, 0
	win.Plan = Plan{}
	return win
}

// cutRows cuts a contiguous or token-major rows plan into windows of per
// tokens (a token: cols ids, stride bytes apart in the destination).
func cutRows(w *DstCutter, p *Plan, per, cols, stride uint64) {
	r := &p.Rows
	n := uint64(r.Len())
	tokens := n / cols
	extent := func(k uint64) uint64 { // k tokens' destination span
		if p.Rows.Layout.Kind == LayoutContiguous {
			return k * r.RowSize
		}
		return (k-1)*stride + (cols-1)*r.Layout.ColStride + r.RowSize
	}
	for t0 := uint64(0); t0 < tokens; t0 += per {
		k := min(per, tokens-t0)
		lo, hi := t0*cols, (t0+k)*cols
		bytes, frags := rowsCarried(r, int(lo), int(hi))
		if frags == 0 {
			continue
		}
		win := w.add()
		win.Off = r.DstBase + t0*stride
		win.Bytes, win.Fragments = bytes, frags
		win.Plan = Plan{Form: FormRows, SrcExtent: p.SrcExtent, DstExtent: extent(k),
			Rows: Rows{RowSize: r.RowSize, SrcBase: r.SrcBase, TableRows: r.TableRows, Layout: r.Layout}}
		if len(r.IDs32) != 0 {
			win.Plan.Rows.IDs32 = r.IDs32[lo:hi]
		} else {
			win.Plan.Rows.IDs64 = r.IDs64[lo:hi]
		}
	}
}

// cutTokenColumns cuts a token-major rows plan whose tokens are each
// larger than a window: every token into windows of per columns (its ids
// of those columns, a one-token plan of per columns).
func cutTokenColumns(w *DstCutter, p *Plan, per uint64) {
	r := &p.Rows
	l := r.Layout
	tokens := uint64(r.Len()) / l.Cols
	for t := range tokens {
		for c0 := uint64(0); c0 < l.Cols; c0 += per {
			m := min(per, l.Cols-c0)
			lo, hi := t*l.Cols+c0, t*l.Cols+c0+m
			bytes, frags := rowsCarried(r, int(lo), int(hi))
			if frags == 0 {
				continue
			}
			win := w.add()
			win.Off = r.DstBase + t*l.RowStride + c0*l.ColStride
			win.Bytes, win.Fragments = bytes, frags
			lay := l
			lay.Cols = m
			win.Plan = Plan{Form: FormRows, SrcExtent: p.SrcExtent, DstExtent: (m-1)*l.ColStride + r.RowSize,
				Rows: Rows{RowSize: r.RowSize, SrcBase: r.SrcBase, TableRows: r.TableRows, Layout: lay}}
			if len(r.IDs32) != 0 {
				win.Plan.Rows.IDs32 = r.IDs32[lo:hi]
			} else {
				win.Plan.Rows.IDs64 = r.IDs64[lo:hi]
			}
		}
	}
}

// rowsCarried counts the ids of [lo, hi) that are not -1 and their bytes.
func rowsCarried(r *Rows, lo, hi int) (uint64, int) {
	n := 0
	if len(r.IDs32) != 0 {
		for _, id := range r.IDs32[lo:hi] {
			if id >= 0 {
				n++
			}
		}
	} else {
		for _, id := range r.IDs64[lo:hi] {
			if id >= 0 {
				n++
			}
		}
	}
	return uint64(n) * r.RowSize, n
}

// cutColumns cuts a head-major rows plan: column c's tokens land at
// DstBase + c*ColStride + t*RowStride, so a window is per tokens of one
// column, a one-column plan whose ids are copied into out.
func cutColumns[T int32 | int64](w *DstCutter, p *Plan, ids, out []T, per uint64, set func(*Plan, []T)) {
	r := &p.Rows
	l := r.Layout
	cols := l.Cols
	tokens := uint64(len(ids)) / cols
	at := 0
	for c := range cols {
		for t0 := uint64(0); t0 < tokens; t0 += per {
			k := min(per, tokens-t0)
			start, frags := at, 0
			for t := t0; t < t0+k; t++ {
				id := ids[t*cols+c]
				out[at] = id
				at++
				if id >= 0 {
					frags++
				}
			}
			if frags == 0 {
				at = start
				continue
			}
			win := w.add()
			win.Off = r.DstBase + c*l.ColStride + t0*l.RowStride
			win.Bytes, win.Fragments = uint64(frags)*r.RowSize, frags
			win.Plan = Plan{Form: FormRows, SrcExtent: p.SrcExtent, DstExtent: (k-1)*l.RowStride + r.RowSize,
				Rows: Rows{RowSize: r.RowSize, SrcBase: r.SrcBase, TableRows: r.TableRows,
					Layout: Layout{Kind: LayoutStrided, Cols: 1, RowStride: l.RowStride}}}
			if k == 1 || l.RowStride == r.RowSize {
				win.Plan.Rows.Layout = Layout{}
			}
			set(&win.Plan, out[start:at])
		}
	}
}

// maxPieces bounds the range pieces one Cut makes (a window size far
// below the ranges' lengths would make one per window crossed).
const maxPieces = 1 << 24

// cutRanges cuts a ranges plan's destination every size bytes: the pieces
// are made in plan order, tagged with their window, and sorted by window
// (stable, so a window's pieces keep plan order), so the storage grows
// with the pieces, not with the windows.
func (w *DstCutter) cutRanges(p *Plan, size uint64) error {
	total := uint64(0)
	for _, rg := range p.Ranges {
		if rg.Len != 0 {
			total += (rg.Dst+rg.Len-1)/size - rg.Dst/size + 1
		}
	}
	if total > maxPieces {
		return invalid("size", strconv.FormatUint(size, 10)+" B windows cut the ranges into "+strconv.FormatUint(total, 10)+
			" pieces, more than "+strconv.Itoa(maxPieces)+": use larger windows")
	}
	w.ranges = slices.Grow(w.ranges[:0], int(total))[:total]
	w.keys = slices.Grow(w.keys[:0], int(total))[:total]
	at := 0
	for _, rg := range p.Ranges {
		if rg.Len == 0 {
			continue
		}
		for k := rg.Dst / size; k <= (rg.Dst+rg.Len-1)/size; k++ {
			lo, hi := max(rg.Dst, k*size), min(rg.Dst+rg.Len, (k+1)*size)
			w.keys[at] = pieceKey{window: k, at: at}
			w.ranges[at] = Range{Src: rg.Src + (lo - rg.Dst), Dst: lo - k*size, Len: hi - lo}
			at++
		}
	}
	sorted := slices.IsSortedFunc(w.keys, comparePieces)
	if !sorted {
		slices.SortFunc(w.keys, comparePieces)
		w.sorted = slices.Grow(w.sorted[:0], len(w.ranges))[:len(w.ranges)]
		for i, k := range w.keys {
			w.sorted[i] = w.ranges[k.at]
		}
		w.ranges, w.sorted = w.sorted, w.ranges
	}
	for i := 0; i < len(w.keys); {
		k := w.keys[i].window
		j := i + 1
		for j < len(w.keys) && w.keys[j].window == k {
			j++
		}
		pieces := w.ranges[i:j]
		win := w.add()
		win.Off = k * size
		win.Plan = Plan{Form: FormRanges, SrcExtent: p.SrcExtent, DstExtent: min(size, p.DstExtent-k*size), Ranges: pieces}
		for _, pc := range pieces {
			win.Bytes += pc.Len
		}
		win.Fragments = len(pieces)
		i = j
	}
	return nil
}

// pieceKey is a range piece's window and its place in plan order.
type pieceKey struct {
	window uint64
	at     int
}

func comparePieces(a, b pieceKey) int {
	if a.window != b.window {
		if a.window < b.window {
			return -1
		}
		return 1
	}
	return a.at - b.at
}

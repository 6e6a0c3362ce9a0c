package planfmt

import (
	"slices"
	"strconv"
)

// Shard is one part of a plan cut by Splitter.Split: the fragments whose
// source bytes lie in one shard of the source extent.
type Shard struct {
	// Plan's source extent is the shard ([Cuts[i], Cuts[i+1]) of the plan
	// it came from, at offset 0); its destination extent, layout and
	// completion spans are the original's. It holds as many fragments as
	// the original, in the same order: in the rows form every id outside
	// the shard is -1, in the ranges form a range is cut to its piece in
	// the shard (zero-length when it has none there). So fragment j and
	// completion span j of every shard are fragment j and span j of the
	// original, and the shards' span byte counts add up to the original's.
	Plan Plan
	// Bytes and Fragments count what the shard carries (Fragments: ids
	// or pieces that are not empty).
	Bytes     uint64
	Fragments int
}

// Splitter cuts plans by their source extent, for a source spread over
// several owners (a table split by row ranges, an object space by byte
// ranges): each shard becomes one owner's part of the operation. A
// Splitter keeps its shards' storage for the next Split; it is not safe
// for concurrent use.
type Splitter struct {
	shards []Shard
	norm   Normalized // a ranges plan's check
	rowLo  []uint64   // per shard: its first whole row
	rowHi  []uint64   // per shard: one past its last whole row
}

// Split cuts p at cuts: shard i holds the source bytes [cuts[i],
// cuts[i+1]), so cuts must start at 0, increase strictly and end at
// p.SrcExtent. In the rows form every row an id names must lie whole in
// one shard (a row across a cut is an *InvalidError naming the id's
// index). p is checked as the engine checks a plan (bounds, overlap,
// completion ends) and its errors are this package's; on error the
// Splitter's previous shards are invalid. The returned shards, and their
// plans' ids, ranges and ends, belong to the Splitter until its next
// Split.
func (s *Splitter) Split(p *Plan, cuts []uint64) ([]Shard, error) {
	return s.split(p, cuts, true)
}

// SplitDst is Split by the destination extent, for a plan whose
// destination is spread over several owners (a WRITE: in the engine a
// WRITE plan's destination is the owner's region). Shard i holds the
// pieces of the ranges landing in [cuts[i], cuts[i+1]), its destination
// extent is that shard (at offset 0), and its source extent is the
// original's. Only the ranges form can be cut this way: a rows plan's
// destination is its layout, not a table.
func (s *Splitter) SplitDst(p *Plan, cuts []uint64) ([]Shard, error) {
	if p != nil && p.Form == FormRows {
		return nil, invalid("Form", "a rows plan is cut by its source (its table), not by its destination")
	}
	return s.split(p, cuts, false)
}

func (s *Splitter) split(p *Plan, cuts []uint64, bySrc bool) ([]Shard, error) {
	if p == nil {
		return nil, invalid("plan", "nil")
	}
	if len(cuts) < 2 {
		return nil, invalid("cuts", "fewer than two (one shard needs its start and end)")
	}
	extent, which := p.SrcExtent, "source"
	if !bySrc {
		extent, which = p.DstExtent, "destination"
	}
	if cuts[0] != 0 || cuts[len(cuts)-1] != extent {
		return nil, invalid("cuts", "must start at 0 and end at the "+which+" extent ("+strconv.FormatUint(extent, 10)+")")
	}
	for i := 1; i < len(cuts); i++ {
		if cuts[i] <= cuts[i-1] {
			return nil, invalid("cuts", "must increase strictly")
		}
	}
	// The checks the engine's Normalize makes, once: a ranges plan is
	// normalized whole (overlap between ranges that land in different
	// shards shows only there); a rows plan's layout overlap follows from
	// its strides alone, and its ids are checked in the split's own pass.
	switch p.Form {
	case FormRanges:
		if err := Normalize(&s.norm, p); err != nil {
			return nil, err
		}
	case FormRows:
		if _, err := p.checkRows(); err != nil {
			return nil, err
		}
		if err := checkEnds(p.CompletionEnds, p.Rows.Len()); err != nil {
			return nil, err
		}
	default:
		return nil, invalid("Form", p.Form.String())
	}
	n := len(cuts) - 1
	if cap(s.shards) < n {
		s.shards = slices.Grow(s.shards[:0], n)
	}
	s.shards = s.shards[:n]
	for i := range s.shards {
		sh := &s.shards[i]
		sh.Bytes, sh.Fragments = 0, 0
		sh.Plan = Plan{Form: p.Form, SrcExtent: cuts[i+1] - cuts[i], DstExtent: p.DstExtent, CompletionEnds: p.CompletionEnds,
			ownRanges: sh.Plan.ownRanges, ownIDs32: sh.Plan.ownIDs32, ownIDs64: sh.Plan.ownIDs64}
		if !bySrc {
			sh.Plan.SrcExtent, sh.Plan.DstExtent = p.SrcExtent, cuts[i+1]-cuts[i]
		}
	}
	if p.Form == FormRanges {
		s.splitRanges(p, cuts, bySrc)
	} else if err := s.splitRows(p, cuts); err != nil {
		return nil, err
	}
	return s.shards, nil
}

// splitRanges cuts each range into its pieces, one per shard it crosses
// (shards of the source extent, or with bySrc false of the destination's).
func (s *Splitter) splitRanges(p *Plan, cuts []uint64, bySrc bool) {
	n := len(p.Ranges)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.Plan.ownRanges = slices.Grow(sh.Plan.ownRanges[:0], n)[:n]
		for j, r := range p.Ranges {
			if bySrc {
				sh.Plan.ownRanges[j] = Range{Dst: r.Dst}
			} else {
				sh.Plan.ownRanges[j] = Range{Src: r.Src}
			}
		}
		sh.Plan.Ranges = sh.Plan.ownRanges
	}
	for j, r := range p.Ranges {
		if r.Len == 0 {
			continue
		}
		at, other := r.Src, r.Dst // the cut side and the other
		if !bySrc {
			at, other = r.Dst, r.Src
		}
		// The shard holding the range's first byte, then the ones after it.
		k, _ := slices.BinarySearch(cuts, at+1)
		k--
		for x, end := at, at+r.Len; x < end; k++ {
			hi := min(end, cuts[k+1])
			sh := &s.shards[k]
			piece := Range{Src: x - cuts[k], Dst: other + (x - at), Len: hi - x}
			if !bySrc {
				piece.Src, piece.Dst = other+(x-at), x-cuts[k]
			}
			sh.Plan.ownRanges[j] = piece
			sh.Bytes += hi - x
			sh.Fragments++
			x = hi
		}
	}
}

// splitRows gives each shard the ids of its rows (rebased to the shard's
// first row) and -1 elsewhere.
func (s *Splitter) splitRows(p *Plan, cuts []uint64) error {
	r := &p.Rows
	n := len(s.shards)
	s.rowLo = slices.Grow(s.rowLo[:0], n)[:n]
	s.rowHi = slices.Grow(s.rowHi[:0], n)[:n]
	for i := range s.shards {
		// Whole rows of the table inside [cuts[i], cuts[i+1]).
		lo, hi := uint64(0), uint64(0)
		if cuts[i+1] > r.SrcBase {
			if cuts[i] > r.SrcBase {
				lo = (cuts[i] - r.SrcBase + r.RowSize - 1) / r.RowSize
			}
			hi = (cuts[i+1] - r.SrcBase) / r.RowSize
		}
		lo, hi = min(lo, r.TableRows), min(hi, r.TableRows)
		if hi < lo {
			hi = lo
		}
		s.rowLo[i], s.rowHi[i] = lo, hi
		sh := &s.shards[i]
		sh.Plan.Rows = Rows{RowSize: r.RowSize, TableRows: hi - lo, DstBase: r.DstBase, Layout: r.Layout}
		if hi > lo {
			sh.Plan.Rows.SrcBase = r.SrcBase + lo*r.RowSize - cuts[i]
		}
	}
	if len(r.IDs64) != 0 {
		return splitIDs(s, r.IDs64, r, func(sh *Shard) *[]int64 { return &sh.Plan.ownIDs64 },
			func(sh *Shard, ids []int64) { sh.Plan.Rows.IDs64 = ids })
	}
	return splitIDs(s, r.IDs32, r, func(sh *Shard) *[]int32 { return &sh.Plan.ownIDs32 },
		func(sh *Shard, ids []int32) { sh.Plan.Rows.IDs32 = ids })
}

// splitIDs checks each id (-1, or a row of the table, as Normalize does)
// and writes it, rebased, into its shard's ids.
func splitIDs[T int32 | int64](s *Splitter, ids []T, r *Rows, own func(*Shard) *[]T, set func(*Shard, []T)) error {
	n := len(ids)
	if n == 0 {
		return nil
	}
	outs := make([][]T, len(s.shards)) // one small slice header per shard
	for i := range s.shards {
		o := own(&s.shards[i])
		*o = slices.Grow((*o)[:0], n)[:n]
		for j := range *o {
			(*o)[j] = -1
		}
		outs[i] = *o
		set(&s.shards[i], *o)
	}
	last := 0 // the shard of the previous id: ids often cluster
	for j, id := range ids {
		if id < 0 || uint64(id) >= r.TableRows {
			if id == -1 {
				continue
			}
			return &BoundsError{Index: j, Field: "id", Off: uint64(int64(id)), Limit: r.TableRows}
		}
		row := uint64(id)
		k := last
		if row < s.rowLo[k] || row >= s.rowHi[k] {
			// The first shard whose end is past the row holds it, unless
			// the row lies across that shard's start.
			k, _ = slices.BinarySearch(s.rowHi, row+1)
			if k == len(s.shards) || row < s.rowLo[k] {
				return invalid("Rows", "id "+strconv.FormatInt(int64(id), 10)+" at index "+strconv.Itoa(j)+
					" names a row across a cut (rows of "+strconv.FormatUint(r.RowSize, 10)+" bytes)")
			}
			last = k
		}
		outs[k][j] = T(row - s.rowLo[k]) // fits: it is at most id
		s.shards[k].Bytes += r.RowSize
		s.shards[k].Fragments++
	}
	return nil
}

package reshard

import (
	"fmt"
	"math"
)

// Copy2D is one strided copy of a reshard between two ranks' memory:
// Rows rows of Width bytes, row i read at SrcOff + i*SrcPitch of rank Src
// and written at DstOff + i*DstPitch of rank Dst. It is the shape of a
// 2-D device copy (cuMemcpy2D: both pitches at least Width), so that a
// device executor moves a strided region with one copy, not one per
// fragment; Rows 1 is a plain copy of Width bytes.
type Copy2D struct {
	Src, Dst           int
	SrcOff, DstOff     int64
	Width, Rows        int64
	SrcPitch, DstPitch int64
}

// Bytes is the copy's payload.
func (c *Copy2D) Bytes() int64 { return c.Width * c.Rows }

// Copies appends to cs the plan's regions lowered to 2-D copies, pair by
// pair in plan order (the pairs keep accepts; nil keeps every pair): in
// each region, dimensions contiguous on both sides merge into the rows'
// width, the innermost dimension left becomes the rows (with the outer
// dimensions that continue it at the same pitch), and each index of the
// dimensions outside that is one copy. A dimension whose pitch is below
// the width on either side (a replicated source read with stride 0, say)
// is not a row of a 2-D copy: its fragments become copies of their own.
// The copies together write exactly the bytes Apply writes, each once
// per fragment; within a pair they are in the regions' order.
//
// Every kept pair is checked first (shapes, overflow, negative offsets),
// and an error appends nothing. The offsets are the ranks' own: bounds
// against their memory are the executor's to check (ApplyCopies does).
func (p *Plan) Copies(cs []Copy2D, keep func(pr *Pair) bool) ([]Copy2D, error) {
	for i := range p.Pairs {
		pr := &p.Pairs[i]
		if keep != nil && !keep(pr) {
			continue
		}
		var x execPair
		if err := measurePair(pr, &x, math.MaxInt64); err != nil {
			return cs, err
		}
		if x.frags > 0 && (x.srcLo < 0 || x.dstLo < 0) {
			return cs, &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: fmt.Sprintf(
				"pair %d->%d reaches source byte %d, destination byte %d: negative", pr.Src, pr.Dst, x.srcLo, x.dstLo)}
		}
	}
	var dims []copyDim
	for i := range p.Pairs {
		pr := &p.Pairs[i]
		if keep != nil && !keep(pr) {
			continue
		}
		for j := range pr.Regions {
			cs, dims = lowerRegion(cs, dims, pr.Src, pr.Dst, &pr.Regions[j])
		}
	}
	return cs, nil
}

// copyDim is one dimension of a region being lowered.
type copyDim struct{ n, src, dst int64 }

// lowerRegion appends rg's copies; dims is scratch.
func lowerRegion(cs []Copy2D, dims []copyDim, src, dst int, rg *Region) ([]Copy2D, []copyDim) {
	dims = dims[:0]
	for l, n := range rg.Counts {
		if n == 0 {
			return cs, dims // no fragment
		}
		if n > 1 {
			dims = append(dims, copyDim{n, rg.SrcStrides[l], rg.DstStrides[l]})
		}
	}
	if rg.Inner == 0 {
		return cs, dims
	}
	width := rg.Inner
	// Innermost dimensions contiguous on both sides widen the rows.
	for k := len(dims) - 1; k >= 0 && dims[k].src == width && dims[k].dst == width; k-- {
		width *= dims[k].n
		dims = dims[:k]
	}
	c := Copy2D{Src: src, Dst: dst, Width: width, Rows: 1}
	if k := len(dims) - 1; k >= 0 && dims[k].src >= width && dims[k].dst >= width {
		// The innermost dimension left is the rows; outer ones that go on
		// at the same pitch (their stride the rows' extent) add rows.
		c.Rows, c.SrcPitch, c.DstPitch = dims[k].n, dims[k].src, dims[k].dst
		dims = dims[:k]
		for k--; k >= 0 && dims[k].src == c.Rows*c.SrcPitch && dims[k].dst == c.Rows*c.DstPitch; k-- {
			c.Rows *= dims[k].n
			dims = dims[:k]
		}
	}
	return emitCopies(cs, dims, c, rg.SrcOff, rg.DstOff), dims
}

// emitCopies appends one copy of shape c for every index of dims, from
// offsets so and do.
func emitCopies(cs []Copy2D, dims []copyDim, c Copy2D, so, do int64) []Copy2D {
	if len(dims) == 0 {
		c.SrcOff, c.DstOff = so, do
		return append(cs, c)
	}
	d := dims[0]
	for range d.n {
		cs = emitCopies(cs, dims[1:], c, so, do)
		so += d.src
		do += d.dst
	}
	return cs
}

// ApplyCopies carries out copies in this process, src(rank) and dst(rank)
// the ranks' memory: the host reference of a device executor. Every copy
// is checked against the lengths first (negative or overflowing shapes,
// bytes past a rank's memory); on an error nothing is written.
func ApplyCopies(cs []Copy2D, src, dst func(rank int) []byte) error {
	for i := range cs {
		c := &cs[i]
		if err := c.check(int64(len(src(c.Src))), int64(len(dst(c.Dst)))); err != nil {
			return fmt.Errorf("copy %d: %w", i, err)
		}
	}
	for i := range cs {
		c := &cs[i]
		s, d := src(c.Src), dst(c.Dst)
		so, do := c.SrcOff, c.DstOff
		for range c.Rows {
			copy(d[do:do+c.Width], s[so:so+c.Width])
			so += c.SrcPitch
			do += c.DstPitch
		}
	}
	return nil
}

// check validates c against a source of srcLen bytes and a destination of
// dstLen bytes.
func (c *Copy2D) check(srcLen, dstLen int64) error {
	bad := func(f string, a ...any) error {
		return &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: fmt.Sprintf(f, a...)}
	}
	if c.Width < 0 || c.Rows < 0 || c.SrcOff < 0 || c.DstOff < 0 || c.SrcPitch < 0 || c.DstPitch < 0 {
		return bad("%+v: negative", *c)
	}
	if c.Width == 0 || c.Rows == 0 {
		return nil
	}
	end := func(off, pitch, limit int64) bool { // off + (Rows-1)*pitch + Width <= limit, without overflow
		if c.Rows-1 > 0 && pitch > (math.MaxInt64-off-c.Width)/(c.Rows-1) {
			return false
		}
		if off > math.MaxInt64-c.Width {
			return false
		}
		return off+(c.Rows-1)*pitch+c.Width <= limit
	}
	if !end(c.SrcOff, c.SrcPitch, srcLen) {
		return bad("%d rows of %d B from source byte %d at pitch %d: past rank %d's %d B", c.Rows, c.Width, c.SrcOff, c.SrcPitch, c.Src, srcLen)
	}
	if !end(c.DstOff, c.DstPitch, dstLen) {
		return bad("%d rows of %d B from destination byte %d at pitch %d: past rank %d's %d B", c.Rows, c.Width, c.DstOff, c.DstPitch, c.Dst, dstLen)
	}
	return nil
}

package planfmt

import (
	"encoding/binary"
	"math"
)

// DecodePlan decodes a plan message (see # Format) into dst under
// DefaultLimits. See Limits.DecodePlan.
func DecodePlan(dst *Plan, b []byte) error {
	return DefaultLimits.DecodePlan(dst, b)
}

// DecodePlan decodes a plan message into dst. It rejects, with a
// *DecodeError, any message that is truncated, oversized for l, of another
// version, fails its checksum, or is inconsistent or non-canonical in any
// field; it validates ids against the table, ranges against the extents and
// a strided layout against overlap. Overlap between ranges is left to
// Normalize, which the owner runs next.
//
// The whole message is validated before dst is touched, so on error dst is
// unchanged. On success dst's ids, ranges and completion ends live in storage
// owned by dst (see Rows for the id type); decoding allocates nothing once
// that storage has grown to the message's size.
func (l Limits) DecodePlan(dst *Plan, b []byte) error {
	lim := l.withDefaults()
	h, err := parseHeader(b, planMagic, &lim)
	if err != nil {
		return err
	}
	d, err := parseBody(b, headerSize, h)
	if err != nil {
		return err
	}
	d.commit(dst, b)
	return nil
}

// bodyDec is a validated plan body, ready to be committed into a Plan.
type bodyDec struct {
	form           Form
	n, g           int
	srcExt, dstExt uint64

	rows  Rows
	shape rowShape

	srcLo, dstLo     uint64
	srcW, dstW, lenW int

	endsOff, dataOff int
}

// parseBody validates the plan body that starts at b[off:] and runs to the
// end of b (the header has already matched len(b) to the length field).
func parseBody(b []byte, off int, h header) (bodyDec, error) {
	le := binary.LittleEndian
	d := bodyDec{form: h.form, n: h.n, g: h.g}
	descSize := rowsDescSize
	if h.form == FormRanges {
		descSize = rangesDescSize
	}
	if len(b)-off < descSize {
		return d, decodeErr(offLength, "length", ErrCorrupt)
	}
	desc := b[off : off+descSize]
	d.srcExt = le.Uint64(desc[0:])
	d.dstExt = le.Uint64(desc[8:])

	// Structure first: widths in range and a length that matches the counts,
	// so that a lying count is reported as such and nothing below reads past
	// the message.
	var recSize int
	if h.form == FormRows {
		width := int(desc[72])
		if width < 1 || width > 8 {
			return d, decodeErr(off+72, "id width", ErrCorrupt)
		}
		recSize = width
	} else {
		d.srcW, d.dstW, d.lenW = int(desc[32]), int(desc[33]), int(desc[34])
		if d.srcW > 8 || d.dstW > 8 || d.lenW > 8 || (h.n > 0 && d.lenW < 1) {
			return d, decodeErr(off+32, "widths", ErrCorrupt)
		}
		recSize = d.srcW + d.dstW + d.lenW
	}
	d.endsOff = off + descSize
	d.dataOff = d.endsOff + h.g*endSize
	if uint64(d.dataOff)+uint64(h.n)*uint64(recSize) != uint64(len(b)) {
		return d, decodeErr(offFragments, "fragments", ErrCorrupt)
	}

	if h.form == FormRows {
		r := &d.rows
		r.RowSize = le.Uint64(desc[16:])
		r.SrcBase = le.Uint64(desc[24:])
		r.TableRows = le.Uint64(desc[32:])
		r.DstBase = le.Uint64(desc[40:])
		r.Layout.Cols = le.Uint64(desc[48:])
		r.Layout.RowStride = le.Uint64(desc[56:])
		r.Layout.ColStride = le.Uint64(desc[64:])
		kind := desc[73]
		if !allZero(desc[74:]) {
			return d, decodeErr(off+74, "reserved", ErrCorrupt)
		}
		if kind > byte(LayoutStrided) {
			return d, decodeErr(off+73, "layout", ErrCorrupt)
		}
		r.Layout.Kind = LayoutKind(kind)
		s, err := checkRowsShape(r, h.n, d.srcExt, d.dstExt)
		if err != nil {
			return d, decodeErr(off, "rows", err)
		}
		if recSize != s.width {
			return d, decodeErr(off+72, "id width", ErrCorrupt)
		}
		d.shape = s
	} else {
		d.srcLo = le.Uint64(desc[16:])
		d.dstLo = le.Uint64(desc[24:])
		if !allZero(desc[35:]) {
			return d, decodeErr(off+35, "reserved", ErrCorrupt)
		}
		if h.n == 0 && (d.srcLo != 0 || d.dstLo != 0 || recSize != 0) {
			return d, decodeErr(off+16, "empty ranges", ErrCorrupt)
		}
	}
	if err := d.checkEnds(b); err != nil {
		return d, err
	}
	if h.form == FormRows {
		return d, d.checkIDs(b)
	}
	return d, d.checkRanges(b)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (d *bodyDec) checkEnds(b []byte) error {
	var prev uint32
	for j := range d.g {
		off := d.endsOff + j*endSize
		e := binary.LittleEndian.Uint32(b[off:])
		if e == 0 || (j > 0 && e <= prev) || uint64(e) > uint64(d.n) {
			return decodeErr(off, "completion end", invalid("CompletionEnds", "ends must be strictly increasing, positive and at most the fragment count"))
		}
		prev = e
	}
	if d.g > 0 && uint64(prev) != uint64(d.n) {
		return decodeErr(d.endsOff+(d.g-1)*endSize, "completion end", invalid("CompletionEnds", "last end must equal the fragment count"))
	}
	return nil
}

func (d *bodyDec) checkIDs(b []byte) error {
	w := d.shape.width
	data := b[d.dataOff:]
	tableRows := d.rows.TableRows
	if scanIDs(data, w) <= tableRows {
		return nil
	}
	i := firstBadEncodedID(data, w, tableRows)
	v := loadUint(data[i*w:], w)
	return decodeErr(d.dataOff+i*w, "id", &BoundsError{Index: i, Field: "id", Off: v, Limit: tableRows})
}

// colOffsets returns where the three columns start in the message.
func (d *bodyDec) colOffsets() (src, dst, lens int) {
	src = d.dataOff
	dst = src + d.n*d.srcW
	return src, dst, dst + d.n*d.dstW
}

// checkRanges validates every range against the extents and checks that the
// columns are encoded canonically (as AppendPlan would have written them).
func (d *bodyDec) checkRanges(b []byte) error {
	srcOff, dstOff, lenOff := d.colOffsets()
	ms, md, ml := widthMask(d.srcW), widthMask(d.dstW), widthMask(d.lenW)
	var (
		nextSrc, nextDst = d.srcLo, d.dstLo
		srcSeq, dstSeq   = true, true
		minS, minD       = uint64(math.MaxUint64), uint64(math.MaxUint64)
		maxS, maxD, maxL uint64
	)
	// Most entries are read with one inlined 8-byte load; the last few of
	// each column, whose 8 bytes would run past the message, take loadCol.
	fastS, fastD, fastL := fastEntries(len(b), srcOff, d.srcW, d.n), fastEntries(len(b), dstOff, d.dstW, d.n),
		fastEntries(len(b), lenOff, d.lenW, d.n)
	for i := range d.n {
		var l uint64
		if i < fastL {
			l = load8(b, lenOff+i*d.lenW, ml)
		} else {
			l = loadCol(b, lenOff+i*d.lenW, d.lenW, ml)
		}
		maxL = max(maxL, l)
		s := nextSrc
		if d.srcW != 0 {
			var rel uint64
			if i < fastS {
				rel = load8(b, srcOff+i*d.srcW, ms)
			} else {
				rel = loadCol(b, srcOff+i*d.srcW, d.srcW, ms)
			}
			minS, maxS = min(minS, rel), max(maxS, rel)
			var ok bool
			if s, ok = add3(d.srcLo, rel, 0); !ok {
				return decodeErr(srcOff+i*d.srcW, "src", &BoundsError{Index: i, Field: "src", Off: math.MaxUint64, Len: l, Limit: d.srcExt})
			}
			srcSeq = srcSeq && s == nextSrc
		}
		se, ok := add3(s, l, 0)
		if !ok || se > d.srcExt {
			return decodeErr(srcOff+i*d.srcW, "src", &BoundsError{Index: i, Field: "src", Off: s, Len: l, Limit: d.srcExt})
		}
		nextSrc = se
		t := nextDst
		if d.dstW != 0 {
			var rel uint64
			if i < fastD {
				rel = load8(b, dstOff+i*d.dstW, md)
			} else {
				rel = loadCol(b, dstOff+i*d.dstW, d.dstW, md)
			}
			minD, maxD = min(minD, rel), max(maxD, rel)
			if t, ok = add3(d.dstLo, rel, 0); !ok {
				return decodeErr(dstOff+i*d.dstW, "dst", &BoundsError{Index: i, Field: "dst", Off: math.MaxUint64, Len: l, Limit: d.dstExt})
			}
			dstSeq = dstSeq && t == nextDst
		}
		te, ok := add3(t, l, 0)
		if !ok || te > d.dstExt {
			return decodeErr(dstOff+i*d.dstW, "dst", &BoundsError{Index: i, Field: "dst", Off: t, Len: l, Limit: d.dstExt})
		}
		nextDst = te
	}
	if d.n == 0 {
		return nil
	}
	if d.srcW != 0 && (srcSeq || minS != 0 || bytesFor(maxS) != d.srcW) {
		return decodeErr(srcOff, "src column", ErrCorrupt)
	}
	if d.dstW != 0 && (dstSeq || minD != 0 || bytesFor(maxD) != d.dstW) {
		return decodeErr(dstOff, "dst column", ErrCorrupt)
	}
	if bytesFor(maxL) != d.lenW {
		return decodeErr(lenOff, "len column", ErrCorrupt)
	}
	return nil
}

// grow returns s resized to n, reallocating only when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// commit writes a validated body into p. It cannot fail.
func (d *bodyDec) commit(p *Plan, b []byte) {
	p.Form = d.form
	p.SrcExtent, p.DstExtent = d.srcExt, d.dstExt
	p.CompletionEnds = nil
	if d.g > 0 {
		p.ownEnds = grow(p.ownEnds, d.g)
		for j := range p.ownEnds {
			p.ownEnds[j] = binary.LittleEndian.Uint32(b[d.endsOff+j*endSize:])
		}
		p.CompletionEnds = p.ownEnds
	}
	if d.form == FormRows {
		p.Ranges = nil
		p.Rows = d.rows
		if d.n == 0 {
			return
		}
		data := b[d.dataOff:]
		if d.rows.TableRows <= math.MaxInt32 {
			p.ownIDs32 = grow(p.ownIDs32, d.n)
			decodeIDs32(p.ownIDs32, data, d.shape.width)
			p.Rows.IDs32 = p.ownIDs32
		} else {
			p.ownIDs64 = grow(p.ownIDs64, d.n)
			decodeIDs64(p.ownIDs64, data, d.shape.width)
			p.Rows.IDs64 = p.ownIDs64
		}
		return
	}
	p.Rows = Rows{}
	p.Ranges = nil
	if d.n == 0 {
		return
	}
	p.ownRanges = grow(p.ownRanges, d.n)
	rs := p.ownRanges
	srcOff, dstOff, lenOff := d.colOffsets()
	ml := widthMask(d.lenW)
	fastL := fastEntries(len(b), lenOff, d.lenW, d.n)
	for i := range rs[:fastL] {
		rs[i].Len = load8(b, lenOff+i*d.lenW, ml)
	}
	for i := fastL; i < len(rs); i++ {
		rs[i].Len = loadCol(b, lenOff+i*d.lenW, d.lenW, ml)
	}
	next := d.srcLo
	ms := widthMask(d.srcW)
	if d.srcW == 0 {
		for i := range rs {
			rs[i].Src = next
			next += rs[i].Len
		}
	} else {
		fastS := fastEntries(len(b), srcOff, d.srcW, d.n)
		for i := range rs[:fastS] {
			rs[i].Src = d.srcLo + load8(b, srcOff+i*d.srcW, ms)
		}
		for i := fastS; i < len(rs); i++ {
			rs[i].Src = d.srcLo + loadCol(b, srcOff+i*d.srcW, d.srcW, ms)
		}
	}
	next = d.dstLo
	md := widthMask(d.dstW)
	if d.dstW == 0 {
		for i := range rs {
			rs[i].Dst = next
			next += rs[i].Len
		}
	} else {
		fastD := fastEntries(len(b), dstOff, d.dstW, d.n)
		for i := range rs[:fastD] {
			rs[i].Dst = d.dstLo + load8(b, dstOff+i*d.dstW, md)
		}
		for i := fastD; i < len(rs); i++ {
			rs[i].Dst = d.dstLo + loadCol(b, dstOff+i*d.dstW, d.dstW, md)
		}
	}
	p.Ranges = rs
}

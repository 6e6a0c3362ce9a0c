package planfmt

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// bodyEnc is what the encoder learns about a plan before writing it: the
// checked row shape, or the ranges' touched windows and column widths.
type bodyEnc struct {
	form  Form
	n, g  int
	shape rowShape

	srcLo, dstLo     uint64
	srcW, dstW, lenW int
}

// prepareBody validates p (except the ids, which the writing loop checks)
// and chooses its encoding.
func prepareBody(p *Plan) (bodyEnc, error) {
	e := bodyEnc{form: p.Form, g: len(p.CompletionEnds)}
	switch p.Form {
	case FormRows:
		s, err := p.checkRows()
		if err != nil {
			return e, err
		}
		e.shape, e.n = s, s.n
	case FormRanges:
		if err := e.prepareRanges(p); err != nil {
			return e, err
		}
	default:
		return e, invalid("Form", "unknown form "+p.Form.String())
	}
	if err := checkEnds(p.CompletionEnds, e.n); err != nil {
		return e, err
	}
	return e, nil
}

// prepareRanges checks bounds and picks the column encoding: a column whose
// offsets follow on from the previous range (offset = previous offset +
// previous length) is stored with width 0; otherwise offsets are stored
// relative to the smallest one, in the fewest bytes that hold the largest.
func (e *bodyEnc) prepareRanges(p *Plan) error {
	rs := p.Ranges
	if uint64(len(rs)) > maxFragments {
		return invalid("Ranges", "more than 2^32-1 ranges")
	}
	e.n = len(rs)
	if len(rs) == 0 {
		return nil
	}
	var (
		minSrc, minDst = uint64(math.MaxUint64), uint64(math.MaxUint64)
		maxSrc, maxDst uint64
		maxLen         uint64
		srcSeq, dstSeq = true, true
		nextSrc        = rs[0].Src
		nextDst        = rs[0].Dst
	)
	for i, r := range rs {
		se, ok := add3(r.Src, r.Len, 0)
		if !ok || se > p.SrcExtent {
			return &BoundsError{Index: i, Field: "src", Off: r.Src, Len: r.Len, Limit: p.SrcExtent}
		}
		de, ok := add3(r.Dst, r.Len, 0)
		if !ok || de > p.DstExtent {
			return &BoundsError{Index: i, Field: "dst", Off: r.Dst, Len: r.Len, Limit: p.DstExtent}
		}
		srcSeq = srcSeq && r.Src == nextSrc
		dstSeq = dstSeq && r.Dst == nextDst
		nextSrc, nextDst = se, de
		minSrc, maxSrc = min(minSrc, r.Src), max(maxSrc, r.Src)
		minDst, maxDst = min(minDst, r.Dst), max(maxDst, r.Dst)
		maxLen = max(maxLen, r.Len)
	}
	e.srcLo, e.srcW = minSrc, bytesFor(maxSrc-minSrc)
	if srcSeq {
		e.srcLo, e.srcW = rs[0].Src, 0
	}
	e.dstLo, e.dstW = minDst, bytesFor(maxDst-minDst)
	if dstSeq {
		e.dstLo, e.dstW = rs[0].Dst, 0
	}
	e.lenW = bytesFor(maxLen)
	return nil
}

// size returns the encoded size of the plan body: descriptor, completion
// ends and fragment data.
func (e *bodyEnc) size() uint64 {
	n := uint64(e.n)
	ends := uint64(e.g) * endSize
	if e.form == FormRows {
		return rowsDescSize + ends + n*uint64(e.shape.width)
	}
	return rangesDescSize + ends + n*uint64(e.srcW+e.dstW+e.lenW)
}

// writeBody writes the body of p into b, which is exactly e.size() bytes.
// It fails only on an invalid row id.
func writeBody(b []byte, p *Plan, e *bodyEnc) error {
	le := binary.LittleEndian
	le.PutUint64(b[0:], p.SrcExtent)
	le.PutUint64(b[8:], p.DstExtent)
	var off int
	if e.form == FormRows {
		r := &p.Rows
		le.PutUint64(b[16:], r.RowSize)
		le.PutUint64(b[24:], r.SrcBase)
		le.PutUint64(b[32:], r.TableRows)
		le.PutUint64(b[40:], r.DstBase)
		le.PutUint64(b[48:], r.Layout.Cols)
		le.PutUint64(b[56:], r.Layout.RowStride)
		le.PutUint64(b[64:], r.Layout.ColStride)
		b[72] = byte(e.shape.width)
		b[73] = byte(r.Layout.Kind)
		clear(b[74:rowsDescSize])
		off = rowsDescSize
	} else {
		le.PutUint64(b[16:], e.srcLo)
		le.PutUint64(b[24:], e.dstLo)
		b[32], b[33], b[34] = byte(e.srcW), byte(e.dstW), byte(e.lenW)
		clear(b[35:rangesDescSize])
		off = rangesDescSize
	}
	for _, end := range p.CompletionEnds {
		le.PutUint32(b[off:], end)
		off += endSize
	}
	data := b[off:]
	if e.form == FormRanges {
		writeRanges(data, p.Ranges, e)
		return nil
	}
	r := &p.Rows
	w := e.shape.width
	if len(r.IDs32) != 0 {
		if encodeIDs(data, r.IDs32, w) > r.TableRows {
			i := firstBadID(r.IDs32, r.TableRows)
			return &BoundsError{Index: i, Field: "id", Off: uint64(int64(r.IDs32[i])), Limit: r.TableRows}
		}
	} else if encodeIDs(data, r.IDs64, w) > r.TableRows {
		i := firstBadID(r.IDs64, r.TableRows)
		return &BoundsError{Index: i, Field: "id", Off: uint64(r.IDs64[i]), Limit: r.TableRows}
	}
	return nil
}

// writeRanges writes the three columns into b, which ends where the message
// ends: source offsets, destination offsets, lengths. Columns and values are
// written in increasing order, which storeCol relies on.
func writeRanges(b []byte, rs []Range, e *bodyEnc) {
	n := len(rs)
	off := 0
	if e.srcW != 0 {
		for i, r := range rs {
			storeCol(b, off+i*e.srcW, r.Src-e.srcLo, e.srcW)
		}
		off += n * e.srcW
	}
	if e.dstW != 0 {
		for i, r := range rs {
			storeCol(b, off+i*e.dstW, r.Dst-e.dstLo, e.dstW)
		}
		off += n * e.dstW
	}
	for i, r := range rs {
		storeCol(b, off+i*e.lenW, r.Len, e.lenW)
	}
}

// EncodedPlanSize returns the number of bytes AppendPlan would append for p,
// or the error it would return for an invalid plan (except an invalid row id,
// which only AppendPlan's pass over the ids finds). It is O(1) for the
// fixed-row form and O(N) for ranges.
func EncodedPlanSize(p *Plan) (int, error) {
	e, err := prepareBody(p)
	if err != nil {
		return 0, err
	}
	return messageSize(headerSize + e.size())
}

func messageSize(n uint64) (int, error) {
	if n > maxMessageBytes {
		return 0, fmt.Errorf("planfmt: encoded message of %d bytes: %w", n, ErrTooLarge)
	}
	return int(n), nil
}

// AppendPlan appends the encoding of p to dst (see # Format in the package
// doc). It validates p as DecodePlan would (bounds, ids, layout overlap,
// completion ends) but not overlap between ranges, which is Normalize's job.
// On error it returns dst unchanged in length and content (bytes past
// len(dst) may have been written).
func AppendPlan(dst []byte, p *Plan) ([]byte, error) {
	e, err := prepareBody(p)
	if err != nil {
		return dst, err
	}
	size, err := messageSize(headerSize + e.size())
	if err != nil {
		return dst, err
	}
	out := slices.Grow(dst, size)
	base := len(dst)
	out = out[:base+size]
	msg := out[base:]
	putHeader(msg, planMagic, p.Form, e.n, e.g)
	if err := writeBody(msg[headerSize:], p, &e); err != nil {
		return dst, err
	}
	seal(msg)
	return out, nil
}

package planfmt

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

var le = binary.LittleEndian

// Offsets of plan body fields for a plan message (body at headerSize).
const (
	bodyOff   = headerSize
	rdRowSize = bodyOff + 16
	rdTable   = bodyOff + 32
	rdCols    = bodyOff + 48
	rdColStr  = bodyOff + 64
	rdWidth   = bodyOff + 72
	rdLayout  = bodyOff + 73
	rdResv    = bodyOff + 74
	rdEnds    = bodyOff + rowsDescSize
)

// sampleRowsPlan: 6 ids as [3, 2] token-major, 2-byte ids, two completion
// spans.
func sampleRowsPlan() *Plan {
	p := rowsPlan(16, 1000, []int64{7, 8, -1, 999, 0, 500},
		Layout{Kind: LayoutStrided, Cols: 2, RowStride: 40, ColStride: 16}, 16000, 200)
	p.Rows.SrcBase = 0
	p.CompletionEnds = []uint32{2, 6}
	return p
}

// sampleRangesPlan: 3 ranges with every column stored.
func sampleRangesPlan() *Plan {
	return rangesPlan(1<<20, 1<<16,
		Range{Src: 5000, Dst: 300, Len: 40},
		Range{Src: 100, Dst: 1000, Len: 300},
		Range{Src: 70000, Dst: 100, Len: 8})
}

func sampleCommand() *Command {
	return &Command{OpID: 42, Dir: Read, Chunk: 1 << 16, Pipeline: 4, Flags: FlagSpanEvents,
		Src: Window{Key: 7, Off: 4096, Len: 16000}, Dst: Window{Key: 9, Off: 0, Len: 200},
		Plan: *sampleRowsPlan()}
}

func mustAppendPlan(t *testing.T, p *Plan) []byte {
	t.Helper()
	b, err := AppendPlan(nil, p)
	require.NoError(t, err)
	return b
}

// rawRanges builds a ranges plan message with arbitrary descriptor values,
// for the non-canonical cases the encoder never writes.
func rawRanges(srcExt, dstExt, srcLo, dstLo uint64, srcW, dstW, lenW int, srcs, dsts, lens []uint64) []byte {
	n := len(lens)
	b := make([]byte, headerSize+rangesDescSize+n*(srcW+dstW+lenW))
	putHeader(b, planMagic, FormRanges, n, 0)
	d := b[headerSize:]
	le.PutUint64(d[0:], srcExt)
	le.PutUint64(d[8:], dstExt)
	le.PutUint64(d[16:], srcLo)
	le.PutUint64(d[24:], dstLo)
	d[32], d[33], d[34] = byte(srcW), byte(dstW), byte(lenW)
	data := d[rangesDescSize:]
	for i := range n {
		if srcW > 0 {
			putUint(data[i*srcW:], srcs[i], srcW)
		}
		if dstW > 0 {
			putUint(data[n*srcW+i*dstW:], dsts[i], dstW)
		}
		putUint(data[n*(srcW+dstW)+i*lenW:], lens[i], lenW)
	}
	seal(b)
	return b
}

func TestDecodeTruncatedEverywhere(t *testing.T) {
	cmdBytes, err := AppendCommand(nil, sampleCommand())
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		b      []byte
		decode func([]byte) error
	}{
		{"rows plan", mustAppendPlan(t, sampleRowsPlan()), func(b []byte) error { return DecodePlan(&Plan{}, b) }},
		{"ranges plan", mustAppendPlan(t, sampleRangesPlan()), func(b []byte) error { return DecodePlan(&Plan{}, b) }},
		{"command", cmdBytes, func(b []byte) error { return DecodeCommand(&Command{}, b) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.decode(tc.b))
			for k := range len(tc.b) {
				err := tc.decode(tc.b[:k])
				require.ErrorIs(t, err, ErrTruncated, "cut at %d of %d", k, len(tc.b))
				var de *DecodeError
				require.ErrorAs(t, err, &de)
				require.Equal(t, k, de.Offset)
			}
		})
	}
}

func TestDecodePlanRejects(t *testing.T) {
	rows := mustAppendPlan(t, sampleRowsPlan())
	ranges := mustAppendPlan(t, sampleRangesPlan())
	idOff := rdEnds + 2*endSize // first id of the rows sample
	tests := []struct {
		name   string
		base   []byte
		mut    func(b []byte) []byte
		reseal bool
		limits Limits
		is     error
		field  string
		offset int // checked when field is set
	}{
		{name: "trailing byte", base: rows, mut: func(b []byte) []byte {
			b = append(b, 0)
			le.PutUint32(b[offLength:], uint32(len(b)-1))
			return b
		}, is: ErrCorrupt, field: "length", offset: len(rows)},
		{name: "bad magic", base: rows, mut: func(b []byte) []byte { b[0] = 'X'; return b }, is: ErrCorrupt, field: "magic", offset: 0},
		{name: "short garbage", base: rows, mut: func(b []byte) []byte { return []byte("nope, not a plan") }, is: ErrCorrupt, field: "magic"},
		{name: "command magic", base: rows, mut: func(b []byte) []byte { copy(b, commandMagic[:]); return b }, reseal: true, is: ErrCorrupt, field: "magic"},
		{name: "version 2", base: rows, mut: func(b []byte) []byte { b[offVersion] = 2; return b }, reseal: true, is: ErrVersion, field: "version", offset: offVersion},
		{name: "version 0", base: rows, mut: func(b []byte) []byte { b[offVersion] = 0; return b }, is: ErrVersion},
		{name: "crc field flipped", base: rows, mut: func(b []byte) []byte { b[offCRC] ^= 1; return b }, is: ErrChecksum, field: "crc32c", offset: offCRC},
		{name: "payload bit flipped", base: rows, mut: func(b []byte) []byte { b[len(b)-1] ^= 0x10; return b }, is: ErrChecksum},
		{name: "header flags", base: rows, mut: func(b []byte) []byte { b[offFlags+1] = 1; return b }, reseal: true, is: ErrCorrupt, field: "flags"},
		{name: "unknown form", base: rows, mut: func(b []byte) []byte { b[offForm] = 3; return b }, reseal: true, is: ErrCorrupt, field: "form"},
		{name: "ranges form on rows body", base: rows, mut: func(b []byte) []byte { b[offForm] = byte(FormRanges); return b }, reseal: true, is: ErrCorrupt},
		{name: "fragment count too high", base: rows, mut: func(b []byte) []byte { le.PutUint32(b[offFragments:], 7); return b }, reseal: true, is: ErrCorrupt, field: "fragments"},
		{name: "fragment count too low", base: rows, mut: func(b []byte) []byte { le.PutUint32(b[offFragments:], 5); return b }, reseal: true, is: ErrCorrupt, field: "fragments"},
		{name: "fragment count huge", base: rows, mut: func(b []byte) []byte { le.PutUint32(b[offFragments:], math.MaxUint32); return b }, reseal: true, is: ErrTooLarge, field: "fragments"},
		{name: "completion count lies", base: rows, mut: func(b []byte) []byte { le.PutUint32(b[offGroups:], 3); return b }, reseal: true, is: ErrCorrupt, field: "fragments"},
		{name: "completion count huge", base: rows, mut: func(b []byte) []byte { le.PutUint32(b[offGroups:], 1<<30); return b }, reseal: true, is: ErrTooLarge, field: "completions"},
		{name: "length field huge", base: rows, mut: func(b []byte) []byte { le.PutUint32(b[offLength:], math.MaxUint32); return b }, is: ErrTooLarge, field: "length"},
		{name: "length field short", base: rows, mut: func(b []byte) []byte { le.PutUint32(b[offLength:], 30); return b }, reseal: true, is: ErrCorrupt, field: "length"},
		{name: "over fragment limit", base: rows, limits: Limits{MaxFragments: 5}, is: ErrTooLarge, field: "fragments"},
		{name: "over message limit", base: rows, limits: Limits{MaxMessageBytes: 100}, is: ErrTooLarge, field: "length"},
		{name: "over completion limit", base: rows, limits: Limits{MaxCompletions: 1}, is: ErrTooLarge, field: "completions"},
		{name: "id equals table rows", base: rows, mut: func(b []byte) []byte { le.PutUint16(b[idOff+3*2:], 1000); return b }, reseal: true, is: ErrBounds, field: "id", offset: idOff + 3*2},
		{name: "id just under all-ones", base: rows, mut: func(b []byte) []byte { le.PutUint16(b[idOff+5*2:], 0xfffe); return b }, reseal: true, is: ErrBounds, field: "id", offset: idOff + 5*2},
		{name: "id width over 8", base: rows, mut: func(b []byte) []byte { b[rdWidth] = 9; return b }, reseal: true, is: ErrCorrupt, field: "id width"},
		{name: "id width zero", base: rows, mut: func(b []byte) []byte { b[rdWidth] = 0; return b }, reseal: true, is: ErrCorrupt, field: "id width"},
		{name: "id width disagrees with length", base: rows, mut: func(b []byte) []byte { b[rdWidth] = 3; return b }, reseal: true, is: ErrCorrupt, field: "fragments"},
		{name: "id width wider than the table needs", base: rows, mut: func(b []byte) []byte { le.PutUint64(b[rdTable:], 255); return b }, reseal: true, is: ErrCorrupt, field: "id width", offset: rdWidth},
		{name: "id width narrower than the table needs", base: rows, mut: func(b []byte) []byte {
			le.PutUint64(b[rdTable:], 70000)
			le.PutUint64(b[bodyOff:], 70000*16)
			return b
		}, reseal: true, is: ErrCorrupt, field: "id width", offset: rdWidth},
		{name: "reserved rows byte", base: rows, mut: func(b []byte) []byte { b[rdResv+5] = 1; return b }, reseal: true, is: ErrCorrupt, field: "reserved"},
		{name: "unknown layout", base: rows, mut: func(b []byte) []byte { b[rdLayout] = 2; return b }, reseal: true, is: ErrCorrupt, field: "layout"},
		{name: "layout overlap", base: rows, mut: func(b []byte) []byte { le.PutUint64(b[rdColStr:], 8); return b }, reseal: true, is: ErrOverlap, field: "rows"},
		{name: "cols do not divide", base: rows, mut: func(b []byte) []byte { le.PutUint64(b[rdCols:], 4); return b }, reseal: true, is: ErrInvalid, field: "rows"},
		{name: "zero row size", base: rows, mut: func(b []byte) []byte { le.PutUint64(b[rdRowSize:], 0); return b }, reseal: true, is: ErrInvalid, field: "rows"},
		{name: "table past extent", base: rows, mut: func(b []byte) []byte { le.PutUint64(b[rdTable:], 1001); return b }, reseal: true, is: ErrBounds, field: "rows"},
		{name: "layout past extent", base: rows, mut: func(b []byte) []byte { le.PutUint64(b[bodyOff+8:], 111); return b }, reseal: true, is: ErrBounds, field: "rows"},
		{name: "completion ends not increasing", base: rows, mut: func(b []byte) []byte { le.PutUint32(b[rdEnds:], 6); return b }, reseal: true, is: ErrInvalid, field: "completion end", offset: rdEnds + endSize},
		{name: "completion end zero", base: rows, mut: func(b []byte) []byte { le.PutUint32(b[rdEnds:], 0); return b }, reseal: true, is: ErrInvalid, field: "completion end", offset: rdEnds},
		{name: "completion ends stop short", base: rows, mut: func(b []byte) []byte { le.PutUint32(b[rdEnds+endSize:], 5); return b }, reseal: true, is: ErrInvalid, field: "completion end"},
		{name: "completion end past n", base: rows, mut: func(b []byte) []byte { le.PutUint32(b[rdEnds+endSize:], 9); return b }, reseal: true, is: ErrInvalid, field: "completion end"},

		{name: "range src past extent", base: ranges, mut: func(b []byte) []byte { le.PutUint64(b[bodyOff:], 70007); return b }, reseal: true, is: ErrBounds, field: "src"},
		{name: "range dst past extent", base: ranges, mut: func(b []byte) []byte { le.PutUint64(b[bodyOff+8:], 1299); return b }, reseal: true, is: ErrBounds, field: "dst"},
		{name: "ranges reserved", base: ranges, mut: func(b []byte) []byte { b[bodyOff+39] = 1; return b }, reseal: true, is: ErrCorrupt, field: "reserved"},
		{name: "ranges width over 8", base: ranges, mut: func(b []byte) []byte { b[bodyOff+32] = 9; return b }, reseal: true, is: ErrCorrupt, field: "widths"},
		{name: "ranges zero length width", base: ranges, mut: func(b []byte) []byte { b[bodyOff+34] = 0; return b }, reseal: true, is: ErrCorrupt, field: "widths"},
		{name: "src lo not the minimum", base: rawRanges(1000, 1000, 10, 0, 1, 1, 1, []uint64{5, 9}, []uint64{0, 50}, []uint64{4, 4}), is: ErrCorrupt, field: "src column"},
		{name: "src width not minimal", base: rawRanges(1000, 1000, 10, 0, 2, 1, 1, []uint64{0, 9}, []uint64{0, 50}, []uint64{4, 4}), is: ErrCorrupt, field: "src column"},
		{name: "src stored though sequential", base: rawRanges(1000, 1000, 10, 0, 1, 1, 1, []uint64{0, 4}, []uint64{0, 50}, []uint64{4, 4}), is: ErrCorrupt, field: "src column"},
		{name: "dst width not minimal", base: rawRanges(1000, 1000, 0, 0, 1, 3, 1, []uint64{0, 9}, []uint64{0, 50}, []uint64{4, 4}), is: ErrCorrupt, field: "dst column"},
		{name: "len width not minimal", base: rawRanges(1000, 1000, 0, 0, 1, 1, 2, []uint64{0, 9}, []uint64{0, 50}, []uint64{4, 4}), is: ErrCorrupt, field: "len column"},
		{name: "src lo plus offset wraps", base: rawRanges(math.MaxUint64, 1000, math.MaxUint64-2, 0, 1, 1, 1, []uint64{0, 9}, []uint64{0, 50}, []uint64{1, 1}), is: ErrBounds, field: "src"},
		{name: "sequential src runs past extent", base: rawRanges(10, 1000, 5, 0, 0, 1, 1, nil, []uint64{0, 50}, []uint64{4, 4}), is: ErrBounds, field: "src"},
		{name: "empty ranges with a base", base: rawRanges(10, 10, 1, 0, 0, 0, 0, nil, nil, nil), is: ErrCorrupt, field: "empty ranges"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), tc.base...)
			if tc.mut != nil {
				b = tc.mut(b)
			}
			if tc.reseal {
				seal(b)
			}
			// Decode into a plan holding a previous result: it must survive.
			var p Plan
			require.NoError(t, DecodePlan(&p, ranges))
			before := viewOf(&p)
			err := tc.limits.DecodePlan(&p, b)
			require.ErrorIs(t, err, tc.is)
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			if tc.field != "" {
				require.Equal(t, tc.field, de.Field, err.Error())
			}
			if tc.offset != 0 {
				require.Equal(t, tc.offset, de.Offset, err.Error())
			}
			require.NotEmpty(t, err.Error())
			require.Equal(t, before, viewOf(&p), "a failed decode must leave dst unchanged")
		})
	}
}

func TestDecodeCommandRejects(t *testing.T) {
	good, err := AppendCommand(nil, sampleCommand())
	require.NoError(t, err)
	const f = headerSize // command fields start here
	tests := []struct {
		name   string
		mut    func(b []byte) []byte
		limits Limits
		is     error
		field  string
	}{
		{name: "plan magic", mut: func(b []byte) []byte { copy(b, planMagic[:]); return b }, is: ErrCorrupt, field: "magic"},
		{name: "zero direction", mut: func(b []byte) []byte { b[f+72] = 0; return b }, is: ErrCorrupt, field: "direction"},
		{name: "unknown direction", mut: func(b []byte) []byte { b[f+72] = 3; return b }, is: ErrCorrupt, field: "direction"},
		{name: "reserved byte", mut: func(b []byte) []byte { b[f+79] = 1; return b }, is: ErrCorrupt, field: "reserved"},
		{name: "unknown command flag", mut: func(b []byte) []byte { le.PutUint32(b[f+68:], 1<<31); return b }, is: ErrCorrupt, field: "command flags"},
		{name: "zero chunk", mut: func(b []byte) []byte { le.PutUint64(b[f+56:], 0); return b }, is: ErrCorrupt, field: "chunk"},
		{name: "chunk over limit", mut: func(b []byte) []byte { le.PutUint64(b[f+56:], 1<<40); return b }, is: ErrTooLarge, field: "chunk"},
		{name: "chunk over custom limit", limits: Limits{MaxChunkBytes: 1 << 10}, is: ErrTooLarge, field: "chunk"},
		{name: "zero pipeline", mut: func(b []byte) []byte { le.PutUint32(b[f+64:], 0); return b }, is: ErrCorrupt, field: "pipeline"},
		{name: "pipeline over limit", mut: func(b []byte) []byte { le.PutUint32(b[f+64:], 1<<20); return b }, is: ErrTooLarge, field: "pipeline"},
		{name: "src window wraps", mut: func(b []byte) []byte { le.PutUint64(b[f+16:], math.MaxUint64-100); return b }, is: ErrCorrupt, field: "src window"},
		{name: "dst window wraps", mut: func(b []byte) []byte { le.PutUint64(b[f+40:], math.MaxUint64); return b }, is: ErrCorrupt, field: "dst window"},
		{name: "src extent differs from window", mut: func(b []byte) []byte { le.PutUint64(b[f+24:], 16001); return b }, is: ErrCorrupt, field: "plan extents"},
		{name: "dst extent differs from window", mut: func(b []byte) []byte { le.PutUint64(b[f+48:], 300); return b }, is: ErrCorrupt, field: "plan extents"},
		{name: "id out of table", mut: func(b []byte) []byte {
			le.PutUint16(b[headerSize+commandSize+rowsDescSize+2*endSize:], 1000)
			return b
		}, is: ErrBounds, field: "id"},
		{name: "body shorter than command fields", mut: func(b []byte) []byte {
			b = b[:headerSize+10]
			le.PutUint32(b[offLength:], uint32(len(b)))
			le.PutUint32(b[offFragments:], 0)
			le.PutUint32(b[offGroups:], 0)
			return b
		}, is: ErrCorrupt, field: "length"},
		{name: "body shorter than descriptor", mut: func(b []byte) []byte {
			b = b[:headerSize+commandSize+10]
			le.PutUint32(b[offLength:], uint32(len(b)))
			return b
		}, is: ErrCorrupt, field: "length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), good...)
			if tc.mut != nil {
				b = tc.mut(b)
				seal(b)
			}
			var c Command
			require.NoError(t, DecodeCommand(&c, good))
			before, beforePlan := c, viewOf(&c.Plan)
			err := tc.limits.DecodeCommand(&c, b)
			require.ErrorIs(t, err, tc.is)
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			require.Equal(t, tc.field, de.Field, err.Error())
			require.Equal(t, beforePlan, viewOf(&c.Plan))
			c.Plan, before.Plan = Plan{}, Plan{}
			require.Equal(t, before, c, "a failed decode must leave dst unchanged")
		})
	}
}

func TestErrorMessages(t *testing.T) {
	errs := []error{
		&InvalidError{Field: "Rows.RowSize", Reason: "must be at least 1"},
		&BoundsError{Index: 3, Field: "id", Off: uint64(1<<64 - 2), Limit: 10},
		&BoundsError{Index: -1, Field: "dst", Off: 5, Len: 10, Limit: 12},
		&OverlapError{First: 1, Second: 2, FirstDst: 0, FirstLen: 8, SecondDst: 4, SecondLen: 8},
		&DecodeError{Offset: 12, Field: "crc32c", Err: ErrChecksum},
	}
	want := []string{
		"planfmt: invalid Rows.RowSize: must be at least 1",
		"planfmt: fragment 3: row id -2 outside table of 10 rows",
		"planfmt: plan: dst [5, +10) outside extent 12",
		"planfmt: fragment 1 dst [0, +8) overlaps fragment 2 dst [4, +8)",
		"planfmt: decode crc32c at offset 12: planfmt: checksum mismatch",
	}
	for i, err := range errs {
		require.Equal(t, want[i], err.Error())
		require.NotNil(t, errors.Unwrap(err))
	}
}

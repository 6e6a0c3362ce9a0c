package pack

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fuzz targets run every generated loop and the any-size loop on the
// same request and require the same bytes, plus the oracle's. Seeds live in
// testdata/fuzz/<target>/.

const fuzzTableRows = 33

// fuzzTable is shared by all inputs: 33 rows of the largest specialized
// size plus a partial row, filled once with a non-zero pattern.
var fuzzTable = func() []byte {
	maxRow := specializedRowBytes[len(specializedRowBytes)-1]
	b := make([]byte, fuzzTableRows*maxRow+maxRow-1)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}()

// fuzzRequest decodes a fuzz input into a layout and ids. Id bytes map to
// table rows (byte % 33), except 255, the skip id -1, and 254, an id past
// the table, so most inputs are valid and some are not.
type fuzzRequest struct {
	l   Layout
	raw []byte
}

func newFuzzRequest(size, rows, pad, idStride, off uint8, bias int8, raw []byte) fuzzRequest {
	rowBytes := specializedRowBytes[int(size)%len(specializedRowBytes)]
	l := Layout{
		Rows:     int(rows) % 48,
		RowBytes: rowBytes,
		Stride:   rowBytes,
		IDStride: 1,
		Off:      int(off) % 17,
		Bias:     int64(bias),
	}
	if pad%3 != 0 {
		l.Stride += int(pad) % 37
	}
	if idStride%2 != 0 {
		l.IDStride += int(idStride) % 4
	}
	return fuzzRequest{l: l, raw: raw}
}

// ids returns the request's ids; with distinct set, an id naming a row an
// earlier id names becomes -1.
func fuzzIDs[I ID](q fuzzRequest, distinct bool) []I {
	n := 0
	if q.l.Rows > 0 {
		n = (q.l.Rows-1)*q.l.IDStride + 1
	}
	ids := make([]I, n)
	var seen [fuzzTableRows]bool
	for j := range ids {
		var b byte = byte(j * 31)
		if len(q.raw) > 0 {
			b = q.raw[j%len(q.raw)] + byte(j/len(q.raw))
		}
		switch {
		case b == 255:
			ids[j] = -1
		case b == 254:
			ids[j] = I(fuzzTableRows + q.l.Bias)
		default:
			row := int(b) % fuzzTableRows
			if distinct && j%q.l.IDStride == 0 {
				if seen[row] {
					ids[j] = -1
					continue
				}
				seen[row] = true
			}
			ids[j] = I(int64(row) + q.l.Bias)
		}
	}
	return ids
}

// fuzzPoison returns n bytes of a pattern derived from seed, never all zero.
func fuzzPoison(n int, seed []byte) []byte {
	x := uint64(len(seed))*0x2545f4914f6cdd1d | 1
	for _, b := range seed {
		x = x*0x100000001b3 ^ uint64(b)
	}
	out := make([]byte, n)
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		out[i] = byte(x) | 1
	}
	return out
}

func FuzzGatherAgainstGeneric(f *testing.F) {
	f.Fuzz(func(t *testing.T, size uint8, wide bool, rows, pad, idStride, off uint8, bias int8, raw []byte) {
		q := newFuzzRequest(size, rows, pad, idStride, off, bias, raw)
		if wide {
			fuzzGather[int64](t, q)
		} else {
			fuzzGather[int32](t, q)
		}
	})
}

func fuzzGather[I ID](t *testing.T, q fuzzRequest) {
	ids := fuzzIDs[I](q, false)
	table := fuzzTable[:fuzzTableRows*q.l.RowBytes+len(q.raw)%q.l.RowBytes]
	poison := fuzzPoison(packedLen(q.l), q.raw)

	l, err := checkLinear(poison, table, ids, q.l, false)
	if err != nil {
		dst := bytes.Clone(poison)
		gerr := Gather(dst, table, ids, q.l)
		require.Error(t, gerr)
		require.Equal(t, err.Error(), gerr.Error())
		var idErr *IDError
		require.ErrorAs(t, gerr, &idErr, "only ids can be wrong in a fuzzed request")
		requireSameBytes(t, poison, dst, "rejected gather")
		return
	}
	if l.Rows == 0 {
		return
	}
	spec, generic, want := bytes.Clone(poison), bytes.Clone(poison), bytes.Clone(poison)
	refGather(want, table, ids, l)

	ts := linearTask(spec, table, ids, l, false)
	ts.run()
	tg := linearTask(generic, table, ids, l, false)
	tg.anyRow = true
	tg.run()
	requireSameBytes(t, generic, spec, "generated loop against the any-size loop")
	requireSameBytes(t, want, spec, "generated loop against the oracle")
}

func FuzzScatterAgainstGeneric(f *testing.F) {
	f.Fuzz(func(t *testing.T, size uint8, wide bool, rows, pad, idStride, off uint8, bias int8, raw []byte) {
		q := newFuzzRequest(size, rows, pad, idStride, off, bias, raw)
		if wide {
			fuzzScatter[int64](t, q)
		} else {
			fuzzScatter[int32](t, q)
		}
	})
}

func fuzzScatter[I ID](t *testing.T, q fuzzRequest) {
	ids := fuzzIDs[I](q, true)
	base := fuzzTable[:fuzzTableRows*q.l.RowBytes+len(q.raw)%q.l.RowBytes]
	src := fuzzPoison(packedLen(q.l), q.raw)

	l, err := checkLinear(src, base, ids, q.l, true)
	if err != nil {
		table := bytes.Clone(base)
		serr := Scatter(table, src, ids, q.l)
		require.Error(t, serr)
		require.Equal(t, err.Error(), serr.Error())
		var idErr *IDError
		require.True(t, errors.As(serr, &idErr) && errors.Is(serr, ErrBounds), "only ids past the table can be wrong: %v", serr)
		requireSameBytes(t, base, table, "rejected scatter")
		return
	}
	if l.Rows == 0 {
		return
	}
	spec, generic, want := bytes.Clone(base), bytes.Clone(base), bytes.Clone(base)
	refScatter(want, src, ids, l)

	ts := linearTask(src, spec, ids, l, true)
	ts.run()
	tg := linearTask(src, generic, ids, l, true)
	tg.anyRow = true
	tg.run()
	requireSameBytes(t, generic, spec, "generated loop against the any-size loop")
	requireSameBytes(t, want, spec, "generated loop against the oracle")
}

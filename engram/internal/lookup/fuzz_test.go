package lookup

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzLookup decodes a lookup from the input (row size, shape, layout,
// which table and offset each column reads, ids), decides with brute-force
// oracles whether it is valid, and requires Check and Lookup (serial and
// split) to agree: the oracle's bytes when valid, the right error and an
// untouched output when not. Seeds live in testdata/fuzz/FuzzLookup/.
func FuzzLookup(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		q, ok := decodeFuzz(data)
		if !ok {
			return
		}
		if q.wide {
			fuzzOne(t, q, q.ids64)
		} else {
			fuzzOne(t, q, q.ids32)
		}
	})
}

// fuzzRowBytes are the row sizes the fuzzer picks from: generated loops
// and odd sizes.
var fuzzRowBytes = [...]int{1, 5, 64, 128, 264, 300, 4096}

const fuzzTableRows = 12

// fuzzTables are shared by all inputs: three tables of fuzzTableRows rows
// of the largest fuzz row size (a smaller R sees more rows), non-zero.
var fuzzTables = func() [3][]byte {
	var ts [3][]byte
	x := uint64(0x9e3779b97f4a7c15)
	for i := range ts {
		ts[i] = make([]byte, fuzzTableRows*4096)
		for j := range ts[i] {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			ts[i][j] = byte(x) | 1
		}
	}
	return ts
}()

// fuzzOffsets are the offsets a column may take: small, negative, and
// near the int64 limits (where id - offset overflows).
var fuzzOffsets = [...]int64{0, 7, -3, 1 << 33, -1 << 40, 1<<63 - 5}

type fuzzCase struct {
	t, k  int
	cols  []Column
	wide  bool
	ids32 []int32
	ids64 []int64
	out   Output
}

// input is a cursor over the fuzz bytes; past the end it reads zeros.
type input struct{ b []byte }

func (in *input) next() int {
	if len(in.b) == 0 {
		return 0
	}
	v := in.b[0]
	in.b = in.b[1:]
	return int(v)
}

func decodeFuzz(data []byte) (fuzzCase, bool) {
	in := &input{b: data}
	var q fuzzCase
	rowBytes := fuzzRowBytes[in.next()%len(fuzzRowBytes)]
	q.t, q.k = in.next()%9, in.next()%9
	flags := in.next()
	q.wide = flags&1 != 0
	switch (flags >> 1) % 5 {
	case 0:
		q.out = TokenMajor(nil, q.t, q.k, rowBytes)
	case 1:
		q.out = HeadMajor(nil, q.t, q.k, rowBytes)
	case 2:
		q.out = Output{Off: in.next() % 17, KStride: rowBytes + in.next()%5, TStride: q.k*rowBytes + in.next()%300}
	default: // any strides near multiples of the row size, often invalid
		q.out = Output{Off: in.next() % 17, TStride: in.next()%9*rowBytes + in.next()%7 - 3, KStride: in.next()%9*rowBytes + in.next()%7 - 3}
	}
	size := q.out.Off + rowBytes
	if q.t > 0 && q.k > 0 {
		size += max(0, (q.t-1)*q.out.TStride) + max(0, (q.k-1)*q.out.KStride)
	}
	size += in.next()%5 - 2 // sometimes one or two bytes short
	size = max(0, size)
	q.out.Buf = make([]byte, size)
	for i := range q.out.Buf {
		q.out.Buf[i] = byte(i*7 + 3)
	}
	maxRows := len(fuzzTables[0]) / rowBytes
	for range q.k {
		pick := in.next()
		rows := min(maxRows, 1+(pick>>2)%fuzzTableRows)
		if pick>>6 == 3 {
			rows = 0
		}
		q.cols = append(q.cols, Column{
			Rows: fuzzTables[pick%3], NumRows: int64(rows), RowBytes: rowBytes,
			Offset: fuzzOffsets[in.next()%len(fuzzOffsets)],
		})
	}
	if flags&0x80 != 0 && q.k > 1 { // a column with another row size
		q.cols[q.k-1].RowBytes = fuzzRowBytes[(flags>>4)%len(fuzzRowBytes)]
	}
	for i := range q.t * q.k {
		c := q.cols[i%q.k]
		v := in.next()
		var id int64
		switch {
		case v == 255:
			id = -1
		case v == 254:
			id = c.Offset + c.NumRows // one past the table
		case v == 253:
			id = c.Offset - 1
		case c.NumRows == 0:
			id = -1
		default:
			id = c.Offset + int64(v)%c.NumRows
		}
		if !q.wide && int64(int32(id)) != id {
			id = -1
		}
		q.ids64 = append(q.ids64, id)
		q.ids32 = append(q.ids32, int32(id))
	}
	return q, true
}

// fuzzExpect is the oracle's verdict: nil or the sentinel error.
func fuzzExpect[I interface{ ~int32 | ~int64 }](q fuzzCase, ids []I) error {
	if q.k == 0 {
		return nil
	}
	rowBytes := q.cols[0].RowBytes
	for _, c := range q.cols {
		if c.RowBytes != rowBytes {
			return ErrRowBytes
		}
	}
	if q.t == 0 {
		return nil
	}
	o := q.out
	ts, ks := o.TStride, o.KStride
	if q.t == 1 {
		ts = 0
	}
	if q.k == 1 {
		ks = 0
	}
	if ts < 0 || ks < 0 || o.Off+(q.t-1)*ts+(q.k-1)*ks+rowBytes > len(o.Buf) || overlapsBrute(q.t, ts, q.k, ks, rowBytes) {
		return ErrOutput
	}
	for i, id := range ids {
		c := q.cols[i%q.k]
		v := int64(id)
		if v == -1 {
			continue
		}
		// row = v - Offset without overflow, in [0, NumRows)
		if (c.Offset >= 0 && v < c.Offset) || (c.Offset < 0 && v >= c.Offset+c.NumRows) ||
			v-c.Offset < 0 || v-c.Offset >= c.NumRows {
			return ErrID
		}
	}
	return nil
}

func fuzzOne[I interface{ ~int32 | ~int64 }](t *testing.T, q fuzzCase, ids []I) {
	want := fuzzExpect(q, ids)
	err := Check(q.cols, ids, q.t, q.k, q.out)
	if want == nil {
		require.NoError(t, err)
	} else {
		require.ErrorIs(t, err, want)
	}
	expect := append([]byte(nil), q.out.Buf...)
	if want == nil {
		refLookup(q.cols, ids, q.t, q.k, Output{Buf: expect, Off: q.out.Off, TStride: q.out.TStride, KStride: q.out.KStride})
	}
	split := NewEngine(2)
	split.minRows = 2
	defer split.Close()
	for _, e := range []*Engine{nil, split} {
		got := q.out
		got.Buf = append([]byte(nil), q.out.Buf...)
		lerr := Lookup(e, q.cols, ids, q.t, q.k, got)
		if !errors.Is(lerr, want) || (want == nil) != (lerr == nil) {
			t.Fatalf("Lookup: %v, want %v", lerr, want)
		}
		requireSameBytes(t, expect, got.Buf, "output")
	}
}

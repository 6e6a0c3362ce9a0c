package pack

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// testRowSizes are the specialized sizes and odd ones around them.
var testRowSizes = append(slices.Clone(specializedRowBytes[:]), 1, 7, 263, 265, 3000)

// linearCase is a 1-D layout shape, scaled to a row size by layout.
type linearCase struct {
	name      string
	pad       int   // Stride = RowBytes + pad; -1 leaves Stride zero
	idStride  int   // 0 leaves IDStride zero
	off       int   // Off
	bias      int64 // Bias
	skipEvery int   // about one id in skipEvery is -1
	column    int   // >0: gather column 1 of a [rows, column] id array into a token-major output
}

var linearCases = []linearCase{
	{name: "dense", pad: -1},
	{name: "dense-explicit", pad: 0, idStride: 1},
	{name: "strided", pad: 13, idStride: 3, off: 5},
	{name: "bias", pad: -1, bias: 1000},
	{name: "negative-bias", pad: 0, bias: -70, off: 3},
	{name: "skip", pad: -1, skipEvery: 3},
	{name: "strided-skip-bias", pad: 1, idStride: 2, bias: 77, skipEvery: 4, off: 1},
	{name: "token-major-column", column: 4, skipEvery: 5},
}

// layout returns the case's layout for rows rows of rowBytes bytes.
func (c linearCase) layout(rows, rowBytes int) Layout {
	l := Layout{Rows: rows, RowBytes: rowBytes, Off: c.off, IDStride: c.idStride, Bias: c.bias}
	if c.pad >= 0 {
		l.Stride = rowBytes + c.pad
	}
	if c.column > 0 {
		l.IDStride = c.column
		l.Stride = c.column * rowBytes
		l.Off = rowBytes
	}
	return l
}

// packedLen returns a buffer length that holds l with a few spare bytes.
func packedLen(l Layout) int {
	l = l.dense()
	if l.Rows == 0 {
		return l.Off + 11
	}
	return l.Off + (l.Rows-1)*l.Stride + l.RowBytes + 11
}

func TestGather(t *testing.T) {
	r := newRand(t)
	for _, rowBytes := range testRowSizes {
		for _, c := range linearCases {
			t.Run(fmt.Sprintf("R=%d/%s/int32", rowBytes, c.name), func(t *testing.T) {
				testGather[int32](t, r, rowBytes, c)
			})
			t.Run(fmt.Sprintf("R=%d/%s/int64", rowBytes, c.name), func(t *testing.T) {
				testGather[int64](t, r, rowBytes, c)
			})
		}
	}
}

func testGather[I ID](t *testing.T, r *rand.Rand, rowBytes int, c linearCase) {
	const rows, tableRows = 31, 37
	l := c.layout(rows, rowBytes)
	// A trailing partial row must not count as a row.
	table := randomBytes(r, tableRows*rowBytes+r.IntN(rowBytes))
	ids := randomIDs[I](r, rows, l.dense().IDStride, tableRows, l.Bias, c.skipEvery, false)
	poison := randomBytes(r, packedLen(l))
	want := bytes.Clone(poison)
	refGather(want, table, ids, l)
	require.False(t, bytes.Equal(want, poison), "the request copies nothing")
	tableBefore := bytes.Clone(table)

	dst := bytes.Clone(poison)
	require.NoError(t, Gather(dst, table, ids, l))
	requireSameBytes(t, want, dst, "Gather")
	requireSameBytes(t, tableBefore, table, "table after Gather")

	dst = bytes.Clone(poison)
	require.NoError(t, CheckGather(dst, table, ids, l))
	GatherUnchecked(dst, table, ids, l)
	requireSameBytes(t, want, dst, "GatherUnchecked")
}

func TestScatter(t *testing.T) {
	r := newRand(t)
	for _, rowBytes := range testRowSizes {
		for _, c := range linearCases {
			t.Run(fmt.Sprintf("R=%d/%s/int32", rowBytes, c.name), func(t *testing.T) {
				testScatter[int32](t, r, rowBytes, c)
			})
			t.Run(fmt.Sprintf("R=%d/%s/int64", rowBytes, c.name), func(t *testing.T) {
				testScatter[int64](t, r, rowBytes, c)
			})
		}
	}
}

func testScatter[I ID](t *testing.T, r *rand.Rand, rowBytes int, c linearCase) {
	const rows, tableRows = 31, 37
	l := c.layout(rows, rowBytes)
	poison := randomBytes(r, tableRows*rowBytes+r.IntN(rowBytes))
	ids := randomIDs[I](r, rows, l.dense().IDStride, tableRows, l.Bias, c.skipEvery, true)
	src := randomBytes(r, packedLen(l))
	want := bytes.Clone(poison)
	refScatter(want, src, ids, l)
	require.False(t, bytes.Equal(want, poison), "the request copies nothing")
	srcBefore := bytes.Clone(src)

	table := bytes.Clone(poison)
	require.NoError(t, Scatter(table, src, ids, l))
	requireSameBytes(t, want, table, "Scatter")
	requireSameBytes(t, srcBefore, src, "source after Scatter")

	table = bytes.Clone(poison)
	require.NoError(t, CheckScatter(table, src, ids, l))
	ScatterUnchecked(table, src, ids, l)
	requireSameBytes(t, want, table, "ScatterUnchecked")
}

func TestScatterThenGather(t *testing.T) {
	r := newRand(t)
	for _, rowBytes := range []int{264, 4096, 7} {
		for _, c := range []linearCase{{name: "dense", pad: -1}, {name: "strided", pad: 5, idStride: 2, off: 3, bias: 9}} {
			t.Run(fmt.Sprintf("R=%d/%s", rowBytes, c.name), func(t *testing.T) {
				const rows, tableRows = 40, 64
				l := c.layout(rows, rowBytes)
				table := randomBytes(r, tableRows*rowBytes)
				ids := randomIDs[int64](r, rows, l.dense().IDStride, tableRows, l.Bias, 0, true)
				packed := randomBytes(r, packedLen(l))
				require.NoError(t, Scatter(table, packed, ids, l))
				back := randomBytes(r, len(packed))
				require.NoError(t, Gather(back, table, ids, l))
				d := l.dense()
				for i := range rows {
					at := d.Off + i*d.Stride
					requireSameBytes(t, packed[at:at+rowBytes], back[at:at+rowBytes], fmt.Sprintf("row %d", i))
				}
			})
		}
	}
}

func TestGatherDuplicateIDs(t *testing.T) {
	r := newRand(t)
	table := randomBytes(r, 8*264)
	ids := []int32{3, 3, -1, 3, 0}
	dst := randomBytes(r, 5*264)
	want := bytes.Clone(dst)
	l := Layout{Rows: 5, RowBytes: 264}
	refGather(want, table, ids, l)
	require.NoError(t, Gather(dst, table, ids, l))
	requireSameBytes(t, want, dst, "gather with repeated ids")
}

// rejectCase breaks a valid request of 8 rows of 264 bytes from a 16-row
// table with int64 ids 0..7 in random order.
type rejectCase struct {
	name    string
	mutate  func(r *request)
	err     error
	index   int  // index of the rejected id, or -1 when no IDError
	gather  bool // applies to Gather
	scatter bool // applies to Scatter
}

type request struct {
	packed, table []byte
	ids           []int64
	l             Layout
}

const (
	rejRows      = 8
	rejRowBytes  = 264
	rejTableRows = 16
)

func newRequest(r *rand.Rand) request {
	ids := make([]int64, rejRows)
	for i, p := range r.Perm(rejRows) {
		ids[i] = int64(p)
	}
	return request{
		packed: randomBytes(r, rejRows*rejRowBytes),
		table:  randomBytes(r, rejTableRows*rejRowBytes),
		ids:    ids,
		l:      Layout{Rows: rejRows, RowBytes: rejRowBytes},
	}
}

var rejectCases = []rejectCase{
	{name: "row-size-0", mutate: func(q *request) { q.l.RowBytes = 0 }, err: ErrLayout, index: -1, gather: true, scatter: true},
	{name: "negative-rows", mutate: func(q *request) { q.l.Rows = -1 }, err: ErrLayout, index: -1, gather: true, scatter: true},
	{name: "negative-offset", mutate: func(q *request) { q.l.Off = -1 }, err: ErrLayout, index: -1, gather: true, scatter: true},
	{name: "stride-below-row", mutate: func(q *request) { q.l.Stride = rejRowBytes - 1 }, err: ErrLayout, index: -1, gather: true, scatter: true},
	{name: "negative-stride", mutate: func(q *request) { q.l.Stride = -rejRowBytes }, err: ErrLayout, index: -1, gather: true, scatter: true},
	{name: "negative-id-stride", mutate: func(q *request) { q.l.IDStride = -1 }, err: ErrLayout, index: -1, gather: true, scatter: true},
	{name: "ids-short", mutate: func(q *request) { q.ids = q.ids[:rejRows-1] }, err: ErrBounds, index: -1, gather: true, scatter: true},
	{name: "id-stride-past-ids", mutate: func(q *request) { q.l.IDStride = 2 }, err: ErrBounds, index: -1, gather: true, scatter: true},
	{name: "packed-short", mutate: func(q *request) { q.packed = q.packed[:len(q.packed)-1] }, err: ErrBounds, index: -1, gather: true, scatter: true},
	{name: "offset-past-end", mutate: func(q *request) { q.l.Off = 1 }, err: ErrBounds, index: -1, gather: true, scatter: true},
	{name: "stride-past-end", mutate: func(q *request) { q.l.Stride = rejRowBytes + 1 }, err: ErrBounds, index: -1, gather: true, scatter: true},
	{name: "stride-overflow", mutate: func(q *request) { q.l.Stride = math.MaxInt / 4 }, err: ErrBounds, index: -1, gather: true, scatter: true},
	{name: "offset-overflow", mutate: func(q *request) { q.l.Off = math.MaxInt - 10 }, err: ErrBounds, index: -1, gather: true, scatter: true},
	{name: "id-past-table", mutate: func(q *request) { q.ids[3] = rejTableRows }, err: ErrBounds, index: 3, gather: true, scatter: true},
	{name: "id-minus-2", mutate: func(q *request) { q.ids[2] = -2 }, err: ErrBounds, index: 2, gather: true, scatter: true},
	{name: "bias-below-table", mutate: func(q *request) {
		for i := range q.ids {
			q.ids[i]++
		}
		q.l.Bias, q.ids[4] = 1, 0
	}, err: ErrBounds, index: 4, gather: true, scatter: true},
	{name: "bias-past-table", mutate: func(q *request) { q.l.Bias = -(rejTableRows - rejRows + 1) }, err: ErrBounds, index: -2, gather: true, scatter: true},
	// id - Bias wraps around to a row inside the table.
	{name: "bias-wraps-to-row-1", mutate: func(q *request) { skipAll(q); q.l.Bias = math.MaxInt64; q.ids[1] = math.MinInt64 }, err: ErrBounds, index: 1, gather: true, scatter: true},
	{name: "bias-wraps-to-row-6", mutate: func(q *request) { skipAll(q); q.l.Bias = math.MaxInt64; q.ids[6] = math.MinInt64 + 5 }, err: ErrBounds, index: 6, gather: true, scatter: true},
	{name: "partial-row-is-not-a-row", mutate: func(q *request) {
		q.table = q.table[:(rejTableRows-1)*rejRowBytes+rejRowBytes-1]
		q.ids[0] = rejTableRows - 1
	}, err: ErrBounds, index: 0, gather: true, scatter: true},
	{name: "packed-is-table", mutate: func(q *request) { q.packed = q.table[rejRowBytes : rejRowBytes+rejRows*rejRowBytes] }, err: ErrLayout, index: -1, gather: true, scatter: true},
	{name: "packed-overlaps-table-end", mutate: func(q *request) {
		both := make([]byte, (rejTableRows+rejRows)*rejRowBytes)
		copy(both, q.table)
		q.table = both[:rejTableRows*rejRowBytes]
		q.packed = both[rejTableRows*rejRowBytes-1:]
	}, err: ErrLayout, index: -1, gather: true, scatter: true},
	{name: "duplicate-row", mutate: func(q *request) { q.ids[5] = q.ids[2] }, err: ErrLayout, index: 5, scatter: true},
	{name: "duplicate-row-last", mutate: func(q *request) { q.ids[0] = q.ids[7] }, err: ErrLayout, index: 7, scatter: true},
	{name: "duplicate-row-after-skips", mutate: func(q *request) { q.ids[1], q.ids[2], q.ids[4] = -1, -1, q.ids[3] }, err: ErrLayout, index: 4, scatter: true},
}

func skipAll(q *request) {
	for i := range q.ids {
		q.ids[i] = -1
	}
}

func TestReject(t *testing.T) {
	r := newRand(t)
	for _, c := range rejectCases {
		for _, scatter := range []bool{false, true} {
			if (scatter && !c.scatter) || (!scatter && !c.gather) {
				continue
			}
			name := c.name + "/gather"
			if scatter {
				name = c.name + "/scatter"
			}
			t.Run(name, func(t *testing.T) {
				q := newRequest(r)
				c.mutate(&q)
				packedBefore, tableBefore := bytes.Clone(q.packed), bytes.Clone(q.table)
				w := NewWorkers(2)
				defer w.Close()
				w.minRows = 1
				calls := []func() error{
					func() error { return Gather(q.packed, q.table, q.ids, q.l) },
					func() error { return CheckGather(q.packed, q.table, q.ids, q.l) },
					func() error { return ParallelGather(w, q.packed, q.table, q.ids, q.l) },
				}
				if scatter {
					calls = []func() error{
						func() error { return Scatter(q.table, q.packed, q.ids, q.l) },
						func() error { return CheckScatter(q.table, q.packed, q.ids, q.l) },
						func() error { return ParallelScatter(w, q.table, q.packed, q.ids, q.l) },
					}
				}
				for _, call := range calls {
					err := call()
					require.ErrorIs(t, err, c.err)
					require.Contains(t, err.Error(), "pack: ")
					var idErr *IDError
					switch {
					case c.index == -1:
						require.False(t, errors.As(err, &idErr), "unexpected IDError %v", err)
					case c.index >= 0:
						require.ErrorAs(t, err, &idErr)
						require.Equal(t, c.index, idErr.Index)
						require.Equal(t, q.ids[c.index], idErr.ID)
					default:
						require.ErrorAs(t, err, &idErr)
					}
					requireSameBytes(t, packedBefore, q.packed, "packed buffer")
					requireSameBytes(t, tableBefore, q.table, "table")
				}
			})
		}
	}
}

func TestZeroRows(t *testing.T) {
	r := newRand(t)
	table := randomBytes(r, 4*64)
	dst := randomBytes(r, 64)
	before := bytes.Clone(dst)
	l := Layout{Rows: 0, RowBytes: 64}
	require.NoError(t, Gather(dst, table, []int32(nil), l))
	require.NoError(t, Scatter(table, dst, []int64(nil), l))
	require.NoError(t, Gather(nil, nil, []int32(nil), l))
	GatherUnchecked(nil, nil, []int32(nil), l)
	ScatterUnchecked(nil, nil, []int64(nil), l)
	requireSameBytes(t, before, dst, "dst")
	// The row size is still checked.
	require.ErrorIs(t, Gather(dst, table, []int32(nil), Layout{}), ErrLayout)
}

// namedID checks that types defined on int32 work.
type namedID int32

func TestNamedIDType(t *testing.T) {
	r := newRand(t)
	table := randomBytes(r, 10*128)
	ids := []namedID{9, -1, 2}
	dst := randomBytes(r, 3*128)
	want := bytes.Clone(dst)
	l := Layout{Rows: 3, RowBytes: 128}
	refGather(want, table, ids, l)
	require.NoError(t, Gather(dst, table, ids, l))
	requireSameBytes(t, want, dst, "named id type")
	require.ErrorIs(t, Gather(dst, table, []namedID{10}, Layout{Rows: 1, RowBytes: 128}), ErrBounds)
}

func TestIDErrorMessage(t *testing.T) {
	err := error(&IDError{Index: 4, ID: 99, Err: ErrBounds})
	require.Equal(t, "id 99 at index 4: row outside the table: pack: out of bounds", err.Error())
	require.ErrorIs(t, err, ErrBounds)
	dup := error(&IDError{Index: 2, ID: 5, Err: ErrLayout})
	require.Equal(t, "id 5 at index 2: table row written twice: pack: bad layout", dup.Error())
	require.ErrorIs(t, fmt.Errorf("lookup: %w", dup), ErrLayout)
}

func TestAllocs(t *testing.T) {
	r := newRand(t)
	const rows = 256
	table := randomBytes(r, 1024*264)
	dst := randomBytes(r, rows*264)
	ids32 := randomIDs[int32](r, rows, 1, 1024, 0, 7, true)
	ids64 := randomIDs[int64](r, rows, 1, 1024, 0, 7, true)
	odd := Layout{Rows: rows / 2, RowBytes: 263, Stride: 264}
	w := NewWorkers(2)
	defer w.Close()
	w.minRows = 16
	cases := []struct {
		name string
		f    func()
	}{
		{"Gather/int32", func() { require.NoError(t, Gather(dst, table, ids32, Layout{Rows: rows, RowBytes: 264})) }},
		{"Gather/int64", func() { require.NoError(t, Gather(dst, table, ids64, Layout{Rows: rows, RowBytes: 264})) }},
		{"Gather/any-size", func() { require.NoError(t, Gather(dst, table, ids32, odd)) }},
		{"GatherUnchecked", func() { GatherUnchecked(dst, table, ids64, Layout{Rows: rows, RowBytes: 264}) }},
		{"ScatterUnchecked", func() { ScatterUnchecked(table, dst, ids32, Layout{Rows: rows, RowBytes: 264}) }},
		{"GatherGrid", func() { require.NoError(t, GatherGrid(dst, table, ids32, HeadMajor(rows/4, 4, 264))) }},
		{"ParallelGather", func() { require.NoError(t, ParallelGather(w, dst, table, ids32, Layout{Rows: rows, RowBytes: 264})) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.f() // starts the helpers
			require.Zero(t, testing.AllocsPerRun(100, c.f))
		})
	}
}

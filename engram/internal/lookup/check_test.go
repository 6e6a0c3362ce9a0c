package lookup

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValidationErrors runs every rejected request through Check and
// Lookup on every engine: the typed error with its sentinel, and the
// output untouched.
func TestValidationErrors(t *testing.T) {
	r := newRand(t)
	engines := testEngines()
	defer closeEngines(engines)
	const rowBytes = 64
	s := newTables(r, 2, rowBytes, 30)
	good := func() ([]Column, []int64, Output) {
		cols := []Column{s.column(0, 0), s.column(1, 100), s.column(0, 0)}
		ids := randomIDs[int64](r, cols, 4, 5)
		return cols, ids, newOutput(r, layoutToken, 4, 3, rowBytes)
	}
	cases := []struct {
		name   string
		change func(cols []Column, ids []int64, out *Output) ([]Column, []int64, int, int)
		want   error
		detail any // the typed error it must be, with its fields
	}{
		{"negative T", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) { return c, ids, -4, 3 },
			ErrShape, &ShapeError{T: -4, K: 3, IDs: 12, Columns: 3}},
		{"K is not len(cols)", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) { return c[:2], ids, 4, 3 },
			ErrShape, &ShapeError{T: 4, K: 3, IDs: 12, Columns: 2}},
		{"len(ids) is not T*K", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) { return c, ids[:11], 4, 3 },
			ErrShape, &ShapeError{T: 4, K: 3, IDs: 11, Columns: 3}},
		{"T*K overflows", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			return c, ids, math.MaxInt/2 + 1, 3
		}, ErrShape, nil},
		{"row size below 1", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			c[1].RowBytes = 0
			return c, ids, 4, 3
		}, ErrTable, nil},
		{"negative rows", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			c[2].NumRows = -1
			return c, ids, 4, 3
		}, ErrTable, nil},
		{"table too short", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			c[0].Rows = c[0].Rows[:int(c[0].NumRows)*rowBytes-1]
			return c, ids, 4, 3
		}, ErrTable, nil},
		{"table rows overflow", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			c[0].NumRows = math.MaxInt64 / 2
			return c, ids, 4, 3
		}, ErrTable, nil},
		{"row sizes differ", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			c[2].RowBytes = rowBytes / 2
			return c, ids, 4, 3
		}, ErrRowBytes, &ColumnError{Column: 2, RowBytes: rowBytes / 2, NumRows: s.rows[0], Len: len(s.tables[0]), Want: rowBytes, Err: ErrRowBytes}},
		{"negative offset", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			out.Off = -1
			return c, ids, 4, 3
		}, ErrOutput, nil},
		{"negative stride", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			out.KStride = -rowBytes
			return c, ids, 4, 3
		}, ErrOutput, nil},
		{"output too short", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			out.Off = len(out.Buf) - 12*rowBytes + 1
			return c, ids, 4, 3
		}, ErrOutput, nil},
		{"output extent overflows", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			out.TStride = math.MaxInt / 2
			return c, ids, 4, 3
		}, ErrOutput, nil},
		{"rows overlap along K", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			out.KStride = rowBytes - 1
			return c, ids, 4, 3
		}, ErrOutput, nil},
		{"rows overlap along T", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			out.TStride = 0
			return c, ids, 4, 3
		}, ErrOutput, nil},
		{"strides interleave", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			out.TStride, out.KStride = 2*rowBytes, 3*rowBytes // (t=3, k=0) and (t=0, k=2) coincide
			return c, ids, 4, 3
		}, ErrOutput, nil},
		{"output overlaps a table", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			c[1].Rows = out.Buf[len(out.Buf)-rowBytes:]
			c[1].NumRows = 1
			return c, ids, 4, 3
		}, ErrOutput, nil},
		{"id past the table", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			ids[7] = 100 + c[1].NumRows
			return c, ids, 4, 3
		}, ErrID, &IDError{T: 2, K: 1, ID: 100 + s.rows[1], Rows: s.rows[1], Offset: 100}},
		{"id below the offset", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			ids[4] = 99
			return c, ids, 4, 3
		}, ErrID, &IDError{T: 1, K: 1, ID: 99, Rows: s.rows[1], Offset: 100}},
		{"negative id other than -1", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			ids[11] = -2
			return c, ids, 4, 3
		}, ErrID, &IDError{T: 3, K: 2, ID: -2, Rows: s.rows[0], Offset: 0}},
		{"first bad id in token-major order", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			ids[11] = -2
			ids[5] = math.MinInt64
			ids[9] = math.MaxInt64
			return c, ids, 4, 3
		}, ErrID, &IDError{T: 1, K: 2, ID: math.MinInt64, Rows: s.rows[0], Offset: 0}},
		{"id - offset overflows", func(c []Column, ids []int64, out *Output) ([]Column, []int64, int, int) {
			for j := range c {
				c[j].Offset = math.MaxInt64 - 1
			}
			for i := range ids {
				ids[i] = -1
			}
			ids[6] = math.MinInt64 // MinInt64 - (MaxInt64-1) wraps to a small row
			return c, ids, 4, 3
		}, ErrID, &IDError{T: 2, K: 0, ID: math.MinInt64, Rows: s.rows[0], Offset: math.MaxInt64 - 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cols, ids, out := good()
			require.NoError(t, Check(cols, ids, 4, 3, out))
			cols, ids, tt, k := c.change(cols, ids, &out)
			poison := append([]byte(nil), out.Buf...)
			err := Check(cols, ids, tt, k, out)
			require.ErrorIs(t, err, c.want)
			if c.detail != nil {
				require.Equal(t, c.detail, err)
			}
			require.NotEmpty(t, err.Error())
			for _, x := range engines {
				require.Equal(t, err, Lookup(x.e, cols, ids, tt, k, out), x.name)
				requireSameBytes(t, poison, out.Buf, x.name)
			}
		})
	}
}

// TestIDErrorColumnOrderFallback checks the column-by-column id check
// (more than inlineCols columns, distinct bounds) reports the same first
// id as the token-major one.
func TestIDErrorColumnOrderFallback(t *testing.T) {
	r := newRand(t)
	const k, tt = inlineCols + 6, 5
	cols := randomColumns(r, shareDistinct, k, 64, false)
	ids := randomIDs[int32](r, cols, tt, 3)
	ids[3*k+50] = int32(cols[50].Offset + cols[50].NumRows)
	ids[4*k+2] = -7
	ids[2*k+k-1] = int32(cols[k-1].Offset - 1)
	want := &IDError{T: 2, K: k - 1, ID: cols[k-1].Offset - 1, Rows: cols[k-1].NumRows, Offset: cols[k-1].Offset}
	var bounds [k]bound
	require.Equal(t, want, checkIDs(cols, ids, tt, k, bounds[:]))
	require.Equal(t, want, checkIDs(cols, ids, tt, k, nil))
	require.Equal(t, want, Check(cols, ids, tt, k, newOutput(r, layoutHead, tt, k, 64)))
}

func TestErrorMessages(t *testing.T) {
	cases := []struct {
		err  error
		want string
		is   error
	}{
		{&ShapeError{T: 2, K: 3, IDs: 5, Columns: 3}, "engram: lookup shape mismatch: [T=2, K=3] with 5 ids and 3 columns", ErrShape},
		{&ColumnError{Column: 1, RowBytes: 8, Want: 16, Err: ErrRowBytes}, "engram: row sizes differ: column 1: row size 8, column 0 has 16", ErrRowBytes},
		{&ColumnError{Column: 0, RowBytes: 0, Err: ErrTable}, "engram: bad table: column 0: row size 0 below 1", ErrTable},
		{&ColumnError{Column: 2, RowBytes: 8, NumRows: -3, Err: ErrTable}, "engram: bad table: column 2: negative row count -3", ErrTable},
		{&ColumnError{Column: 2, RowBytes: 8, NumRows: 3, Len: 20, Err: ErrTable}, "engram: bad table: column 2: 3 rows of 8 bytes do not fit in 20 bytes", ErrTable},
		{&OutputError{T: 1, K: 2, RowBytes: 8, Off: 1, TStride: 16, KStride: 8, Len: 9, Reason: "rows do not fit in the buffer"},
			"engram: bad output layout: output [T=1, K=2] of 8-byte rows at offset 1, strides (16, 8), in 9 bytes: rows do not fit in the buffer", ErrOutput},
		{&IDError{T: 1, K: 2, ID: 40, Rows: 10, Offset: 20}, "engram: id out of range: id 40 at (t=1, k=2): not -1 and not in [20, 20+10)", ErrID},
		{&IDError{T: 1, K: 2, ID: 40, Rows: 10, Offset: 20, Table: "emb"}, `engram: id out of range: id 40 at (t=1, k=2) of table "emb": not -1 and not in [20, 20+10)`, ErrID},
		{&ShapeError{T: 2, K: 3, IDs: 6, Columns: 3, Reason: "2 offsets"}, "engram: lookup shape mismatch: [T=2, K=3] with 6 ids and 3 columns: 2 offsets", ErrShape},
		{&ColumnError{Column: 1, Table: "wide", RowBytes: 8, Want: 16, Err: ErrRowBytes}, `engram: row sizes differ: column 1 of table "wide": row size 8, column 0 has 16`, ErrRowBytes},
		{&ColumnError{Column: 4, Table: "tiny", Offset: -1, Err: ErrShape}, `engram: lookup shape mismatch: column 4 of table "tiny": offset -1: a remote lookup takes no negative offset`, ErrShape},
		{&BufferError{Len: 264, Reason: "empty output"}, "engram: output not in a registered buffer: output of 264 bytes: empty output", ErrUnregisteredOutput},
		{&TableError{Table: "x", Op: "lookup", Err: ErrUnknownTable}, `engram: lookup table "x": engram: unknown table`, ErrUnknownTable},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			require.Equal(t, c.want, c.err.Error())
			require.ErrorIs(t, fmt.Errorf("engram: lookup table %q: %w", "x", c.err), c.is)
			require.True(t, errors.Is(c.err, c.is))
		})
	}
}

// overlapsBrute is the overlap oracle: every pair of rows compared.
func overlapsBrute(n, a, m, b, r int) bool {
	for x := range n * m {
		p := (x/m)*a + (x%m)*b
		for y := x + 1; y < n*m; y++ {
			q := (y/m)*a + (y%m)*b
			if p < q+r && q < p+r {
				return true
			}
		}
	}
	return false
}

// TestOverlapRuleExact compares the overlap rule with the oracle on every
// small lattice, and on random larger ones.
func TestOverlapRuleExact(t *testing.T) {
	check := func(n, a, m, b, r int) {
		t.Helper()
		got := overlapReason(n, a, m, b, r) != ""
		if got != overlapsBrute(n, a, m, b, r) {
			t.Fatalf("n=%d a=%d m=%d b=%d r=%d: rule says overlap=%v", n, a, m, b, r, got)
		}
	}
	for n := 1; n <= 5; n++ {
		for m := 1; m <= 5; m++ {
			for r := 1; r <= 4; r++ {
				for a := 0; a <= 24; a++ {
					for b := 0; b <= 24; b++ {
						check(n, a, m, b, r)
					}
				}
			}
		}
	}
	rng := newRand(t)
	for range 3000 {
		n, m, r := 1+rng.IntN(30), 1+rng.IntN(30), 1+rng.IntN(50)
		check(n, rng.IntN(400), m, rng.IntN(400), r)
	}
}

// TestOutputChecks covers what the output check accepts beyond the dense
// layouts: unused strides of size-1 dimensions, and empty lookups.
func TestOutputChecks(t *testing.T) {
	r := newRand(t)
	cols := randomColumns(r, shareSame, 3, 16, false)
	ids := randomIDs[int32](r, cols, 1, 0)
	// T = 1: TStride unused, even negative.
	require.NoError(t, Check(cols, ids, 1, 3, Output{Buf: make([]byte, 48), TStride: -5, KStride: 16}))
	// K = 1: KStride unused.
	require.NoError(t, Check(cols[:1], ids[:1], 1, 1, Output{Buf: make([]byte, 16), TStride: -5, KStride: math.MinInt}))
	// T = 0: no rows, nothing checked of the output.
	require.NoError(t, Check(cols, []int32{}, 0, 3, Output{Off: -1}))
	require.NoError(t, Lookup[int32](nil, cols, nil, 0, 3, Output{Off: -1}))
	// The dense constructors turn an overflowing stride into a rejected one.
	out := TokenMajor(nil, 2, math.MaxInt/4, 16)
	require.Equal(t, -1, out.TStride)
	require.Equal(t, -1, HeadMajor(nil, -1, 3, 16).KStride)
}

// TestLargeLookupErrors checks that a lookup large enough to split writes
// nothing when one id is bad, on the pack path (one table) and the
// engine's split (distinct tables).
func TestLargeLookupErrors(t *testing.T) {
	r := newRand(t)
	e := NewEngine(2)
	defer e.Close()
	const tt, k, rowBytes = 400, 24, 264
	for _, mode := range []string{shareSame, shareDistinct} {
		for _, bad := range []int{0, tt*k/2 + 3, tt*k - 1} {
			t.Run(fmt.Sprintf("%s/bad=%d", mode, bad), func(t *testing.T) {
				cols := randomColumns(r, mode, k, rowBytes, true)
				ids := randomIDs[int64](r, cols, tt, 0)
				c := cols[bad%k]
				ids[bad] = c.Offset + c.NumRows
				out := newOutput(r, layoutToken, tt, k, rowBytes)
				poison := append([]byte(nil), out.Buf...)
				want := &IDError{T: bad / k, K: bad % k, ID: ids[bad], Rows: c.NumRows, Offset: c.Offset}
				require.Equal(t, want, Lookup(e, cols, ids, tt, k, out))
				requireSameBytes(t, poison, out.Buf, "output")
			})
		}
	}
}

// TestEmptyTable reads a column whose table has no rows: only -1 is valid.
func TestEmptyTable(t *testing.T) {
	r := newRand(t)
	engines := testEngines()
	defer closeEngines(engines)
	c := Column{Rows: randomBytes(r, 10*64), NumRows: 10, RowBytes: 64, Offset: 3}
	cols := []Column{c, {RowBytes: 64, Offset: 3}, c}
	ids := []int32{3, -1, 4, 5, -1, 3}
	runCase(t, engines, cols, ids, 2, 3, newOutput(r, layoutHead, 2, 3, 64))
	ids[4] = 3
	require.Equal(t, &IDError{T: 1, K: 1, ID: 3, Rows: 0, Offset: 3}, Check(cols, ids, 2, 3, newOutput(r, layoutHead, 2, 3, 64)))
}

package lookup

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testTables are named tables, local (arena nil) or, with an arena, a
// remote owner's: Column then leaves Rows out.
type testTables struct {
	cols  map[string]Column
	arena []byte
}

func (tt *testTables) Column(name string) (Column, error) {
	c, ok := tt.cols[name]
	if !ok {
		return Column{}, &TableError{Table: name, Op: "lookup", Err: ErrUnknownTable}
	}
	if tt.arena != nil {
		c.Rows = nil
	}
	return c, nil
}

func (tt *testTables) Arena() []byte { return tt.arena }

// TestRequestCheck runs named requests through Request.Check against
// local and remote tables: what a valid one resolves to, every rejection
// with its typed error (the table named where it is known), and that the
// local engine runs the checked request exactly as Lookup does.
func TestRequestCheck(t *testing.T) {
	r := newRand(t)
	const T, K, R = 3, 4, 32
	s := newTables(r, 3, R, 20)
	named := map[string]Column{"a": s.column(0, 0), "b": s.column(1, 0), "c": s.column(2, 0),
		"narrow": {Rows: randomBytes(r, 5*8), NumRows: 5, RowBytes: 8}}
	// The arena is part of a larger buffer, so that an output can start
	// inside it and end past it.
	mem := randomBytes(r, 5*T*K*R)
	arena := mem[:4*T*K*R]
	local := &testTables{cols: named}
	remote := &testTables{cols: named, arena: arena}
	valid := func(buf []byte) *Request {
		tables := []string{"a", "b", "a", "c"}
		offs := []int64{0, 100, 7, 0}
		ids := make([]int64, T*K)
		for i := range ids {
			c := named[tables[i%K]]
			ids[i] = offs[i%K] + r.Int64N(c.NumRows)
		}
		ids[5] = -1
		return &Request{Tables: tables, Offsets: offs, IDs64: ids, T: T, K: K, Out: buf, TStride: K * R, KStride: R}
	}

	t.Run("resolves", func(t *testing.T) {
		for _, tables := range []*testTables{local, remote} {
			q := valid(arena[R : R+T*K*R])
			c, err := q.Check(tables, nil)
			require.NoError(t, err)
			cols := c.Columns()
			require.Len(t, cols, K)
			for k, name := range q.Tables {
				require.Equal(t, name, cols[k].Name)
				require.Equal(t, q.Offsets[k], cols[k].Offset)
				require.Equal(t, named[name].NumRows, cols[k].NumRows)
				require.Equal(t, tables.arena == nil, cols[k].Rows != nil, "rows only for local tables")
			}
			require.Equal(t, R, c.RowBytes())
			tt, k := c.Shape()
			require.Equal(t, [2]int{T, K}, [2]int{tt, k})
			_, ids64 := c.IDs()
			require.Equal(t, q.IDs64, ids64)
			if tables.arena != nil {
				require.Equal(t, uint64(R), c.ArenaOffset())
			} else {
				require.Zero(t, c.ArenaOffset())
			}
		}
	})

	t.Run("runs like Lookup", func(t *testing.T) {
		e := NewEngine(2)
		defer e.Close()
		q := valid(randomBytes(r, T*K*R))
		c, err := q.Check(local, nil)
		require.NoError(t, err)
		want := append([]byte(nil), q.Out...)
		refLookup(c.Columns(), q.IDs64, T, K, Output{Buf: want, TStride: K * R, KStride: R})
		require.NoError(t, e.Run(&c))
		requireSameBytes(t, want, q.Out, "output")

		// A request checked against remote tables has no rows here.
		q = valid(arena[:T*K*R])
		c, err = q.Check(remote, nil)
		require.NoError(t, err)
		before := append([]byte(nil), arena...)
		require.ErrorIs(t, e.Run(&c), ErrTable)
		requireSameBytes(t, before, arena, "arena")
		// The zero Checked is an empty lookup.
		require.NoError(t, e.Run(&Checked{}))
	})

	cases := []struct {
		name   string
		remote bool // checked against remote tables only (else both)
		change func(q *Request)
		want   error
		detail error // the typed error, compared whole when set
	}{
		{"both id types", false, func(q *Request) { q.IDs32 = []int32{1} }, ErrShape,
			&ShapeError{T: T, K: K, IDs: T*K + 1, Columns: K, Reason: "both int32 and int64 ids"}},
		{"names vs K", false, func(q *Request) { q.Tables = q.Tables[:3] }, ErrShape,
			&ShapeError{T: T, K: K, IDs: T * K, Columns: 3}},
		{"ids vs T*K", false, func(q *Request) { q.IDs64 = q.IDs64[1:] }, ErrShape,
			&ShapeError{T: T, K: K, IDs: T*K - 1, Columns: K}},
		{"offsets vs K", false, func(q *Request) { q.Offsets = q.Offsets[:2] }, ErrShape,
			&ShapeError{T: T, K: K, IDs: T * K, Columns: K, Reason: "2 offsets"}},
		{"empty offsets", false, func(q *Request) { q.Offsets = []int64{} }, ErrShape, nil},
		{"negative T", false, func(q *Request) { q.T = -1 }, ErrShape, nil},
		{"huge T", false, func(q *Request) { q.T = math.MaxInt / 2 }, ErrShape, nil},
		{"unknown table", false, func(q *Request) { q.Tables[3] = "nope" }, ErrUnknownTable,
			&TableError{Table: "nope", Op: "lookup", Err: ErrUnknownTable}},
		{"row sizes differ", false, func(q *Request) { q.Tables[2], q.Offsets[2] = "narrow", 0 }, ErrRowBytes, nil},
		{"rows overlap", false, func(q *Request) { q.KStride = R - 1 }, ErrOutput, nil},
		{"output too short", false, func(q *Request) { q.Out = q.Out[:T*K*R-1] }, ErrOutput, nil},
		{"id past its table", false, func(q *Request) { q.IDs64[K+3] = named["c"].NumRows }, ErrID,
			&IDError{T: 1, K: 3, ID: named["c"].NumRows, Rows: named["c"].NumRows, Table: "c"}},
		{"id below its offset", false, func(q *Request) { q.IDs64[2*K+1] = 99 }, ErrID,
			&IDError{T: 2, K: 1, ID: 99, Rows: named["b"].NumRows, Offset: 100, Table: "b"}},
		{"negative offset", true, func(q *Request) { q.Offsets[1] = -1 }, ErrShape, nil},
		{"negative unused stride", true, func(q *Request) { q.T, q.IDs64, q.TStride = 1, q.IDs64[:K], -1 }, ErrOutput, nil},
		{"output outside the arena", true, func(q *Request) { q.Out = randomBytes(r, T*K*R) }, ErrUnregisteredOutput,
			&BufferError{Len: T * K * R, Reason: "not inside the registered output memory (take it from NewBuffer)"}},
		{"output past the arena", true, func(q *Request) { q.Out = mem[len(arena)-T*K*R+1 : len(arena)+1] }, ErrUnregisteredOutput, nil},
		{"empty output", true, func(q *Request) { q.Out = arena[:0] }, ErrUnregisteredOutput, nil},
	}
	for _, tc := range cases {
		for _, tables := range []*testTables{local, remote} {
			if tc.remote && tables.arena == nil {
				continue
			}
			where := "local"
			if tables.arena != nil {
				where = "remote"
			}
			t.Run(tc.name+"/"+where, func(t *testing.T) {
				q := valid(arena[:T*K*R])
				if tables.arena == nil {
					q.Out = randomBytes(r, T*K*R)
				}
				tc.change(q)
				before := append([]byte(nil), q.Out...)
				c, err := q.Check(tables, nil)
				require.ErrorIs(t, err, tc.want)
				if tc.detail != nil {
					require.Equal(t, tc.detail, err)
				}
				require.True(t, strings.HasPrefix(err.Error(), "engram: "), err.Error())
				require.Equal(t, Checked{}, c, "a failed check returns no lookup")
				require.True(t, bytes.Equal(before, q.Out), "the output changed")
			})
		}
	}

	t.Run("named errors", func(t *testing.T) {
		q := valid(randomBytes(r, T*K*R))
		q.Tables[2], q.Offsets[2] = "narrow", 0
		_, err := q.Check(local, nil)
		var ce *ColumnError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "narrow", ce.Table)
		require.Contains(t, err.Error(), `of table "narrow"`)

		q = valid(arena[:T*K*R])
		q.Offsets[1] = -5
		_, err = q.Check(remote, nil)
		require.ErrorAs(t, err, &ce)
		require.Equal(t, ColumnError{Column: 1, Table: "b", RowBytes: R, NumRows: named["b"].NumRows, Want: R,
			Offset: -5, Err: ErrShape}, *ce)
	})

	t.Run("local tables take negative offsets", func(t *testing.T) {
		q := valid(randomBytes(r, T*K*R))
		for k := range q.Offsets {
			q.Offsets[k] -= 1000
		}
		for i := range q.IDs64 {
			if q.IDs64[i] != -1 {
				q.IDs64[i] -= 1000
			}
		}
		_, err := q.Check(local, nil)
		require.NoError(t, err)
	})

	t.Run("empty lookups check no output", func(t *testing.T) {
		for _, tables := range []*testTables{local, remote} {
			q := &Request{Tables: []string{"a", "b"}, T: 0, K: 2, Off: -1}
			_, err := q.Check(tables, nil)
			require.NoError(t, err)
		}
	})

	t.Run("allocs", func(t *testing.T) {
		scratch := make([]Column, K)
		for _, tables := range []*testTables{local, remote} {
			q := valid(arena[:T*K*R])
			if tables.arena == nil {
				q.Out = randomBytes(r, T*K*R)
			}
			require.Zero(t, testing.AllocsPerRun(50, func() {
				if _, err := q.Check(tables, scratch); err != nil {
					t.Fatal(err)
				}
			}))
		}
	})

	t.Run("errors.Is through a wrap", func(t *testing.T) {
		q := valid(arena[:T*K*R])
		q.IDs64[0] = -7
		_, err := q.Check(remote, nil)
		require.True(t, errors.Is(err, ErrID))
		var ie *IDError
		require.ErrorAs(t, errors.Join(errors.New("x"), err), &ie)
		require.Equal(t, "a", ie.Table)
	})
}

// TestRequestCheckDevice checks requests with a device output
// (Request.DeviceLen): a remote owner's tables take one, checked against
// its length with the output rules and without the arena rule; local
// tables, a device output with a host buffer too, and rows past the
// device length are refused with typed errors.
func TestRequestCheckDevice(t *testing.T) {
	r := newRand(t)
	const T, K, R = 3, 4, 32
	s := newTables(r, 1, R, 20)
	named := map[string]Column{"a": s.column(0, 0)}
	arena := randomBytes(r, 4096)
	local := &testTables{cols: named}
	remote := &testTables{cols: named, arena: arena}
	req := func(devLen int) *Request {
		ids := make([]int64, T*K)
		for i := range ids {
			ids[i] = r.Int64N(named["a"].NumRows)
		}
		return &Request{Tables: []string{"a", "a", "a", "a"}, IDs64: ids, T: T, K: K, TStride: K * R, KStride: R, DeviceLen: devLen}
	}
	c, err := req(T*K*R).Check(remote, nil)
	require.NoError(t, err)
	require.True(t, c.Device())
	require.Equal(t, uint64(0), c.ArenaOffset())
	require.Equal(t, T*K*R, c.Output().Len())

	_, err = req(T*K*R).Check(local, nil)
	var be *BufferError
	require.ErrorAs(t, err, &be)
	require.Contains(t, err.Error(), "remote store")

	both := req(T * K * R)
	both.Out = arena[:T*K*R]
	_, err = both.Check(remote, nil)
	require.ErrorAs(t, err, &be)

	_, err = req(T*K*R-1).Check(remote, nil)
	require.ErrorIs(t, err, ErrOutput)
	var oe *OutputError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, T*K*R-1, oe.Len)

	overlap := req(T * K * R)
	overlap.KStride = R / 2
	_, err = overlap.Check(remote, nil)
	require.ErrorIs(t, err, ErrOutput)

	neg := req(T * K * R)
	neg.DeviceLen = -1
	_, err = neg.Check(remote, nil)
	require.ErrorAs(t, err, &be)

	bad := req(T * K * R)
	bad.IDs64[7] = named["a"].NumRows
	_, err = bad.Check(remote, nil)
	require.ErrorIs(t, err, ErrID)
}

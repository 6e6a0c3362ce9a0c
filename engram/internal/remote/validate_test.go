package remote

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLookupRejects checks that every invalid request fails with its typed
// error before anything moves: the output (poison) is unchanged and no
// operation ran. Several rejections sit in the last column group, so a
// lookup that submitted group by group would already have written the
// others.
func TestLookupRejects(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRand(t)
			e := newEnv(t, r, envConfig{backend: be})
			const T, K, R = 6, 5, 264
			out := e.output(t, r, T*K*R+R)
			other := newEnv(t, r, envConfig{backend: be}).output(t, r, T*K*R)
			valid := func() *Request[int64] {
				names := []string{"emb", "ngram.l3", "emb", "ngram.l3", "tiny"}
				offs := []int64{0, 10, 0, 10, 3}
				return &Request[int64]{Tables: names, Offsets: offs, IDs: randomIDs[int64](r, e, names, offs, T, 5),
					T: T, K: K, Out: out, TStride: K * R, KStride: R}
			}
			// The valid request works (so the rejections below are about
			// what each case changes).
			require.NoError(t, Lookup(testContext(t), e.cli, valid()))
			fill(r, out)

			cases := []struct {
				name string
				edit func(q *Request[int64])
				want error
			}{
				{"negative T", func(q *Request[int64]) { q.T = -1 }, ErrInvalid},
				{"tables shorter than K", func(q *Request[int64]) { q.Tables = q.Tables[:4] }, ErrInvalid},
				{"offsets shorter than K", func(q *Request[int64]) { q.Offsets = q.Offsets[:2] }, ErrInvalid},
				{"ids shorter than T*K", func(q *Request[int64]) { q.IDs = q.IDs[:len(q.IDs)-1] }, ErrInvalid},
				{"ids longer than T*K", func(q *Request[int64]) { q.IDs = append(q.IDs, 0) }, ErrInvalid},
				{"ids without K", func(q *Request[int64]) { q.K, q.T, q.Tables, q.Offsets = 0, 1, nil, nil }, ErrInvalid},
				{"huge T", func(q *Request[int64]) { q.T = math.MaxInt / 2 }, ErrInvalid},
				{"negative offset", func(q *Request[int64]) { q.Offsets[4] = -1 }, ErrInvalid},
				{"negative Off", func(q *Request[int64]) { q.Off = -264 }, ErrInvalid},
				{"negative stride", func(q *Request[int64]) { q.KStride = -R }, ErrInvalid},
				{"unknown table", func(q *Request[int64]) { q.Tables[4] = "nope" }, ErrUnknownTable},
				{"row sizes differ", func(q *Request[int64]) { q.Tables[4], q.IDs[4] = "narrow", 1 }, ErrInvalid},
				{"output not in the arena", func(q *Request[int64]) { q.Out = append([]byte(nil), out...) }, ErrNotInArena},
				{"output of another client", func(q *Request[int64]) { q.Out = other }, ErrNotInArena},
				{"empty output", func(q *Request[int64]) { q.Out = out[:0] }, ErrNotInArena},
				{"layout past the output", func(q *Request[int64]) { q.Off = 2 * R }, ErrInvalid},
				{"output too short", func(q *Request[int64]) { q.Out = out[:T*K*R-1] }, ErrInvalid},
				{"stride overflow", func(q *Request[int64]) { q.TStride = math.MaxInt }, ErrInvalid},
				{"columns overlap", func(q *Request[int64]) { q.KStride = R - 8 }, ErrInvalid},
				{"tokens overlap", func(q *Request[int64]) { q.TStride, q.KStride = R, R }, ErrInvalid},
				{"id past the table", func(q *Request[int64]) { q.IDs[len(q.IDs)-1] = 7 + 3 }, ErrIDRange},
				{"id below the offset", func(q *Request[int64]) { q.IDs[len(q.IDs)-1] = 2 }, ErrIDRange},
				{"id -2", func(q *Request[int64]) { q.IDs[2*K+2] = -2 }, ErrIDRange},
				{"id past a zero-offset table", func(q *Request[int64]) { q.IDs[K] = 6000 }, ErrIDRange},
				{"id max", func(q *Request[int64]) { q.IDs[len(q.IDs)-2] = math.MaxInt64 }, ErrIDRange},
				{"id min", func(q *Request[int64]) { q.IDs[len(q.IDs)-2] = math.MinInt64 }, ErrIDRange},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					q := valid()
					tc.edit(q)
					before := append([]byte(nil), out...)
					beforeOther := append([]byte(nil), other...)
					st := e.cli.Stats()
					err := Lookup(testContext(t), e.cli, q)
					require.ErrorIs(t, err, tc.want)
					t.Log(err)
					require.Equal(t, before, out, "output changed")
					require.Equal(t, beforeOther, other, "the other client's output changed")
					require.Equal(t, st.Ops, e.cli.Stats().Ops, "an operation ran")
					require.Equal(t, st.Failed+1, e.cli.Stats().Failed)
				})
			}

			t.Run("typed errors", func(t *testing.T) {
				q := valid()
				q.IDs[3*K+4] = 99
				var ie *IDError
				require.ErrorAs(t, Lookup(testContext(t), e.cli, q), &ie)
				require.Equal(t, IDError{Token: 3, Column: 4, ID: 99, Offset: 3, Table: "tiny", Rows: 7}, *ie)

				q = valid()
				q.Tables[2] = "missing"
				var te *TableError
				require.ErrorAs(t, Lookup(testContext(t), e.cli, q), &te)
				require.Equal(t, TableError{Column: 2, Name: "missing"}, *te)

				q = valid()
				q.KStride = 100
				var ae *ArgError
				require.ErrorAs(t, Lookup(testContext(t), e.cli, q), &ae)
				require.NotNil(t, ae.Err, "the overlap cause is kept")
			})

			t.Run("int32 ids", func(t *testing.T) {
				ids := []int32{0, 5999, -1, math.MinInt32}
				q := &Request[int32]{Tables: repeat("emb", 2), IDs: ids, T: 2, K: 2, Out: out, TStride: 2 * R, KStride: R}
				before := append([]byte(nil), out...)
				require.ErrorIs(t, Lookup(testContext(t), e.cli, q), ErrIDRange)
				require.Equal(t, before, out)
			})

			t.Run("context already done", func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				before := append([]byte(nil), out...)
				err := Lookup(ctx, e.cli, valid())
				require.ErrorIs(t, err, context.Canceled)
				require.Equal(t, before, out)
			})

			t.Run("output exhausted", func(t *testing.T) {
				_, err := e.cli.NewOutput(64 << 20)
				require.ErrorIs(t, err, ErrExhausted)
				_, err = e.cli.NewOutput(0)
				require.ErrorIs(t, err, ErrInvalid)
			})
		})
	}
}

// TestLookupAfterClose checks that a closed client refuses lookups, pings
// and outputs with ErrClosed, and that Close reports leased outputs.
func TestLookupAfterClose(t *testing.T) {
	r := newRand(t)
	e := newEnv(t, r, envConfig{backend: tcpBackend})
	ctx := testContext(t)
	o, err := e.cli.NewOutput(264)
	require.NoError(t, err)
	q := &Request[int32]{Tables: []string{"emb"}, IDs: []int32{1}, T: 1, K: 1, Out: o.Bytes()}
	require.NoError(t, Lookup(ctx, e.cli, q))

	err = e.cli.Close()
	require.Error(t, err, "an output is still leased")
	require.ErrorIs(t, Lookup(ctx, e.cli, q), ErrClosed)
	_, err = e.cli.Ping(ctx)
	require.ErrorIs(t, err, ErrClosed)
	_, err = e.cli.NewOutput(264)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, o.Release())
	require.Error(t, o.Release(), "second release")
	require.NoError(t, e.cli.Close())
	require.NoError(t, e.cli.Close())
	require.True(t, errors.Is(Lookup(ctx, e.cli, q), ErrClosed))
}

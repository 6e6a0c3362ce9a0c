package remote

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
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
			valid := func() *lookup.Request {
				names := []string{"emb", "ngram.l3", "emb", "ngram.l3", "tiny"}
				offs := []int64{0, 10, 0, 10, 3}
				return &lookup.Request{Tables: names, Offsets: offs, IDs64: randomIDs[int64](r, e, names, offs, T, 5),
					T: T, K: K, Out: out, TStride: K * R, KStride: R}
			}
			// The valid request works (so the rejections below are about
			// what each case changes).
			require.NoError(t, Lookup(testContext(t), e.cli, valid()))
			fill(r, out)

			cases := []struct {
				name string
				edit func(q *lookup.Request)
				want error
			}{
				{"negative T", func(q *lookup.Request) { q.T = -1 }, lookup.ErrShape},
				{"tables shorter than K", func(q *lookup.Request) { q.Tables = q.Tables[:4] }, lookup.ErrShape},
				{"offsets shorter than K", func(q *lookup.Request) { q.Offsets = q.Offsets[:2] }, lookup.ErrShape},
				{"ids shorter than T*K", func(q *lookup.Request) { q.IDs64 = q.IDs64[:len(q.IDs64)-1] }, lookup.ErrShape},
				{"ids longer than T*K", func(q *lookup.Request) { q.IDs64 = append(q.IDs64, 0) }, lookup.ErrShape},
				{"ids without K", func(q *lookup.Request) { q.K, q.T, q.Tables, q.Offsets = 0, 1, nil, nil }, lookup.ErrShape},
				{"huge T", func(q *lookup.Request) { q.T = math.MaxInt / 2 }, lookup.ErrShape},
				{"negative offset", func(q *lookup.Request) { q.Offsets[4] = -1 }, lookup.ErrShape},
				{"negative Off", func(q *lookup.Request) { q.Off = -264 }, lookup.ErrOutput},
				{"negative stride", func(q *lookup.Request) { q.KStride = -R }, lookup.ErrOutput},
				{"unknown table", func(q *lookup.Request) { q.Tables[4] = "nope" }, lookup.ErrUnknownTable},
				{"row sizes differ", func(q *lookup.Request) { q.Tables[4], q.IDs64[4] = "narrow", 1 }, lookup.ErrRowBytes},
				{"output not in the arena", func(q *lookup.Request) { q.Out = append([]byte(nil), out...) }, lookup.ErrUnregisteredOutput},
				{"output of another client", func(q *lookup.Request) { q.Out = other }, lookup.ErrUnregisteredOutput},
				{"empty output", func(q *lookup.Request) { q.Out = out[:0] }, lookup.ErrUnregisteredOutput},
				{"layout past the output", func(q *lookup.Request) { q.Off = 2 * R }, lookup.ErrOutput},
				{"output too short", func(q *lookup.Request) { q.Out = out[:T*K*R-1] }, lookup.ErrOutput},
				{"stride overflow", func(q *lookup.Request) { q.TStride = math.MaxInt }, lookup.ErrOutput},
				{"columns overlap", func(q *lookup.Request) { q.KStride = R - 8 }, lookup.ErrOutput},
				{"tokens overlap", func(q *lookup.Request) { q.TStride, q.KStride = R, R }, lookup.ErrOutput},
				{"id past the table", func(q *lookup.Request) { q.IDs64[len(q.IDs64)-1] = 7 + 3 }, lookup.ErrID},
				{"id below the offset", func(q *lookup.Request) { q.IDs64[len(q.IDs64)-1] = 2 }, lookup.ErrID},
				{"id -2", func(q *lookup.Request) { q.IDs64[2*K+2] = -2 }, lookup.ErrID},
				{"id past a zero-offset table", func(q *lookup.Request) { q.IDs64[K] = 6000 }, lookup.ErrID},
				{"id max", func(q *lookup.Request) { q.IDs64[len(q.IDs64)-2] = math.MaxInt64 }, lookup.ErrID},
				{"id min", func(q *lookup.Request) { q.IDs64[len(q.IDs64)-2] = math.MinInt64 }, lookup.ErrID},
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
				q.IDs64[3*K+4] = 99
				var ie *lookup.IDError
				require.ErrorAs(t, Lookup(testContext(t), e.cli, q), &ie)
				require.Equal(t, lookup.IDError{T: 3, K: 4, ID: 99, Offset: 3, Table: "tiny", Rows: 7}, *ie)

				q = valid()
				q.Tables[2] = "missing"
				var te *lookup.TableError
				require.ErrorAs(t, Lookup(testContext(t), e.cli, q), &te)
				require.Equal(t, lookup.TableError{Table: "missing", Op: "lookup", Err: lookup.ErrUnknownTable}, *te)

				q = valid()
				q.KStride = 100
				var oe *lookup.OutputError
				require.ErrorAs(t, Lookup(testContext(t), e.cli, q), &oe)
				require.Equal(t, "rows along K overlap (KStride below the row size)", oe.Reason, "the overlap cause is kept")
			})

			t.Run("int32 ids", func(t *testing.T) {
				ids := []int32{0, 5999, -1, math.MinInt32}
				q := &lookup.Request{Tables: repeat("emb", 2), IDs32: ids, T: 2, K: 2, Out: out, TStride: 2 * R, KStride: R}
				before := append([]byte(nil), out...)
				require.ErrorIs(t, Lookup(testContext(t), e.cli, q), lookup.ErrID)
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
	q := &lookup.Request{Tables: []string{"emb"}, IDs32: []int32{1}, T: 1, K: 1, Out: o.Bytes()}
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

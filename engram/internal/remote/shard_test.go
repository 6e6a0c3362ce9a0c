package remote

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/gather"
)

// shardEnv is a table set cut by row ranges over several owners (each its
// own transport and server, serving its shards' rows as tables of the
// same names) and a client dialled with the shards.
type shardEnv struct {
	tables map[string]Table // the whole tables, for the reference
	owners []*Server
	trs    []verbs.Transport
	shards []Shard
	cli    *Client
	reqTr  verbs.Transport
}

// newShardEnv cuts every test table into len(cuts)+1 shards at the row
// fractions cuts and places shard i on owner i%owners and, when
// replicated, also on owner (i+1)%owners.
func newShardEnv(t *testing.T, r *rand.Rand, be backend, owners int, cuts []float64, replicated bool) *shardEnv {
	t.Helper()
	e := &shardEnv{tables: map[string]Table{}, reqTr: be.new()}
	t.Cleanup(func() { require.NoError(t, e.reqTr.Close()) })
	held := make([][]Table, owners) // each owner's tables
	var places [][]int              // per shard, its owners
	for _, s := range testSpecs {
		rows := make([]byte, s.Bytes())
		fill(r, rows)
		e.tables[s.Name] = Table{Name: s.Name, NumRows: s.NumRows, RowBytes: s.RowBytes, Rows: rows}
		bounds := []int64{0}
		for _, f := range cuts {
			if b := int64(f * float64(s.NumRows)); b > bounds[len(bounds)-1] && b < s.NumRows {
				bounds = append(bounds, b)
			}
		}
		bounds = append(bounds, s.NumRows)
		for i := range len(bounds) - 1 {
			lo, hi := bounds[i], bounds[i+1]
			at := []int{i % owners}
			if replicated {
				at = append(at, (i+1)%owners)
			}
			places = append(places, at)
			served := fmt.Sprintf("%s.s%d", s.Name, i) // an owner may hold several shards of a table
			e.shards = append(e.shards, Shard{Table: s.Name, Served: served, Lo: lo, Hi: hi})
			for _, o := range at {
				held[o] = append(held[o], Table{Name: served, NumRows: hi - lo, RowBytes: s.RowBytes,
					Rows: rows[lo*int64(s.RowBytes) : hi*int64(s.RowBytes)]})
			}
		}
	}
	for o := range owners {
		tr := be.new()
		t.Cleanup(func() { require.NoError(t, tr.Close()) })
		srv, err := Serve(ServerConfig{Transport: tr, Addr: be.addr(), Namespace: testNamespace, Tables: held[o], StagingBytes: 4 << 20,
			Gather: gather.Config{Calibration: &testCalibration, PackWorkers: 2, ParallelMin: 128 << 10, AcquireTimeout: 5 * time.Second}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = srv.Close() }) // a test may have closed it
		e.owners, e.trs = append(e.owners, srv), append(e.trs, tr)
	}
	for i := range e.shards {
		for _, o := range places[i] {
			e.shards[i].Addrs = append(e.shards[i].Addrs, e.owners[o].Addr())
		}
	}
	var err error
	e.cli, err = Dial(testContext(t), ClientConfig{Transport: e.reqTr, Namespace: testNamespace, OutputBytes: 32 << 20,
		Shards: e.shards, Connect: verbs.ConnectOptions{Link: testLink}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.cli.Close()) })
	return e
}

// lookupReq is a random token-major lookup over the test tables' columns,
// about one id in 9 -1, into a leased output.
func (e *shardEnv) lookupReq(t *testing.T, r *rand.Rand, tokens int) *lookup.Request {
	t.Helper()
	names := []string{"emb", "emb", "ngram.l3", "emb", "tiny", "ngram.l3", "emb", "emb"}
	k, row := len(names), 264
	ids := make([]int64, tokens*k)
	for i := range ids {
		ids[i] = r.Int64N(e.tables[names[i%k]].NumRows)
		if r.IntN(9) == 0 {
			ids[i] = -1
		}
	}
	o, err := e.cli.NewOutput(tokens * k * row)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, o.Release()) })
	fill(r, o.Bytes())
	return &lookup.Request{Tables: names, IDs64: ids, T: tokens, K: k, Out: o.Bytes(), TStride: k * row, KStride: row}
}

// TestShardedLookups: lookups of tables cut over three owners return the
// bytes of the whole tables, in every mode the engine picks; the client's
// tables are the whole tables.
func TestShardedLookups(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRand(t)
			e := newShardEnv(t, r, be, 3, []float64{0.2, 0.55, 0.6}, false)
			for _, s := range testSpecs {
				got, ok := e.cli.Spec(s.Name)
				require.True(t, ok)
				require.Equal(t, s, got, "the client's table is the whole table")
			}
			for _, tokens := range []int{1, 16, 700} {
				q := e.lookupReq(t, r, tokens)
				want := reference(e.tables, q)
				require.NoError(t, Lookup(testContext(t), e.cli, q))
				requireSameBytes(t, want, q.Out)
			}
			st := e.cli.Stats()
			require.Zero(t, st.Failed)
			require.Greater(t, st.Ops, uint64(3), "the lookups ran on several owners")
			_, err := e.cli.Ping(testContext(t))
			require.NoError(t, err)
		})
	}
}

// TestShardedReplicaServes: an owner that dies while lookups are in
// flight, or between them, is replaced by its shards' replicas without
// the caller noticing; a shard with no replica left fails the lookup
// whole, with an error naming the shard and its owners.
func TestShardedReplicaServes(t *testing.T) {
	r := newRand(t)
	t.Run("replicated", func(t *testing.T) {
		e := newShardEnv(t, r, tcpBackend, 3, []float64{0.3, 0.6}, true)
		q := e.lookupReq(t, r, 300)
		want := reference(e.tables, q)
		require.NoError(t, Lookup(testContext(t), e.cli, q))
		requireSameBytes(t, want, q.Out)
		victim := r.IntN(3)
		// Lookups in flight while the owner goes: each succeeds, from the
		// replicas where it must.
		qs := make([]*lookup.Request, 16) // 16 x 211 KB of the 8 MiB arena
		wants := make([][]byte, len(qs))
		for i := range qs {
			qs[i] = e.lookupReq(t, r, 100)
			wants[i] = reference(e.tables, qs[i])
		}
		errs := make(chan error, len(qs))
		go func() {
			for _, q := range qs {
				errs <- Lookup(testContext(t), e.cli, q)
			}
		}()
		time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
		require.NoError(t, e.owners[victim].Close())
		require.NoError(t, e.trs[victim].Close()) // its connections end
		for i := range qs {
			require.NoError(t, <-errs, "lookup %d: owner %d went, its shards have replicas", i, victim)
			requireSameBytes(t, wants[i], qs[i].Out)
		}
		for range 3 {
			q := e.lookupReq(t, r, 300)
			want := reference(e.tables, q)
			require.NoError(t, Lookup(testContext(t), e.cli, q), "owner %d gone, its shards have replicas", victim)
			requireSameBytes(t, want, q.Out)
		}
		// A second owner gone leaves a shard (on those two) without a
		// replica: the lookup fails whole, naming it.
		second := (victim + 1) % 3
		require.NoError(t, e.owners[second].Close())
		require.NoError(t, e.trs[second].Close())
		q = e.lookupReq(t, r, 300)
		err := Lookup(testContext(t), e.cli, q)
		var se *ShardError
		require.ErrorAs(t, err, &se)
		require.ErrorIs(t, err, ErrTransfer)
		require.Len(t, se.Addrs, 2)
		require.Contains(t, se.Addrs, e.owners[victim].Addr())
		require.Contains(t, se.Addrs, e.owners[second].Addr())
		require.Contains(t, err.Error(), se.Table)
	})
	t.Run("unreplicated", func(t *testing.T) {
		e := newShardEnv(t, r, tcpBackend, 3, []float64{0.3, 0.6}, false)
		victim := r.IntN(3)
		require.NoError(t, e.owners[victim].Close())
		require.NoError(t, e.trs[victim].Close())
		q := e.lookupReq(t, r, 300)
		err := Lookup(testContext(t), e.cli, q)
		var se *ShardError
		require.ErrorAs(t, err, &se)
		require.Equal(t, []string{e.owners[victim].Addr()}, se.Addrs)
		require.Less(t, se.Lo, se.Hi)
		require.Error(t, se.Err, "the failure that took the last replica")
		require.Equal(t, uint64(1), e.cli.Stats().Failed)
	})
}

// TestShardedConfigRefused: shards that do not tile their tables, or that
// disagree with what the owners serve, are refused by Dial.
func TestShardedConfigRefused(t *testing.T) {
	r := newRand(t)
	e := newShardEnv(t, r, tcpBackend, 2, []float64{0.5}, false)
	dial := func(shards []Shard) error {
		c, err := Dial(testContext(t), ClientConfig{Transport: e.reqTr, Namespace: testNamespace, OutputBytes: 1 << 20, Shards: shards})
		if err == nil {
			c.Close()
		}
		return err
	}
	base := func() []Shard {
		out := make([]Shard, len(e.shards))
		for i, s := range e.shards {
			out[i] = s
			out[i].Addrs = append([]string(nil), s.Addrs...)
		}
		return out
	}
	require.NoError(t, dial(base()))
	var ce *ConfigError
	var me *MismatchError

	gap := base()
	gap = gap[1:] // emb's first shard missing
	require.ErrorAs(t, dial(gap), &ce)

	bad := base()
	bad[0].Hi-- // the owner serves one row more than the shard says
	err := dial(bad)
	require.True(t, errors.As(err, &me) || errors.As(err, &ce), "%v", err)

	wrong := base()
	wrong[0].Addrs = []string{e.owners[1].Addr()} // that owner holds the other half
	require.ErrorAs(t, dial(wrong), &me)

	both := base()
	_, err = Dial(testContext(t), ClientConfig{Transport: e.reqTr, Namespace: testNamespace, Addr: e.owners[0].Addr(), Shards: both})
	require.ErrorAs(t, err, &ce)
	for _, sh := range []Shard{{Table: "emb", Lo: 5, Hi: 5, Addrs: []string{"x"}}, {Table: "emb", Lo: 0, Hi: 1},
		{Table: "emb", Lo: 0, Hi: 1, Addrs: []string{"a", "a"}}, {Table: "bad name", Lo: 0, Hi: 1, Addrs: []string{"a"}}} {
		require.ErrorAs(t, dial([]Shard{sh}), &ce, "%+v", sh)
	}
}

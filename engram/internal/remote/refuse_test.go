package remote

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

// TestOwnerRefuses sends hand-built operations through the client's own
// connection that reach outside what the owner serves: rows past a
// table's end under a forged, longer RegionInfo, a WRITE into a table, an
// unknown key, malformed control calls. The owner refuses each (direct
// and gather alike), the destination stays untouched, the tables too, and
// the connection keeps serving valid lookups.
func TestOwnerRefuses(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRand(t)
			e := newEnv(t, r, envConfig{backend: be})
			ctx := testContext(t)
			tbl := e.cli.remote[e.cli.index["tiny"]] // 7 rows of 264 bytes
			const rows = 64
			out := e.output(t, r, rows*264)
			off := arenaOffset(t, e.cli, out)
			// Rows 7.. of a "table" of 1,000 rows: all past the real end.
			ids := make([]int32, rows)
			for i := range ids {
				ids[i] = int32(7 + i*13)
			}
			forged := tbl
			forged.Len = 1000 * 264
			past := &planfmt.Plan{Form: planfmt.FormRows, SrcExtent: forged.Len, DstExtent: uint64(len(out)),
				Rows: planfmt.Rows{RowSize: 264, TableRows: 1000, IDs32: ids}}
			tableBefore := append([]byte(nil), e.tables["tiny"].Rows...)
			served := e.srv.Stats()

			modes := []engine.Mode{engine.ModeDirect, engine.ModeGather}
			for _, mode := range modes {
				t.Run("read past the table/"+mode.String(), func(t *testing.T) {
					before := append([]byte(nil), out...)
					op := &engine.ScatterOp{Conn: e.cli.conn, Dir: verbs.OpRead, Remote: forged, Local: e.cli.local,
						LocalOff: off, Plan: past, Mode: mode}
					res, err := e.cli.engine.Do(ctx, op)
					require.Error(t, err)
					t.Logf("%v (mode %v, fallback %v: %v)", err, res.Mode, res.Fallback, res.FallbackErr)
					require.True(t, errors.Is(err, verbs.ErrBounds), "the owner's bounds check refused it: %v", err)
					require.Equal(t, before, out, "bytes were read")
					if mode == engine.ModeGather && e.cli.Exposed() {
						require.Equal(t, engine.FallbackRefused, res.Fallback, "the gather service refused the command")
					}
				})
			}
			if e.cli.Exposed() {
				require.Greater(t, e.srv.Stats().Refused, served.Refused)
			}

			t.Run("read from a forged key", func(t *testing.T) {
				before := append([]byte(nil), out...)
				key, err := verbs.NewKey()
				require.NoError(t, err)
				bogus := verbs.RegionInfo{Name: "bogus", Key: key, Len: 1 << 20, Access: verbs.AccessRemoteRead}
				plan := &planfmt.Plan{Form: planfmt.FormRows, SrcExtent: bogus.Len, DstExtent: uint64(len(out)),
					Rows: planfmt.Rows{RowSize: 264, TableRows: 3000, IDs32: ids}}
				_, err = e.cli.engine.Do(ctx, &engine.ScatterOp{Conn: e.cli.conn, Dir: verbs.OpRead, Remote: bogus,
					Local: e.cli.local, LocalOff: off, Plan: plan, Mode: engine.ModeDirect})
				require.ErrorIs(t, err, verbs.ErrBadKey)
				require.Equal(t, before, out)
			})

			t.Run("write into a table", func(t *testing.T) {
				writable := tbl
				writable.Access |= verbs.AccessRemoteWrite
				src := e.output(t, r, 7*264)
				srcOff := arenaOffset(t, e.cli, src)
				plan := &planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: uint64(len(src)), DstExtent: tbl.Len,
					Ranges: []planfmt.Range{{Src: 0, Dst: 0, Len: 264}, {Src: 264, Dst: 3 * 264, Len: 264}}}
				_, err := e.cli.engine.Do(ctx, &engine.ScatterOp{Conn: e.cli.conn, Dir: verbs.OpWrite, Remote: writable,
					Local: e.cli.local, LocalOff: srcOff, Plan: plan, Mode: engine.ModeDirect})
				require.ErrorIs(t, err, verbs.ErrAccess)
			})
			require.Equal(t, tableBefore, e.tables["tiny"].Rows, "a table changed")

			t.Run("malformed calls", func(t *testing.T) {
				for _, m := range []uint16{MethodTables, MethodPing} {
					_, err := e.cli.conn.Call(ctx, m, []byte{1}, nil)
					require.ErrorIs(t, err, verbs.ErrHandler)
				}
				_, err := e.cli.conn.Call(ctx, gather.MethodGather, []byte("not a command"), nil)
				require.Error(t, err)
			})

			t.Run("still serving", func(t *testing.T) {
				p := pattern{columns: func(_ *rand.Rand, k int) ([]string, []int64) { return repeat("tiny", k), nil }}
				checkLookup[int32](t, r, e, p, layouts[0], 40, 24, 7)
			})
		})
	}
}

// TestOwnerGone closes the owner under a client, between lookups and while
// lookups run: every lookup ends (an error, never a hang), and the client
// still closes cleanly.
func TestOwnerGone(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRand(t)
			e := newEnv(t, r, envConfig{backend: be, outputBytes: 64 << 20})
			var jobs []*lookup.Request
			for i := range 4 {
				tokens := []int{1, 16, 700, 4096}[i]
				names := repeat("emb", 24)
				jobs = append(jobs, &lookup.Request{Tables: names, IDs32: randomIDs[int32](r, e, names, nil, tokens, 0),
					T: tokens, K: 24, Out: e.output(t, r, tokens*24*264), TStride: 24 * 264, KStride: 264})
			}
			ctx := testContext(t)
			for _, q := range jobs {
				require.NoError(t, Lookup(ctx, e.cli, q))
			}

			var wg sync.WaitGroup
			errs := make([]error, len(jobs))
			start := make(chan struct{})
			for i, q := range jobs {
				wg.Go(func() {
					<-start
					for {
						if err := Lookup(ctx, e.cli, q); err != nil {
							errs[i] = err
							return
						}
					}
				})
			}
			close(start)
			time.Sleep(20 * time.Millisecond)
			require.NoError(t, e.srv.Close())
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("lookups still running 10 s after the owner closed")
			}
			for i, err := range errs {
				require.Error(t, err)
				require.NotErrorIs(t, err, context.DeadlineExceeded, "lookup %d waited for its deadline", i)
				t.Logf("lookup %d: %v", i, err)
			}
			// Later lookups fail at once too.
			t0 := time.Now()
			require.ErrorIs(t, Lookup(ctx, e.cli, jobs[0]), ErrTransfer)
			require.Less(t, time.Since(t0), 5*time.Second)
			_, err := e.cli.Ping(ctx)
			require.Error(t, err)
		})
	}
}

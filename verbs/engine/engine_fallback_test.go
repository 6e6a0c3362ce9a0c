package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

// TestFallback runs operations whose gather cannot happen or fails and
// checks that each ends correct, direct, with the reason counted.
func TestFallback(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				cfg  fixtureConfig
				dir  verbs.Op
				mode engine.Mode
				// setup runs before the op and returns a cleanup.
				setup func(t *testing.T, f *fixture) func()
				want  engine.Fallback
			}{
				{name: "no-service-gather", cfg: fixtureConfig{noService: true}, mode: engine.ModeGather, want: engine.FallbackNoService},
				{name: "no-service-auto", cfg: fixtureConfig{noService: true}, mode: engine.ModeAuto, want: engine.FallbackNoService},
				{name: "not-exposed", cfg: fixtureConfig{noExpose: true}, mode: engine.ModeGather, want: engine.FallbackNotExposed},
				{name: "no-write-staging", dir: verbs.OpWrite, mode: engine.ModeGather, want: engine.FallbackNotExposed},
				{name: "refused-limits", mode: engine.ModeGather, want: engine.FallbackRefused,
					cfg: fixtureConfig{service: func(c *gather.Config) { c.Limits.MaxFragments = 100 }}},
				{name: "owner-exhausted", mode: engine.ModeGather, want: engine.FallbackExhausted,
					cfg: fixtureConfig{service: func(c *gather.Config) { c.AcquireTimeout = time.Millisecond }},
					setup: func(t *testing.T, f *fixture) func() {
						// Hold the owner's whole pool.
						l, err := f.ownerStaging.Pool().TryAcquire(f.ownerStaging.Pool().Stats().Budget)
						require.NoError(t, err)
						return func() { require.NoError(t, l.Release()) }
					}},
				{name: "owner-aborts", mode: engine.ModeGather, want: engine.FallbackAborted,
					setup: func(t *testing.T, f *fixture) func() {
						// A handler that writes garbage into the first
						// destination row, then fails: direct must rewrite it.
						junk, err := f.owner.Alloc(4096, verbs.AccessLocal)
						require.NoError(t, err)
						for i := range junk.Bytes() {
							junk.Bytes()[i] = 0xEE
						}
						f.seg.Handle(gatherwire.MethodGather, verbs.HandlerFunc(func(ctx context.Context, p verbs.Peer, req, resp []byte) ([]byte, error) {
							var cmd planfmt.Command
							if err := planfmt.DecodeCommand(&cmd, req); err != nil {
								return nil, err
							}
							first := verbstest.Fragments(&cmd.Plan)[0]
							wr := verbs.WorkRequest{ID: 1, Op: verbs.OpWrite, Len: uint32(first.N), LocalKey: junk.Key(),
								RemoteKey: verbs.Key(cmd.Dst.Key), RemoteOff: cmd.Dst.Off + first.Dst}
							if _, err := p.Post([]verbs.WorkRequest{wr}); err != nil {
								return nil, err
							}
							cs := make([]verbs.Completion, 1)
							if _, err := p.Wait(ctx, cs, 1); err != nil || cs[0].Err != nil {
								return nil, fmt.Errorf("junk write: %v %v", err, cs[0].Err)
							}
							return nil, errors.New("verbs: gather aborted: transfer: injected failure")
						}))
						return func() {}
					}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					r := verbstest.NewRand(t)
					cfg := tc.cfg
					cfg.backend, cfg.tableBytes, cfg.localBytes = be, tableBytes, localBytes
					f := newFixture(t, r, cfg)
					undo := func() {}
					if tc.setup != nil {
						undo = tc.setup(t, f)
					}
					dir := tc.dir
					if dir == 0 {
						dir = verbs.OpRead
					}
					p := rowsPlan(r, localBytes, 3000, 264, 11, 0)
					res := f.run(t, dir, p, tc.mode)
					undo()
					require.Equal(t, engine.ModeDirect, res.Mode)
					require.Equal(t, tc.want, res.Fallback, "fallback error: %v", res.FallbackErr)
					st := f.eng.Stats()
					require.Equal(t, uint64(1), st.Fallbacks[tc.want])
					require.Equal(t, uint64(1), st.FallbackTotal)
					require.Equal(t, uint64(1), st.Direct)
					if f.ownerStaging != nil {
						require.Zero(t, f.ownerStaging.Pool().Stats().Leases)
					}
				})
			}
		})
	}
}

// TestFallbackWriteExhausted holds the requester's staging so a WRITE
// gather cannot stage its first wave.
func TestFallbackWriteExhausted(t *testing.T) {
	r := verbstest.NewRand(t)
	f := newFixture(t, r, fixtureConfig{backend: backends[1], tableBytes: tableBytes, localBytes: localBytes,
		reqStaging: true, engine: engine.Config{StagingTimeout: time.Millisecond}})
	l, err := f.reqStaging.Pool().TryAcquire(f.reqStaging.Pool().Stats().Budget)
	require.NoError(t, err)
	res := f.run(t, verbs.OpWrite, rowsPlan(r, localBytes, 2000, 264, 0, 0), engine.ModeGather)
	require.NoError(t, l.Release())
	require.Equal(t, engine.FallbackExhausted, res.Fallback)
	require.ErrorIs(t, res.FallbackErr, bufferpool.ErrExhausted)
	require.Equal(t, engine.ModeDirect, res.Mode)
}

// TestStagingPressure runs 8 concurrent callers against an owner whose
// pool holds one slot: every operation must complete correctly (gathered
// or fallen back), and the pool must end with nothing leased.
func TestStagingPressure(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			const callers, rounds, rowsPer = 8, 4, 600
			window := uint64(rowsPer * 264)
			f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: callers * int(window),
				ownerPool: bufferpool.Config{Budget: 64 << 10, MinSlot: 64 << 10, NoHugePages: true},
				service:   func(c *gather.Config) { c.AcquireTimeout = 200 * time.Microsecond }})
			plans := make([]*planfmt.Plan, callers*rounds)
			for i := range plans {
				plans[i] = rowsPlan(r, tableBytes, rowsPer, 264, 13, 0)
			}
			var wg sync.WaitGroup
			errs := make([]error, callers)
			results := make([][]engine.Result, callers)
			for c := range callers {
				wg.Go(func() {
					for k := range rounds {
						p := plans[c*rounds+k]
						op := f.op(verbs.OpRead, p, engine.ModeGather)
						op.LocalOff = uint64(c) * window
						want := verbstest.Expect(p, f.table.Bytes(), 0, f.local.Bytes()[op.LocalOff:op.LocalOff+window], 0)
						res, err := f.eng.Do(verbstest.Context(t), op)
						if err != nil {
							errs[c] = err
							return
						}
						if !bytes.Equal(want, f.local.Bytes()[op.LocalOff:op.LocalOff+window]) {
							errs[c] = fmt.Errorf("caller %d round %d: destination differs (mode %v, fallback %v)", c, k, res.Mode, res.Fallback)
							return
						}
						results[c] = append(results[c], res)
					}
				})
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}
			var gathered, exhausted int
			for _, rs := range results {
				for _, res := range rs {
					switch {
					case res.Mode == engine.ModeGather:
						gathered++
						require.LessOrEqual(t, res.Trace.StagingPeak, int64(64<<10), "bounded by P*C")
					case res.Fallback == engine.FallbackExhausted:
						exhausted++
					default:
						t.Fatalf("unexpected outcome: mode %v fallback %v: %v", res.Mode, res.Fallback, res.FallbackErr)
					}
				}
			}
			t.Logf("%d gathered, %d fell back on exhaustion", gathered, exhausted)
			require.Equal(t, callers*rounds, gathered+exhausted)
			ps := f.ownerStaging.Pool().Stats()
			require.Zero(t, ps.InUse)
			require.Zero(t, ps.Leases)
			require.LessOrEqual(t, ps.Peak, 64<<10)
			ss := f.svc.Stats()
			require.Equal(t, uint64(gathered), ss.Reads)
			require.Equal(t, uint64(exhausted), ss.Exhausted)
		})
	}
}

// TestOpFailures checks operations that fail as a whole: the connection is
// gone (gather and direct both fail) and the context ended.
func TestOpFailures(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			t.Run("conn-closed", func(t *testing.T) {
				f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes})
				p := rowsPlan(r, localBytes, 1000, 264, 0, 0)
				_, err := f.eng.Prepare(verbstest.Context(t), f.conn)
				require.NoError(t, err)
				require.NoError(t, f.conn.Close())
				for _, mode := range []engine.Mode{engine.ModeGather, engine.ModeDirect} {
					_, err = f.eng.Do(verbstest.Context(t), f.op(verbs.OpRead, p, mode))
					var oe *engine.OpError
					require.ErrorAs(t, err, &oe)
					require.ErrorIs(t, err, verbs.ErrClosed)
					require.Equal(t, engine.ModeDirect, oe.Mode)
					if mode == engine.ModeGather {
						require.Error(t, oe.Gather)
					}
				}
				st := f.eng.Stats()
				require.Equal(t, uint64(2), st.Failed)
				require.Zero(t, f.ownerStaging.Pool().Stats().Leases)
			})
			t.Run("context-ended", func(t *testing.T) {
				f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes})
				p := rowsPlan(r, localBytes, 1000, 264, 0, 0)
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				for _, mode := range []engine.Mode{engine.ModeGather, engine.ModeDirect, engine.ModeAuto} {
					_, err := f.eng.Do(ctx, f.op(verbs.OpRead, p, mode))
					require.ErrorIs(t, err, context.Canceled)
					var oe *engine.OpError
					require.ErrorAs(t, err, &oe)
				}
				// The engine still works afterwards.
				f.run(t, verbs.OpRead, p, engine.ModeGather)
			})
		})
	}
}

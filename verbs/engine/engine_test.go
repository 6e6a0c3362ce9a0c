package engine_test

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

const (
	tableBytes = 4 << 20
	localBytes = 2 << 20
)

// testPlans are the geometries every backend, direction and mode runs.
func testPlans(r *rand.Rand) []struct {
	name string
	plan *planfmt.Plan
} {
	return []struct {
		name string
		plan *planfmt.Plan
	}{
		{"rows-R64", rowsPlan(r, localBytes, 3000, 64, 0, 0)},
		{"rows-R264-skips", rowsPlan(r, localBytes, 3000, 264, 9, 100)},
		{"rows-R1000", rowsPlan(r, localBytes, 700, 1000, 5, 0)},
		{"rows-strided-264", stridedPlan(r, localBytes, 400, 4, 264, 40)},
		{"ranges-mixed", mixedPlan(r, localBytes, 1500, 264, 6, 96<<10)},
	}
}

// run runs one op and checks the destination against the reference,
// poison included.
func (f *fixture) run(t *testing.T, dir verbs.Op, p *planfmt.Plan, mode engine.Mode) engine.Result {
	t.Helper()
	var want []byte
	if dir == verbs.OpRead {
		want = verbstest.Expect(p, f.table.Bytes(), 0, f.local.Bytes(), 0)
	} else {
		want = verbstest.Expect(p, f.local.Bytes(), 0, f.table.Bytes(), 0)
	}
	res, err := f.eng.Do(verbstest.Context(t), f.op(dir, p, mode))
	require.NoError(t, err)
	got := f.local.Bytes()
	if dir == verbs.OpWrite {
		got = f.table.Bytes()
	}
	require.True(t, bytes.Equal(want, got), "destination differs from the reference (mode %v, result %v, fallback %v: %v)",
		mode, res.Mode, res.Fallback, res.FallbackErr)
	var n uint64
	for _, fr := range verbstest.Fragments(p) {
		n += fr.N
	}
	require.Equal(t, n, res.Bytes)
	require.Equal(t, n, sum(res.SpanBytes))
	require.Equal(t, n, res.Trace.Payload)
	require.Positive(t, res.Trace.Total)
	return res
}

func TestScatterMatrix(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			for _, dir := range []verbs.Op{verbs.OpRead, verbs.OpWrite} {
				t.Run(dir.String(), func(t *testing.T) {
					r := verbstest.NewRand(t)
					f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes,
						reqStaging: true, lanes: 2})
					// Ranges sources and row tables are relative to the
					// source extent: the table for READ, the local region
					// for WRITE; both plans fit in the smaller (local).
					for _, tp := range testPlans(r) {
						t.Run(tp.name, func(t *testing.T) {
							for _, mode := range []engine.Mode{engine.ModeDirect, engine.ModeGather, engine.ModeAuto} {
								t.Run(mode.String(), func(t *testing.T) {
									res := f.run(t, dir, tp.plan, mode)
									switch {
									case mode == engine.ModeDirect:
										require.Equal(t, engine.ModeDirect, res.Mode)
										require.Equal(t, engine.FallbackNone, res.Fallback)
									case dir == verbs.OpWrite && !be.exposeRegistered:
										// shm cannot expose a registered staging arena.
										require.Equal(t, engine.ModeDirect, res.Mode)
										require.Equal(t, engine.FallbackNotExposed, res.Fallback)
									case mode == engine.ModeGather:
										require.Equal(t, engine.ModeGather, res.Mode, "fallback %v: %v", res.Fallback, res.FallbackErr)
										require.Equal(t, engine.FallbackNone, res.Fallback)
										require.Positive(t, res.Trace.Chunks)
										require.Positive(t, res.Trace.Waves)
										if res.Trace.Inline {
											// The payload came in the reply: no staging.
											require.Equal(t, verbs.OpRead, dir)
											require.LessOrEqual(t, res.Bytes, uint64(engine.DefaultInlineMax))
											require.Zero(t, res.Trace.StagingPeak)
										} else {
											require.Positive(t, res.Trace.StagingPeak)
										}
									}
								})
							}
						})
					}
					require.Zero(t, f.ownerStaging.Pool().Stats().InUse)
					if f.reqStaging != nil {
						require.Zero(t, f.reqStaging.Pool().Stats().InUse)
					}
				})
			}
		})
	}
}

// TestConcurrentSubmit has several goroutines submit batches of
// operations of mixed modes and directions on one Conn before waiting for
// any, each into its own window, and checks every byte.
func TestConcurrentSubmit(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			const callers, batch, rows = 6, 5, 400
			window := uint64(rows * 264)
			f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: callers * batch * int(window),
				reqStaging: true, engine: engine.Config{PollBatch: 64}})
			type job struct {
				op   *engine.ScatterOp
				want []byte
				got  func() []byte
			}
			jobs := make([][]job, callers)
			modes := []engine.Mode{engine.ModeDirect, engine.ModeGather, engine.ModeAuto}
			for c := range callers {
				for k := range batch {
					slotOff := uint64(c*batch+k) * window
					dir := verbs.OpRead
					if r.IntN(3) == 0 {
						dir = verbs.OpWrite
					}
					// Rows come from a window of the source that no WRITE
					// of this test touches (the table's upper half is
					// read only by READs; WRITEs land in the lower half).
					p := rowsPlan(r, int(window), rows, 264, 10, 0)
					op := f.op(dir, p, modes[r.IntN(len(modes))])
					op.LocalOff = slotOff
					op.RemoteOff = tableBytes/2 + slotOff%(tableBytes/2-window)
					j := job{op: op}
					if dir == verbs.OpRead {
						j.want = verbstest.Expect(p, f.table.Bytes(), op.RemoteOff, f.local.Bytes()[slotOff:slotOff+window], 0)
						j.got = func() []byte { return f.local.Bytes()[slotOff : slotOff+window] }
					} else {
						op.RemoteOff = slotOff % (tableBytes/2 - window)
						op.RemoteOff -= op.RemoteOff % window
						j.want = nil
					}
					jobs[c] = append(jobs[c], j)
				}
			}
			// WRITE destinations in the lower half may collide between
			// callers: give each WRITE a distinct window there.
			next := uint64(0)
			for c := range jobs {
				for k := range jobs[c] {
					j := &jobs[c][k]
					if j.op.Dir != verbs.OpWrite {
						continue
					}
					j.op.RemoteOff = next
					next += window
					require.LessOrEqual(t, next, uint64(tableBytes/2))
					off := j.op.RemoteOff
					j.want = verbstest.Expect(j.op.Plan, f.local.Bytes(), j.op.LocalOff, f.table.Bytes()[off:off+window], 0)
					j.got = func() []byte { return f.table.Bytes()[off : off+window] }
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, callers)
			for c := range callers {
				wg.Go(func() {
					ops := make([]*engine.Operation, 0, batch)
					for _, j := range jobs[c] {
						o, err := f.eng.Submit(verbstest.Context(t), j.op)
						if err != nil {
							errs[c] = err
							return
						}
						ops = append(ops, o)
					}
					for i := len(ops) - 1; i >= 0; i-- { // out of order
						if _, err := ops[i].Wait(verbstest.Context(t)); err != nil {
							errs[c] = err
							return
						}
					}
				})
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}
			for c := range jobs {
				for k, j := range jobs[c] {
					require.True(t, bytes.Equal(j.want, j.got()), "caller %d op %d (%v %v) differs", c, k, j.op.Dir, j.op.Mode)
				}
			}
			st := f.eng.Stats()
			require.Equal(t, uint64(callers*batch), st.Ops)
			require.Zero(t, st.Failed)
		})
	}
}

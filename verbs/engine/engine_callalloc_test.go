package engine_test

import (
	"bytes"
	"context"
	"runtime/debug"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

// raceBuild reports whether the test binary was built with -race (the
// race detector allocates on its own).
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// TestCallAllocs checks the control-call path end to end, both sides in
// this process: a warm Conn.Call of the gather service's info method and
// a warm gather READ through the Engine allocate nothing at all. Repeated
// calls reuse the requester's pending-call state and the owner's handler
// goroutines, Peer queues, request and response buffers.
func TestCallAllocs(t *testing.T) {
	if raceBuild() {
		t.Skip("the race detector allocates")
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: localBytes})
			ctx := context.Background()
			_, err := f.eng.Prepare(ctx, f.conn)
			require.NoError(t, err)

			t.Run("info-call", func(t *testing.T) {
				buf := make([]byte, 0, 256)
				var want []byte
				call := func() {
					resp, err := f.conn.Call(ctx, gatherwire.MethodGatherInfo, nil, buf[:0])
					if err != nil || len(resp) == 0 || &resp[0] != &buf[:1][0] {
						t.Fatalf("info call: %d bytes, %v", len(resp), err)
					}
					if want == nil {
						want = append([]byte(nil), resp...)
					} else if string(resp) != string(want) {
						t.Fatalf("info answer changed: %x, then %x", want, resp)
					}
				}
				for range 20 {
					call()
				}
				allocs := testing.AllocsPerRun(200, call)
				t.Logf("%s: %.2f allocations per info call", be.name, allocs)
				require.Zero(t, allocs)
			})

			t.Run("gather-read", func(t *testing.T) {
				plan := rowsPlan(r, tableBytes, 2000, 264, 0, 0)
				op := f.op(verbs.OpRead, plan, engine.ModeGather)
				op.SpanBytes = make([]uint64, 0, 1)
				do := func() {
					res, err := f.eng.Do(ctx, op)
					if err != nil || res.Mode != engine.ModeGather {
						t.Fatalf("gather: mode %v, %v (fallback %v: %v)", res.Mode, err, res.Fallback, res.FallbackErr)
					}
				}
				for range 20 { // warm: engine states, owner staging, workers, Peers
					do()
				}
				// Fresh destination bytes, so the measured runs must write.
				verbstest.Fill(r, f.local.Bytes())
				want := verbstest.Expect(plan, f.table.Bytes(), 0, f.local.Bytes(), 0)
				allocs := testing.AllocsPerRun(100, do)
				t.Logf("%s: %.2f allocations per gather READ of %d rows", be.name, allocs, plan.Rows.Len())
				require.Zero(t, allocs)
				require.True(t, bytes.Equal(want, f.local.Bytes()), "destination differs after the gathers")
			})
		})
	}
}

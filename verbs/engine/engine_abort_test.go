package engine_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/faultproxy"
)

// TestAbortFence: an operation whose network stalls past its context's
// deadline returns within AbortGrace of it (plus the close), failing
// with the context's error and ErrClosed, for direct and gather, READ
// and WRITE; nothing of a READ lands in the caller's memory after it
// returned, even once the network heals; the owner is healthy afterwards
// and keeps no staging.
func TestAbortFence(t *testing.T) {
	const grace = 200 * time.Millisecond
	for _, tc := range []struct {
		name string
		dir  verbs.Op
		mode engine.Mode
	}{
		{"direct-read", verbs.OpRead, engine.ModeDirect},
		{"direct-write", verbs.OpWrite, engine.ModeDirect},
		{"gather-read", verbs.OpRead, engine.ModeGather},
		{"gather-write", verbs.OpWrite, engine.ModeGather},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			f := newFixture(t, r, fixtureConfig{backend: backends[1], tableBytes: 16 << 20, localBytes: 16 << 20,
				proxy: true, reqStaging: true, engine: engine.Config{AbortGrace: grace},
				service: func(sc *gather.Config) { sc.ProgressTimeout = time.Hour }})
			op := f.op(tc.dir, rowsPlan(r, 16<<20, 40_000, 264, 0, 0), tc.mode)
			_, err := f.eng.Prepare(verbstest.Context(t), f.conn) // the owner's gather capability, before the stall
			require.NoError(t, err)
			require.NoError(t, f.px.Set(faultproxy.Fault{Kind: faultproxy.Stall}))
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err = f.eng.Do(ctx, op)
			took := time.Since(start)
			require.Error(t, err)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorIs(t, err, verbs.ErrClosed, "the stalled transfers were fenced by closing the connection")
			require.Less(t, took, 300*time.Millisecond+grace+2*time.Second, "returned %v after the start", took)
			t.Logf("returned after %v: %v", took, err)

			before := bytes.Clone(f.local.Bytes())
			f.px.Heal()
			time.Sleep(100 * time.Millisecond)
			if tc.dir == verbs.OpRead {
				require.True(t, bytes.Equal(before, f.local.Bytes()), "a READ landed after its operation returned")
			}
			// The owner is healthy: a fresh connection, not through the
			// proxy, reads correctly; the evicted one left no staging.
			c, err := f.req.Connect(verbstest.Context(t), f.seg.Addr(), verbs.ConnectOptions{Link: manySmallLink,
				Expose: []verbs.Export{{Name: "dst", Region: f.local}}})
			require.NoError(t, err)
			defer c.Close()
			good := f.op(verbs.OpRead, rowsPlan(r, 16<<20, 5_000, 264, 0, 0), engine.ModeGather)
			good.Conn = c
			_, err = f.eng.Do(verbstest.Context(t), good)
			require.NoError(t, err)
			require.Equal(t, verbstest.Expect(good.Plan, f.table.Bytes(), 0, f.local.Bytes(), 0), f.local.Bytes())
			require.Eventually(t, func() bool { return f.ownerStaging.Pool().Stats().Leases == 0 }, 10*time.Second, time.Millisecond)
			_, err = f.eng.Do(verbstest.Context(t), op)
			require.True(t, errors.Is(err, verbs.ErrClosed), "the fenced connection stays closed: %v", err)
		})
	}
}

package engine_test

import (
	"testing"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

// TestInlineReply: READ gathers up to the inline limit come back inside the
// reply (no staging, no bulk WRITEs) with the same bytes as direct; the
// engine and the owner each can turn it off; larger ones use staging.
func TestInlineReply(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			const table, local = 8 << 20, 2 << 20
			plans := map[string]*planfmt.Plan{
				"rows-skips":  rowsPlan(r, table, 300, 264, 7, 128),
				"strided":     stridedPlan(r, table, 16, 24, 264, 40),
				"ranges":      mixedPlan(r, table, 200, 100, 2, 8<<10),
				"above-limit": rowsPlan(r, table, 1200, 264, 0, 0), // 316,800 B > 256 KiB
			}
			cases := []struct {
				name         string
				engineMax    int64
				serviceMax   int64
				wantInlineLE int64 // plans up to this payload come inline (0: none)
			}{
				{"default", 0, 0, engine.DefaultInlineMax},
				{"engine-off", -1, 0, 0},
				{"owner-off", 0, -1, 0},
				{"owner-smaller", 0, 64 << 10, 64 << 10},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: table, localBytes: local,
						engine:  engine.Config{InlineMax: tc.engineMax},
						service: func(sc *gather.Config) { sc.InlineMax = tc.serviceMax }})
					for name, p := range plans {
						res := f.run(t, verbs.OpRead, p, engine.ModeGather)
						require.Equal(t, engine.ModeGather, res.Mode, "%s: fallback %v: %v", name, res.Fallback, res.FallbackErr)
						want := int64(res.Bytes) <= tc.wantInlineLE
						require.Equal(t, want, res.Trace.Inline, "%s: %d bytes", name, res.Bytes)
						if res.Trace.Inline {
							require.Zero(t, res.Trace.StagingPeak, name)
						} else {
							require.Positive(t, res.Trace.StagingPeak, name)
						}
					}
					st := f.svc.Stats()
					require.LessOrEqual(t, st.Inline, st.Reads)
					if tc.wantInlineLE == 0 {
						require.Zero(t, st.Inline)
					} else {
						require.Positive(t, st.Inline)
					}
				})
			}
		})
	}
}

func TestInlineReplyConfig(t *testing.T) {
	_, err := engine.New(engine.Config{InlineMax: engine.MaxInlineReply + 1})
	require.ErrorIs(t, err, verbs.ErrInvalid)
}

package bench

import (
	"context"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/verbs"
)

// BenchmarkScatter times one operation of the default workloads per
// transport and mode against an in-process owner with a 1 GiB table (the
// setup fills it: a second or two). It reports goodput in Gbit/s besides
// the standard figures; the command's goals use scatterbench itself.
func BenchmarkScatter(b *testing.B) {
	for _, tr := range []string{"tcp", "shm"} {
		b.Run(tr, func(b *testing.B) {
			var ws []Workload
			for _, n := range DefaultWorkloads {
				w, _ := Lookup(n)
				ws = append(ws, w)
			}
			c := &Config{Owner: OwnerInproc, StagingSlots: 8, StagingBytes: 64 << 20, Callers: 1, Seed: 1, TableBytes: 1 << 30}
			ctx := context.Background()
			s, err := newSession(ctx, c, Pass{Transport: tr, Workloads: ws}, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := s.close(nil); err != nil {
					b.Error(err)
				}
			}()
			for i := range ws {
				w := &ws[i]
				p, err := w.Plan(planRand(c.Seed, w.Name), s.table.Len)
				if err != nil {
					b.Fatal(err)
				}
				for _, m := range Modes[:3] {
					b.Run(w.Name+"/"+m.Name, func(b *testing.B) {
						op := engine.ScatterOp{Conn: s.conn, Dir: verbs.OpRead, Remote: s.table, Local: s.dst, Plan: p, Mode: m.Verbs,
							SpanBytes: make([]uint64, 0, 1)}
						b.SetBytes(int64(w.Payload()))
						b.ReportAllocs()
						fallbacks := 0
						for b.Loop() {
							res, err := s.eng.Do(ctx, &op)
							if err != nil {
								b.Fatal(err)
							}
							if res.Fallback != engine.FallbackNone {
								fallbacks++
							}
						}
						b.ReportMetric(float64(w.Payload())*8*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gbit/s")
						b.ReportMetric(float64(fallbacks)/float64(b.N), "fallbacks/op")
					})
				}
			}
		})
	}
}

package gather

import (
	"time"

	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"
	"github.com/scatterkit/scatterkit/verbs/internal/packstream"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

// packInline packs a validated READ command's whole payload behind an
// 88-byte space for the reply record in resp (grown if needed) and returns
// it; the caller writes the record in front.
func (s *Service) packInline(st *cmdState, c *command, out *gatherwire.Stats, resp []byte) []byte {
	total := int(out.Payload)
	n := gatherwire.ReplySize + total
	if cap(resp) < n {
		resp = make([]byte, n)
	}
	resp = resp[:n]
	buf := resp[gatherwire.ReplySize:]
	plan := &st.cmd.Plan
	t := time.Now()
	stage.Begin(c.markID, stage.Pack)
	if plan.Form == planfmt.FormRows {
		var rows packstream.RowCursor
		skips := st.norm.Summary().Skipped > 0
		rows.Init(plan, c.own, skips)
		var w *pack.Workers
		if total >= s.cfg.ParallelMin {
			w = s.workers
		}
		if rows.IDs32 != nil {
			packstream.PackRows(buf, rows.Table, rows.IDs32, rows.RowSize, skips, w)
		} else {
			packstream.PackRows(buf, rows.Table, rows.IDs64, rows.RowSize, skips, w)
		}
	} else {
		var rng packstream.RangeCursor
		rng.Init(plan.Ranges)
		rng.PackInto(buf, c.own)
	}
	stage.End(c.markID, stage.Pack, uint64(total))
	out.Pack = time.Since(t)
	out.Window = out.Pack
	out.Fill = time.Since(c.received)
	out.Chunks, out.Chunk = 1, uint64(total)
	return resp
}

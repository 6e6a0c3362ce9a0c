package verbs

import (
	"time"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

// packInline packs a validated READ command's whole payload behind an
// 88-byte space for the reply record in resp (grown if needed) and returns
// it; the caller writes the record in front.
func (s *GatherService) packInline(st *cmdState, c *command, out *ownerStats, resp []byte) []byte {
	total := int(out.payload)
	n := replySize + total
	if cap(resp) < n {
		resp = make([]byte, n)
	}
	resp = resp[:n]
	buf := resp[replySize:]
	plan := &st.cmd.Plan
	t := time.Now()
	stage.Begin(c.markID, stage.Pack)
	if plan.Form == planfmt.FormRows {
		var rows rowCursor
		skips := st.norm.Geometry().Skipped > 0
		rows.init(plan, c.own, skips)
		var w *pack.Workers
		if total >= s.cfg.ParallelMin {
			w = s.workers
		}
		if rows.ids32 != nil {
			packRows(buf, rows.table, rows.ids32, rows.rowSize, skips, w)
		} else {
			packRows(buf, rows.table, rows.ids64, rows.rowSize, skips, w)
		}
	} else {
		var rng rangeCursor
		rng.init(plan.Ranges)
		rng.packInto(buf, c.own)
	}
	stage.End(c.markID, stage.Pack, uint64(total))
	out.pack = time.Since(t)
	out.window = out.pack
	out.fill = time.Since(c.received)
	out.chunks, out.chunk = 1, uint64(total)
	return resp
}

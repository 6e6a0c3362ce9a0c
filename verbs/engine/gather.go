package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"
	"github.com/scatterkit/scatterkit/verbs/internal/packstream"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

// minPackSample is the shortest owner packing time fed to the moving
// model: below it the timer and the per-command fixed costs, not the
// copy rate, decide the figure.
const minPackSample = 50 * time.Microsecond

// gatherPlan is the plan the gather part carries: the whole plan, or the
// hybrid's sub-plan of small spans.
func (op *Operation) gatherPlan() *planfmt.Plan {
	if op.mode == ModeHybrid {
		return &op.h.subPlan
	}
	return op.sop.Plan
}

// prepareGather builds what the gather part needs before launch: the
// hybrid split's two parts, the READ command (encoded once), or the
// destination runs of a WRITE. On failure the operation runs direct.
func (op *Operation) prepareGather() {
	if op.mode == ModeHybrid {
		op.buildHybrid()
	}
	var err error
	if op.g.chunked {
		// Per-chunk commands are built at launch: a rows plan's from its
		// ids, a ranges plan's from its spans.
		if op.sop.Plan.Form == planfmt.FormRanges {
			op.g.spans = op.appendSpans(op.g.spans[:0])
		}
	} else if op.g.staged {
		// Per-chunk commands are built at launch: a rows plan's from its
		// ids (and its replies scattered by its layout), a ranges plan's
		// from its spans (and its replies scattered by its destination
		// runs).
		if op.sop.Plan.Form == planfmt.FormRanges {
			op.g.spans = op.appendSpans(op.g.spans[:0])
			runs := op.g.runs[:0]
			op.norm.ForEachRun(func(dst, stream, n uint64) bool {
				runs = append(runs, planfmt.Run{Dst: dst, Stream: stream, Len: n})
				return true
			})
			op.g.runs = runs
		}
	} else if op.sop.Dir == verbs.OpRead {
		op.g.cmd = planfmt.Command{
			OpID: op.id, Dir: planfmt.Read,
			Src:   planfmt.Window{Key: uint64(op.sop.Remote.Key), Off: op.sop.RemoteOff, Len: op.sop.Plan.SrcExtent},
			Dst:   planfmt.Window{Key: uint64(op.sop.Local.Key()), Off: op.sop.LocalOff, Len: op.sop.Plan.DstExtent},
			Chunk: uint64(op.g.chunk), Pipeline: uint32(op.g.slots),
			Plan: *op.gatherPlan(),
		}
		if op.mode != ModeHybrid && op.g.inline {
			op.g.cmd.Flags |= planfmt.FlagInlineReply
		}
		op.g.cmdBuf, err = planfmt.AppendCommand(op.g.cmdBuf[:0], &op.g.cmd)
		op.g.cmd.Plan = planfmt.Plan{}
	} else if op.mode == ModeHybrid {
		op.g.runs = packstream.AppendRuns(op.g.runs[:0], op.h.sub)
	} else if op.sop.Plan.Form == planfmt.FormRanges {
		op.g.runs = packstream.AppendRuns(op.g.runs[:0], op.sop.Plan.Ranges)
	} else {
		runs := op.g.runs[:0]
		op.norm.ForEachRun(func(dst, stream, n uint64) bool {
			runs = append(runs, planfmt.Run{Dst: dst, Stream: stream, Len: n})
			return true
		})
		op.g.runs = runs
	}
	if err != nil {
		if op.mode == ModeHybrid && op.mapper == nil {
			op.cs.release(&op.primary)
		}
		op.noGather(FallbackUnsupported, fmt.Errorf("verbs: gather command: %w", err))
	}
}

// appendSpans appends the plan's non-empty spans in stream order.
func (op *Operation) appendSpans(spans []planfmt.Range) []planfmt.Range {
	op.norm.ForEachSpan(func(src, dst, n uint64) bool {
		if n > 0 {
			spans = append(spans, planfmt.Range{Src: src, Dst: dst, Len: n})
		}
		return true
	})
	return spans
}

// runGather runs the gather part and reports it.
func (op *Operation) runGather() {
	var err error
	var fb Fallback
	if op.g.staged {
		err, fb = op.gatherStaged()
	} else if op.g.chunked {
		err, fb = op.gatherChunked()
	} else if op.sop.Dir == verbs.OpRead {
		err, fb = op.gatherRead()
	} else {
		err, fb = op.gatherWrite()
	}
	op.gatherDone(err, fb)
}

// classify maps a failed gather call to its fallback reason.
func classify(err error) Fallback {
	var ce *verbs.CallError
	if errors.As(err, &ce) {
		if ce.Status == verbs.StatusNotSupported {
			return FallbackNoService
		}
		if code, ok := gatherwire.ParseGatherCode(ce.Message); ok {
			switch code {
			case GatherRefused:
				return FallbackRefused
			case GatherExhausted:
				return FallbackExhausted
			}
		}
	}
	return FallbackAborted
}

// call sends one command and decodes the owner's reply; for an inline
// reply it returns the payload (in op.g.respBuf, valid until the next call).
func (op *Operation) call(cmd []byte, st *gatherwire.Stats) (time.Duration, []byte, error) {
	d, resp, err := op.callBuf(cmd, op.g.respBuf, st)
	if cap(resp) > cap(op.g.respBuf) {
		op.g.respBuf = resp[:0]
	}
	if err != nil {
		return d, nil, err
	}
	return d, resp[gatherwire.ReplySize:], nil
}

// callBuf is call with the reply appended to buf[:0]: the reply (whole,
// its stats header included, for the caller to keep as its buffer) and
// the decoded stats. Concurrent calls of one operation (WRITE chunks) each
// bring their own buf.
func (op *Operation) callBuf(cmd, buf []byte, st *gatherwire.Stats) (time.Duration, []byte, error) {
	stage.Begin(op.id, stage.Control)
	t := time.Now()
	// The call ends with the engine or the Conn, not with the operation's
	// context: once that ends, the owner may still be writing the
	// destination, so the abort fence (abort.go) ends the call by closing
	// the Conn if it has not answered within AbortGrace.
	resp, err := op.cs.conn.Call(op.e.ctx, gatherwire.MethodGather, cmd, buf[:0])
	d := time.Since(t)
	stage.End(op.id, stage.Control, uint64(len(cmd)))
	if err != nil {
		return d, resp, fmt.Errorf("verbs: gather call: %w", err)
	}
	if err := gatherwire.DecodeReply(st, resp); err != nil {
		return d, resp, err
	}
	return d, resp, nil
}

// gatherRead sends the READ command; the owner's bulk WRITEs have landed
// when the call returns.
func (op *Operation) gatherRead() (error, Fallback) {
	var st gatherwire.Stats
	d, inline, err := op.call(op.g.cmdBuf, &st)
	if err != nil {
		return err, classify(err)
	}
	want := op.gatherPlan()
	bytes := op.geom.Bytes
	if op.mode == ModeHybrid {
		bytes = uint64(op.h.split.Gather.S)
	}
	if st.Dir != verbs.OpRead || st.Payload != bytes {
		return &WireError{Message: "reply", Field: "payload",
			Reason: fmt.Sprintf("%s of %d bytes for a READ of %d (%d ranges)", st.Dir, st.Payload, bytes, len(want.Ranges))}, FallbackAborted
	}
	if st.Inline {
		if op.mode == ModeHybrid {
			return &WireError{Message: "reply", Field: "flags", Reason: "inline payload for a hybrid part, which did not ask for it"}, FallbackAborted
		}
		// The reply holds the packed stream: copy each destination run
		// from it, as the owner's bulk WRITEs would have.
		t := time.Now()
		dst := op.sop.Local.Bytes()[op.sop.LocalOff:]
		op.norm.ForEachRun(func(at, stream, n uint64) bool {
			copy(dst[at:at+n], inline[stream:stream+n])
			return true
		})
		st.Window += time.Since(t)
	}
	op.mu.Lock()
	op.addOwnerStats(&st, d)
	op.mu.Unlock()
	// Feed the moving model, except from a Conn's first gather (warm-up
	// costs would skew it, and a skewed model that stops choosing gather
	// never sees the sample that would correct it) and, for packing,
	// except samples too short to time (fixed costs dominate them).
	if m := op.cs.moving; m != nil && op.cs.gathers.Add(1) > 1 {
		op.observeGather(m, &st, d, len(op.g.cmdBuf))
	}
	return nil, FallbackNone
}

// observeControl feeds the moving model the fixed control latency of one
// gather call of cmdBytes bytes answered in d: the call less the owner's
// handling and the command's bytes at the link's rate. An inline reply
// carries the payload, so its round trip is not the control latency (the
// model prices the payload separately); a Conn's first gather warms both
// sides up and is not fed.
func (op *Operation) observeControl(st *gatherwire.Stats, d time.Duration, cmdBytes int) {
	m := op.cs.moving
	if m == nil || st.Inline || op.cs.gathers.Load() < 2 {
		return
	}
	ctl := d - st.Handler
	if bnet := op.cs.link().Bandwidth; bnet > 0 {
		ctl -= time.Duration(float64(cmdBytes) / bnet * 1e9)
	}
	if ctl > 0 {
		_ = m.ObserveControl(ctl)
	}
}

// minSpanSample is the fewest spans a plan or decode sample needs: below
// it the fixed TPlan and TDecode are too large a part of the time for the
// sample to say what a span costs.
const minSpanSample = 16 << 10

// observeGather feeds the moving model from a READ gather's one command of
// cmdBytes bytes, answered in call d with owner figures st: the fixed
// control latency (the call, less the owner's handling and the command's
// bytes at the link's rate), the owner's packing rate, and the planning
// and decoding cost per span. The fixed cost per chunk is not fed: the
// window's excess over its bytes and its packing, the one figure that
// could stand for it, is mostly pipeline fill and drain, and taking it
// for a per-chunk cost raised C_min until a gather ran as one chunk
// (perf-notes, 2026-12-02).
func (op *Operation) observeGather(m *costmodel.Moving, st *gatherwire.Stats, d time.Duration, cmdBytes int) {
	op.observeControl(st, d, cmdBytes)
	spans := int64(op.geom.Spans)
	if op.mode == ModeHybrid {
		spans = op.h.split.Gather.M
	}
	if w := int64(max(st.Workers, 1)); st.Pack >= minPackSample {
		frags := int64(op.geom.Fragments)
		if op.mode == ModeHybrid {
			frags = op.h.split.Gather.M
		}
		_ = m.ObservePack(int64(st.Payload)/w, max(frags/w, 1), st.Pack)
	}
	if spans >= minSpanSample {
		if op.mode != ModeHybrid { // a hybrid's plan time is the whole operation's
			_ = m.ObservePlan(spans, op.trace.Plan)
		}
		if st.Decode > 0 {
			_ = m.ObserveDecode(spans, st.Decode)
		}
	}
}

// addOwnerStats folds one reply into the trace. Called with op.mu held.
func (op *Operation) addOwnerStats(st *gatherwire.Stats, call time.Duration) {
	t := &op.trace
	t.Call += call
	t.Control += max(call-st.Handler, 0)
	t.Decode += st.Decode
	if st.Dir == verbs.OpRead {
		t.Pack += st.Pack
	} else {
		t.Scatter += st.Pack
	}
	if t.Waves == 0 {
		t.OwnerFill = st.Fill
	}
	if st.Dir == verbs.OpRead {
		t.Window = max(t.Window, st.Window)
	} else {
		t.Window += st.Window
	}
	t.Chunks += int(st.Chunks)
	t.ChunkBytes = int64(st.Chunk)
	t.Slots = int(st.Slots)
	t.PackWorkers = int(st.Workers)
	t.StagingPeak = max(t.StagingPeak, int64(st.Peak))
	t.Inline = t.Inline || st.Inline && !op.g.staged // a staged call's inline reply is one chunk's
	t.Waves++
}

// chunkSlot is one chunk of a gather sent as a command per chunk (WRITE,
// staged READ, chunked READ): its lease of the engine's staging (WRITE and
// staged READ), its command and its reply; reused from one operation to
// the next.
type chunkSlot struct {
	lease     bufferpool.Lease
	n         int             // the chunk's payload bytes
	at        uint64          // staged READ: the chunk's stream offset
	runs      []planfmt.Run   // staged READ: the destination runs it touches
	scatter   time.Duration   // staged READ: its scatter
	inline    bool            // staged READ: its call asked for an inline reply
	ranges    []planfmt.Range // the command's ranges, built in place
	lo, hi    int             // staged READ of rows: the chunk's ids are the plan's [lo, hi), -1 ids skipped
	c         planfmt.Command // staged READ: the chunk's command, encoded on its goroutine
	ids32     []int32         // staged READ of rows with -1 ids: the chunk's carrying ids, built in place
	ids64     []int64
	cmd, resp []byte
	st        gatherwire.Stats
	d         time.Duration
	err       error
}

// runChunks is the loop of a gather sent as a command per chunk: while
// a slot is free (P of them) and fill has a chunk to give, fill builds the
// chunk's command into the slot (leasing staging when it needs it) and
// call runs on a goroutine of its own; each reply comes back here, its
// lease is released and its figures folded into the trace. A failure
// stops the issuing, the calls in flight are waited for (their leases may
// be in use until then), and the first failure is returned. fill reports
// whether it filled the slot (false: nothing is left, and it is not
// called again). dir and what check and name the replies.
func (op *Operation) runChunks(dir verbs.Op, what string, fill func(w *chunkSlot) (bool, error, Fallback), call func(w *chunkSlot)) (error, Fallback) {
	chunk, slots := op.g.chunk, max(op.g.slots, 1)
	for len(op.g.wslots) < slots {
		op.g.wslots = append(op.g.wslots, &chunkSlot{})
	}
	if cap(op.g.wdone) < slots {
		op.g.wdone = make(chan *chunkSlot, slots)
	}
	free := append(op.g.wfree[:0], op.g.wslots[:slots]...)
	var held, peak int64
	var began, ended time.Time // the first call, the last reply: the Window
	var first error
	firstFb := FallbackNone
	fail := func(err error, fb Fallback) {
		if first == nil {
			first, firstFb = err, fb
		}
	}
	release := func(w *chunkSlot) {
		if w.lease != (bufferpool.Lease{}) {
			held -= int64(w.lease.Class())
			_ = w.lease.Release()
			w.lease = bufferpool.Lease{}
		}
	}
	inflight, exhausted := 0, false
	for {
		if first == nil && !exhausted && len(free) > 0 {
			w := free[len(free)-1]
			ok, err, fb := fill(w)
			if w.lease != (bufferpool.Lease{}) {
				held += int64(w.lease.Class())
				peak = max(peak, held)
			}
			if err == nil && ok {
				if cerr := op.ctx.Err(); cerr != nil { // ended: send nothing more
					err, fb = cerr, FallbackAborted
				}
			}
			if err != nil {
				release(w)
				fail(err, fb)
				continue
			}
			exhausted = !ok
			if ok {
				free = free[:len(free)-1]
				if began.IsZero() {
					began = time.Now()
				}
				inflight++
				go call(w)
				continue
			}
		}
		if inflight == 0 {
			break
		}
		// The owner is done with the chunk (or gave up) when its call returns.
		w := <-op.g.wdone
		inflight--
		ended = time.Now()
		release(w)
		w.runs = nil
		free = append(free, w)
		switch {
		case w.err != nil:
			fail(w.err, classify(w.err))
		case w.st.Dir != dir || w.st.Payload != uint64(w.n):
			fail(&WireError{Message: "reply", Field: "payload",
				Reason: fmt.Sprintf("%s of %d bytes for a %s chunk of %d", w.st.Dir, w.st.Payload, what, w.n)}, FallbackAborted)
		default:
			op.mu.Lock()
			op.addOwnerStats(&w.st, w.d)
			op.trace.Scatter += w.scatter
			op.mu.Unlock()
			op.observeControl(&w.st, w.d, len(w.cmd))
			if op.g.staged {
				op.cs.observeStagedCall(w.d, &w.st, w.n)
			}
		}
	}
	op.g.wfree = free[:0]
	if dir == verbs.OpRead && first == nil {
		op.cs.gathers.Add(1) // its calls fed the model only after the Conn's first gather
	}
	op.mu.Lock()
	// The operation's own shape (the replies carry the owner's per-command
	// slots), the staging it held (its leases at once, or an owner's
	// command, whichever is larger) and the requester's window.
	op.trace.ChunkBytes, op.trace.Slots = chunk, slots
	op.trace.StagingPeak = max(op.trace.StagingPeak, peak)
	if !began.IsZero() {
		op.trace.Window = ended.Sub(began)
	}
	op.mu.Unlock()
	if first != nil {
		return first, firstFb
	}
	return nil, FallbackNone
}

// chunkCall sends one chunk's command and hands the slot back.
func (op *Operation) chunkCall(w *chunkSlot) {
	w.st, w.scatter = gatherwire.Stats{}, 0
	w.d, w.resp, w.err = op.callBuf(w.cmd, w.resp, &w.st)
	op.g.wdone <- w
}

// gatherWrite stages the payload chunk by chunk, each chunk packed into a
// lease of C bytes of the requester's staging, and has the owner read and
// scatter each one (a command per chunk), with up to P chunks in flight:
// the next chunk is packed while the owner reads the ones before it. The
// staging held at once is at most P leases of C (Trace.StagingPeak), never
// one lease of C x P that the pool would round up.
func (op *Operation) gatherWrite() (error, Fallback) {
	stg := op.e.cfg.Staging
	pool, key := stg.Pool(), stg.Region().Key()
	chunk := op.g.chunk
	local := op.sop.Local.Bytes()[op.sop.LocalOff : op.sop.LocalOff+op.sop.Plan.SrcExtent]
	plan := op.gatherPlan()
	isRows := plan.Form == planfmt.FormRows
	var rows packstream.RowCursor
	var rng packstream.RangeCursor
	if isRows {
		rows.Init(plan, local, op.geom.Skipped > 0)
	} else {
		rng.Init(plan.Ranges)
	}
	runs := packstream.RunCursor{Runs: op.g.runs}
	var stream uint64
	var packTime time.Duration
	wave := 0
	fill := func(w *chunkSlot) (bool, error, Fallback) {
		if isRows && rows.Done() || !isRows && rng.Done() {
			return false, nil, FallbackNone
		}
		lease, err := pool.AcquireTimeout(int(chunk), op.e.cfg.StagingTimeout)
		if err != nil {
			return false, fmt.Errorf("verbs: write staging: %w", err), FallbackExhausted
		}
		w.lease = lease
		buf := lease.Bytes()[:chunk]
		cid := stage.ChunkID(op.id, wave)
		wave++
		stage.Begin(cid, stage.Pack)
		t := time.Now()
		if isRows {
			w.n = rows.PackInto(buf)
		} else {
			w.n = rng.PackInto(buf, local)
		}
		packTime += time.Since(t)
		stage.End(cid, stage.Pack, uint64(w.n))
		ranges := w.ranges[:0]
		runs.Each(stream, stream+uint64(w.n), func(dst, at, l uint64) {
			ranges = append(ranges, planfmt.Range{Src: at - stream, Dst: dst, Len: l})
		})
		w.ranges = ranges
		stream += uint64(w.n)
		cmd := planfmt.Command{
			OpID: op.id, Dir: planfmt.Write,
			Src:   planfmt.Window{Key: uint64(key), Off: uint64(lease.Offset()), Len: uint64(w.n)},
			Dst:   planfmt.Window{Key: uint64(op.sop.Remote.Key), Off: op.sop.RemoteOff, Len: op.sop.Plan.DstExtent},
			Chunk: uint64(chunk), Pipeline: 1, // one chunk per command; P commands in flight
			Plan: planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: uint64(w.n), DstExtent: op.sop.Plan.DstExtent, Ranges: ranges},
		}
		w.cmd, err = planfmt.AppendCommand(w.cmd[:0], &cmd)
		return err == nil, err, FallbackAborted
	}
	err, fb := op.runChunks(verbs.OpWrite, "WRITE", fill, op.chunkCall)
	op.mu.Lock()
	op.trace.Pack += packTime
	op.mu.Unlock()
	return err, fb
}

// appendChunkRanges appends the ranges of the next n stream bytes of spans
// (from span *si, *off bytes into it, both advanced): their sources, and
// as destination dst(span, off) for each piece.
func appendChunkRanges(rs []planfmt.Range, spans []planfmt.Range, si *int, off *uint64, n uint64, dst func(sp *planfmt.Range, off, got uint64) uint64) []planfmt.Range {
	for got := uint64(0); got < n; {
		sp := &spans[*si]
		l := min(sp.Len-*off, n-got)
		rs = append(rs, planfmt.Range{Src: sp.Src + *off, Dst: dst(sp, *off, got), Len: l})
		got += l
		if *off += l; *off == sp.Len {
			*si, *off = *si+1, 0
		}
	}
	return rs
}

// gatherStaged runs a READ gather whose destination is too fragmented for
// the owner to WRITE fragment by fragment: chunk by chunk, the owner packs
// the chunk's sources and WRITEs them as one run into a lease of C bytes
// of the engine's staging (a command per chunk, up to P in flight), and
// the engine scatters each landed chunk into its destination (in the
// chunk's own goroutine, so chunks scatter in parallel). The staging held
// is at most P leases of C, as for a WRITE gather.
//
// The issuing loop only cuts the next chunk (a rows plan's id range, a
// ranges plan's source pieces) and leases its staging; the chunk's
// command is encoded, and a rows chunk's ids gathered, on the chunk's own
// goroutine, so the first P commands leave at once instead of one
// encoding after another.
func (op *Operation) gatherStaged() (error, Fallback) {
	stg := op.e.cfg.Staging
	pool, key := stg.Pool(), stg.Region().Key()
	chunk := op.g.chunk
	total := op.geom.Bytes
	spans, runs := op.g.spans, op.g.runs
	plan := op.sop.Plan
	isRows := plan.Form == planfmt.FormRows
	skips := op.geom.Skipped > 0
	var per int // rows: the carrying ids a chunk holds
	if isRows {
		per = int(max(uint64(chunk)/plan.Rows.RowSize, 1))
	}
	var si int      // the span the next chunk starts in
	var sOff uint64 // bytes of it already in earlier chunks
	var next int    // rows: the next chunk's first id
	var ri int      // ranges: the first run the next chunk touches
	var stream uint64
	inChunk := func(_ *planfmt.Range, _, got uint64) uint64 { return got } // landing contiguously in the lease
	fill := func(w *chunkSlot) (bool, error, Fallback) {
		if stream >= total {
			return false, nil, FallbackNone
		}
		lease, err := pool.AcquireTimeout(int(chunk), op.e.cfg.StagingTimeout)
		if err != nil {
			return false, fmt.Errorf("verbs: staging for a staged read: %w", err), FallbackExhausted
		}
		w.lease = lease
		n := min(uint64(chunk), total-stream)
		var sub planfmt.Plan
		if isRows {
			// As many whole rows as the chunk holds, sent in the rows form
			// (4 bytes or fewer an id, decoded and packed as rows) and
			// landing densely from the lease's start, in stream order:
			// the ids [lo, hi) of the plan, those of them not -1.
			w.lo = next
			if len(plan.Rows.IDs32) != 0 {
				w.hi, n = liveSpan(plan.Rows.IDs32, next, per, skips)
			} else {
				w.hi, n = liveSpan(plan.Rows.IDs64, next, per, skips)
			}
			next = w.hi
			n *= plan.Rows.RowSize
			sub = planfmt.Plan{Form: planfmt.FormRows, SrcExtent: plan.SrcExtent, DstExtent: n,
				Rows: planfmt.Rows{RowSize: plan.Rows.RowSize, TableRows: plan.Rows.TableRows, SrcBase: plan.Rows.SrcBase}}
		} else {
			w.ranges = appendChunkRanges(w.ranges[:0], spans, &si, &sOff, n, inChunk)
			sub = planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: plan.SrcExtent, DstExtent: n, Ranges: w.ranges}
			// Its destination runs: from the first touching [stream, stream+n).
			for ri < len(runs) && runs[ri].Stream+runs[ri].Len <= stream {
				ri++
			}
			rj := ri
			for rj < len(runs) && runs[rj].Stream < stream+n {
				rj++
			}
			w.runs = runs[ri:rj]
		}
		w.n, w.at = int(n), stream
		stream += n
		w.c = planfmt.Command{
			OpID: op.id, Dir: planfmt.Read,
			Src:   planfmt.Window{Key: uint64(op.sop.Remote.Key), Off: op.sop.RemoteOff, Len: op.sop.Plan.SrcExtent},
			Dst:   planfmt.Window{Key: uint64(key), Off: uint64(lease.Offset()), Len: n},
			Chunk: uint64(chunk), Pipeline: 1, // one chunk per command; P commands in flight
			Plan: sub,
		}
		if w.inline = int64(n) <= op.g.stagedInline; w.inline {
			w.c.Flags |= planfmt.FlagInlineReply
		}
		return true, nil, FallbackNone
	}
	err, fb := op.runChunks(verbs.OpRead, "staged READ", fill, op.stagedCall)
	op.mu.Lock()
	op.trace.Staged = true
	op.mu.Unlock()
	return err, fb
}

// liveSpan returns the end hi of the chunk of ids that starts at next and
// holds per carrying ids (fewer at the plan's end), and how many it holds;
// without -1 ids (skips false) that is per ids, counted without a look.
func liveSpan[T int32 | int64](ids []T, next, per int, skips bool) (int, uint64) {
	if !skips {
		hi := min(next+per, len(ids))
		return hi, uint64(hi - next)
	}
	live := 0
	for next < len(ids) && live < per {
		if ids[next] != -1 {
			live++
		}
		next++
	}
	return next, uint64(live)
}

// stagedCall encodes one staged chunk's command (a rows chunk's ids
// gathered first: the plan's own slice when it has no -1 ids), sends it
// and, once the chunk has landed (in its lease, or inside the reply when
// it asked for that), scatters it into its destination.
func (op *Operation) stagedCall(w *chunkSlot) {
	w.st, w.scatter = gatherwire.Stats{}, 0
	w.err = op.encodeStaged(w)
	if w.err == nil {
		w.d, w.resp, w.err = op.callBuf(w.cmd, w.resp, &w.st)
	}
	if w.err == nil && w.st.Inline && (!w.inline || len(w.resp) != gatherwire.ReplySize+w.n) {
		w.err = &WireError{Message: "reply", Field: "flags",
			Reason: fmt.Sprintf("inline payload of %d bytes for a staged chunk of %d (inline asked: %v)", len(w.resp)-gatherwire.ReplySize, w.n, w.inline)}
	}
	if w.err == nil && w.st.Dir == verbs.OpRead && w.st.Payload == uint64(w.n) {
		t := time.Now()
		local := op.sop.Local.Bytes()[op.sop.LocalOff:]
		buf := w.lease.Bytes()[:w.n]
		if w.st.Inline {
			buf = w.resp[gatherwire.ReplySize:]
		}
		if rows := &op.sop.Plan.Rows; op.sop.Plan.Form == planfmt.FormRows {
			if len(rows.IDs32) != 0 {
				packstream.ScatterRows(local, buf, rows, rows.IDs32, w.lo, w.hi)
			} else {
				packstream.ScatterRows(local, buf, rows, rows.IDs64, w.lo, w.hi)
			}
		} else {
			rc := packstream.RunCursor{Runs: w.runs}
			rc.Each(w.at, w.at+uint64(w.n), func(dst, at, l uint64) {
				copy(local[dst:dst+l], buf[at-w.at:at-w.at+l])
			})
		}
		w.scatter = time.Since(t)
	}
	op.g.wdone <- w
}

// encodeStaged encodes w's command (w.c, its rows chunk's ids set here)
// into w.cmd.
func (op *Operation) encodeStaged(w *chunkSlot) error {
	if rows := &op.sop.Plan.Rows; op.sop.Plan.Form == planfmt.FormRows {
		skips := op.geom.Skipped > 0
		sub := &w.c.Plan.Rows
		switch {
		case len(rows.IDs32) != 0 && skips:
			w.ids32, _ = appendLiveIDs(w.ids32[:0], rows.IDs32[:w.hi], w.lo, w.hi-w.lo)
			sub.IDs32 = w.ids32
		case len(rows.IDs32) != 0:
			sub.IDs32 = rows.IDs32[w.lo:w.hi]
		case skips:
			w.ids64, _ = appendLiveIDs(w.ids64[:0], rows.IDs64[:w.hi], w.lo, w.hi-w.lo)
			sub.IDs64 = w.ids64
		default:
			sub.IDs64 = rows.IDs64[w.lo:w.hi]
		}
	}
	var err error
	w.cmd, err = planfmt.AppendCommand(w.cmd[:0], &w.c)
	w.c.Plan = planfmt.Plan{} // pins nothing of the caller's plan
	return err
}

// gatherChunked runs a READ gather as one command per chunk with up to P
// in flight (Config.ChunkedRead): the owner decodes and starts packing the
// first chunk while the later commands are still being encoded and sent,
// and serves the P commands on goroutines of its own, so the packing,
// posting and completion of different chunks overlap instead of sharing
// one goroutine per command. A rows plan is cut by ids (a chunk is the ids
// whose rows fill it, sent in the rows form); a ranges plan by its spans.
// The owner writes each chunk's runs into the destination as for one
// command.
func (op *Operation) gatherChunked() (error, Fallback) {
	plan := op.gatherPlan()
	chunk := op.g.chunk
	isRows := plan.Form == planfmt.FormRows
	var ids, per int // rows: ids in all, ids per chunk
	if isRows {
		ids = plan.Rows.Len()
		per = int(max(uint64(chunk)/plan.Rows.RowSize, 1))
	}
	spans := op.g.spans
	var next int    // rows: the next chunk's first id
	var si int      // ranges: the span the next chunk starts in
	var sOff uint64 // ranges: bytes of it already in earlier chunks
	var stream uint64
	total := op.geom.Bytes
	inPlace := func(sp *planfmt.Range, off, _ uint64) uint64 { return sp.Dst + off }
	fill := func(w *chunkSlot) (bool, error, Fallback) {
		if isRows && next >= ids || !isRows && stream >= total {
			return false, nil, FallbackNone
		}
		sub := planfmt.Plan{Form: plan.Form, SrcExtent: plan.SrcExtent, DstExtent: plan.DstExtent}
		var n uint64
		if isRows {
			hi := min(next+per, ids)
			sub.Rows = plan.Rows
			if len(plan.Rows.IDs32) != 0 {
				sub.Rows.IDs32 = plan.Rows.IDs32[next:hi]
				n = liveRows(sub.Rows.IDs32)
			} else {
				sub.Rows.IDs64 = plan.Rows.IDs64[next:hi]
				n = liveRows(sub.Rows.IDs64)
			}
			n *= plan.Rows.RowSize
			sub.Rows.DstBase = plan.Rows.DstBase + uint64(next)*plan.Rows.RowSize
			next = hi
		} else {
			n = min(uint64(chunk), total-stream)
			w.ranges = appendChunkRanges(w.ranges[:0], spans, &si, &sOff, n, inPlace)
			sub.Ranges = w.ranges
		}
		stream += n
		w.n = int(n)
		cmd := planfmt.Command{
			OpID: op.id, Dir: planfmt.Read,
			Src:   planfmt.Window{Key: uint64(op.sop.Remote.Key), Off: op.sop.RemoteOff, Len: op.sop.Plan.SrcExtent},
			Dst:   planfmt.Window{Key: uint64(op.sop.Local.Key()), Off: op.sop.LocalOff, Len: op.sop.Plan.DstExtent},
			Chunk: uint64(chunk), Pipeline: 1, // one chunk per command; P commands in flight
			Plan: sub,
		}
		var err error
		w.cmd, err = planfmt.AppendCommand(w.cmd[:0], &cmd)
		return err == nil, err, FallbackAborted
	}
	return op.runChunks(verbs.OpRead, "READ", fill, op.chunkCall)
}

// appendLiveIDs appends to dst the carrying ids (not -1) of ids from
// index next on, up to max of them, and returns it with the index after
// the last id it looked at.
func appendLiveIDs[T int32 | int64](dst, ids []T, next, max int) ([]T, int) {
	for next < len(ids) && len(dst) < max {
		if id := ids[next]; id != -1 {
			dst = append(dst, id)
		}
		next++
	}
	return dst, next
}

// liveRows counts the ids that are not -1 (skipped rows carry no bytes).
func liveRows[T int32 | int64](ids []T) uint64 {
	var n uint64
	for _, id := range ids {
		if id != -1 {
			n++
		}
	}
	return n
}

package engine

import (
	"errors"
	"fmt"
	"time"

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
	if op.sop.Dir == verbs.OpRead {
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

// runGather runs the gather part and reports it.
func (op *Operation) runGather() {
	var err error
	var fb Fallback
	if op.sop.Dir == verbs.OpRead {
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
	stage.Begin(op.id, stage.Control)
	t := time.Now()
	// The call ends with the engine or the Conn, not with the operation's
	// context: once that ends, the owner may still be writing the
	// destination, so the abort fence (abort.go) ends the call by closing
	// the Conn if it has not answered within AbortGrace.
	resp, err := op.cs.conn.Call(op.e.ctx, gatherwire.MethodGather, cmd, op.g.respBuf[:0])
	d := time.Since(t)
	stage.End(op.id, stage.Control, uint64(len(cmd)))
	if cap(resp) > cap(op.g.respBuf) {
		op.g.respBuf = resp[:0]
	}
	if err != nil {
		return d, nil, fmt.Errorf("verbs: gather call: %w", err)
	}
	if err := gatherwire.DecodeReply(st, resp); err != nil {
		return d, nil, err
	}
	return d, resp[gatherwire.ReplySize:], nil
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
		// An inline reply carries the payload: its round trip is not the
		// control latency (the model prices the payload separately).
		if ctl := d - st.Handler; ctl > 0 && !st.Inline {
			_ = m.ObserveControl(ctl)
		}
		if w := int64(max(st.Workers, 1)); st.Pack >= minPackSample {
			spans := int64(op.geom.Fragments)
			if op.mode == ModeHybrid {
				spans = op.h.split.Gather.M
			}
			_ = m.ObservePack(int64(st.Payload)/w, max(spans/w, 1), st.Pack)
		}
	}
	return nil, FallbackNone
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
	t.Inline = t.Inline || st.Inline
	t.Waves++
}

// gatherWrite stages the payload in waves of at most slots*chunk bytes
// and has the owner read and scatter each wave.
func (op *Operation) gatherWrite() (error, Fallback) {
	stg := op.e.cfg.Staging
	pool, key := stg.Pool(), stg.Region().Key()
	waveBytes := op.g.chunk * int64(op.g.slots)
	local := op.sop.Local.Bytes()[op.sop.LocalOff : op.sop.LocalOff+op.sop.Plan.SrcExtent]
	plan := op.gatherPlan()
	var rows packstream.RowCursor
	var rng packstream.RangeCursor
	if plan.Form == planfmt.FormRows {
		rows.Init(plan, local, op.geom.Skipped > 0)
	} else {
		rng.Init(plan.Ranges)
	}
	runs := packstream.RunCursor{Runs: op.g.runs}
	var stream uint64
	var packTime time.Duration
	for wave := 0; ; wave++ {
		if plan.Form == planfmt.FormRows && rows.Done() || plan.Form != planfmt.FormRows && rng.Done() {
			break
		}
		if err := op.ctx.Err(); err != nil {
			return err, FallbackAborted
		}
		lease, err := pool.AcquireTimeout(int(waveBytes), op.e.cfg.StagingTimeout)
		if err != nil {
			return fmt.Errorf("verbs: write staging: %w", err), FallbackExhausted
		}
		buf := lease.Bytes()
		cid := stage.ChunkID(op.id, wave)
		stage.Begin(cid, stage.Pack)
		t := time.Now()
		var n int
		if plan.Form == planfmt.FormRows {
			n = rows.PackInto(buf)
		} else {
			n = rng.PackInto(buf, local)
		}
		packTime += time.Since(t)
		stage.End(cid, stage.Pack, uint64(n))
		ranges := op.g.wave[:0]
		runs.Each(stream, stream+uint64(n), func(dst, at, l uint64) {
			ranges = append(ranges, planfmt.Range{Src: at - stream, Dst: dst, Len: l})
		})
		op.g.cmd = planfmt.Command{
			OpID: op.id, Dir: planfmt.Write,
			Src:   planfmt.Window{Key: uint64(key), Off: uint64(lease.Offset()), Len: uint64(n)},
			Dst:   planfmt.Window{Key: uint64(op.sop.Remote.Key), Off: op.sop.RemoteOff, Len: op.sop.Plan.DstExtent},
			Chunk: uint64(op.g.chunk), Pipeline: uint32(op.g.slots),
			Plan: planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: uint64(n), DstExtent: op.sop.Plan.DstExtent, Ranges: ranges},
		}
		op.g.cmdBuf, err = planfmt.AppendCommand(op.g.cmdBuf[:0], &op.g.cmd)
		op.g.cmd.Plan = planfmt.Plan{}
		op.g.wave = ranges[:0]
		var st gatherwire.Stats
		var d time.Duration
		if err == nil {
			d, _, err = op.call(op.g.cmdBuf, &st)
		}
		// The owner has read the wave (or given up) when the call returns.
		class := lease.Class()
		_ = lease.Release()
		if err != nil {
			return err, classify(err)
		}
		if st.Dir != verbs.OpWrite || st.Payload != uint64(n) {
			return &WireError{Message: "reply", Field: "payload",
				Reason: fmt.Sprintf("%s of %d bytes for a WRITE wave of %d", st.Dir, st.Payload, n)}, FallbackAborted
		}
		op.mu.Lock()
		op.addOwnerStats(&st, d)
		op.trace.StagingPeak = max(op.trace.StagingPeak, int64(class))
		op.mu.Unlock()
		stream += uint64(n)
	}
	op.mu.Lock()
	op.trace.Pack += packTime
	op.mu.Unlock()
	return nil, FallbackNone
}

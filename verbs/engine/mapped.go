package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/scatterkit/scatterkit/verbs"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

// Mapped direct: on a Conn that implements Mapper (shm), the direct part
// of an operation is a local copy between the mapped owner region and the
// caller's region, made by the engine itself: a fixed-row plan runs
// bufferpool/pack's unchecked gather loops (split over the engine's
// pack.Workers), a ranges plan copies its coalesced spans (split over the
// engine's span crew). The plan was normalized (every fragment inside its
// extents, every id inside the table, no overlapping destinations) and
// the extents are checked here against the mapped and registered lengths
// the Mapper returns, which is what makes the unchecked loops safe.

// mappedHold takes the Conn's mapping for op and returns the source and
// destination extents (windows of the two regions, in the operation's
// direction). On error nothing is held.
func (op *Operation) mappedHold() (src, dst []byte, err error) {
	need, remoteExt, localExt := verbs.AccessRemoteRead, op.sop.Plan.SrcExtent, op.sop.Plan.DstExtent
	if op.sop.Dir == verbs.OpWrite {
		need, remoteExt, localExt = verbs.AccessRemoteWrite, op.sop.Plan.DstExtent, op.sop.Plan.SrcExtent
	}
	local, remote, err := op.mapper.HoldMapped(op.sop.Local, op.sop.Remote.Key, need)
	if err != nil {
		return nil, nil, err
	}
	// The caller's RegionInfo was checked in Submit; the mapping is what
	// the copies will touch, so check against its real length too.
	if !fits(op.sop.RemoteOff, remoteExt, uint64(len(remote))) {
		op.mapper.ReleaseMapped()
		return nil, nil, fmt.Errorf("verbs: mapped direct: extent of %d bytes at %d exceeds the mapped region's %d: %w",
			remoteExt, op.sop.RemoteOff, len(remote), verbs.ErrBounds)
	}
	if !fits(op.sop.LocalOff, localExt, uint64(len(local))) {
		op.mapper.ReleaseMapped()
		return nil, nil, fmt.Errorf("verbs: mapped direct: extent of %d bytes at %d exceeds the local region's %d: %w",
			localExt, op.sop.LocalOff, len(local), verbs.ErrBounds)
	}
	rw := remote[op.sop.RemoteOff : op.sop.RemoteOff+remoteExt]
	lw := local[op.sop.LocalOff : op.sop.LocalOff+localExt]
	if op.sop.Dir == verbs.OpWrite {
		return lw, rw, nil
	}
	return rw, lw, nil
}

// runMapped runs a direct part p as mapped copies on the calling
// goroutine and reports it: the whole plan when spans is false, else the
// spans collected in p's span list. Every byte is written by the time it
// returns; one completion, no work requests.
func (op *Operation) runMapped(p *directPart, spans bool) {
	p.op = op
	p.posted, p.outstanding, p.err, p.pending = 0, 0, nil, false
	p.first, p.last = time.Time{}, time.Time{}
	var bytes uint64
	if spans {
		bytes = p.spanBytes
	} else {
		bytes = op.geom.Bytes
	}
	if bytes == 0 {
		op.directDone(p)
		return
	}
	if err := op.ctx.Err(); err != nil {
		p.err = err
		op.directDone(p)
		return
	}
	src, dst, err := op.mappedHold()
	if err != nil {
		p.err = err
		op.directDone(p)
		return
	}
	stage.Begin(op.id, stage.Post)
	p.first = time.Now()
	switch {
	case spans:
		op.e.copySpans(dst, src, p.spans, p.stream, bytes)
	case op.sop.Plan.Form == planfmt.FormRows:
		op.e.copyRows(dst, src, &op.sop.Plan.Rows)
	default:
		p.resetSpans()
		op.norm.ForEachSpan(func(src, dst, n uint64) bool {
			p.addSpan(src, dst, n)
			return true
		})
		op.e.copySpans(dst, src, p.spans, p.stream, bytes)
	}
	p.last = time.Now()
	op.mapper.ReleaseMapped()
	stage.End(op.id, stage.Post, bytes)
	op.mu.Lock()
	op.trace.Mapped += bytes
	op.mu.Unlock()
	op.directDone(p)
}

// resetSpans empties p's span list.
func (p *directPart) resetSpans() {
	p.spans, p.stream, p.spanBytes = p.spans[:0], p.stream[:0], 0
}

// addSpan appends one span to p's span list.
func (p *directPart) addSpan(src, dst, n uint64) {
	p.spans = append(p.spans, planfmt.Range{Src: src, Dst: dst, Len: n})
	p.stream = append(p.stream, p.spanBytes)
	p.spanBytes += n
}

// setSpans makes rs (ranges of the plan, e.g. the hybrid's gathered
// spans) the mapped span list.
func (p *directPart) setSpans(rs []planfmt.Range) {
	p.resetSpans()
	for _, r := range rs {
		if r.Len > 0 {
			p.addSpan(r.Src, r.Dst, r.Len)
		}
	}
}

// copyRows gathers the rows of a normalized fixed-row plan from src (the
// source extent) into dst (the destination extent). Id -1 leaves its
// destination row untouched, as the plan says.
func (e *Engine) copyRows(dst, src []byte, r *planfmt.Rows) {
	table := src[r.SrcBase : r.SrcBase+r.TableRows*r.RowSize]
	if len(r.IDs32) != 0 {
		gatherMapped(e.rowWorkers, dst, table, r.IDs32, r)
	} else {
		gatherMapped(e.rowWorkers, dst, table, r.IDs64, r)
	}
}

// gatherMapped runs the pack loops for a validated plan: one 1-D layout
// for a contiguous destination, one per line of the longer dimension for a
// strided [T,K] one (so each call moves as many rows as it can and pack
// can split it over w).
func gatherMapped[I pack.ID](w *pack.Workers, dst, table []byte, ids []I, r *planfmt.Rows) {
	rb := int(r.RowSize)
	if r.Layout.Kind != planfmt.LayoutStrided {
		runLayout(w, dst, table, ids, pack.Layout{Rows: len(ids), RowBytes: rb, Off: int(r.DstBase)})
		return
	}
	k := int(r.Layout.Cols)
	t := len(ids) / k
	base, rs, cs := int(r.DstBase), int(r.Layout.RowStride), int(r.Layout.ColStride)
	if w == nil {
		pack.GatherGridUnchecked(dst, table, ids, pack.Grid{T: t, K: k, RowBytes: rb, Off: base,
			TStride: rs, KStride: cs, IDTStride: k, IDKStride: 1})
		return
	}
	if t >= k {
		for c := range k { // column c: rows (0, c), (1, c), ...
			runLayout(w, dst, table, ids[c:], pack.Layout{Rows: t, RowBytes: rb, Off: base + c*cs, Stride: rs, IDStride: k})
		}
		return
	}
	for tok := range t { // token tok: rows (tok, 0), (tok, 1), ...
		runLayout(w, dst, table, ids[tok*k:(tok+1)*k], pack.Layout{Rows: k, RowBytes: rb, Off: base + tok*rs, Stride: cs})
	}
}

// runLayout gathers one validated 1-D layout, split over w when pack's
// threshold says so.
func runLayout[I pack.ID](w *pack.Workers, dst, table []byte, ids []I, l pack.Layout) {
	if w != nil && pack.ParallelGatherUnchecked(w, dst, table, ids, l) == nil {
		return
	}
	// nil or closed workers (the engine closes them only once no
	// operation is in flight): copy on this goroutine.
	pack.GatherUnchecked(dst, table, ids, l)
}

// mappedParams describes a direct transfer on a mapped Conn to the cost
// model. There a "request" is a copy the requester makes itself with the
// engine's W copy workers: the time the model charges direct, S/B_net +
// N/R_post, must be the local gather time t = S/(W*B_mem) + M/(W*R_copy)
// (local calibration), so R_post is the rate that makes N/R_post the part
// of t beyond S/B_net (at least a thousandth of t, when the link's figure
// alone would already exceed it). Nothing is in flight, so the queue never
// limits (Q >= N). B_net and L stay the link's: the bytes still move at
// memmove speed and the control round trip stays in both predictions.
func (op *Operation) mappedParams(p costmodel.Params, cal costmodel.Calibration) costmodel.Params {
	w := float64(op.e.copyWorkers)
	n := float64(op.geom.Fragments)
	t := float64(op.geom.Bytes)/(w*cal.BMem) + float64(op.geom.Spans)/(w*cal.RCopy)
	if p.BNet > 0 {
		t = max(t-float64(op.geom.Bytes)/p.BNet, t/1000)
	}
	if n > 0 && t > 0 && !math.IsInf(t, 0) {
		p.RPost = n / t
	}
	p.Q = max(p.Q, int(min(op.geom.Fragments, math.MaxInt32)))
	return p
}

// Calibration returns the engine's local packing calibration and whether
// it has one yet (given, probed in New with staging, or probed by
// the first mapped operation). A probe that could not finish gives the
// conservative figures, with Calibration.Fallback saying why.
func (e *Engine) Calibration() (costmodel.Calibration, bool) {
	e.calMu.Lock()
	defer e.calMu.Unlock()
	return e.local, e.calOK
}

// localCalibration returns the engine's local packing calibration,
// probing once (CalibrationBudget, with the engine's copy workers) when
// the configuration gave none and there is no staging.
func (e *Engine) localCalibration() (costmodel.Calibration, error) {
	e.calMu.Lock()
	defer e.calMu.Unlock()
	if e.calOK {
		return e.local, nil
	}
	ctx, cancel := context.WithTimeout(e.ctx, 10*e.cfg.CalibrationBudget+time.Second)
	defer cancel()
	cal, err := costmodel.CalibrateOrFallback(ctx, costmodel.CalibrateOptions{Budget: e.cfg.CalibrationBudget, Workers: e.copyWorkers})
	if err != nil {
		return costmodel.Calibration{}, fmt.Errorf("verbs: engine calibration: %w", err)
	}
	if !(cal.BMem > 0) || !(cal.RCopy > 0) {
		return costmodel.Calibration{}, errors.New("verbs: engine calibration: non-positive rates")
	}
	e.local, e.calOK = cal, true
	return cal, nil
}

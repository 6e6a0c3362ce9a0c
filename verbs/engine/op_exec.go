package engine

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"time"

	"github.com/scatterkit/scatterkit/verbs"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

// Operation is a submitted scatter operation. Wait for its result once:
// when Wait returns the result, the Operation goes back to the engine for
// reuse and must not be touched again. (If Wait returns because its own
// context ended, the operation keeps running and Wait may be called
// again.)
type Operation struct {
	e    *Engine
	cs   *connState
	ctx  context.Context
	id   uint64
	sop  ScatterOp
	t0   time.Time
	prep time.Duration // prepare's time (a group prepares every part before any starts)
	norm planfmt.Normalized
	geom planfmt.Summary

	chosen, mode Mode
	dec          costmodel.Decision
	g            gatherState // the gathered part (ModeGather, ModeHybrid)
	h            hybridState // the split (ModeHybrid)

	// mapper is the Conn's Mapper when direct parts copy through its
	// mapping (each part keeps the spans it copies: see directPart).
	mapper verbs.Mapper

	// wholeDevice marks the decision of a device operation's whole plan
	// (deviceMode): its destination is the device's, reached piece by
	// piece through the bounce region, so the region need only be
	// exposed, not cover the plan's extent.
	wholeDevice bool

	primary, fallback directPart

	// The abort fence (abort.go): the operation's slot in the engine's
	// watch list (-1: off it) and when the watchdog saw its context end
	// (both under the engine's watchMu), and whether the watchdog closed
	// the Conn (under op.mu).
	watchIdx int
	endedAt  time.Time
	fenced   bool

	mu       sync.Mutex
	parts    int
	err      error
	fb       Fallback
	trace    Trace
	lastData time.Time
	launched time.Time // start handed it to launch: its own time runs Plan, then from here
	res      Result
	done     chan struct{}
}

// gatherState is an operation's gather part: its shape, its command and
// the buffers reused from one operation to the next.
type gatherState struct {
	chunk           int64           // chunk size C
	slots           int             // staging slots P
	inline          bool            // a READ gather would be answered inline
	staged          bool            // a READ gather lands in the engine's staging and is scattered here
	stagedInline    int64           // staged: the largest chunk its calls ask to be answered inline (0: none)
	chunked         bool            // a READ gather sent as a command per chunk (Config.ChunkedRead)
	spans           []planfmt.Range // staged and chunked READ: the plan's spans in stream order
	wslots          []*chunkSlot    // a gather sent per chunk: its chunks in flight, reused
	wfree           []*chunkSlot
	wdone           chan *chunkSlot // their calls' completions
	runs            []planfmt.Run
	cmd             planfmt.Command
	cmdBuf, respBuf []byte
	err             error // why the gather part fell back to direct
}

// hybridState is a hybrid operation's split: which spans are gathered.
type hybridState struct {
	split       costmodel.SplitDecision
	bucketModes [64]Mode        // mode of spans by log2 size
	sub         []planfmt.Range // the gathered spans
	subPlan     planfmt.Plan    // the gathered spans as a plan
}

// reset drops references so an idle state pins nothing of the caller.
func (op *Operation) reset() {
	op.cs, op.ctx, op.sop, op.mapper = nil, nil, ScatterOp{}, nil
	op.primary.resetSpans()
	op.fallback.resetSpans()
	op.primary.op, op.fallback.op = nil, nil
	op.primary.wrs, op.fallback.wrs = op.primary.wrs[:0], op.fallback.wrs[:0]
	op.h.sub, op.g.runs, op.g.spans = op.h.sub[:0], op.g.runs[:0], op.g.spans[:0]
	op.g.cmd.Plan = planfmt.Plan{}
	op.h.subPlan = planfmt.Plan{}
	op.err, op.g.err = nil, nil
	op.res = Result{}
	op.dec, op.h.split = costmodel.Decision{}, costmodel.SplitDecision{}
}

// Submit starts op and returns without waiting for its transfers: direct
// requests are posted (as many as the queue takes), a gather command is
// handed to its own goroutine. Invalid input returns an error at once
// and starts nothing. ctx bounds the whole operation: when it ends, the
// operation stops posting; its transfers in flight get
// Config.AbortGrace to finish (an operation whose every transfer
// finished succeeds), then the engine closes the Conn to end them, and the
// operation fails with the context's error and ErrClosed. Either way,
// nothing of the operation lands in the caller's memory after it
// returned.
func (e *Engine) Submit(ctx context.Context, op *ScatterOp) (*Operation, error) {
	return e.submit(ctx, op, false)
}

// Do runs op and waits for its result. It runs a gather command on the
// calling goroutine.
func (e *Engine) Do(ctx context.Context, op *ScatterOp) (Result, error) {
	o, err := e.submit(ctx, op, true)
	if err != nil {
		return Result{}, err
	}
	return o.Wait(context.Background()) // ctx ends the operation itself
}

// Wait waits for the operation's result. A failed operation returns an
// *OpError; its Result still describes what was planned. If ctx ends
// first, Wait returns ctx.Err() and the operation keeps running.
func (op *Operation) Wait(ctx context.Context) (Result, error) {
	select {
	case <-op.done:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	now := time.Now()
	res := op.res
	res.Trace.Total = now.Sub(op.t0)
	if !op.lastData.IsZero() {
		res.Trace.Complete = now.Sub(op.lastData)
	}
	stage.End(op.id, stage.Complete, 0)
	stage.End(op.id, stage.Op, res.Bytes)
	var err error
	if op.err != nil {
		err = &OpError{OpID: op.id, Mode: res.Mode, Err: op.err, Gather: op.g.err}
	}
	op.e.putOp(op)
	return res, err
}

// checkOp validates a ScatterOp before anything starts.
func checkOp(op *ScatterOp) error { return checkOpLocal(op, true) }

// checkOpLocal is checkOp, with the local region's fit checked only when
// localFit is set (a device operation's whole plan is checked against the
// device's length instead: Engine.checkDevice).
func checkOpLocal(op *ScatterOp, localFit bool) error {
	bad := func(field, reason string) error { return &InvalidOpError{Field: field, Reason: reason} }
	switch {
	case op == nil:
		return bad("op", "nil")
	case op.Conn == nil:
		return bad("Conn", "nil")
	case op.Plan == nil:
		return bad("Plan", "nil")
	case op.Local == nil:
		return bad("Local", "nil")
	case op.Dir != verbs.OpRead && op.Dir != verbs.OpWrite:
		return bad("Dir", fmt.Sprintf("%v is neither OpRead nor OpWrite", op.Dir))
	case op.Mode > ModeHybrid:
		return bad("Mode", op.Mode.String())
	case !op.Local.Access().Has(verbs.AccessLocal):
		return bad("Local", "region lacks AccessLocal")
	case op.Remote.Key == 0:
		return bad("Remote.Key", "zero")
	}
	need, remoteExt, localExt := verbs.AccessRemoteRead, op.Plan.SrcExtent, op.Plan.DstExtent
	if op.Dir == verbs.OpWrite {
		need, remoteExt, localExt = verbs.AccessRemoteWrite, op.Plan.DstExtent, op.Plan.SrcExtent
	}
	if !op.Remote.Access.Has(need) {
		return bad("Remote.Access", fmt.Sprintf("%v lacks %v", op.Remote.Access, need))
	}
	if !fits(op.RemoteOff, remoteExt, op.Remote.Len) {
		return bad("RemoteOff", fmt.Sprintf("extent of %d bytes at %d exceeds the remote region's %d", remoteExt, op.RemoteOff, op.Remote.Len))
	}
	if localFit && !fits(op.LocalOff, localExt, uint64(op.Local.Len())) {
		return bad("LocalOff", fmt.Sprintf("extent of %d bytes at %d exceeds the local region's %d", localExt, op.LocalOff, op.Local.Len()))
	}
	return nil
}

// fits reports whether [off, off+n) lies inside [0, size).
func fits(off, n, size uint64) bool { return off <= size && n <= size-off }

func (e *Engine) submit(ctx context.Context, sop *ScatterOp, inline bool) (*Operation, error) {
	op, err := e.prepare(ctx, sop)
	if err != nil {
		return nil, err
	}
	op.start(inline)
	return op, nil
}

// prepare checks sop and normalizes its plan into an operation that has
// not started: nothing is decided, posted or sent yet. The caller either
// starts it or discards it.
func (e *Engine) prepare(ctx context.Context, sop *ScatterOp) (*Operation, error) {
	return e.prepareOp(ctx, sop, false)
}

// prepareOp is prepare; wholeDevice prepares a device operation's whole
// plan for its decision only (deviceMode), its local fit not checked.
func (e *Engine) prepareOp(ctx context.Context, sop *ScatterOp, wholeDevice bool) (*Operation, error) {
	t0 := time.Now()
	if err := checkOpLocal(sop, !wholeDevice); err != nil {
		return nil, err
	}
	cs, err := e.conn(sop.Conn)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, fmt.Errorf("verbs: engine: %w", verbs.ErrClosed)
	}
	e.active.Add(1)
	e.mu.Unlock()

	op := e.getOp()
	op.cs, op.ctx, op.sop, op.t0 = cs, ctx, *sop, t0
	op.id = stage.NewID()
	op.fenced, op.wholeDevice = false, wholeDevice
	op.fb, op.lastData = FallbackNone, time.Time{}
	op.trace = Trace{OpID: op.id, Start: t0}
	if m, ok := sop.Conn.(verbs.Mapper); ok && !e.cfg.PostOnMapped {
		op.mapper = m
	}
	stage.Begin(op.id, stage.Op)
	stage.Begin(op.id, stage.Plan)
	if err := planfmt.NormalizeParallel(&op.norm, sop.Plan, e.normPar); err != nil {
		op.discard()
		return nil, fmt.Errorf("verbs: scatter op: %w", err)
	}
	op.geom = op.norm.Summary()
	op.trace.Payload = op.geom.Bytes
	op.prep = time.Since(t0)
	return op, nil
}

// discard releases a prepared operation that will not start.
func (op *Operation) discard() {
	stage.End(op.id, stage.Plan, 0)
	stage.End(op.id, stage.Op, 0)
	e := op.e
	e.active.Done()
	e.putOp(op)
}

// start decides a prepared operation's mode and launches it; from here on
// it ends in complete.
func (op *Operation) start(inline bool) {
	t := time.Now()
	op.decide()
	if op.mode == ModeGather || op.mode == ModeHybrid {
		op.prepareGather()
	}
	// Its own planning: its prepare and this, not the other parts of a
	// group prepared between them.
	op.trace.Plan = op.prep + time.Since(t)
	stage.End(op.id, stage.Plan, 0)
	op.e.watchAbort(op) // from here on the operation ends in complete
	op.launched = time.Now()
	op.launch(inline)
}

// decide picks the mode (and for gather the chunk size and slots).
func (op *Operation) decide() {
	want := op.sop.Mode
	op.chosen, op.mode, op.g.inline, op.g.staged, op.g.chunked = ModeDirect, ModeDirect, false, false, false
	op.g.stagedInline = 0
	if op.geom.Bytes == 0 || want == ModeDirect {
		return
	}
	if want == ModeAuto {
		op.chosen = ModeAuto // settled below
	} else {
		op.chosen = want
	}
	info, err := op.cs.ownerInfo(op.ctx)
	if err != nil {
		op.noGather(FallbackNoService, err)
		return
	}
	if fb := op.gatherable(info); fb != FallbackNone {
		op.noGather(fb, nil)
		return
	}
	p := op.params(info)
	g := costmodel.Geometry{S: int64(op.geom.Bytes), N: int64(op.geom.Fragments), M: int64(op.geom.Spans)}
	var cand costmodel.Candidate
	switch {
	case op.sop.Plan.Form == planfmt.FormRanges && want != ModeGather && op.occupiedBuckets() > 1:
		op.splitPlan(p, want == ModeHybrid)
		cand = op.h.split.Pipeline
	default:
		op.dec = costmodel.Decide(p, g)
		cand = op.dec.Gather
		op.g.inline = op.sop.Dir == verbs.OpRead && int64(op.geom.Bytes) <= min(op.e.cfg.InlineMax, info.InlineMax)
		runsOK := op.geom.Runs*uint64(op.e.cfg.MinRunFragments) <= op.geom.Fragments
		// A destination as fragmented as the source: the owner would post
		// a WRITE per fragment. Staged, its chunks land whole in the
		// engine's staging and are scattered here instead.
		staged := !runsOK && !op.g.inline && op.stageable(info)
		if staged {
			// Its calls carry one chunk each through the owner's packing,
			// the link and this side's scatter: priced, and shaped, as
			// such (costmodel.DecideStaged).
			op.g.stagedInline = op.stagedInlineMax(info)
			op.dec = costmodel.DecideStaged(op.stagedParams(p), g, costmodel.Staged{
				BMem: op.e.local.BMem, RCopy: op.e.local.RCopy, Runs: int64(op.geom.Runs),
				MaxCalls: stagedMaxCalls(p.MaxP), Workers: runtime.GOMAXPROCS(0)})
			cand = op.dec.Gather
		}
		switch {
		case want == ModeGather || want == ModeHybrid:
			op.mode = ModeGather
			op.g.staged = staged
		case op.dec.Mode == ModeGather && (runsOK || staged):
			op.mode, op.g.staged = ModeGather, staged
		case op.g.inline && float64(inlineTime(p, g)+op.inlineScatterTime(p, runsOK))*(1+p.Margin) < float64(op.dec.Direct.Total):
			// The model's T_gather counts a bulk round trip an inline
			// reply does not pay, and for a fragmented destination a
			// WRITE per run it does not post either (the reply's bytes
			// are copied into the runs here): price the inline path on
			// its own.
			op.mode = ModeGather
		}
	}
	if op.chosen == ModeAuto {
		op.chosen = op.mode
	}
	if op.mode == ModeDirect {
		return
	}
	// A command per chunk: a plain READ gather (not inline, not staged, not
	// a hybrid part) of a ranges plan or a contiguous rows plan.
	op.g.chunked = op.e.cfg.ChunkedRead && op.mode == ModeGather && op.sop.Dir == verbs.OpRead &&
		!op.g.inline && !op.g.staged &&
		(op.sop.Plan.Form == planfmt.FormRanges || op.sop.Plan.Rows.Layout.Kind == planfmt.LayoutContiguous)
	if !op.shape(info, cand) {
		op.noGather(FallbackUnsupported, nil)
	}
}

// stagedMaxCalls bounds a staged READ's calls in flight: twice the owner's
// pack workers (as capped by the engine's MaxP), since a call waits on the
// round trip and the requester's scatter as long as on the owner's
// packing, and twice the workers keep them busy through those waits
// (the model prices the owner's packing at its workers whatever the
// calls). A 2-core owner is sent 4 at most; the owner's own MaxCommands
// bounds what all its peers' calls hold.
func stagedMaxCalls(workers int) int {
	return min(2*max(workers, 1), costmodel.MaxPipelineWidth)
}

// stageable reports whether a READ gather can land in the engine's staging:
// the engine has staging, exposed on the Conn for the owner to WRITE.
func (op *Operation) stageable(info *OwnerInfo) bool {
	st := op.e.cfg.Staging
	return op.sop.Dir == verbs.OpRead && st != nil &&
		info.Covers(st.Region().Key(), verbs.AccessRemoteWrite, uint64(st.Region().Len()))
}

// stagedParams bounds a staged READ's candidates by the engine's staging
// too (its chunks are leases of the engine's pool, a class each, so a
// lease of C is exactly C, P of them within the pool's budget) and prices
// a call's fixed cost as the Conn's staged calls measured it.
func (op *Operation) stagedParams(p costmodel.Params) costmodel.Params {
	ps := op.e.cfg.Staging.Pool().Stats()
	p.StagingBudget = min(p.StagingBudget, int64(ps.Budget))
	// A call's cost beyond its round trip, packing and bytes, as the
	// Conn's staged calls measured it (the owner's handling of a command,
	// its WRITE riding one lane, the reply): its T_chunk_fixed.
	if f := op.cs.stagedCallFixed(); f > 0 {
		p.TChunkFixed = f
	}
	if p.MaxChunk == 0 || int64(ps.MaxSlot) < p.MaxChunk {
		p.MaxChunk = int64(ps.MaxSlot)
	}
	if lim := op.g.stagedInline; lim > 0 {
		p.MaxChunk = min(p.MaxChunk, lim)
	}
	return p
}

// stagedInlineMax is the largest chunk of a staged READ whose call asks
// the owner for an inline reply (the chunk's packed bytes inside the
// reply, scattered from there), or 0 when inline replies are off on
// either side or smaller than the engine's smallest lease. Answered
// inline, a call is one round trip: the owner packs into its reply
// instead of WRITEing the chunk into the lease and waiting for the
// WRITE's acknowledgement before it replies. The lease is held all the
// same, so whatever the owner answers, it can only write where the
// operation owns the staging.
func (op *Operation) stagedInlineMax(info *OwnerInfo) int64 {
	lim := min(op.e.cfg.InlineMax, info.InlineMax)
	if lim < int64(op.e.cfg.Staging.Pool().Stats().MinSlot) || lim < info.MinChunk {
		return 0
	}
	return lim
}

// inlineScatterTime predicts copying an inline reply's payload into the
// destination's runs on this side when they are fragmented (runsOK false;
// a few long runs cost nothing beside the link): every run at R_copy and
// the bytes at B_mem of one worker, from this engine's calibration, or
// else the owner's packing figures (the same kind of copy).
func (op *Operation) inlineScatterTime(p costmodel.Params, runsOK bool) time.Duration {
	if runsOK {
		return 0
	}
	bmem, rcopy := p.BMem, p.RCopy
	if op.e.calOK {
		bmem, rcopy = op.e.local.BMem, op.e.local.RCopy
	}
	if !(bmem > 0) || !(rcopy > 0) {
		return costmodel.Forever
	}
	return time.Duration((float64(op.geom.Runs)/rcopy + float64(op.geom.Bytes)/bmem) * 1e9)
}

// inlineTime predicts a READ gather answered inline: the gather front
// (plan, command, decode), the owner packing with one worker, and the
// payload crossing the link once in the reply.
func inlineTime(p costmodel.Params, g costmodel.Geometry) time.Duration {
	t := costmodel.TFront(p, g) + costmodel.TPack(p, g, 1)
	if p.BNet > 0 {
		t += time.Duration(float64(g.S) / p.BNet * 1e9)
	}
	return t
}

// noGather records that gather cannot run and settles on direct.
func (op *Operation) noGather(fb Fallback, err error) {
	if op.chosen == ModeAuto {
		op.chosen = ModeDirect
	}
	op.mode = ModeDirect
	op.fb = fb
	op.g.err = err
}

// gatherable checks what gather needs besides the cost model: the
// destination (READ) or the engine's staging (WRITE) exposed on the
// Conn, rows no larger than the owner's largest chunk.
func (op *Operation) gatherable(info *OwnerInfo) Fallback {
	if op.sop.Dir == verbs.OpRead {
		end := op.sop.LocalOff + op.sop.Plan.DstExtent
		if op.wholeDevice { // the pieces land in the bounce region
			end = uint64(op.sop.Local.Len())
		}
		if !info.Covers(op.sop.Local.Key(), verbs.AccessRemoteWrite, end) {
			return FallbackNotExposed
		}
	} else {
		st := op.e.cfg.Staging
		if st == nil || !info.Covers(st.Region().Key(), verbs.AccessRemoteRead, uint64(st.Region().Len())) {
			return FallbackNotExposed
		}
	}
	if op.sop.Plan.Form == planfmt.FormRows {
		r := int64(op.sop.Plan.Rows.RowSize)
		if r > info.MaxChunk || (op.sop.Dir == verbs.OpWrite && r > int64(op.e.cfg.Staging.Pool().Stats().MaxSlot)) {
			return FallbackUnsupported
		}
	}
	return FallbackNone
}

// params builds the cost model's inputs for this operation.
func (op *Operation) params(info *OwnerInfo) costmodel.Params {
	p := op.linkParams(info)
	if op.mapper != nil {
		// Direct is a local copy here; see mappedParams. Without a local
		// calibration (its probe failed) the owner's, taken on this same
		// host, stands in.
		cal := costmodel.Calibration{BMem: info.BMem, RCopy: info.RCopy}
		if loc, err := op.e.localCalibration(); err == nil {
			cal = loc
		}
		p = op.mappedParams(p, cal)
	}
	return p
}

// linkParams builds the cost model's inputs from the link, the owner's
// packing figures and the direct rate observed on the Conn.
func (op *Operation) linkParams(info *OwnerInfo) costmodel.Params {
	cfg := &op.e.cfg
	lp := op.cs.link()
	p := costmodel.Params{
		BNet: lp.Bandwidth, RPost: lp.PostRate, Q: max(lp.QueueDepth, 1), L: lp.RTT,
		RequestsOverlap: lp.RequestsOverlap,
		BMem:            info.BMem, RCopy: info.RCopy,
		TPlan: cfg.TPlan, TPlanPerSpan: cfg.TPlanPerSpan,
		TDecode: cfg.TDecode, TDecodePerSpan: cfg.TDecodePerSpan,
		TChunkFixed: cfg.TChunkFixed,
		Epsilon:     cfg.Epsilon, Margin: cfg.Margin,
		StagingBudget: info.StagingBudget,
		MaxP:          max(1, min(cfg.MaxP, info.PackWorkers)),
		ParallelMin:   info.ParallelMin,
		MaxChunk:      info.MaxChunk,
		ChunkSteps:    cfg.ChunkSteps,
	}
	// The command itself crosses the link before the owner starts.
	// (EncodedCommandSize is O(1) for rows; ranges take at most 24 bytes
	// each, a bound that avoids a pass over them.)
	cmdBytes := int64(op.geom.Fragments+op.geom.Skipped) * 24
	if op.sop.Plan.Form == planfmt.FormRows {
		if n, err := planfmt.EncodedCommandSize(&planfmt.Command{Chunk: 1, Pipeline: 1, Dir: planfmt.Read,
			Src: planfmt.Window{Len: op.sop.Plan.SrcExtent}, Dst: planfmt.Window{Len: op.sop.Plan.DstExtent},
			Plan: *op.sop.Plan}); err == nil {
			cmdBytes = int64(n)
		}
	}
	// TControl is the control call's fixed latency (the probe's RTT, or
	// the moving measure of it once there is one) plus this command's
	// bytes at the link's rate.
	var cmdTime time.Duration
	if lp.Bandwidth > 0 {
		cmdTime = time.Duration(float64(cmdBytes) / lp.Bandwidth * 1e9)
	}
	p.TControl = lp.RTT
	if op.sop.Dir == verbs.OpWrite {
		p.TControl += cmdTime
		// The requester packs; the owner only moves whole chunks.
		loc := op.e.local
		p.BMem, p.RCopy = loc.BMem, loc.RCopy
		ps := op.e.cfg.Staging.Pool().Stats()
		p.StagingBudget = min(p.StagingBudget, int64(ps.Budget)) // P leases of C (gatherWrite)
		p.MaxChunk = min(p.MaxChunk, int64(ps.MaxSlot))
		p.MaxP = 1 // one packer: the requester's goroutine
		p.ParallelMin = 0
		return op.directRate(p)
	}
	p = op.cs.moving.Refresh(p)
	p.TControl += cmdTime
	return op.directRate(p)
}

// directRate sets the request rate the direct prediction uses: the rate
// direct operations achieved on this Conn once there is one; before that
// the probe's rate, capped by the small-copy rate (each direct fragment is
// also a random copy on one goroutine somewhere). It also sets a direct
// request's cost outside the window as the Conn's direct operations
// measured it (none before the first), which the gather side's front
// (planning, control, decoding) has its counterpart of.
func (op *Operation) directRate(p costmodel.Params) costmodel.Params {
	p.TDirectPerRequest = op.cs.directPerRequest()
	if r := op.cs.observedPostRate(); r > 0 {
		p.RPost = r
	} else if p.RCopy > 0 {
		p.RPost = min(p.RPost, p.RCopy)
	}
	return p
}

// shape turns a gather candidate into the command's chunk size (a power of
// two within the owner's chunk bounds, at least one row) and staging slots
// (at least two when there are two chunks, so packing overlaps sending,
// within the budget). It reports false when no shape fits.
func (op *Operation) shape(info *OwnerInfo, cand costmodel.Candidate) bool {
	if cand.C < 1 {
		return false
	}
	s := int64(op.geom.Bytes)
	if op.mode == ModeHybrid {
		s = op.h.split.Gather.S
	}
	maxChunk := info.MaxChunk
	budget := info.StagingBudget
	minChunk := info.MinChunk
	if op.sop.Dir == verbs.OpWrite || op.g.staged {
		// A WRITE's chunks are leases of the requester's pool: C one of
		// its classes (so a lease of C is exactly C), P of them within the
		// pool's budget.
		ps := op.e.cfg.Staging.Pool().Stats()
		maxChunk, budget = min(maxChunk, int64(ps.MaxSlot)), min(budget, int64(ps.Budget))
		minChunk = max(minChunk, int64(ps.MinSlot))
	}
	if op.g.staged && op.g.stagedInline > 0 {
		// Its calls are answered inline: no chunk above the inline limit.
		maxChunk = min(maxChunk, op.g.stagedInline)
	}
	// C is the model's chunk rounded down to a power of two, shaped by
	// the rule the owner applies too (gatherwire.ChunkShape): exactly the
	// size of the staging lease that holds it, so P leases of C bytes are
	// the whole staging the command may hold. A plan smaller than C leaves
	// its one chunk partly empty rather than asking for a lease the pool
	// would round up.
	var row int64
	if op.sop.Plan.Form == planfmt.FormRows {
		row = int64(op.sop.Plan.Rows.RowSize)
	}
	c, err := gatherwire.ChunkShape(int64(1)<<(bits.Len64(uint64(cand.C))-1), row, minChunk, maxChunk)
	if err != nil {
		return false
	}
	if c > maxChunk || c > budget {
		return false
	}
	// Staging slots: as many as the owner's limit and the budget allow
	// (at least the model's pipeline width), so packing runs ahead of
	// the link instead of waiting on each chunk's completion.
	k := (s + c - 1) / c
	slots := max(int64(cand.P), int64(info.MaxSlots))
	if op.g.staged {
		// A staged READ's slots are its calls in flight, which the model
		// chose with its chunk: more would start more chunks packing at
		// once, and delay the first to land.
		slots = int64(max(cand.P, 1))
	}
	slots = min(slots, budget/c, k)
	op.g.chunk, op.g.slots = c, int(max(slots, 1))
	op.trace.ChunkBytes, op.trace.Slots = op.g.chunk, op.g.slots
	return true
}

// launch starts the transfers of the decided mode.
func (op *Operation) launch(inline bool) {
	switch op.mode {
	case ModeGather:
		op.parts = 1
		if inline {
			op.runGather()
		} else {
			go op.runGather()
		}
	case ModeHybrid:
		// The gather part starts first, on its own goroutine: a backend
		// that copies inside Post (shm) then moves the direct part on this
		// goroutine while the owner packs.
		op.parts = 2
		go op.runGather()
		if op.mapper != nil {
			op.runMapped(&op.primary, true)
			return
		}
		op.submitReserved(&op.primary)
	default:
		op.parts = 1
		if op.mapper != nil {
			op.runMapped(&op.primary, false)
			return
		}
		op.primary.op = op
		id := op.cs.reserve(&op.primary)
		wrs := op.primary.wrs[:0]
		op.norm.ForEachSpan(func(src, dst, n uint64) bool {
			wrs = op.spanRequest(wrs, id, src, dst, n)
			return true
		})
		op.primary.wrs = wrs
		op.submitReserved(&op.primary)
	}
}

// submitReserved submits a part whose requests carry the ID reserve gave.
func (op *Operation) submitReserved(p *directPart) {
	op.mu.Lock()
	op.trace.DirectRequests += len(p.wrs)
	op.mu.Unlock()
	if len(p.wrs) == 0 {
		op.cs.release(p)
		op.directDone(p)
		return
	}
	op.cs.submit(p)
}

// directDone is called when a direct part finished (all its requests
// completed, or it failed and its requests in flight completed).
func (op *Operation) directDone(p *directPart) {
	op.mu.Lock()
	if p.err != nil && op.err == nil {
		op.err = p.err
	}
	if !p.first.IsZero() {
		if w := p.last.Sub(p.first); w > op.trace.Window {
			op.trace.Window = w
		}
	}
	if p.last.After(op.lastData) {
		op.lastData = p.last
	}
	op.parts--
	last := op.parts == 0
	op.mu.Unlock()
	if last {
		op.complete()
	}
}

// gatherDone is called when the gather part ended. On failure it falls
// back: the gathered spans are sent direct (rewriting whatever the gather
// wrote), unless the operation's context ended.
func (op *Operation) gatherDone(err error, fb Fallback) {
	now := time.Now()
	op.mu.Lock()
	if now.After(op.lastData) {
		op.lastData = now
	}
	if err == nil {
		op.parts--
		last := op.parts == 0
		op.mu.Unlock()
		if last {
			op.complete()
		}
		return
	}
	op.fb, op.g.err = fb, err
	if cerr := op.ctx.Err(); cerr != nil {
		if op.err == nil {
			op.err = cerr
		}
		op.parts--
		last := op.parts == 0
		op.mu.Unlock()
		if last {
			op.complete()
		}
		return
	}
	op.mu.Unlock()
	// The gather part is replaced by its direct fallback.
	p := &op.fallback
	if op.mapper != nil {
		if op.mode == ModeHybrid {
			p.setSpans(op.h.sub)
		}
		op.runMapped(p, op.mode == ModeHybrid)
		return
	}
	p.op = op
	id := op.cs.reserve(p)
	if op.mode == ModeHybrid {
		p.wrs = op.rangeRequests(p.wrs[:0], id, op.h.sub)
	} else {
		wrs := p.wrs[:0]
		op.norm.ForEachSpan(func(src, dst, n uint64) bool {
			wrs = op.spanRequest(wrs, id, src, dst, n)
			return true
		})
		p.wrs = wrs
	}
	op.submitReserved(p)
}

// complete publishes the result.
func (op *Operation) complete() {
	stage.Begin(op.id, stage.Complete)
	op.e.unwatchAbort(op)
	op.mu.Lock()
	if op.fenced {
		op.err = fmt.Errorf("%w; its transfers were still in flight %v later, so the engine closed the connection to end them: %w",
			op.ctx.Err(), op.e.cfg.AbortGrace, verbs.ErrClosed)
	}
	op.mu.Unlock()
	e := op.e
	res := &op.res
	res.Chosen = op.chosen
	res.Mode = op.mode
	if op.fb != FallbackNone && op.mode != ModeDirect {
		res.Mode = ModeDirect // every byte went direct in the end
	}
	res.Bytes, res.Fragments, res.Spans = op.geom.Bytes, op.geom.Fragments, op.geom.Spans
	sb := op.sop.SpanBytes[:0]
	for _, c := range op.norm.Completions() {
		sb = append(sb, c.Bytes)
	}
	res.SpanBytes = sb
	res.Fallback = op.fb
	res.FallbackErr = op.g.err
	res.Decision, res.Split = op.dec, op.h.split
	res.Trace = op.trace

	e.stats.ops.Add(1)
	if op.fb != FallbackNone {
		e.stats.fallbacks[op.fb].Add(1)
	}
	if op.err != nil {
		e.stats.failed.Add(1)
	} else {
		if res.Mode == ModeDirect && op.fb == FallbackNone {
			// Its own time: its planning and, from launch, its posting,
			// window and completion (not a group's other parts before it).
			op.cs.observeDirect(op.trace.DirectRequests, op.geom.Bytes, op.trace.Window, op.trace.Plan+time.Since(op.launched))
		}
		e.stats.bytes.Add(op.geom.Bytes)
		switch res.Mode {
		case ModeGather:
			e.stats.gather.Add(1)
		case ModeHybrid:
			e.stats.hybrid.Add(1)
		default:
			e.stats.direct.Add(1)
		}
	}
	if op.err != nil && errors.Is(op.err, verbs.ErrClosed) {
		op.cs.e.forget(op.cs)
	}
	e.active.Done()
	op.done <- struct{}{}
}

package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

// DeviceDst is memory a READ can land in that the transports cannot
// write, such as a GPU's: Engine.DoDevice stages the bytes in registered
// host memory and hands them over piece by piece. The engine calls no
// device API itself, and the interface has only built-in types, so that
// a device package satisfies it without importing the engine
// (cudagather's device buffers do).
type DeviceDst interface {
	// DeviceLen is the destination's size in bytes.
	DeviceLen() uint64
	// CopyIn starts copying runs of src into the destination at devOff:
	// run {off, n} is src[off : off+n], landing at devOff+off, in order
	// after every copy started before (a device stream's order); bytes
	// between runs are left as they are. src is host memory of the
	// operation's bounce region: the engine leaves it untouched until
	// wait has returned, and calls wait exactly once; wait returns once
	// the copy has read src (and, in stream order, written the
	// destination), with the copy's error if it failed. runs is valid
	// only during the call.
	CopyIn(devOff uint64, src []byte, runs [][2]uint64) (wait func() error, err error)
}

// Defaults of DeviceOp.
const (
	DefaultDeviceWindow = 8 << 20
	DefaultDeviceDepth  = 3
)

// DeviceOp is a READ into a DeviceDst through a bounce region.
//
// Op is the operation as if the destination were host memory: Plan's
// destination extent is the device destination's window at DeviceOff,
// Conn, Remote, RemoteOff, Mode as for Do. Op.Local is the bounce region
// (registered with AccessLocal, and exposed on the Conn with
// AccessRemoteWrite for the pieces to gather), Op.LocalOff where its
// Depth slots of Window bytes start.
type DeviceOp struct {
	Op        ScatterOp
	Device    DeviceDst
	DeviceOff uint64
	// Window bounds the destination bytes one piece covers (default
	// DefaultDeviceWindow); a plan is cut into pieces of at most Window
	// bytes of its destination (planfmt.DstCutter), each staged whole in
	// a slot of the bounce region. A token row (a strided rows plan) or a
	// row larger than Window is an *InvalidOpError.
	Window uint64
	// Depth is the bounce slots: pieces in flight, transferring or being
	// copied to the device (default DefaultDeviceDepth, at least 2).
	Depth int
}

// DeviceResult is the outcome of Engine.DoDevice.
type DeviceResult struct {
	// Result adds up the pieces: Bytes, Fragments, Spans, the fallbacks;
	// Trace.StagingPeak is the largest piece's, Trace.Slots and
	// Trace.ChunkBytes the largest piece bound's (each piece's peak stays
	// within its own); Mode and Chosen are those of the piece that moved
	// the most bytes;
	// SpanBytes is one span of Bytes; Trace.Total is the whole operation,
	// Trace.Payload its bytes, the stage times the pieces' sums.
	Result
	// Pieces is the number of pieces the plan was cut into.
	Pieces int
	// CopyWait is the time spent waiting for device copies (to free a
	// bounce slot, and at the end).
	CopyWait time.Duration
}

// DeviceError is the error of a DoDevice whose piece failed: its
// transfer (Err then wraps the *OpError) or its device copy.
type DeviceError struct {
	Piece int    // in destination order
	Off   uint64 // the piece's start in the plan's destination extent
	Copy  bool   // the device copy failed, not the transfer
	Err   error
}

func (e *DeviceError) Error() string {
	what := "transfer"
	if e.Copy {
		what = "device copy"
	}
	return fmt.Sprintf("verbs: device destination: piece %d (destination offset %d): %s: %v", e.Piece, e.Off, what, e.Err)
}

func (e *DeviceError) Unwrap() error { return e.Err }

// DoDevice runs a READ whose destination is device memory: the plan is
// cut by its destination into pieces of at most Window bytes, and up to
// Depth pieces are in flight at once, each transferred (in its own mode,
// as Do decides) into a slot of the bounce region and, once landed,
// copied to the device with DeviceDst.CopyIn while later pieces
// transfer; a slot is reused once its copy has finished. It returns when
// every copy has finished, so the bytes are in device memory in the
// device's copy order. Nothing is staged whole: the bounce region holds
// Depth x Window bytes whatever the plan's size.
//
// Bad input (no device, not a READ, a destination past the device's
// length, a bounce region too small, completion spans, an invalid plan)
// is an error before any transfer. A failed piece fails the operation
// with a *DeviceError once every piece in flight and every copy started
// has ended (the bounce region is then no longer written or read); the
// device bytes of the pieces before it have landed, the rest are
// unspecified.
func (e *Engine) DoDevice(ctx context.Context, d *DeviceOp) (DeviceResult, error) {
	t0 := time.Now()
	var res DeviceResult
	window, depth, err := e.checkDevice(d)
	if err != nil {
		return res, err
	}
	var cut planfmt.DstCutter
	pieces, err := cut.Cut(d.Op.Plan, window)
	if err != nil {
		return res, err
	}
	mode := d.Op.Mode
	if len(pieces) > 1 { // one piece decides for itself: it is the whole plan
		if mode, err = e.deviceMode(ctx, d); err != nil {
			return res, err
		}
	}
	for i := range pieces {
		if pieces[i].Plan.DstExtent > window {
			return res, &InvalidOpError{Field: "DeviceOp.Window", Reason: fmt.Sprintf(
				"%d B: piece %d needs %d B (one token row or one row of the layout is larger)", window, i, pieces[i].Plan.DstExtent)}
		}
	}
	res.Pieces = len(pieces)
	// The order pieces go in: destination order, except that a last
	// piece smaller than the first (the remainder of a plan cut by the
	// window) goes first when the pieces are more than the slots. Pieces
	// in flight together share the link and land together, so the first
	// slot frees only when a whole wave has landed, and a remainder sent
	// last runs alone after it, its fixed costs and its transfer exposed
	// (the H200 host: many-small, 4 pieces in 3 slots, 0.84-0.92 of the
	// same READ into host memory). Sent first, it lands early, and the
	// piece after the wave starts while the wave is still in flight.
	n := len(pieces)
	first := n > depth && pieces[n-1].Plan.DstExtent < pieces[0].Plan.DstExtent
	sendOrder := func(i int) int { // the i-th piece sent
		if !first {
			return i
		}
		if i == 0 {
			return n - 1
		}
		return i - 1
	}
	slots := make([]deviceSlot, depth)
	var norm planfmt.Normalized
	var runs [][2]uint64
	var failed error
	bounce := d.Op.Local.Bytes()
	byMode := map[Mode]uint64{}

	// waitCopy frees slot s of its device copy.
	waitCopy := func(s *deviceSlot) {
		if s.copy == nil {
			return
		}
		tw := time.Now()
		if err := s.copy(); err != nil && failed == nil {
			failed = &DeviceError{Piece: s.piece, Off: pieces[s.piece].Off, Copy: true, Err: err}
		}
		res.CopyWait += time.Since(tw)
		s.copy = nil
	}
	next := 0
	for done := 0; done < len(pieces); done++ {
		// Keep Depth pieces in flight: a slot is free once the copy of
		// its previous piece has read it.
		for failed == nil && next < len(pieces) && next-done < depth {
			s := &slots[next%depth]
			waitCopy(s)
			if failed != nil {
				break
			}
			op := d.Op
			pi := sendOrder(next)
			op.Plan, op.LocalOff, op.SpanBytes = &pieces[pi].Plan, d.Op.LocalOff+uint64(next%depth)*window, nil
			op.Mode = mode
			s.piece, s.op = pi, nil
			if s.op, err = e.Submit(ctx, &op); err != nil {
				failed = &DeviceError{Piece: pi, Off: pieces[pi].Off, Err: err}
				break
			}
			next++
		}
		if done >= next {
			break // nothing in flight: a submit failed
		}
		s := &slots[done%depth]
		pi := s.piece
		r, err := s.op.Wait(context.Background()) // ctx ends the operation itself
		s.op = nil
		if err != nil {
			if failed == nil {
				failed = &DeviceError{Piece: pi, Off: pieces[pi].Off, Err: err}
			}
			continue // the others in flight still end before the slots are left
		}
		res.add(&r)
		byMode[r.Mode] += r.Bytes
		if mb := byMode[r.Mode]; mb >= byMode[res.Mode] {
			res.Mode, res.Chosen = r.Mode, r.Chosen
		}
		if failed != nil {
			continue
		}
		pc := &pieces[pi]
		if err := planfmt.Normalize(&norm, &pc.Plan); err != nil { // checked by Cut: not expected
			failed = &DeviceError{Piece: pi, Off: pc.Off, Err: err}
			continue
		}
		runs = runs[:0]
		norm.ForEachRun(func(dst, _, n uint64) bool {
			if k := len(runs) - 1; k >= 0 && runs[k][0]+runs[k][1] == dst {
				runs[k][1] += n
			} else {
				runs = append(runs, [2]uint64{dst, n})
			}
			return true
		})
		at := d.Op.LocalOff + uint64(done%depth)*window
		if s.copy, err = d.Device.CopyIn(d.DeviceOff+pc.Off, bounce[at:at+pc.Plan.DstExtent], runs); err != nil {
			s.copy = nil
			failed = &DeviceError{Piece: pi, Off: pc.Off, Copy: true, Err: err}
		}
	}
	for i := range slots {
		if slots[i].op != nil { // submitted after a failure was seen: let it end
			_, _ = slots[i].op.Wait(context.Background())
			slots[i].op = nil
		}
		waitCopy(&slots[i])
	}
	res.SpanBytes = append(d.Op.SpanBytes[:0], res.Bytes)
	res.Trace.Total, res.Trace.Payload = time.Since(t0), res.Bytes
	if failed != nil {
		return res, failed
	}
	return res, nil
}

// deviceMode is the mode every piece of d runs in: d.Op.Mode when it is
// forced; for ModeAuto, the engine's choice for the whole plan, as one
// operation into host memory exposed as the bounce region is. The pieces
// are Depth at once, their fixed costs overlapping as one operation's
// chunks do, so a piece's own decision (a window's bytes, the whole
// operation's fixed costs) would undervalue gather: on the H200 host the
// pieces of many-small each chose direct, 0.27 of the same READ into host
// memory, where gather ran 0.6 (perf-notes, 2026-12-03).
func (e *Engine) deviceMode(ctx context.Context, d *DeviceOp) (Mode, error) {
	if d.Op.Mode != ModeAuto {
		return d.Op.Mode, nil
	}
	op, err := e.prepareOp(ctx, &d.Op, true)
	if err != nil {
		return 0, err
	}
	op.decide()
	mode := op.mode
	op.discard()
	return mode, nil
}

// deviceSlot is one bounce slot: the piece in it, its transfer while in
// flight and then its device copy.
type deviceSlot struct {
	piece int
	op    *Operation
	copy  func() error // the device copy's wait
}

// add sums a piece's result into the device operation's.
func (d *DeviceResult) add(r *Result) {
	d.Bytes += r.Bytes
	d.Fragments += r.Fragments
	d.Spans += r.Spans
	if d.Fallback == FallbackNone && r.Fallback != FallbackNone {
		d.Fallback, d.FallbackErr = r.Fallback, r.FallbackErr
	}
	t, s := &d.Trace, &r.Trace
	t.Plan += s.Plan
	t.Call += s.Call
	t.Control += s.Control
	t.Decode += s.Decode
	t.Pack += s.Pack
	t.Scatter += s.Scatter
	t.OwnerFill += s.OwnerFill
	t.Window += s.Window
	t.Complete += s.Complete
	t.Chunks += s.Chunks
	t.DirectRequests += s.DirectRequests
	t.Mapped += s.Mapped
	t.StagingPeak = max(t.StagingPeak, s.StagingPeak)
	// The bound beside the peak: the largest piece's Slots x ChunkBytes.
	if int64(s.Slots)*s.ChunkBytes > int64(t.Slots)*t.ChunkBytes {
		t.Slots, t.ChunkBytes = s.Slots, s.ChunkBytes
	}
}

// checkDevice validates a DeviceOp and returns its window and depth.
func (e *Engine) checkDevice(d *DeviceOp) (uint64, int, error) {
	bad := func(field, reason string) (uint64, int, error) {
		return 0, 0, &InvalidOpError{Field: field, Reason: reason}
	}
	if d == nil {
		return bad("op", "nil")
	}
	if d.Device == nil {
		return bad("DeviceOp.Device", "nil")
	}
	if d.Op.Dir != verbs.OpRead {
		return bad("DeviceOp.Op.Dir", fmt.Sprintf("%v: a device destination is a READ's", d.Op.Dir))
	}
	if d.Op.Plan == nil {
		return bad("DeviceOp.Op.Plan", "nil")
	}
	if d.Op.Local == nil {
		return bad("DeviceOp.Op.Local", "nil: the bounce region")
	}
	if len(d.Op.Plan.CompletionEnds) > 0 {
		return bad("DeviceOp.Op.Plan.CompletionEnds", "completion spans are not kept across a device operation's pieces")
	}
	window, depth := d.Window, d.Depth
	if window == 0 {
		window = DefaultDeviceWindow
	}
	if depth == 0 {
		depth = DefaultDeviceDepth
	}
	if depth < 2 {
		return bad("DeviceOp.Depth", fmt.Sprintf("%d: at least 2 (one piece transfers while the one before is copied)", depth))
	}
	if n := d.Device.DeviceLen(); d.DeviceOff > n || d.Op.Plan.DstExtent > n-d.DeviceOff {
		return bad("DeviceOp.DeviceOff", fmt.Sprintf("%d + destination extent %d is past the device destination's %d B", d.DeviceOff, d.Op.Plan.DstExtent, n))
	}
	need, ok := mulAddU64(window, uint64(depth), d.Op.LocalOff)
	if !ok || need > uint64(d.Op.Local.Len()) {
		return bad("DeviceOp.Op.Local", fmt.Sprintf("bounce region of %d B from offset %d: %d slots of %d B do not fit", d.Op.Local.Len(), d.Op.LocalOff, depth, window))
	}
	if e == nil {
		return bad("engine", "nil")
	}
	return window, depth, nil
}

// mulAddU64 returns a*b+c and whether it did not overflow.
func mulAddU64(a, b, c uint64) (uint64, bool) {
	if a != 0 && b > (^uint64(0)-c)/a {
		return 0, false
	}
	return a*b + c, true
}

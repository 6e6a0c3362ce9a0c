package engine

import (
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
)

// Mode selects how a scatter operation moves its bytes. It is the cost
// model's mode type (one numbering for both).
type Mode = costmodel.Mode

// The modes of an operation.
const (
	// ModeAuto lets the engine decide from the cost model: direct, gather,
	// or (for a ranges plan whose span sizes differ) hybrid.
	ModeAuto = costmodel.ModeAuto
	// ModeDirect posts one work request per coalesced span.
	ModeDirect = costmodel.ModeDirect
	// ModeGather has the owner pack the whole plan into staging and send
	// bulk transfers (READ), or stages the fragments on the requester for
	// the owner to read and scatter (WRITE).
	ModeGather = costmodel.ModeGather
	// ModeHybrid sends large spans direct and gathers small ones, both at
	// once, under one completion. Forced on a plan whose spans share one
	// size class (a fixed-row plan), it gathers.
	ModeHybrid = costmodel.ModeHybrid
)

// Fallback says why an operation that was to gather (wholly or in part)
// ran direct instead.
type Fallback uint8

const (
	// FallbackNone: no fallback happened.
	FallbackNone Fallback = iota
	// FallbackNoService: the owner has no gather service (its segment
	// answered MethodGatherInfo with ErrNotSupported), or asking failed.
	FallbackNoService
	// FallbackNotExposed: gather needs a region exposed on the Conn that is
	// not: the local destination of a READ, or the engine's staging for a
	// WRITE (or the engine has no staging).
	FallbackNotExposed
	// FallbackUnsupported: the plan cannot be gathered under the owner's
	// limits (a row larger than the largest chunk, no staging budget).
	FallbackUnsupported
	// FallbackRefused: the owner rejected the command (validation).
	FallbackRefused
	// FallbackExhausted: no staging was free in time (owner or requester).
	FallbackExhausted
	// FallbackAborted: the gather failed after it started (transfer
	// error, owner gone, malformed reply).
	FallbackAborted
)

var fallbackNames = [...]string{
	FallbackNone: "none", FallbackNoService: "no-service", FallbackNotExposed: "not-exposed",
	FallbackUnsupported: "unsupported", FallbackRefused: "refused", FallbackExhausted: "exhausted",
	FallbackAborted: "aborted",
}

// numFallbacks is the number of Fallback values.
const numFallbacks = int(FallbackAborted) + 1

// String returns the reason's name ("refused").
func (f Fallback) String() string {
	if int(f) < len(fallbackNames) {
		return fallbackNames[f]
	}
	return fmt.Sprintf("Fallback(%d)", uint8(f))
}

// ScatterOp describes one scatter operation between the caller's
// registered memory and a region the owner exported.
//
// The plan's offsets are relative to extents: Src offsets index the
// source extent and Dst offsets the destination extent. For OpRead the
// source is the owner's region (the window of Plan.SrcExtent bytes at
// RemoteOff) and the destination the local one (Plan.DstExtent bytes at
// LocalOff); for OpWrite it is the other way round.
//
// A ScatterOp is read during Submit only (the plan's ids and ranges must
// stay unchanged until the operation completes), so one value may be
// reused for the next operation.
type ScatterOp struct {
	// Conn is the connection to the owner's segment.
	Conn verbs.Conn
	// Dir is OpRead (owner's region -> local region) or OpWrite (local
	// region -> owner's region).
	Dir verbs.Op
	// Remote is the owner's region, as listed by Conn.Remote().
	Remote verbs.RegionInfo
	// RemoteOff is where the remote extent starts in Remote.
	RemoteOff uint64
	// Local is the caller's region, registered with the Conn's
	// transport with AccessLocal. For a READ to be gathered it must also
	// be exposed on the Conn (ConnectOptions.Expose) with
	// AccessRemoteWrite; otherwise the operation runs direct.
	Local *verbs.Region
	// LocalOff is where the local extent starts in Local.
	LocalOff uint64
	// Plan is the scatter plan.
	Plan *planfmt.Plan
	// Mode forces a mode; ModeAuto (the zero value) lets the engine
	// decide.
	Mode Mode
	// SpanBytes, when it has the capacity, holds Result.SpanBytes
	// (appended to SpanBytes[:0]), so steady-state operations allocate
	// nothing for it.
	SpanBytes []uint64
}

// Result is the outcome of a completed operation.
type Result struct {
	// Mode is how the bytes moved: ModeDirect after a full fallback.
	Mode Mode
	// Chosen is what the engine decided (or was told) before any fallback.
	Chosen Mode
	// Bytes, Fragments and Spans are the plan's payload bytes, carrying
	// fragments and coalesced spans.
	Bytes, Fragments, Spans uint64
	// SpanBytes holds the byte count of each completion span of the plan
	// (planfmt Completions), in plan order.
	SpanBytes []uint64
	// Fallback is why a planned gather ran direct (FallbackNone if not),
	// and FallbackErr the error behind it, when there was one.
	Fallback    Fallback
	FallbackErr error
	// Decision is the cost model's decision for the operation (for
	// ModeAuto and forced gather); Split the hybrid split, when one was
	// evaluated. Their String methods explain them.
	Decision costmodel.Decision
	Split    costmodel.SplitDecision
	// Trace holds the stage times.
	Trace Trace
}

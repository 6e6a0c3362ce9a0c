package engine

import (
	"fmt"
	"time"
)

// Trace is the stage record of one scatter operation. Requester-side
// durations are measured on the requester's clock; Decode, Pack, Window
// (for gather) and OwnerFill come from the owner's reply and are durations
// on the owner's clock, so they compare with the others but are never
// added to timestamps.
//
// A hybrid operation's Window is the longer of its direct window and its
// gather window (the two run at once).
type Trace struct {
	OpID  uint64    // the operation id (stage markers use it)
	Start time.Time // Submit entered

	// Plan is the requester's normalize + decide + encode time.
	Plan time.Duration
	// Call is the gather command round trip as the requester saw it (the
	// sum over WRITE waves); Control is Call minus the owner's handler
	// time: delivering the command and its reply.
	Call, Control time.Duration
	// Decode is the owner's decode and validation; Pack is packing into
	// staging (the owner's for READ, the requester's for WRITE) and Scatter
	// the owner's unpacking of WRITE chunks. All are totals over chunks.
	Decode, Pack, Scatter time.Duration
	// OwnerFill is the owner's time from receiving the command to its
	// first bulk post (decode, first lease and first chunk packed).
	OwnerFill time.Duration
	// Window is first bulk post to last data completion: the owner's
	// bulk window for gather, the requester's first post to last polled
	// completion for direct. A gather sent as a command per chunk (WRITE,
	// staged or chunked READ) has several owner windows at once: its
	// Window is the requester's, from the first chunk's call to the last
	// chunk's reply (scatter included, for a staged READ).
	Window time.Duration
	// Complete is the time from the last data completion observed by the
	// requester to the result being published to Wait.
	Complete time.Duration
	// Total is Submit to Wait returning the result: the full API time.
	Total time.Duration

	// Payload is the operation's payload bytes.
	Payload uint64
	// Chunks, ChunkBytes and Slots are the gather pipeline's chunk count,
	// chunk size C and staging slots P (zero for direct).
	Chunks     int
	ChunkBytes int64
	Slots      int
	// PackWorkers is how many goroutines the owner packed one chunk with.
	PackWorkers int
	// StagingPeak is the most staging bytes the owner held at once (for
	// WRITE, the requester's wave lease).
	StagingPeak int64
	// DirectRequests is the number of work requests the requester posted.
	DirectRequests int
	// Mapped is the payload the requester copied itself through the
	// Conn's mapping (a Conn that implements Mapper) instead of posting
	// work requests: the direct part of an operation on shm. For such a
	// part Window is the copy time.
	Mapped uint64
	// Waves is the number of gather commands sent (a WRITE and a staged
	// READ send one per chunk; a READ one).
	Waves int
	// Inline reports a READ gather answered with an inline reply (the
	// payload inside the reply; no staging, no bulk WRITEs). Its Window
	// is the owner's packing plus the engine's copy into place.
	Inline bool
	// Staged reports a READ gather landed chunk by chunk in the engine
	// (a call per chunk: its packed bytes inside the call's reply when
	// the chunk fits both sides' inline limit, else WRITEn into a lease
	// of the engine's staging) and scattered into a destination too
	// fragmented for the owner to WRITE run by run; Scatter is the
	// engine's scatter time, summed over chunks. Inline stays false.
	Staged bool
}

// Goodput is the end-to-end useful throughput: payload bytes per second
// of full API time (Total). It is zero when Total is.
func (t *Trace) Goodput() float64 { return rate(t.Payload, t.Total) }

// WindowGoodput is the payload over the bulk window, bytes per second.
// It is zero when the window is.
func (t *Trace) WindowGoodput() float64 { return rate(t.Payload, t.Window) }

func rate(b uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(b) / d.Seconds()
}

// String summarizes the trace on one line.
func (t *Trace) String() string {
	return fmt.Sprintf("op %d: %d B total %v (%.3f GB/s) plan %v call %v control %v decode %v pack %v scatter %v fill %v window %v (%.3f GB/s) complete %v; chunks %d x %d B, slots %d, workers %d, peak %d B, direct wrs %d, mapped %d B, waves %d",
		t.OpID, t.Payload, t.Total, t.Goodput()/1e9, t.Plan, t.Call, t.Control, t.Decode, t.Pack, t.Scatter,
		t.OwnerFill, t.Window, t.WindowGoodput()/1e9, t.Complete, t.Chunks, t.ChunkBytes, t.Slots,
		t.PackWorkers, t.StagingPeak, t.DirectRequests, t.Mapped, t.Waves)
}

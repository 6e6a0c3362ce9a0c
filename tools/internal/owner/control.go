package owner

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

// Control methods an owner serves besides the gather service's (see
// "# Format" in the package documentation).
const (
	MethodPing     uint16 = 0x5301
	MethodStats    uint16 = 0x5302
	MethodPackOnly uint16 = 0x5303
)

// Limits of the pack-only method.
const (
	// MaxPackReps is the most repetitions one pack-only run may ask for.
	MaxPackReps = 1024
	// MaxStoredPlans is how many loaded plans an owner keeps (per owner,
	// oldest dropped first).
	MaxStoredPlans = 8
)

// PackOp is the operation of a pack-only request.
type PackOp uint8

const (
	// PackLoad stores a plan under an id for later runs.
	PackLoad PackOp = 1
	// PackRun packs a stored plan Reps times and reports each time.
	PackRun PackOp = 2
)

const (
	packMagic      = "SKPO"
	packVersion    = 1
	packHeaderLen  = 16
	packRunLen     = 32
	statsLen       = 48
	packLoadRepLen = 16
)

// Stats is the answer of MethodStats.
type Stats struct {
	Leases   uint64 // staging leases live now
	InUse    uint64 // staging bytes held now (size classes)
	Peak     uint64 // most staging bytes held at once since start
	Budget   uint64 // the staging pool's budget
	Commands uint64 // gather commands completed (READ and WRITE)
	Failed   uint64 // gather commands refused, exhausted or aborted
}

// AppendStats appends the encoding of s to dst.
func AppendStats(dst []byte, s Stats) []byte {
	for _, v := range [...]uint64{s.Leases, s.InUse, s.Peak, s.Budget, s.Commands, s.Failed} {
		dst = binary.LittleEndian.AppendUint64(dst, v)
	}
	return dst
}

// DecodeStats decodes a MethodStats answer.
func DecodeStats(b []byte) (Stats, error) {
	if len(b) != statsLen {
		return Stats{}, &ControlError{Method: MethodStats, Field: "length", Reason: fmt.Sprintf("%d bytes, want %d", len(b), statsLen)}
	}
	u := func(i int) uint64 { return binary.LittleEndian.Uint64(b[8*i:]) }
	return Stats{Leases: u(0), InUse: u(1), Peak: u(2), Budget: u(3), Commands: u(4), Failed: u(5)}, nil
}

// PackRequest is a MethodPackOnly request.
type PackRequest struct {
	Op     PackOp
	PlanID uint64 // non-zero
	// Plan is the planfmt plan message (PackLoad only). Its source offsets
	// are relative to the start of the owner's data region.
	Plan []byte
	// Chunk is the staging chunk size in bytes and Reps the repetitions
	// (PackRun only).
	Chunk uint64
	Reps  uint32
}

// AppendPackRequest appends the encoding of r to dst.
func AppendPackRequest(dst []byte, r *PackRequest) []byte {
	dst = append(dst, packMagic...)
	dst = append(dst, packVersion, byte(r.Op), 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, r.PlanID)
	if r.Op == PackRun {
		dst = binary.LittleEndian.AppendUint64(dst, r.Chunk)
		dst = binary.LittleEndian.AppendUint32(dst, r.Reps)
		return binary.LittleEndian.AppendUint32(dst, 0)
	}
	return append(dst, r.Plan...)
}

// DecodePackRequest decodes a MethodPackOnly request into r. r.Plan
// aliases b. It checks the framing only; the plan itself is decoded (and
// validated against the data region) by the owner.
func DecodePackRequest(r *PackRequest, b []byte) error {
	bad := func(field, reason string) error {
		return &ControlError{Method: MethodPackOnly, Field: field, Reason: reason}
	}
	switch {
	case len(b) < packHeaderLen:
		return bad("length", fmt.Sprintf("%d bytes, shorter than the %d-byte header", len(b), packHeaderLen))
	case string(b[:4]) != packMagic:
		return bad("magic", fmt.Sprintf("%q, want %q", b[:4], packMagic))
	case b[4] != packVersion:
		return bad("version", fmt.Sprintf("%d, want %d", b[4], packVersion))
	case b[6] != 0 || b[7] != 0:
		return bad("reserved", "must be zero")
	}
	out := PackRequest{Op: PackOp(b[5]), PlanID: binary.LittleEndian.Uint64(b[8:])}
	if out.PlanID == 0 {
		return bad("plan id", "zero")
	}
	switch out.Op {
	case PackLoad:
		if len(b) == packHeaderLen {
			return bad("plan", "missing")
		}
		out.Plan = b[packHeaderLen:]
	case PackRun:
		if len(b) != packRunLen {
			return bad("length", fmt.Sprintf("%d bytes, a run request has %d", len(b), packRunLen))
		}
		out.Chunk = binary.LittleEndian.Uint64(b[16:])
		out.Reps = binary.LittleEndian.Uint32(b[24:])
		switch {
		case binary.LittleEndian.Uint32(b[28:]) != 0:
			return bad("reserved", "must be zero")
		case out.Chunk == 0:
			return bad("chunk", "zero")
		case out.Reps == 0 || out.Reps > MaxPackReps:
			return bad("reps", fmt.Sprintf("%d outside [1, %d]", out.Reps, MaxPackReps))
		}
	default:
		return bad("op", fmt.Sprintf("unknown operation %d", b[5]))
	}
	*r = out
	return nil
}

// PackReply is the answer to a pack-only request: for PackLoad the plan's
// payload bytes and carrying fragments; for PackRun the pack workers used
// and the time of each repetition.
type PackReply struct {
	Payload, Fragments uint64
	Workers            uint32
	Times              []time.Duration
}

// AppendPackReply appends the encoding of the reply to op to dst.
func AppendPackReply(dst []byte, op PackOp, r *PackReply) []byte {
	if op == PackLoad {
		dst = binary.LittleEndian.AppendUint64(dst, r.Payload)
		return binary.LittleEndian.AppendUint64(dst, r.Fragments)
	}
	dst = binary.LittleEndian.AppendUint32(dst, r.Workers)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.Times)))
	for _, d := range r.Times {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(d))
	}
	return dst
}

// DecodePackReply decodes the reply to a request of op into r (Times is
// appended to r.Times[:0]).
func DecodePackReply(r *PackReply, op PackOp, b []byte) error {
	bad := func(field, reason string) error {
		return &ControlError{Method: MethodPackOnly, Field: "reply " + field, Reason: reason}
	}
	if op == PackLoad {
		if len(b) != packLoadRepLen {
			return bad("length", fmt.Sprintf("%d bytes, want %d", len(b), packLoadRepLen))
		}
		r.Payload, r.Fragments = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		return nil
	}
	if len(b) < 8 {
		return bad("length", fmt.Sprintf("%d bytes, shorter than 8", len(b)))
	}
	n := binary.LittleEndian.Uint32(b[4:])
	if n == 0 || n > MaxPackReps || uint64(len(b)) != 8+8*uint64(n) {
		return bad("reps", fmt.Sprintf("%d repetitions in %d bytes", n, len(b)))
	}
	r.Workers = binary.LittleEndian.Uint32(b)
	r.Times = r.Times[:0]
	for i := range int(n) {
		d := binary.LittleEndian.Uint64(b[8+8*i:])
		if d > 1<<62 {
			return bad("time", fmt.Sprintf("repetition %d took %d ns", i, d))
		}
		r.Times = append(r.Times, time.Duration(d))
	}
	return nil
}

// storedPlan is a plan loaded for pack-only runs.
type storedPlan struct {
	conn, id  uint64
	plan      *planfmt.Plan
	payload   uint64
	fragments uint64
}

// control serves the owner's control methods.
type control struct {
	o    *Owner
	norm planfmt.Normalized // PackOnly's reused normalization (under run)

	mu    sync.Mutex
	plans []storedPlan // oldest first
	run   sync.Mutex   // one pack-only run at a time
}

func newControl(o *Owner) *control {
	return &control{o: o}
}

func (c *control) close() {
	c.mu.Lock()
	c.plans = nil
	c.mu.Unlock()
}

func (c *control) servePing(_ context.Context, _ verbs.Peer, req, resp []byte) ([]byte, error) {
	if len(req) != 0 {
		return nil, &ControlError{Method: MethodPing, Field: "length", Reason: fmt.Sprintf("%d bytes, want none", len(req))}
	}
	return resp[:0], nil
}

func (c *control) serveStats(_ context.Context, _ verbs.Peer, req, resp []byte) ([]byte, error) {
	if len(req) != 0 {
		return nil, &ControlError{Method: MethodStats, Field: "length", Reason: fmt.Sprintf("%d bytes, want none", len(req))}
	}
	return AppendStats(resp[:0], c.o.Stats()), nil
}

func (c *control) servePackOnly(ctx context.Context, p verbs.Peer, req, resp []byte) ([]byte, error) {
	var r PackRequest
	if err := DecodePackRequest(&r, req); err != nil {
		return nil, err
	}
	if r.Op == PackLoad {
		rep, err := c.load(p.ConnID(), &r)
		if err != nil {
			return nil, err
		}
		return AppendPackReply(resp[:0], PackLoad, &rep), nil
	}
	rep, err := c.runPlan(ctx, p.ConnID(), &r)
	if err != nil {
		return nil, err
	}
	return AppendPackReply(resp[:0], PackRun, &rep), nil
}

// load decodes and validates a plan against the data region and stores it.
func (c *control) load(conn uint64, r *PackRequest) (PackReply, error) {
	bad := func(field, reason string, err error) error {
		return &ControlError{Method: MethodPackOnly, Field: field, Reason: reason, Err: err}
	}
	plan := new(planfmt.Plan)
	if err := planfmt.DecodePlan(plan, r.Plan); err != nil {
		return PackReply{}, bad("plan", "does not decode", err)
	}
	if data := uint64(c.o.data.Len()); plan.SrcExtent > data {
		return PackReply{}, bad("plan", fmt.Sprintf("source extent of %d bytes exceeds the data region's %d", plan.SrcExtent, data), nil)
	}
	var norm planfmt.Normalized
	if err := planfmt.Normalize(&norm, plan); err != nil {
		return PackReply{}, bad("plan", "does not normalize", err)
	}
	g := norm.Summary()
	sp := storedPlan{conn: conn, id: r.PlanID, plan: plan, payload: g.Bytes, fragments: g.Fragments}
	c.mu.Lock()
	for i := range c.plans {
		if c.plans[i].conn == conn && c.plans[i].id == r.PlanID {
			c.plans = append(c.plans[:i], c.plans[i+1:]...)
			break
		}
	}
	if len(c.plans) == MaxStoredPlans {
		c.plans = append(c.plans[:0], c.plans[1:]...)
	}
	c.plans = append(c.plans, sp)
	c.mu.Unlock()
	return PackReply{Payload: g.Bytes, Fragments: g.Fragments}, nil
}

// runPlan packs a stored plan r.Reps times with the gather service's own
// pack-only entry point: the same cursors, loops and pack workers as a
// gather command, into one staging lease of the chunk size, with no
// transfer.
func (c *control) runPlan(ctx context.Context, conn uint64, r *PackRequest) (PackReply, error) {
	bad := func(field, reason string, err error) error {
		return &ControlError{Method: MethodPackOnly, Field: field, Reason: reason, Err: err}
	}
	var sp storedPlan
	c.mu.Lock()
	for _, s := range c.plans {
		if s.conn == conn && s.id == r.PlanID {
			sp = s
		}
	}
	c.mu.Unlock()
	if sp.plan == nil {
		return PackReply{}, bad("plan id", fmt.Sprintf("%d is not loaded on this connection", r.PlanID), nil)
	}
	if r.Chunk > math.MaxInt32 {
		return PackReply{}, bad("chunk", fmt.Sprintf("%d bytes is too large", r.Chunk), nil)
	}
	c.run.Lock()
	defer c.run.Unlock()
	rep := PackReply{Workers: 1, Times: make([]time.Duration, 0, r.Reps)}
	for range r.Reps {
		res, err := c.o.svc.PackOnly(ctx, c.o.data.Key(), 0, sp.plan, int(r.Chunk), &c.norm)
		if err != nil {
			return PackReply{}, bad("run", "pack-only failed", err)
		}
		rep.Times = append(rep.Times, res.Elapsed)
		rep.Workers = max(rep.Workers, uint32(res.Workers))
	}
	return rep, nil
}

package structobj

// The transfers of PUT and GET: a transfer (xfer) moves an operation's
// bytes between caller memory and the owner's region, straight from or
// into Buffers, through pool leases chunk by chunk with several chunks
// in flight, or from or into caller memory registered for the call.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

// noteXfer adds a transfer's figures to the client's counters.
func (c *Client) noteXfer(x *xfer) {
	s := &c.stats
	s.staged.Add(x.staged)
	s.chunks.Add(uint64(x.chunks))
	s.direct.Add(x.direct)
	s.registered.Add(x.registered)
	s.gathered.Add(x.gatheredOps)
}

// xfer runs the one-sided transfers of one PUT, or of the READs of one
// owner in a GET: single operations (from or into Buffers, zeros,
// registered memory) and staged chunks through pool leases, at most
// InFlight chunks in flight, each lease reused for the next chunk once its
// chunk is done.
type xfer struct {
	c   *Client
	ctx context.Context
	oc  *ownerConn
	dir verbs.Op
	// remoteOff and remoteExt are the owner-side extent: the reservation
	// for a WRITE (offsets in the payload), the whole region for a READ
	// (offsets in the region).
	remoteOff, remoteExt uint64

	stagedLeft uint64       // bytes still to stage
	leases     int          // leases held (len(all))
	all        []*chunkSlot // every lease held
	queue      []*chunkSlot // chunks in flight, oldest first
	free       []*chunkSlot // leases ready for a chunk
	cur        *chunkSlot   // the chunk being filled
	singles    []*singleOp
	regs       []*verbs.Region

	chunks                             int
	staged, direct, registered, inline uint64
	gatheredOps                        uint64
	gathered                           bool
}

// chunkSlot is a lease and the chunk it carries.
type chunkSlot struct {
	lease bufferpool.Lease
	n     uint64 // bytes filled
	plan  planfmt.Plan
	op    *engine.Operation
	outs  []segment // READ: lease offset (remote) -> destination (mem)
}

// singleOp is an operation outside the chunk pipeline.
type singleOp struct {
	plan planfmt.Plan
	op   *engine.Operation
}

func (c *Client) newXfer(ctx context.Context, oc *ownerConn, dir verbs.Op, staged uint64) *xfer {
	x := &xfer{c: c, ctx: ctx, oc: oc, dir: dir, stagedLeft: staged}
	if dir == verbs.OpRead {
		x.remoteExt = oc.region.Len
	}
	return x
}

// adopt takes a lease acquired by the caller as the first chunk's.
func (x *xfer) adopt(l bufferpool.Lease) {
	s := &chunkSlot{lease: l}
	x.all = append(x.all, s)
	x.free = append(x.free, s)
	x.leases++
}

// path is the path the transfer took.
func (x *xfer) path() Path {
	switch {
	case x.inline > 0:
		return PathInline
	case len(x.regs) > 0 || x.c.stage == nil:
		return PathRegistered
	}
	return PathPool
}

// bytes is what the transfer moved.
func (x *xfer) bytes() uint64 { return x.staged + x.direct + x.registered + x.inline }

// submit starts one operation of plan (whose extents it sets) between
// local[localOff:+localExt] and the owner's extent.
func (x *xfer) submit(local *verbs.Region, localOff, localExt uint64, plan *planfmt.Plan) (*engine.Operation, error) {
	plan.Form = planfmt.FormRanges
	if x.dir == verbs.OpWrite {
		plan.SrcExtent, plan.DstExtent = localExt, x.remoteExt
	} else {
		plan.SrcExtent, plan.DstExtent = x.remoteExt, localExt
	}
	op := engine.ScatterOp{Conn: x.oc.conn, Dir: x.dir, Remote: x.oc.region, RemoteOff: x.remoteOff,
		Local: local, LocalOff: localOff, Plan: plan}
	if x.dir == verbs.OpWrite && x.c.ownEng {
		// The client's own engine has no staging: a WRITE cannot gather.
		op.Mode = engine.ModeDirect
	}
	o, err := x.c.eng.Submit(x.ctx, &op)
	if err != nil {
		if errors.Is(err, verbs.ErrClosed) {
			x.c.evict(x.oc)
		}
		return nil, err
	}
	return o, nil
}

// rng is the range moving n bytes between local offset l and remote
// offset r in x's direction.
func (x *xfer) rng(l, r, n uint64) planfmt.Range {
	if x.dir == verbs.OpWrite {
		return planfmt.Range{Src: l, Dst: r, Len: n}
	}
	return planfmt.Range{Src: r, Dst: l, Len: n}
}

// single starts an operation of ranges on local outside the pipeline.
func (x *xfer) single(local *verbs.Region, ranges []planfmt.Range) error {
	if len(ranges) == 0 {
		return nil
	}
	so := &singleOp{plan: planfmt.Plan{Ranges: ranges}}
	op, err := x.submit(local, 0, uint64(local.Len()), &so.plan)
	if err != nil {
		return err
	}
	so.op = op
	x.singles = append(x.singles, so)
	return nil
}

// register registers s.mem for this transfer and starts its operation.
func (x *xfer) register(s segment) error {
	r, err := x.c.cfg.Transport.Register(s.mem, verbs.AccessLocal)
	if err != nil {
		return fmt.Errorf("register %d bytes: %w", len(s.mem), err)
	}
	x.regs = append(x.regs, r)
	x.registered += uint64(len(s.mem))
	return x.single(r, []planfmt.Range{x.rng(0, s.remote, uint64(len(s.mem)))})
}

// write WRITEs the payload items: Buffers straight, zeros from the zero
// region, the rest staged (fast) or registered.
func (x *xfer) write(items []item, fast bool) error {
	var pooled, zeros []planfmt.Range
	for _, it := range items {
		if it.mem == nil {
			for at := uint64(0); at < it.n; at += zeroBytes {
				zeros = append(zeros, x.rng(0, it.off+at, min(zeroBytes, it.n-at)))
			}
		} else if off, ok := x.c.inArena(it.mem); ok {
			pooled = append(pooled, x.rng(off, it.off, it.n))
			x.direct += it.n
		}
	}
	if err := x.single(x.c.zero, zeros); err != nil {
		return err
	}
	if len(pooled) > 0 {
		if err := x.single(x.c.stage.Region(), pooled); err != nil {
			return err
		}
	}
	for _, it := range items {
		if _, ok := x.c.inArena(it.mem); it.mem == nil || ok {
			continue
		}
		var err error
		if fast {
			err = x.stage(segment{remote: it.off, mem: it.mem})
		} else {
			err = x.register(segment{remote: it.off, mem: it.mem})
		}
		if err != nil {
			return err
		}
	}
	return x.flush()
}

// readSegments READs the segments: into Buffers straight, the rest
// staged (fast) or into registered memory.
func (x *xfer) readSegments(segs []segment, fast bool) error {
	var pooled []planfmt.Range
	for _, s := range segs {
		if off, ok := x.c.inArena(s.mem); ok {
			pooled = append(pooled, x.rng(off, s.remote, uint64(len(s.mem))))
			x.direct += uint64(len(s.mem))
		}
	}
	if len(pooled) > 0 {
		if err := x.single(x.c.stage.Region(), pooled); err != nil {
			return err
		}
	}
	for _, s := range segs {
		if _, ok := x.c.inArena(s.mem); ok || len(s.mem) == 0 {
			continue
		}
		var err error
		if fast {
			err = x.stage(s)
		} else {
			err = x.register(s)
		}
		if err != nil {
			return err
		}
	}
	return x.flush()
}

// stage adds a segment to the staged chunks: for a WRITE its bytes are
// copied into the lease, for a READ the lease bytes are copied to it once
// the chunk is done. Full chunks are submitted.
func (x *xfer) stage(s segment) error {
	for len(s.mem) > 0 {
		if x.cur == nil {
			sl, err := x.take()
			if err != nil {
				return err
			}
			x.cur = sl
		}
		sl := x.cur
		buf := sl.lease.Bytes()
		n := min(uint64(len(buf))-sl.n, uint64(len(s.mem)))
		if x.dir == verbs.OpWrite {
			copy(buf[sl.n:], s.mem[:n])
		} else {
			sl.outs = append(sl.outs, segment{remote: sl.n, mem: s.mem[:n]})
		}
		sl.plan.Ranges = append(sl.plan.Ranges, x.rng(sl.n, s.remote, n))
		sl.n += n
		x.staged += n
		x.stagedLeft -= n
		s.remote += n
		s.mem = s.mem[n:]
		if sl.n == uint64(len(buf)) {
			if err := x.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// take returns an empty lease for the next chunk: an idle one, a new one
// while fewer than InFlight are held and the pool has one free, else the
// oldest chunk's once it is done.
func (x *xfer) take() (*chunkSlot, error) {
	pool := x.c.stage.Pool()
	for {
		if n := len(x.free); n > 0 {
			s := x.free[n-1]
			x.free = x.free[:n-1]
			return s, nil
		}
		if x.leases < x.c.cfg.InFlight {
			size := int(min(x.c.chunk, x.stagedLeft))
			var l bufferpool.Lease
			var err error
			if x.leases == 0 {
				l, err = pool.AcquireTimeout(size, x.c.cfg.StagingWait)
			} else {
				l, err = pool.TryAcquire(size)
			}
			if err == nil {
				x.adopt(l)
				continue
			}
			if !errors.Is(err, bufferpool.ErrExhausted) || len(x.queue) == 0 {
				return nil, fmt.Errorf("staging lease: %w", err)
			}
		}
		if err := x.retire(); err != nil {
			return nil, err
		}
	}
}

// flush submits the chunk being filled, if any.
func (x *xfer) flush() error {
	sl := x.cur
	if sl == nil || sl.n == 0 {
		return nil
	}
	x.cur = nil
	op, err := x.submit(x.c.stage.Region(), uint64(sl.lease.Offset()), sl.n, &sl.plan)
	if err != nil {
		x.reset(sl)
		return err
	}
	sl.op = op
	x.queue = append(x.queue, sl)
	x.chunks++
	if x.c.hookChunk != nil {
		x.c.hookChunk(x.chunks)
	}
	return nil
}

// note records an operation's result.
func (x *xfer) note(res engine.Result) {
	if res.Mode == engine.ModeGather || res.Mode == engine.ModeHybrid {
		x.gathered = true
		x.gatheredOps++
	}
}

// retire waits for the oldest chunk in flight, copies a READ chunk out,
// and makes its lease idle.
func (x *xfer) retire() error {
	sl := x.queue[0]
	x.queue = slices.Delete(x.queue, 0, 1)
	// The operation ends with x.ctx; wait for it even when that has ended,
	// so the lease is never reused under a transfer.
	res, err := sl.op.Wait(context.Background())
	sl.op = nil
	if err == nil {
		x.note(res)
		if x.dir == verbs.OpRead {
			buf := sl.lease.Bytes()
			for _, o := range sl.outs {
				copy(o.mem, buf[o.remote:])
			}
		}
	}
	x.reset(sl)
	return err
}

// reset makes a lease idle.
func (x *xfer) reset(sl *chunkSlot) {
	sl.n = 0
	sl.plan.Ranges = sl.plan.Ranges[:0]
	clear(sl.outs)
	sl.outs = sl.outs[:0]
	x.free = append(x.free, sl)
}

// finish waits for every operation, releases the leases and
// registrations, and returns err or the first failure.
func (x *xfer) finish(err error) error {
	if err == nil {
		err = x.flush()
	}
	for len(x.queue) > 0 {
		if e := x.retire(); err == nil {
			err = e
		}
	}
	for _, so := range x.singles {
		res, e := so.op.Wait(context.Background())
		if e == nil {
			x.note(res)
		} else if err == nil {
			err = e
		}
	}
	x.singles = nil
	for _, sl := range x.all {
		if e := sl.lease.Release(); e != nil && err == nil {
			err = e
		}
	}
	x.all, x.free, x.cur = nil, nil, nil
	for _, r := range x.regs {
		if e := x.c.cfg.Transport.Deregister(r); e != nil && err == nil && !errors.Is(e, verbs.ErrClosed) {
			err = fmt.Errorf("deregister: %w", e)
		}
	}
	return err
}

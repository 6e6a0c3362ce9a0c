package gather

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"
	"github.com/scatterkit/scatterkit/verbs/internal/packstream"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

// slot is one staging chunk of a running command.
type slot struct {
	lease       bufferpool.Lease
	outstanding int  // its work requests in flight
	busy        bool // holds data not yet sent (READ) or not yet scattered (WRITE)
	// posting: post is still handing this slot's requests to the queue.
	// Its first requests may complete while later ones wait for queue
	// space, so outstanding can touch 0 before the slot is sent; it stays
	// busy until post is done.
	posting bool
}

// pipeline holds a command's staging slots (at most its P leases of C
// bytes) and its work requests in flight on the Peer. Slot i's requests
// carry ID i. The first slot is leased with the service's deadline; later
// ones only if one is free at once, otherwise the command reuses its own
// slots, so a command always makes progress once it holds one.
type pipeline struct {
	s        *Service
	st       *cmdState // whose progress completions stamp
	q        verbs.Queue
	slots    []slot
	chunk    int
	max      int
	comps    []verbs.Completion
	inflight int
	err      error     // first failed completion
	first    time.Time // first bulk post
	last     time.Time // last completion
	peak     uint64
	// freeOnDone: a slot stops being busy when its requests complete (READ:
	// the WRITEs have sent it); otherwise the caller frees it (WRITE: after
	// scattering the chunk its READ brought).
	freeOnDone bool
	// draining: no chunk needs a slot any more, so each is released as
	// soon as it is idle.
	draining bool
}

// drain switches to releasing slots as soon as they are idle, and
// releases the idle ones now.
func (pl *pipeline) drain() {
	pl.draining = true
	for i := range pl.slots {
		pl.releaseIdle(i)
	}
}

// releaseIdle returns slot i's lease if it holds one and is idle.
func (pl *pipeline) releaseIdle(i int) {
	sl := &pl.slots[i]
	if pl.draining && !sl.busy && sl.outstanding == 0 && sl.lease != (bufferpool.Lease{}) {
		_ = sl.lease.Release()
		sl.lease = bufferpool.Lease{}
	}
}

func (s *Service) newPipeline(q verbs.Queue, st *cmdState, c *command, freeOnDone bool) *pipeline {
	st.pl = pipeline{s: s, st: st, q: q, slots: st.slots[:0], chunk: int(c.chunk), max: c.slots, comps: st.comps, freeOnDone: freeOnDone}
	return &st.pl
}

// idle returns a slot that is not busy, leasing one when fewer than max
// are held: the first with the deadline, others only if free at once. With
// wait set and every slot busy it waits for completions; otherwise it
// returns -1.
func (pl *pipeline) idle(ctx context.Context, wait bool) (int, error) {
	for {
		for i := range pl.slots {
			if !pl.slots[i].busy && pl.slots[i].lease != (bufferpool.Lease{}) {
				return i, nil
			}
		}
		if len(pl.slots) < pl.max {
			var l bufferpool.Lease
			var err error
			if len(pl.slots) == 0 {
				l, err = pl.s.cfg.Staging.Pool().AcquireTimeout(pl.chunk, pl.s.cfg.AcquireTimeout)
				if err != nil {
					return -1, &gatherwire.GatherError{Code: gatherwire.GatherExhausted, Stage: "staging", Err: err}
				}
			} else {
				l, err = pl.s.cfg.Staging.Pool().TryAcquire(pl.chunk)
			}
			if err == nil {
				pl.slots = append(pl.slots, slot{lease: l})
				pl.peak += uint64(l.Class())
				return len(pl.slots) - 1, nil
			}
		}
		if !wait {
			return -1, nil
		}
		if err := pl.wait(ctx, 1); err != nil {
			return -1, err
		}
	}
}

// post posts wrs, all carrying slot i's ID, waiting for completions while
// the Peer's queue is full.
func (pl *pipeline) post(ctx context.Context, i int, wrs []verbs.WorkRequest) error {
	pl.slots[i].busy = true
	pl.slots[i].posting = true
	defer pl.posted(i)
	for len(wrs) > 0 {
		n, err := pl.q.Post(wrs)
		if n > 0 {
			if pl.first.IsZero() {
				pl.first = time.Now()
			}
			pl.slots[i].outstanding += n
			pl.inflight += n
			wrs = wrs[n:]
		}
		if len(wrs) == 0 {
			break
		}
		if err != nil && !errors.Is(err, verbs.ErrQueueFull) {
			return &gatherwire.GatherError{Code: gatherwire.GatherAborted, Stage: "post", Err: err}
		}
		if err := pl.wait(ctx, 1); err != nil {
			return err
		}
	}
	return nil
}

// posted ends slot i's posting; a READ slot whose requests all completed
// meanwhile is free now.
func (pl *pipeline) posted(i int) {
	sl := &pl.slots[i]
	sl.posting = false
	if sl.outstanding == 0 && pl.freeOnDone {
		sl.busy = false
		pl.releaseIdle(i)
	}
}

// handle accounts completions.
func (pl *pipeline) handle(cs []verbs.Completion) {
	if len(cs) == 0 {
		return
	}
	pl.st.touch(pl.s)
	now := time.Now()
	for i := range cs {
		c := &cs[i]
		if c.ID >= uint64(len(pl.slots)) {
			continue // not ours: cannot happen on a Peer of one call
		}
		sl := &pl.slots[c.ID]
		sl.outstanding--
		pl.inflight--
		if sl.outstanding == 0 && pl.freeOnDone && !sl.posting {
			sl.busy = false
			pl.releaseIdle(int(c.ID))
		}
		if c.Err != nil && pl.err == nil {
			pl.err = &gatherwire.GatherError{Code: gatherwire.GatherAborted, Stage: "transfer", Err: c.Err}
		}
	}
	clear(cs)
	pl.last = now
}

// wait takes at least min completions (min <= inflight).
func (pl *pipeline) wait(ctx context.Context, min int) error {
	if pl.err != nil {
		return pl.err
	}
	if pl.inflight == 0 {
		return &gatherwire.GatherError{Code: gatherwire.GatherAborted, Stage: "pipeline", Err: fmt.Errorf("waiting with nothing in flight: %w", verbs.ErrInvalid)}
	}
	n, err := pl.q.Wait(ctx, pl.comps, min)
	pl.handle(pl.comps[:n])
	if err != nil {
		return &gatherwire.GatherError{Code: gatherwire.GatherAborted, Stage: "transfer", Err: err}
	}
	return pl.err
}

// poll takes the completions available now.
func (pl *pipeline) poll() error {
	if pl.inflight > 0 {
		n, err := pl.q.Poll(pl.comps)
		pl.handle(pl.comps[:n])
		if err != nil {
			return &gatherwire.GatherError{Code: gatherwire.GatherAborted, Stage: "transfer", Err: err}
		}
	}
	return pl.err
}

// finish waits for every request in flight (even after a failure: a
// slot's memory may be in use until its requests complete) and releases
// the leases.
func (pl *pipeline) finish(st *cmdState) {
	for pl.inflight > 0 {
		n, err := pl.q.Wait(context.Background(), pl.comps, 1)
		pl.handle(pl.comps[:n])
		if err != nil {
			// The queue ended: the transport has completed (and stopped
			// using) everything that was posted.
			break
		}
	}
	for i := range pl.slots {
		if l := pl.slots[i].lease; l != (bufferpool.Lease{}) {
			_ = l.Release()
		}
		pl.slots[i] = slot{}
	}
	st.slots = pl.slots[:0]
	pl.q, pl.s, pl.st = nil, nil, nil
}

// runRead packs the plan chunk by chunk into staging and WRITEs each
// chunk's destination runs to the requester, packing chunk k+1 while
// chunk k is in flight.
func (s *Service) runRead(ctx context.Context, p verbs.Peer, st *cmdState, c *command, out *gatherwire.Stats) error {
	plan := &st.cmd.Plan
	runs := st.runs[:0]
	st.norm.ForEachRun(func(dst, stream, n uint64) bool {
		runs = append(runs, planfmt.Run{Dst: dst, Stream: stream, Len: n})
		return true
	})
	st.runs = runs
	var rows packstream.RowCursor
	var rng packstream.RangeCursor
	isRows := plan.Form == planfmt.FormRows
	if isRows {
		rows.Init(plan, c.own, st.norm.Summary().Skipped > 0)
		rows.Workers, rows.ParallelMin = s.workers, s.cfg.ParallelMin
	} else {
		rng.Workers, rng.ParallelMin = s.workers, s.cfg.ParallelMin
		rng.Init(plan.Ranges)
	}
	if s.workers != nil && c.chunk >= int64(s.cfg.ParallelMin) {
		out.Workers = uint32(s.workers.Len())
	}
	rc := packstream.RunCursor{Runs: st.runs}
	pl := s.newPipeline(p, st, c, true)
	defer pl.finish(st)
	key := s.cfg.Staging.Region().Key()
	total := st.norm.Summary().Bytes
	// The chunk count, for the stage markers' sampling: a rows plan packs
	// whole rows, so a chunk holds the largest multiple of the row size.
	per := uint64(c.chunk)
	if isRows && uint64(rows.RowSize) <= per {
		per -= per % uint64(rows.RowSize)
	}
	chunks := int((total + per - 1) / per)
	var stream uint64
	var err error
	for k := 0; stream < total; k++ {
		var i int
		if i, err = pl.idle(ctx, true); err != nil {
			break
		}
		sl := &pl.slots[i]
		buf := sl.lease.Bytes()[:c.chunk]
		cid := stage.ChunkID(c.markID, k)
		marked, weight := stage.ChunkSample(k, chunks)
		if marked {
			stage.Begin(cid, stage.Pack)
		}
		t := time.Now()
		var n int
		if isRows {
			n = rows.PackInto(buf)
		} else {
			n = rng.PackInto(buf, c.own)
		}
		out.Pack += time.Since(t)
		st.touch(s)
		switch {
		case !marked:
		case n > 0:
			// Posting follows packing directly: one marker for both.
			stage.NextWeighted(cid, stage.Pack, stage.Post, uint64(n), weight)
		default:
			stage.EndWeighted(cid, stage.Pack, 0, weight)
		}
		base, off := stream, uint64(sl.lease.Offset())
		wrs := st.wrs[:0]
		rc.Each(stream, stream+uint64(n), func(dst, at, l uint64) {
			wrs = appendPieces(wrs, verbs.WorkRequest{ID: uint64(i), Op: verbs.OpWrite, LocalKey: key,
				LocalOff: off + (at - base), RemoteKey: c.peerKey, RemoteOff: c.peerOff + dst}, l)
		})
		st.wrs = wrs
		stream += uint64(n)
		out.Chunks++
		if n == 0 {
			// Only skipped rows: nothing to send.
			continue
		}
		if out.Fill == 0 {
			out.Fill = time.Since(c.received)
		}
		err = pl.post(ctx, i, wrs)
		if marked {
			stage.EndWeighted(cid, stage.Post, uint64(n), weight)
		}
		if err == nil {
			err = pl.poll()
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		pl.drain()
		for pl.inflight > 0 && err == nil {
			err = pl.wait(ctx, pl.inflight)
		}
	}
	out.Window = pl.last.Sub(pl.first)
	out.Slots = uint32(len(pl.slots))
	out.Peak = pl.peak
	return err
}

// runWrite READs the requester's staged stream chunk by chunk into
// staging (up to P chunks in flight) and scatters each chunk, in order,
// into the owner's destination window.
func (s *Service) runWrite(ctx context.Context, p verbs.Peer, st *cmdState, c *command, out *gatherwire.Stats) error {
	g := st.norm.Summary()
	pl := s.newPipeline(p, st, c, false)
	defer pl.finish(st)
	var rng packstream.RangeCursor
	rng.Init(st.cmd.Plan.Ranges)
	key := s.cfg.Staging.Region().Key()
	lo, hi := g.SrcLo, g.SrcHi
	k := (hi - lo + uint64(c.chunk) - 1) / uint64(c.chunk)
	if cap(st.order) < c.slots {
		st.order = make([]int, c.slots)
	}
	order := st.order[:c.slots]
	chunkAt := func(j uint64) (at, n uint64) {
		at = lo + j*uint64(c.chunk)
		return at, min(uint64(c.chunk), hi-at)
	}
	var issued, done uint64
	var err error
	for done < k && err == nil {
		// Keep up to P chunk READs in flight.
		for issued < k && issued-done < uint64(c.slots) {
			var i int
			if i, err = pl.idle(ctx, issued == done); err != nil || i < 0 {
				break
			}
			at, n := chunkAt(issued)
			wr := verbs.WorkRequest{ID: uint64(i), Op: verbs.OpRead, LocalKey: key,
				LocalOff: uint64(pl.slots[i].lease.Offset()), RemoteKey: c.peerKey, RemoteOff: c.peerOff + at}
			st.wrs = appendPieces(st.wrs[:0], wr, n)
			marked, weight := stage.ChunkSample(int(issued), int(k))
			if marked {
				stage.Begin(stage.ChunkID(c.markID, int(issued)), stage.Post)
			}
			if issued == 0 {
				out.Fill = time.Since(c.received)
			}
			err = pl.post(ctx, i, st.wrs)
			if marked {
				stage.EndWeighted(stage.ChunkID(c.markID, int(issued)), stage.Post, n, weight)
			}
			order[issued%uint64(c.slots)] = i
			issued++
			if err != nil {
				break
			}
		}
		if err != nil {
			break
		}
		// Scatter the oldest chunk once its READ is in.
		i := order[done%uint64(c.slots)]
		for pl.slots[i].outstanding > 0 && err == nil {
			err = pl.wait(ctx, 1)
		}
		if err != nil {
			break
		}
		at, n := chunkAt(done)
		cid := stage.ChunkID(c.markID, int(done))
		marked, weight := stage.ChunkSample(int(done), int(k))
		if marked {
			stage.Begin(cid, stage.Scatter)
		}
		t := time.Now()
		rng.ScatterFrom(c.own, pl.slots[i].lease.Bytes()[:n], at)
		out.Pack += time.Since(t)
		st.touch(s)
		if marked {
			stage.EndWeighted(cid, stage.Scatter, n, weight)
		}
		pl.slots[i].busy = false
		done++
		out.Chunks++
		if issued == k {
			pl.draining = true
			pl.releaseIdle(i)
		}
	}
	out.Window = pl.last.Sub(pl.first)
	out.Slots = uint32(len(pl.slots))
	out.Peak = pl.peak
	return err
}

// piece is the largest work request a command posts: a chunk's run (or a
// WRITE command's chunk READ) longer than this goes as pieces, so that one
// chunk spreads over the connection's lanes (tcp sends a request whole on
// one lane) instead of riding one of them while the others idle. The
// engine cuts its direct spans the same way.
const piece = 1 << 20

// appendPieces appends wr for n bytes at its offsets, cut into requests of
// at most piece bytes.
func appendPieces(wrs []verbs.WorkRequest, wr verbs.WorkRequest, n uint64) []verbs.WorkRequest {
	for n > 0 {
		l := min(n, piece)
		wr.Len = uint32(l)
		wrs = append(wrs, wr)
		wr.LocalOff += l
		wr.RemoteOff += l
		n -= l
	}
	return wrs
}

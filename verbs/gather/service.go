package gather

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"
	"github.com/scatterkit/scatterkit/verbs/internal/packstream"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

// Config configures a Service.
type Config struct {
	// Segment is the owner's segment; the service registers
	// MethodGatherInfo and MethodGather on it.
	Segment verbs.Segment
	// Exports are the regions the segment serves (as given to Listen):
	// commands may name exactly these as their owner-side window. Each
	// must be listed by Segment.Regions().
	Exports []verbs.Export
	// Staging is where chunks are packed (READ) or received (WRITE); its
	// arena must be registered with the segment's transport (staging.New
	// with AccessLocal). Commands share it; the service does not close it.
	Staging *staging.Staging
	// AcquireTimeout bounds the wait for a command's first staging slot
	// (default 2 ms); past it the command fails with engine.GatherExhausted and
	// the requester falls back to direct.
	AcquireTimeout time.Duration
	// MaxSlots bounds the staging slots (chunks in flight) of one command
	// (default 8).
	MaxSlots int
	// MaxChunk bounds the chunk size (default: the pool's largest class,
	// at most CommandBudget). MinChunk is the pool's smallest class.
	MaxChunk int64
	// CommandBudget bounds the staging one command holds, slots times
	// chunk (default half the pool's budget, at least MaxChunk).
	CommandBudget int64
	// PackWorkers is how many goroutines may pack one chunk (default
	// GOMAXPROCS, at most 8), and share the validation of a large rows
	// command's ids (planfmt.NormalizeParallel); ParallelMin the smallest
	// chunk, in bytes, split among them (default 512 KiB).
	PackWorkers int
	ParallelMin int
	// InlineMax is the largest READ payload, in bytes, returned inside the
	// reply when the command allows it (planfmt.FlagInlineReply) instead
	// of being staged and WRITEn (default 256 KiB; negative: never).
	InlineMax int64
	// Limits bound what a command may carry (planfmt's defaults for zero
	// fields).
	Limits planfmt.Limits
	// MaxCommands bounds the commands running at once over all
	// connections (default DefaultMaxCommands, 64), and MemoryBudget the
	// memory, in bytes, their decoded plans may take together (default
	// DefaultMemoryBudget, 512 MiB). Each command is charged an upper
	// bound of its decoded size from its header before it is decoded
	// (the request, its plan, normalization, runs and requests; every
	// fragment counts, empty ones too). A command that finds no room
	// within AcquireTimeout fails with engine.GatherExhausted (the requester falls
	// back to direct); one that would cost more than the whole budget is
	// refused. So, however many peers send commands, what they hold of the
	// owner stays within the budget plus the staging pool.
	MaxCommands  int
	MemoryBudget int64
	// ProgressTimeout bounds how long a running command may go without
	// progress (no chunk packed, no work request completed; default
	// DefaultProgressTimeout, 2 s). A stalled command's connection is
	// evicted (Segment.Evict): the command and every other call on that
	// connection fail, and its staging is released once the connection is
	// fenced, so a requester that stops acknowledging holds nothing.
	ProgressTimeout time.Duration
	// Calibration is the owner's packing calibration, reported to
	// requesters. Nil runs costmodel.CalibrateOrFallback
	// (CalibrationBudget, default 50 ms, with PackWorkers workers) in
	// NewService: a calibration that cannot finish gives the
	// conservative figures, and Service.Calibration says so.
	Calibration       *costmodel.Calibration
	CalibrationBudget time.Duration
}

// Service is the owner side of gather: it answers capability
// requests and runs commands against the owner's own exported regions,
// packing into (or scattering from) leased staging and moving the chunks
// with bulk work requests through the caller's Peer. Every command is
// validated in full before a byte is read or written.
type Service struct {
	cfg     Config
	seg     verbs.Segment
	exports map[verbs.Key]*verbs.Region
	info    gatherwire.OwnerInfo
	cal     costmodel.Calibration
	workers *pack.Workers

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
	free    []*cmdState
	// freeBytes is the storage the free states keep (keepPoolBytes at most)
	freeBytes int64
	active    map[*cmdState]struct{} // commands transferring, for the watchdog
	epoch     time.Time              // progress stamps count from here
	stop      chan struct{}          // closed by Close: the watchdog ends
	watched   sync.WaitGroup         // the watchdog

	admit admission

	stats     serviceCounters
	inlineMax int64 // Config.InlineMax resolved (-1: never)
}

type serviceCounters struct {
	infos, reads, writes        counter
	inline                      counter
	refused, exhausted, aborted counter
	stalled                     counter
	bytes, chunks               counter
}

// Stats counts what a Service did.
type Stats struct {
	// Infos counts capability requests answered.
	Infos uint64
	// Reads and Writes count commands completed; Inline the READs among
	// them answered with an inline reply.
	Reads, Writes, Inline uint64
	// Refused, Exhausted and Aborted count failed commands by code.
	Refused, Exhausted, Aborted uint64
	// Stalled counts commands whose connection was evicted for making no
	// progress within ProgressTimeout (they are counted Aborted too).
	Stalled uint64
	// Running and Charged are the commands running now and the bytes of
	// MemoryBudget charged to them.
	Running int
	Charged int64
	// Bytes and Chunks are the payload and chunks of completed commands.
	Bytes, Chunks uint64
}

// NewService validates cfg, calibrates if needed and registers the
// service's handlers on cfg.Segment.
func NewService(cfg Config) (*Service, error) {
	bad := func(field, reason string) error {
		return &gatherwire.InvalidOpError{Field: "gather.Config." + field, Reason: reason}
	}
	if cfg.Segment == nil {
		return nil, bad("Segment", "nil")
	}
	if cfg.Staging == nil || cfg.Staging.Pool() == nil || cfg.Staging.Region() == nil {
		return nil, bad("Staging", "nil or not registered")
	}
	ps := cfg.Staging.Pool().Stats()
	if cfg.AcquireTimeout == 0 {
		cfg.AcquireTimeout = 2 * time.Millisecond
	}
	if cfg.MaxSlots == 0 {
		cfg.MaxSlots = 8
	}
	if cfg.CommandBudget == 0 {
		cfg.CommandBudget = max(int64(ps.Budget)/2, int64(ps.MinSlot))
	}
	if cfg.MaxChunk == 0 {
		cfg.MaxChunk = min(int64(ps.MaxSlot), cfg.CommandBudget)
	}
	if cfg.PackWorkers == 0 {
		cfg.PackWorkers = min(runtime.GOMAXPROCS(0), 8)
	}
	if cfg.ParallelMin == 0 {
		cfg.ParallelMin = 512 << 10
	}
	if cfg.CalibrationBudget == 0 {
		cfg.CalibrationBudget = 50 * time.Millisecond
	}
	if cfg.InlineMax == 0 {
		cfg.InlineMax = DefaultInlineMax
	}
	if cfg.MaxCommands == 0 {
		cfg.MaxCommands = DefaultMaxCommands
	}
	if cfg.MemoryBudget == 0 {
		cfg.MemoryBudget = DefaultMemoryBudget
	}
	if cfg.ProgressTimeout == 0 {
		cfg.ProgressTimeout = DefaultProgressTimeout
	}
	lim := cfg.Limits
	switch {
	case cfg.AcquireTimeout < 0:
		return nil, bad("AcquireTimeout", "negative")
	case cfg.MaxSlots < 1 || cfg.MaxSlots > 1<<16:
		return nil, bad("MaxSlots", fmt.Sprint(cfg.MaxSlots))
	case cfg.MaxChunk < int64(ps.MinSlot) || cfg.MaxChunk > int64(ps.MaxSlot) || cfg.MaxChunk > math.MaxUint32:
		return nil, bad("MaxChunk", fmt.Sprintf("%d outside the pool's classes [%d, %d]", cfg.MaxChunk, ps.MinSlot, ps.MaxSlot))
	case cfg.CommandBudget < cfg.MaxChunk || cfg.CommandBudget > int64(ps.Budget):
		return nil, bad("CommandBudget", fmt.Sprintf("%d outside [MaxChunk %d, pool budget %d]", cfg.CommandBudget, cfg.MaxChunk, ps.Budget))
	case cfg.PackWorkers < 1 || cfg.PackWorkers > 1<<10 || cfg.ParallelMin < 0:
		return nil, bad("PackWorkers", fmt.Sprint(cfg.PackWorkers))
	case lim.MaxChunkBytes != 0 && uint64(cfg.MaxChunk) > lim.MaxChunkBytes:
		return nil, bad("MaxChunk", "above Limits.MaxChunkBytes")
	case cfg.MaxCommands < 1:
		return nil, bad("MaxCommands", fmt.Sprint(cfg.MaxCommands))
	case cfg.MemoryBudget < 1<<20:
		return nil, bad("MemoryBudget", fmt.Sprintf("%d: at least 1 MiB", cfg.MemoryBudget))
	case cfg.ProgressTimeout < time.Millisecond:
		return nil, bad("ProgressTimeout", cfg.ProgressTimeout.String()+": at least 1 ms")
	}
	s := &Service{cfg: cfg, seg: cfg.Segment, exports: make(map[verbs.Key]*verbs.Region, len(cfg.Exports)),
		inlineMax: min(cfg.InlineMax, MaxInlineReply), active: make(map[*cmdState]struct{}),
		epoch: time.Now(), stop: make(chan struct{}),
		admit: admission{maxCmds: cfg.MaxCommands, budget: cfg.MemoryBudget}}
	served := cfg.Segment.Regions()
	for i, x := range cfg.Exports {
		if x.Region == nil {
			return nil, bad(fmt.Sprintf("Exports[%d]", i), "nil region")
		}
		ri, ok := verbs.FindRegion(served, x.Name)
		if !ok || ri.Key != x.Region.Key() {
			return nil, bad(fmt.Sprintf("Exports[%d]", i), fmt.Sprintf("%q is not exported by the segment", x.Name))
		}
		s.exports[x.Region.Key()] = x.Region
	}
	var cal costmodel.Calibration
	if cfg.Calibration != nil {
		cal = *cfg.Calibration
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 10*cfg.CalibrationBudget+time.Second)
		var err error
		cal, err = costmodel.CalibrateOrFallback(ctx, costmodel.CalibrateOptions{Budget: cfg.CalibrationBudget, Workers: cfg.PackWorkers})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("verbs: gather service calibration: %w", err)
		}
	}
	if !(cal.BMem > 0) || !(cal.RCopy > 0) {
		return nil, bad("Calibration", "BMem and RCopy must be positive")
	}
	s.cal = cal
	s.info = gatherwire.OwnerInfo{BMem: cal.BMem, RCopy: cal.RCopy, PackWorkers: cfg.PackWorkers, MaxSlots: cfg.MaxSlots,
		ParallelMin:   int64(cfg.ParallelMin),
		StagingBudget: cfg.CommandBudget, MinChunk: int64(ps.MinSlot), MaxChunk: cfg.MaxChunk,
		InlineMax: max(s.inlineMax, 0)}
	if cfg.PackWorkers > 1 {
		s.workers = pack.NewWorkers(cfg.PackWorkers)
	}
	s.watched.Add(1)
	go s.watchdog()
	cfg.Segment.Handle(MethodGatherInfo, verbs.HandlerFunc(s.serveInfo))
	cfg.Segment.Handle(MethodGather, verbs.HandlerFunc(s.serveGather))
	return s, nil
}

// Calibration returns the packing calibration the service reports: as
// given, as measured, or, when the startup calibration could not finish
// (a busy machine), the conservative figures with Calibration.Fallback
// saying why.
func (s *Service) Calibration() costmodel.Calibration { return s.cal }

// Info returns what the service reports to requesters (without exposures),
// as the requester reads it: the type is engine.OwnerInfo (both names are
// one definition, in verbs/internal/gatherwire).
func (s *Service) Info() gatherwire.OwnerInfo { return s.info }

// Stats returns the service's counters.
func (s *Service) Stats() Stats {
	c := &s.stats
	running, charged := s.admit.usage()
	return Stats{Infos: c.infos.Load(), Reads: c.reads.Load(), Writes: c.writes.Load(), Inline: c.inline.Load(),
		Refused: c.refused.Load(), Exhausted: c.exhausted.Load(), Aborted: c.aborted.Load(), Stalled: c.stalled.Load(),
		Bytes: c.bytes.Load(), Chunks: c.chunks.Load(), Running: running, Charged: charged}
}

// Close removes the handlers, waits for running commands and stops the
// pack workers. A command that makes no progress is evicted within
// ProgressTimeout as always, so Close returns within about that, whatever
// the peers do (close the segment first to end every command at once).
// It does not close the segment or the staging. It is idempotent.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.seg.Handle(MethodGatherInfo, nil)
	s.seg.Handle(MethodGather, nil)
	s.running.Wait()
	close(s.stop)
	s.watched.Wait()
	s.workers.Close()
	s.mu.Lock()
	s.free, s.freeBytes = nil, 0
	s.mu.Unlock()
	return nil
}

// enter registers a running call; false once the service closed.
func (s *Service) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.running.Add(1)
	return true
}

func (s *Service) serveInfo(_ context.Context, p verbs.Peer, req, resp []byte) ([]byte, error) {
	if !s.enter() {
		return nil, &gatherwire.GatherError{Code: gatherwire.GatherRefused, Stage: "service", Err: verbs.ErrClosed}
	}
	defer s.running.Done()
	if len(req) != 0 {
		s.stats.refused.Add(1)
		return nil, &gatherwire.GatherError{Code: gatherwire.GatherRefused, Stage: "info", Err: fmt.Errorf("request of %d bytes, want none: %w", len(req), verbs.ErrInvalid)}
	}
	info := s.info
	info.Exposed = p.Remote()
	s.stats.infos.Add(1)
	return gatherwire.AppendInfo(resp, &info), nil
}

// cmdState is the reused storage of one running command.
type cmdState struct {
	conn     uint64       // the connection it runs for (watchdog)
	progress atomic.Int64 // last progress, ns since the service's epoch
	evicted  bool         // the watchdog evicted conn (under the service's mu)
	kept     int64        // footprint when it was put in the free list

	cmd   planfmt.Command
	norm  planfmt.Normalized
	runs  []planfmt.Run
	wrs   []verbs.WorkRequest
	comps []verbs.Completion
	slots []slot
	order []int // WRITE: slot of each chunk in flight, by chunk index mod P
	pl    pipeline
}

func (s *Service) getState() *cmdState {
	s.mu.Lock()
	if n := len(s.free); n > 0 {
		st := s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
		s.freeBytes -= st.kept
		s.mu.Unlock()
		return st
	}
	s.mu.Unlock()
	return &cmdState{comps: make([]verbs.Completion, 256)}
}

// putState keeps st for a later command, unless it holds more than
// keepStateBytes of storage (a huge command's buffers are left to the
// GC, so they do not stay resident) or enough states are kept.
func (s *Service) putState(st *cmdState) {
	st.cmd.Plan.Ranges = st.cmd.Plan.Ranges[:0]
	fp := st.footprint()
	if fp > keepStateBytes {
		return
	}
	s.mu.Lock()
	if !s.closed && len(s.free) < min(64, s.cfg.MaxCommands) && s.freeBytes+fp <= keepPoolBytes {
		st.kept = fp
		s.freeBytes += fp
		s.free = append(s.free, st)
	}
	s.mu.Unlock()
}

// footprint is the storage st keeps, in bytes.
func (st *cmdState) footprint() int64 {
	return st.cmd.Plan.Footprint() + st.norm.Footprint() + int64(cap(st.runs))*int64(unsafe.Sizeof(planfmt.Run{})) +
		int64(cap(st.wrs))*int64(unsafe.Sizeof(verbs.WorkRequest{})) + int64(cap(st.comps))*int64(unsafe.Sizeof(verbs.Completion{})) +
		int64(cap(st.slots))*int64(unsafe.Sizeof(slot{})) + int64(cap(st.order))*8
}

// watch registers st, transferring for p's connection, with the
// watchdog; unwatch takes it off.
func (s *Service) watch(st *cmdState, p verbs.Peer) {
	st.conn = p.ConnID()
	st.touch(s)
	s.mu.Lock()
	st.evicted = false
	s.active[st] = struct{}{}
	s.mu.Unlock()
}

func (s *Service) unwatch(st *cmdState) {
	s.mu.Lock()
	delete(s.active, st)
	s.mu.Unlock()
}

// touch records progress.
func (st *cmdState) touch(s *Service) { st.progress.Store(int64(time.Since(s.epoch))) }

// watchdog evicts the connection of every command that made no progress
// within ProgressTimeout, a quarter of it after the fact at most.
func (s *Service) watchdog() {
	defer s.watched.Done()
	tick := time.NewTicker(max(s.cfg.ProgressTimeout/4, time.Millisecond))
	defer tick.Stop()
	var stalled []uint64
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		now := int64(time.Since(s.epoch))
		stalled = stalled[:0]
		s.mu.Lock()
		for st := range s.active {
			if !st.evicted && now-st.progress.Load() > int64(s.cfg.ProgressTimeout) {
				st.evicted = true
				stalled = append(stalled, st.conn)
			}
		}
		s.mu.Unlock()
		for _, conn := range stalled {
			s.stats.stalled.Add(1)
			s.seg.Evict(conn) // the command sees its Peer end, aborts and finishes once fenced
		}
	}
}

// refuse builds a validation failure.
func refuse(stage string, err error) *gatherwire.GatherError {
	return &gatherwire.GatherError{Code: gatherwire.GatherRefused, Stage: stage, Err: err}
}

// command is a validated command: the owner-side memory it touches and the
// peer-side window, with its pipeline shape.
type command struct {
	own      []byte    // the owner's window: READ source or WRITE destination
	peerKey  verbs.Key // the requester's region: READ destination, WRITE source
	peerOff  uint64
	chunk    int64
	slots    int
	markID   uint64 // the stage markers' id for this command (stage.NewID)
	received time.Time
}

// validate checks a decoded command against the owner's exports and the
// requester's exposures, normalizes its plan and settles the pipeline
// shape. Nothing has been read or written when it fails.
func (s *Service) validate(p verbs.Peer, st *cmdState, c *command) error {
	cmd := &st.cmd
	ownWin, peerWin := cmd.Src, cmd.Dst
	ownNeed, peerNeed := verbs.AccessRemoteRead, verbs.AccessRemoteWrite
	if cmd.Dir == planfmt.Write {
		ownWin, peerWin = cmd.Dst, cmd.Src
		ownNeed, peerNeed = verbs.AccessRemoteWrite, verbs.AccessRemoteRead
	}
	reg := s.exports[verbs.Key(ownWin.Key)]
	switch {
	case reg == nil:
		return refuse("owner region", fmt.Errorf("key %v is not an export of this service: %w", verbs.Key(ownWin.Key), verbs.ErrBadKey))
	case !reg.Access().Has(ownNeed):
		return refuse("owner region", fmt.Errorf("export %v permits %v, %s needs %v: %w", reg.Key(), reg.Access(), cmd.Dir, ownNeed, verbs.ErrAccess))
	case !inBounds(ownWin.Off, ownWin.Len, uint64(reg.Len())):
		return refuse("owner region", fmt.Errorf("window of %d bytes at %d outside export of %d: %w", ownWin.Len, ownWin.Off, reg.Len(), verbs.ErrBounds))
	}
	var peer verbs.RegionInfo
	found := false
	for _, r := range p.Remote() {
		if r.Key == verbs.Key(peerWin.Key) {
			peer, found = r, true
			break
		}
	}
	switch {
	case !found:
		return refuse("peer region", fmt.Errorf("key %v is not exposed by the requester: %w", verbs.Key(peerWin.Key), verbs.ErrBadKey))
	case !peer.Access.Has(peerNeed):
		return refuse("peer region", fmt.Errorf("exposure %v permits %v, %s needs %v: %w", peer.Key, peer.Access, cmd.Dir, peerNeed, verbs.ErrAccess))
	case !inBounds(peerWin.Off, peerWin.Len, peer.Len):
		return refuse("peer region", fmt.Errorf("window of %d bytes at %d outside exposure of %d: %w", peerWin.Len, peerWin.Off, peer.Len, verbs.ErrBounds))
	}
	if err := planfmt.NormalizeParallel(&st.norm, &cmd.Plan, packstream.NormParallel(s.workers)); err != nil {
		return refuse("normalize", err)
	}
	// The chunk rule is the requester's (gatherwire.ChunkShape), so a
	// command runs with the chunk its requester shaped, whatever chunk
	// size it asked for.
	var row int64
	if cmd.Plan.Form == planfmt.FormRows {
		row = int64(cmd.Plan.Rows.RowSize)
	}
	chunk, err := gatherwire.ChunkShape(int64(min(cmd.Chunk, math.MaxInt64)), row, s.info.MinChunk, s.cfg.MaxChunk)
	if err != nil {
		return refuse("shape", fmt.Errorf("%w: %w", err, verbs.ErrInvalid))
	}
	if cmd.Dir == planfmt.Write {
		if cmd.Plan.Form != planfmt.FormRanges {
			return refuse("shape", fmt.Errorf("a WRITE command carries ranges over the staged stream, not %v: %w", cmd.Plan.Form, verbs.ErrInvalid))
		}
		var end uint64
		for i, r := range cmd.Plan.Ranges {
			if r.Len == 0 {
				continue
			}
			if r.Src < end {
				return refuse("shape", fmt.Errorf("range %d reads source %d before %d: WRITE ranges must read the staged stream in order: %w", i, r.Src, end, verbs.ErrInvalid))
			}
			end = r.Src + r.Len
		}
	}
	slots := int(max(min(cmd.Pipeline, uint32(s.cfg.MaxSlots)), 1))
	slots = int(max(min(int64(slots), s.cfg.CommandBudget/chunk), 1))
	window := reg.Bytes()[ownWin.Off : ownWin.Off+ownWin.Len]
	*c = command{own: window, peerKey: verbs.Key(peerWin.Key), peerOff: peerWin.Off, chunk: chunk, slots: slots,
		markID: c.markID, received: c.received}
	return nil
}

func (s *Service) serveGather(ctx context.Context, p verbs.Peer, req, resp []byte) ([]byte, error) {
	t0 := time.Now()
	if !s.enter() {
		return nil, &gatherwire.GatherError{Code: gatherwire.GatherRefused, Stage: "service", Err: verbs.ErrClosed}
	}
	defer s.running.Done()
	shape, err := s.cfg.Limits.PeekCommand(req)
	if err != nil {
		err = refuse("decode", err)
		s.count(err)
		return nil, err
	}
	cost := commandCost(shape, len(req))
	if err := s.admit.admit(cost, s.cfg.AcquireTimeout); err != nil {
		s.count(err)
		return nil, err
	}
	defer s.admit.release(cost)
	st := s.getState()
	defer s.putState(st)
	id := stage.NewID()
	stage.Begin(id, stage.Decode)
	c := command{received: t0, markID: id}
	err = s.cfg.Limits.DecodeCommand(&st.cmd, req)
	if err != nil {
		err = refuse("decode", err)
	} else {
		err = s.validate(p, st, &c)
	}
	stage.End(id, stage.Decode, uint64(len(req)))
	if err != nil {
		s.count(err)
		return nil, err
	}
	out := gatherwire.Stats{Decode: time.Since(t0), Payload: st.norm.Summary().Bytes,
		Chunk: uint64(c.chunk), Workers: 1}
	if st.cmd.Dir == planfmt.Read && st.cmd.Flags&planfmt.FlagInlineReply != 0 && out.Payload > 0 &&
		int64(out.Payload) <= s.inlineMax {
		out.Dir, out.Inline = verbs.OpRead, true
		resp = s.packInline(st, &c, &out, resp)
		s.stats.reads.Add(1)
		s.stats.inline.Add(1)
		s.stats.bytes.Add(out.Payload)
		s.stats.chunks.Add(1)
		out.Handler = time.Since(t0)
		// The record goes in front of the payload packed behind it.
		gatherwire.AppendReply(resp[:0], &out)
		return resp, nil
	}
	s.watch(st, p)
	if st.cmd.Dir == planfmt.Read {
		out.Dir = verbs.OpRead
		err = s.runRead(ctx, p, st, &c, &out)
	} else {
		out.Dir = verbs.OpWrite
		err = s.runWrite(ctx, p, st, &c, &out)
	}
	s.unwatch(st)
	if err != nil {
		s.count(err)
		return nil, err
	}
	if st.cmd.Dir == planfmt.Read {
		s.stats.reads.Add(1)
	} else {
		s.stats.writes.Add(1)
	}
	s.stats.bytes.Add(out.Payload)
	s.stats.chunks.Add(uint64(out.Chunks))
	out.Handler = time.Since(t0)
	return gatherwire.AppendReply(resp, &out), nil
}

// count records a failed command.
func (s *Service) count(err error) {
	var ge *gatherwire.GatherError
	if !errors.As(err, &ge) {
		s.stats.aborted.Add(1)
		return
	}
	switch ge.Code {
	case gatherwire.GatherRefused:
		s.stats.refused.Add(1)
	case gatherwire.GatherExhausted:
		s.stats.exhausted.Add(1)
	default:
		s.stats.aborted.Add(1)
	}
}

// counter is a statistic on its own cache line.
type counter struct {
	atomic.Uint64
	_ [56]byte
}

// inBounds reports whether [off, off+n) lies within [0, size).
func inBounds(off, n, size uint64) bool { return off <= size && n <= size-off }

package verbs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"time"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

// ServiceConfig configures a GatherService.
type ServiceConfig struct {
	// Segment is the owner's segment; the service registers
	// MethodGatherInfo and MethodGather on it.
	Segment Segment
	// Exports are the regions the segment serves (as given to Listen):
	// commands may name exactly these as their owner-side window. Each
	// must be listed by Segment.Regions().
	Exports []Export
	// Staging is where chunks are packed (READ) or received (WRITE); its
	// arena must be registered with the segment's transport (NewStaging
	// with AccessLocal). Commands share it; the service does not close it.
	Staging *Staging
	// AcquireTimeout bounds the wait for a command's first staging slot
	// (default 2 ms); past it the command fails with GatherExhausted and
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
	// GOMAXPROCS, at most 8); ParallelMin the smallest chunk, in bytes,
	// split among them (default 512 KiB).
	PackWorkers int
	ParallelMin int
	// InlineMax is the largest READ payload, in bytes, returned inside the
	// reply when the command allows it (planfmt.FlagInlineReply) instead
	// of being staged and WRITEn (default 256 KiB; negative: never).
	InlineMax int64
	// Limits bound what a command may carry (planfmt's defaults for zero
	// fields).
	Limits planfmt.Limits
	// Calibration is the owner's packing calibration, reported to
	// requesters. Nil runs costmodel.CalibrateOrFallback
	// (CalibrationBudget, default 50 ms, with PackWorkers workers) in
	// NewGatherService: a calibration that cannot finish gives the
	// conservative figures, and GatherService.Calibration says so.
	Calibration       *costmodel.Calibration
	CalibrationBudget time.Duration
}

// GatherService is the owner side of gather: it answers capability
// requests and runs commands against the owner's own exported regions,
// packing into (or scattering from) leased staging and moving the chunks
// with bulk work requests through the caller's Peer. Every command is
// validated in full before a byte is read or written.
type GatherService struct {
	cfg     ServiceConfig
	seg     Segment
	exports map[Key]*Region
	info    OwnerInfo
	cal     costmodel.Calibration
	workers *pack.Workers

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
	free    []*cmdState

	stats     serviceCounters
	inlineMax int64 // ServiceConfig.InlineMax resolved (-1: never)
}

type serviceCounters struct {
	infos, reads, writes        paddedCounter
	inline                      paddedCounter
	refused, exhausted, aborted paddedCounter
	bytes, chunks               paddedCounter
}

// ServiceStats counts what a GatherService did.
type ServiceStats struct {
	// Infos counts capability requests answered.
	Infos uint64
	// Reads and Writes count commands completed; Inline the READs among
	// them answered with an inline reply.
	Reads, Writes, Inline uint64
	// Refused, Exhausted and Aborted count failed commands by code.
	Refused, Exhausted, Aborted uint64
	// Bytes and Chunks are the payload and chunks of completed commands.
	Bytes, Chunks uint64
}

// NewGatherService validates cfg, calibrates if needed and registers the
// service's handlers on cfg.Segment.
func NewGatherService(cfg ServiceConfig) (*GatherService, error) {
	bad := func(field, reason string) error {
		return &InvalidOpError{Field: "ServiceConfig." + field, Reason: reason}
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
	}
	s := &GatherService{cfg: cfg, seg: cfg.Segment, exports: make(map[Key]*Region, len(cfg.Exports)),
		inlineMax: min(cfg.InlineMax, MaxInlineReply)}
	served := cfg.Segment.Regions()
	for i, x := range cfg.Exports {
		if x.Region == nil {
			return nil, bad(fmt.Sprintf("Exports[%d]", i), "nil region")
		}
		ri, ok := FindRegion(served, x.Name)
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
	s.info = OwnerInfo{BMem: cal.BMem, RCopy: cal.RCopy, PackWorkers: cfg.PackWorkers, MaxSlots: cfg.MaxSlots,
		StagingBudget: cfg.CommandBudget, MinChunk: int64(ps.MinSlot), MaxChunk: cfg.MaxChunk,
		InlineMax: max(s.inlineMax, 0)}
	if cfg.PackWorkers > 1 {
		s.workers = pack.NewWorkers(cfg.PackWorkers)
	}
	cfg.Segment.Handle(MethodGatherInfo, HandlerFunc(s.serveInfo))
	cfg.Segment.Handle(MethodGather, HandlerFunc(s.serveGather))
	return s, nil
}

// Calibration returns the packing calibration the service reports: as
// given, as measured, or, when the startup calibration could not finish
// (a busy machine), the conservative figures with Calibration.Fallback
// saying why.
func (s *GatherService) Calibration() costmodel.Calibration { return s.cal }

// Info returns what the service reports to requesters (without exposures).
func (s *GatherService) Info() OwnerInfo { return s.info }

// Stats returns the service's counters.
func (s *GatherService) Stats() ServiceStats {
	c := &s.stats
	return ServiceStats{Infos: c.infos.Load(), Reads: c.reads.Load(), Writes: c.writes.Load(), Inline: c.inline.Load(),
		Refused: c.refused.Load(), Exhausted: c.exhausted.Load(), Aborted: c.aborted.Load(),
		Bytes: c.bytes.Load(), Chunks: c.chunks.Load()}
}

// Close removes the handlers, waits for running commands and stops the
// pack workers. It does not close the segment or the staging. It is
// idempotent.
func (s *GatherService) Close() error {
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
	s.workers.Close()
	s.mu.Lock()
	s.free = nil
	s.mu.Unlock()
	return nil
}

// enter registers a running call; false once the service closed.
func (s *GatherService) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.running.Add(1)
	return true
}

func (s *GatherService) serveInfo(_ context.Context, p Peer, req, resp []byte) ([]byte, error) {
	if !s.enter() {
		return nil, &GatherError{Code: GatherRefused, Stage: "service", Err: ErrClosed}
	}
	defer s.running.Done()
	if len(req) != 0 {
		s.stats.refused.Add(1)
		return nil, &GatherError{Code: GatherRefused, Stage: "info", Err: fmt.Errorf("request of %d bytes, want none: %w", len(req), ErrInvalid)}
	}
	info := s.info
	info.Exposed = p.Remote()
	s.stats.infos.Add(1)
	return appendInfo(resp, &info), nil
}

// cmdState is the reused storage of one running command.
type cmdState struct {
	cmd   planfmt.Command
	norm  planfmt.Normalized
	runs  []planfmt.Run
	wrs   []WorkRequest
	comps []Completion
	slots []slot
	order []int // WRITE: slot of each chunk in flight, by chunk index mod P
	pl    pipeline
}

func (s *GatherService) getState() *cmdState {
	s.mu.Lock()
	if n := len(s.free); n > 0 {
		st := s.free[n-1]
		s.free = s.free[:n-1]
		s.mu.Unlock()
		return st
	}
	s.mu.Unlock()
	return &cmdState{comps: make([]Completion, 256)}
}

func (s *GatherService) putState(st *cmdState) {
	st.cmd.Plan.Ranges = st.cmd.Plan.Ranges[:0]
	s.mu.Lock()
	if !s.closed && len(s.free) < 64 {
		s.free = append(s.free, st)
	}
	s.mu.Unlock()
}

// refuse builds a validation failure.
func refuse(stage string, err error) *GatherError {
	return &GatherError{Code: GatherRefused, Stage: stage, Err: err}
}

// command is a validated command: the owner-side memory it touches and the
// peer-side window, with its pipeline shape.
type command struct {
	own      []byte // the owner's window: READ source or WRITE destination
	peerKey  Key    // the requester's region: READ destination, WRITE source
	peerOff  uint64
	chunk    int64
	slots    int
	markID   uint64 // the stage markers' id for this command (see markIDs)
	received time.Time
}

// validate checks a decoded command against the owner's exports and the
// requester's exposures, normalizes its plan and settles the pipeline
// shape. Nothing has been read or written when it fails.
func (s *GatherService) validate(p Peer, st *cmdState, c *command) error {
	cmd := &st.cmd
	ownWin, peerWin := cmd.Src, cmd.Dst
	ownNeed, peerNeed := AccessRemoteRead, AccessRemoteWrite
	if cmd.Dir == planfmt.Write {
		ownWin, peerWin = cmd.Dst, cmd.Src
		ownNeed, peerNeed = AccessRemoteWrite, AccessRemoteRead
	}
	reg := s.exports[Key(ownWin.Key)]
	switch {
	case reg == nil:
		return refuse("owner region", fmt.Errorf("key %v is not an export of this service: %w", Key(ownWin.Key), ErrBadKey))
	case !reg.Access().Has(ownNeed):
		return refuse("owner region", fmt.Errorf("export %v permits %v, %s needs %v: %w", reg.Key(), reg.Access(), cmd.Dir, ownNeed, ErrAccess))
	case !fits(ownWin.Off, ownWin.Len, uint64(reg.Len())):
		return refuse("owner region", fmt.Errorf("window of %d bytes at %d outside export of %d: %w", ownWin.Len, ownWin.Off, reg.Len(), ErrBounds))
	}
	var peer RegionInfo
	found := false
	for _, r := range p.Remote() {
		if r.Key == Key(peerWin.Key) {
			peer, found = r, true
			break
		}
	}
	switch {
	case !found:
		return refuse("peer region", fmt.Errorf("key %v is not exposed by the requester: %w", Key(peerWin.Key), ErrBadKey))
	case !peer.Access.Has(peerNeed):
		return refuse("peer region", fmt.Errorf("exposure %v permits %v, %s needs %v: %w", peer.Key, peer.Access, cmd.Dir, peerNeed, ErrAccess))
	case !fits(peerWin.Off, peerWin.Len, peer.Len):
		return refuse("peer region", fmt.Errorf("window of %d bytes at %d outside exposure of %d: %w", peerWin.Len, peerWin.Off, peer.Len, ErrBounds))
	}
	if err := planfmt.Normalize(&st.norm, &cmd.Plan); err != nil {
		return refuse("normalize", err)
	}
	// The chunk is the staging lease that holds it: a power of two (a pool
	// class) between the smallest class and the largest power of two
	// within MaxChunk, so slots x chunk is exactly the staging the command
	// may hold, whatever chunk size the requester asked for.
	maxChunk := int64(1) << (bits.Len64(uint64(s.cfg.MaxChunk)) - 1)
	chunk := int64(min(cmd.Chunk, uint64(maxChunk)))
	chunk = max(chunk, s.info.MinChunk)
	if cmd.Plan.Form == planfmt.FormRows {
		if r := cmd.Plan.Rows.RowSize; r > uint64(maxChunk) {
			return refuse("shape", fmt.Errorf("row of %d bytes exceeds the largest chunk %d: %w", r, maxChunk, ErrInvalid))
		}
		chunk = max(chunk, int64(cmd.Plan.Rows.RowSize))
	}
	chunk = min(int64(1)<<bits.Len64(uint64(chunk-1)), maxChunk)
	if cmd.Dir == planfmt.Write {
		if cmd.Plan.Form != planfmt.FormRanges {
			return refuse("shape", fmt.Errorf("a WRITE command carries ranges over the staged stream, not %v: %w", cmd.Plan.Form, ErrInvalid))
		}
		var end uint64
		for i, r := range cmd.Plan.Ranges {
			if r.Len == 0 {
				continue
			}
			if r.Src < end {
				return refuse("shape", fmt.Errorf("range %d reads source %d before %d: WRITE ranges must read the staged stream in order: %w", i, r.Src, end, ErrInvalid))
			}
			end = r.Src + r.Len
		}
	}
	slots := int(max(min(cmd.Pipeline, uint32(s.cfg.MaxSlots)), 1))
	slots = int(max(min(int64(slots), s.cfg.CommandBudget/chunk), 1))
	window := reg.Bytes()[ownWin.Off : ownWin.Off+ownWin.Len]
	*c = command{own: window, peerKey: Key(peerWin.Key), peerOff: peerWin.Off, chunk: chunk, slots: slots,
		markID: c.markID, received: c.received}
	return nil
}

func (s *GatherService) serveGather(ctx context.Context, p Peer, req, resp []byte) ([]byte, error) {
	t0 := time.Now()
	if !s.enter() {
		return nil, &GatherError{Code: GatherRefused, Stage: "service", Err: ErrClosed}
	}
	defer s.running.Done()
	st := s.getState()
	defer s.putState(st)
	id := markIDs.Add(1)
	stage.Begin(id, stage.Decode)
	c := command{received: t0, markID: id}
	err := s.cfg.Limits.DecodeCommand(&st.cmd, req)
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
	out := ownerStats{decode: time.Since(t0), payload: st.norm.Geometry().Bytes,
		chunk: uint64(c.chunk), workers: 1}
	if st.cmd.Dir == planfmt.Read && st.cmd.Flags&planfmt.FlagInlineReply != 0 && out.payload > 0 &&
		int64(out.payload) <= s.inlineMax {
		out.dir, out.inline = OpRead, true
		resp = s.packInline(st, &c, &out, resp)
		s.stats.reads.Add(1)
		s.stats.inline.Add(1)
		s.stats.bytes.Add(out.payload)
		s.stats.chunks.Add(1)
		out.handler = time.Since(t0)
		// The record goes in front of the payload packed behind it.
		appendReply(resp[:0], &out)
		return resp, nil
	}
	if st.cmd.Dir == planfmt.Read {
		out.dir = OpRead
		err = s.runRead(ctx, p, st, &c, &out)
	} else {
		out.dir = OpWrite
		err = s.runWrite(ctx, p, st, &c, &out)
	}
	if err != nil {
		s.count(err)
		return nil, err
	}
	if st.cmd.Dir == planfmt.Read {
		s.stats.reads.Add(1)
	} else {
		s.stats.writes.Add(1)
	}
	s.stats.bytes.Add(out.payload)
	s.stats.chunks.Add(uint64(out.chunks))
	out.handler = time.Since(t0)
	return appendReply(resp, &out), nil
}

// count records a failed command.
func (s *GatherService) count(err error) {
	var ge *GatherError
	if !errors.As(err, &ge) {
		s.stats.aborted.Add(1)
		return
	}
	switch ge.Code {
	case GatherRefused:
		s.stats.refused.Add(1)
	case GatherExhausted:
		s.stats.exhausted.Add(1)
	default:
		s.stats.aborted.Add(1)
	}
}

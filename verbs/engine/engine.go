package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"
	"github.com/scatterkit/scatterkit/verbs/internal/packstream"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
)

// Config configures an Engine. The zero value is usable: no WRITE
// gather (no staging), default policy and model constants.
type Config struct {
	// Staging is the requester's registered staging for WRITE gather: the
	// engine packs WRITE fragments into it, and the owner READs them. Its
	// region must be exposed on each Conn (Staging.Export) with
	// AccessRemoteRead; nil means WRITEs always run direct. The engine
	// does not close it.
	Staging *staging.Staging
	// Calibration is the local packing calibration used for WRITE
	// gather. Nil with Staging set runs costmodel.CalibrateOrFallback in
	// New (CalibrationBudget, default 20 ms): one that cannot finish
	// gives conservative figures (Engine.Calibration says so).
	Calibration       *costmodel.Calibration
	CalibrationBudget time.Duration
	// StagingTimeout bounds the wait for a WRITE wave's staging lease
	// (default 5 ms); past it the operation falls back to direct.
	StagingTimeout time.Duration

	// Margin is how much gather must beat direct by (default 0.1);
	// Epsilon the share of a chunk's time its fixed cost may take
	// (default 0.05); MaxP the largest pipeline width considered
	// (default 8, further capped by the owner's pack workers); ChunkSteps
	// the chunk sizes tried per width (default costmodel's).
	Margin, Epsilon float64
	MaxP            int
	ChunkSteps      int

	// Model constants (defaults in parentheses): the requester's fixed
	// and per-span planning cost (5 us, 3 ns), the owner's fixed and
	// per-span decode cost (5 us, 3 ns) and the fixed cost of one chunk
	// (10 us). Moving measurements refine the control latency and the
	// packing rates as operations run.
	TPlan, TPlanPerSpan     time.Duration
	TDecode, TDecodePerSpan time.Duration
	TChunkFixed             time.Duration

	// InlineMax is the largest READ gather payload, in bytes, for which
	// the engine asks the owner for an inline reply (the payload inside
	// the command's reply, one round trip; see "Inline reply" in the
	// package doc). Default DefaultInlineMax; negative: never. At most
	// MaxInlineReply.
	InlineMax int64

	// HybridThreshold is the largest span gathered by a forced
	// ModeHybrid when the cost model's split is not a hybrid (it gathers
	// nothing, or everything) (default 16 KiB).
	HybridThreshold uint64
	// ChunkedRead sends a READ gather as one command per chunk, up to P in
	// flight, instead of one command for the whole plan: the owner starts
	// packing on the first while the rest are encoded and sent, and serves
	// them on goroutines of its own (experimental, off by default until
	// measured on real hosts: docs/perf-notes.md).
	ChunkedRead bool
	// MinRunFragments: ModeAuto considers gather only when destination
	// runs hold at least this many fragments on average (default 4): a
	// gather sends one bulk request per run piece, so a destination as
	// fragmented as the source gains nothing.
	MinRunFragments int
	// PollBatch is how many completions a connection's driver takes per
	// wait (default 1024).
	PollBatch int
	// KeepStates bounds the idle per-operation states kept for reuse
	// (default 64).
	KeepStates int

	// CopyWorkers is how many goroutines, the caller included, share the
	// copies of one mapped direct operation (a Conn that implements
	// Mapper); default min(GOMAXPROCS, 8). It is the W of the mapped
	// direct cost (see "Mapped direct" in the package doc). A large rows
	// plan's normalization is split over as many
	// (planfmt.NormalizeParallel).
	CopyWorkers int
	// PostOnMapped makes direct transfers on a mapped Conn post work
	// requests like on any other Conn instead of copying through the
	// mapping (for comparisons; the default copies).
	PostOnMapped bool
	// AbortGrace bounds how long an operation whose context ended waits
	// for its transfers in flight (direct requests posted, a gather
	// command the owner is running) to finish; default DefaultAbortGrace.
	// Past it the engine closes the operation's Conn, which ends them
	// (nothing more lands in the caller's memory, and the owner sees the
	// connection end), and the operation fails with the context's error
	// and ErrClosed. So Do and Wait return within AbortGrace (plus the
	// Conn's close) of the context's end, whatever the network does.
	AbortGrace time.Duration
}

// DefaultAbortGrace is Config.AbortGrace's default.
const DefaultAbortGrace = 500 * time.Millisecond

func (c Config) withDefaults() (Config, error) {
	fix := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Margin == 0 {
		c.Margin = 0.1
	}
	if c.Epsilon == 0 {
		c.Epsilon = 0.05
	}
	if c.MaxP == 0 {
		c.MaxP = 8
	}
	fix(&c.TPlan, 5*time.Microsecond)
	fix(&c.TPlanPerSpan, 3*time.Nanosecond)
	fix(&c.TDecode, 5*time.Microsecond)
	fix(&c.TDecodePerSpan, 3*time.Nanosecond)
	fix(&c.TChunkFixed, 10*time.Microsecond)
	fix(&c.CalibrationBudget, 20*time.Millisecond)
	fix(&c.StagingTimeout, 5*time.Millisecond)
	fix(&c.AbortGrace, DefaultAbortGrace)
	if c.HybridThreshold == 0 {
		c.HybridThreshold = 16 << 10
	}
	if c.MinRunFragments == 0 {
		c.MinRunFragments = 4
	}
	if c.InlineMax == 0 {
		c.InlineMax = DefaultInlineMax
	}
	if c.PollBatch == 0 {
		c.PollBatch = 1024
	}
	if c.KeepStates == 0 {
		c.KeepStates = 64
	}
	if c.CopyWorkers == 0 {
		c.CopyWorkers = min(runtime.GOMAXPROCS(0), 8)
	}
	bad := func(field string, v any, reason string) error {
		return &InvalidOpError{Field: "engine.Config." + field, Reason: fmt.Sprintf("%v: %s", v, reason)}
	}
	switch {
	case c.Margin < 0 || math.IsNaN(c.Margin) || math.IsInf(c.Margin, 0):
		return c, bad("Margin", c.Margin, "must be finite and >= 0")
	case !(c.Epsilon > 0 && c.Epsilon <= 1):
		return c, bad("Epsilon", c.Epsilon, "must lie in (0, 1]")
	case c.MaxP < 1 || c.MaxP > costmodel.MaxPipelineWidth:
		return c, bad("MaxP", c.MaxP, "out of range")
	case c.ChunkSteps < 0 || c.ChunkSteps > costmodel.MaxChunkSteps:
		return c, bad("ChunkSteps", c.ChunkSteps, "out of range")
	case c.TPlan < 0 || c.TPlanPerSpan < 0 || c.TDecode < 0 || c.TDecodePerSpan < 0 || c.TChunkFixed < 0:
		return c, bad("T*", "negative", "model constants must be >= 0")
	case c.MinRunFragments < 1 || c.PollBatch < 1 || c.KeepStates < 0 || c.CalibrationBudget < 0:
		return c, bad("MinRunFragments/PollBatch/KeepStates", "", "out of range")
	case c.CopyWorkers < 1 || c.CopyWorkers > 1<<10:
		return c, bad("CopyWorkers", c.CopyWorkers, "out of range [1, 1024]")
	case c.AbortGrace < 0:
		return c, bad("AbortGrace", c.AbortGrace, "must be >= 0")
	case c.InlineMax > MaxInlineReply:
		return c, bad("InlineMax", c.InlineMax, fmt.Sprintf("above MaxInlineReply (%d)", MaxInlineReply))
	}
	return c, nil
}

// Engine is the requester side of the adaptive scatter executor. It is
// safe for concurrent use: many goroutines may Submit at once, on one
// Conn or many.
//
// The engine owns the completion queues of the Conns it runs operations
// on: while an operation is in flight on a Conn, nothing else (another
// Engine included) may Post to, Poll or Wait on that Conn. It starts one driver goroutine per Conn (on
// the first direct transfer) that polls completions in batches and keeps
// the queue full; the driver ends when the Conn closes or the Engine does.
type Engine struct {
	cfg Config

	calMu sync.Mutex

	watchMu sync.Mutex
	watch   abortWatch // the abort fence's operations (abort.go)
	calOK   bool
	local   costmodel.Calibration // for WRITE gather and mapped direct

	// Mapped direct copies: rows over pack's workers, spans over the
	// crew (both nil when CopyWorkers is 1).
	copyWorkers int
	rowWorkers  *pack.Workers
	normPar     planfmt.Parallel // rowWorkers for planfmt.NormalizeParallel (nil: serial)
	spanCrew    *spanCrew

	ctx    context.Context // ends at Close: stops the drivers
	cancel context.CancelFunc
	wg     sync.WaitGroup // drivers
	active sync.WaitGroup // operations in flight

	mu     sync.Mutex
	closed bool
	conns  map[verbs.Conn]*connState
	free   []*Operation

	stats engineCounters
}

// engineCounters are the Engine's statistics, each on its own cache line.
type engineCounters struct {
	ops       paddedCounter
	direct    paddedCounter
	gather    paddedCounter
	hybrid    paddedCounter
	failed    paddedCounter
	bytes     paddedCounter
	fallbacks [numFallbacks]paddedCounter
}

type paddedCounter struct {
	atomic.Uint64
	_ [56]byte
}

// Stats counts what an Engine did since New.
type Stats struct {
	// Ops counts completed operations (successful or not); Direct,
	// Gather and Hybrid count successful ones by the mode they ran in
	// (after any fallback); Failed counts failed ones.
	Ops, Direct, Gather, Hybrid, Failed uint64
	// Bytes is the payload of successful operations.
	Bytes uint64
	// Fallbacks counts fallbacks to direct by reason (index by Fallback;
	// FallbackNone stays zero), and FallbackTotal all of them.
	Fallbacks     [numFallbacks]uint64
	FallbackTotal uint64
}

// New returns an engine.
func New(cfg Config) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, conns: make(map[verbs.Conn]*connState), copyWorkers: cfg.CopyWorkers}
	if cfg.Calibration != nil && cfg.Staging == nil {
		if !(cfg.Calibration.BMem > 0) || !(cfg.Calibration.RCopy > 0) {
			return nil, &InvalidOpError{Field: "engine.Config.Calibration", Reason: "BMem and RCopy must be positive"}
		}
		e.local, e.calOK = *cfg.Calibration, true
	}
	if cfg.Staging != nil {
		if cfg.Staging.Region() == nil || cfg.Staging.Pool() == nil {
			return nil, &InvalidOpError{Field: "engine.Config.Staging", Reason: "not registered"}
		}
		if cfg.Calibration != nil {
			e.local = *cfg.Calibration
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 10*cfg.CalibrationBudget+time.Second)
			e.local, err = costmodel.CalibrateOrFallback(ctx, costmodel.CalibrateOptions{Budget: cfg.CalibrationBudget})
			cancel()
			if err != nil {
				return nil, fmt.Errorf("verbs: engine calibration: %w", err)
			}
		}
		if !(e.local.BMem > 0) || !(e.local.RCopy > 0) {
			return nil, &InvalidOpError{Field: "engine.Config.Calibration", Reason: "BMem and RCopy must be positive"}
		}
		e.calOK = true
	}
	if cfg.CopyWorkers > 1 {
		e.rowWorkers = pack.NewWorkers(cfg.CopyWorkers)
		e.normPar = packstream.NormParallel(e.rowWorkers)
		e.spanCrew = newSpanCrew(cfg.CopyWorkers)
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e, nil
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	s := Stats{
		Ops: e.stats.ops.Load(), Direct: e.stats.direct.Load(), Gather: e.stats.gather.Load(),
		Hybrid: e.stats.hybrid.Load(), Failed: e.stats.failed.Load(), Bytes: e.stats.bytes.Load(),
	}
	for i := range s.Fallbacks {
		s.Fallbacks[i] = e.stats.fallbacks[i].Load()
		if i != int(FallbackNone) {
			s.FallbackTotal += s.Fallbacks[i]
		}
	}
	return s
}

// Close waits for the operations in flight to complete (each ends with
// its context or its Conn), stops the drivers and makes later Submits
// fail with ErrClosed. It is idempotent.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.active.Wait()
	e.cancel()
	e.wg.Wait()
	e.rowWorkers.Close()
	e.spanCrew.close()
	e.mu.Lock()
	clear(e.conns)
	e.free = nil
	e.mu.Unlock()
	return nil
}

// Prepare asks c's owner for its gather capability (once per Conn; later
// calls return the cached answer) so the first operation does not pay
// for it. A segment without a gather service answers with an error
// wrapping ErrNotSupported; operations on c then run direct. On a Conn
// that implements Mapper, Prepare also runs the engine's local
// calibration (once, when Config gave none) that prices mapped
// direct copies.
func (e *Engine) Prepare(ctx context.Context, c verbs.Conn) (OwnerInfo, error) {
	cs, err := e.conn(c)
	if err != nil {
		return OwnerInfo{}, err
	}
	info, err := cs.ownerInfo(ctx)
	if err != nil {
		return OwnerInfo{}, err
	}
	out := *info
	out.Exposed = append([]verbs.RegionInfo(nil), info.Exposed...)
	if _, mapped := c.(verbs.Mapper); mapped && !e.cfg.PostOnMapped {
		// Mapped direct needs the local calibration: probe now rather
		// than in the first operation.
		if _, err := e.localCalibration(); err != nil {
			return OwnerInfo{}, err
		}
	}
	return out, nil
}

// conn returns the state of c, creating it on first use.
func (e *Engine) conn(c verbs.Conn) (*connState, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("verbs: engine: %w", verbs.ErrClosed)
	}
	cs := e.conns[c]
	if cs == nil || cs.isDead() {
		cs = newConnState(e, c)
		e.conns[c] = cs
	}
	return cs, nil
}

// Measured returns what the engine has measured on c so far: the moving
// averages its cost model refreshes its parameters from (packing rate,
// control latency, per-chunk, planning and decoding costs), and false
// when c has not run a gather yet (the averages start with the owner's
// capability, on the first gather decision).
func (e *Engine) Measured(c verbs.Conn) (costmodel.MovingSnapshot, bool) {
	e.mu.Lock()
	cs := e.conns[c]
	e.mu.Unlock()
	if cs == nil {
		return costmodel.MovingSnapshot{}, false
	}
	cs.infoMu.Lock()
	m := cs.moving
	cs.infoMu.Unlock()
	if m == nil {
		return costmodel.MovingSnapshot{}, false
	}
	return m.Snapshot(), true
}

// forget drops cs (its Conn closed) unless it was replaced already.
func (e *Engine) forget(cs *connState) {
	e.mu.Lock()
	if e.conns[cs.conn] == cs {
		delete(e.conns, cs.conn)
	}
	e.mu.Unlock()
}

// getOp returns an idle operation state.
func (e *Engine) getOp() *Operation {
	e.mu.Lock()
	if n := len(e.free); n > 0 {
		op := e.free[n-1]
		e.free[n-1] = nil
		e.free = e.free[:n-1]
		e.mu.Unlock()
		return op
	}
	e.mu.Unlock()
	return &Operation{e: e, done: make(chan struct{}, 1), watchIdx: -1}
}

// putOp keeps op for reuse.
func (e *Engine) putOp(op *Operation) {
	op.reset()
	e.mu.Lock()
	if !e.closed && len(e.free) < e.cfg.KeepStates {
		e.free = append(e.free, op)
	}
	e.mu.Unlock()
}

// connState is what the engine keeps per Conn: the owner's capability
// (asked once) with its moving measurements, and the completion driver.
type connState struct {
	e    *Engine
	conn verbs.Conn

	infoMu  sync.Mutex
	infoOK  bool
	infoErr error // a permanent answer (ErrNotSupported, malformed)
	info    OwnerInfo
	moving  *costmodel.Moving
	// gathers counts READ gathers that completed on this Conn (one
	// command, or a command per chunk): the first one warms both sides up
	// (first touch of staging and buffers, cold handler goroutines) and
	// is not fed to moving.
	gathers atomic.Uint64

	// postRate is a moving average of the request rate direct
	// operations achieved on this Conn (requests per second of window,
	// beyond the time their bytes take at the link's bandwidth; of the
	// whole window when the link says requests overlap bytes): the
	// probe's rate comes from small cache-hot requests, real fragments
	// also pay a random copy.
	rateMu    sync.Mutex
	postRate  float64
	postRates int
	// bandwidth is a moving average of the bytes per second of direct
	// operations whose requests are large enough for their bytes to
	// dominate (see observeDirect): the link as operations see it, where
	// the connect probe (a few MiB on fresh lanes) can read half of it.
	bandwidth float64
	// stagedFixed is a moving average of a staged READ call's time beyond
	// what the staged model prices in it (the round trip, the owner's
	// packing, the chunk's bytes at the link's rate), seconds: its
	// T_chunk_fixed (costmodel.DecideStaged).
	stagedFixed float64
	// directFront is a moving average of a direct operation's time
	// outside its window per request, seconds (its planning, posting and
	// completing on this side: its own time less its Window, over its
	// requests): T_direct_req (costmodel.Params.TDirectPerRequest).
	directFront float64

	driver
}

func newConnState(e *Engine, c verbs.Conn) *connState {
	cs := &connState{e: e, conn: c}
	cs.driver.init(cs)
	return cs
}

// Direct operations that feed the moving bandwidth: at least bwMinBytes
// in requests of bwMinRequest bytes on average, whose per-request costs
// are small beside their bytes.
const (
	bwMinBytes   = 1 << 20
	bwMinRequest = 256 << 10
	// bwMaxStep bounds how far one sample moves the bandwidth or the
	// staged per-call cost (a factor), as costmodel.MaxPackStep bounds the
	// moving measures.
	bwMaxStep = 4
)

// observeDirect feeds what a successful direct operation of n requests
// and b bytes that took window on the link, and total of its own time
// (its planning, then launch to completion), says: the bandwidth, when
// its requests are large (the window is then the bytes' time), or else
// the request rate; and, with enough requests, its time outside the
// window per request.
func (cs *connState) observeDirect(n int, b uint64, window, total time.Duration) {
	const minRequests = 256
	if n >= minRequests && window > 0 && total > window {
		cs.rateMu.Lock()
		moveTo(&cs.directFront, (total-window).Seconds()/float64(n))
		cs.rateMu.Unlock()
	}
	if n > 0 && window > 0 && b >= bwMinBytes && b/uint64(n) >= bwMinRequest {
		cs.rateMu.Lock()
		moveTo(&cs.bandwidth, float64(b)/window.Seconds())
		cs.rateMu.Unlock()
		return
	}
	lp := cs.link()
	if n < minRequests || window <= 0 || lp.Bandwidth <= 0 {
		return
	}
	t := window.Seconds() - float64(b)/lp.Bandwidth
	if lp.RequestsOverlap {
		// Requests and bytes overlap: a window longer than its bytes is
		// the requests' time.
		t = window.Seconds()
	}
	if t < 0.1*window.Seconds() || lp.RequestsOverlap && float64(b)/lp.Bandwidth >= 0.9*window.Seconds() {
		return // bandwidth-bound: says nothing about the request rate
	}
	r := float64(n) / t
	cs.rateMu.Lock()
	if cs.postRates == 0 {
		cs.postRate = r
	} else {
		cs.postRate += costmodel.DefaultAlpha * (r - cs.postRate)
	}
	cs.postRates++
	cs.rateMu.Unlock()
}

// observeStagedCall feeds the per-call cost of a staged READ: call d, the
// owner's figures st, n bytes. The Conn's first gathers (warming both
// sides up) are not fed.
func (cs *connState) observeStagedCall(d time.Duration, st *gatherwire.Stats, n int) {
	if cs.gathers.Load() < 2 {
		return
	}
	lp := cs.link()
	x := d.Seconds() - lp.RTT.Seconds() - st.Pack.Seconds()
	if lp.Bandwidth > 0 {
		x -= float64(n) / lp.Bandwidth
	}
	if x <= 0 {
		return
	}
	cs.rateMu.Lock()
	moveTo(&cs.stagedFixed, x)
	cs.rateMu.Unlock()
}

// moveTo moves the moving average *v (0: no sample yet) toward sample x
// > 0, by at most a factor of bwMaxStep per sample.
func moveTo(v *float64, x float64) {
	if *v == 0 {
		*v = x
		return
	}
	x = min(max(x, *v/bwMaxStep), *v*bwMaxStep)
	*v += costmodel.DefaultAlpha * (x - *v)
}

// directPerRequest returns the measured requester-side cost of a direct
// request outside the window, 0 before any sample.
func (cs *connState) directPerRequest() time.Duration {
	cs.rateMu.Lock()
	defer cs.rateMu.Unlock()
	return time.Duration(cs.directFront * 1e9)
}

// stagedCallFixed returns the measured per-call cost of staged READs, 0
// before any sample.
func (cs *connState) stagedCallFixed() time.Duration {
	cs.rateMu.Lock()
	defer cs.rateMu.Unlock()
	return time.Duration(cs.stagedFixed * 1e9)
}

// link returns the Conn's link parameters with the bandwidth its direct
// operations measured in place of the probe's, once there is one.
func (cs *connState) link() verbs.LinkParams {
	lp := cs.conn.LinkParams()
	cs.rateMu.Lock()
	if cs.bandwidth > 0 {
		lp.Bandwidth = cs.bandwidth
	}
	cs.rateMu.Unlock()
	return lp
}

// observedPostRate returns the moving request rate, 0 before any sample.
func (cs *connState) observedPostRate() float64 {
	cs.rateMu.Lock()
	defer cs.rateMu.Unlock()
	return cs.postRate
}

// ownerInfo asks the owner for its capability once; transient failures
// (context, connection) are not cached.
func (cs *connState) ownerInfo(ctx context.Context) (*OwnerInfo, error) {
	cs.infoMu.Lock()
	defer cs.infoMu.Unlock()
	if cs.infoOK {
		return &cs.info, nil
	}
	if cs.infoErr != nil {
		return nil, cs.infoErr
	}
	resp, err := cs.conn.Call(ctx, gatherwire.MethodGatherInfo, nil, make([]byte, 0, 256))
	if err == nil {
		err = gatherwire.DecodeInfo(&cs.info, resp)
	}
	if err != nil {
		err = fmt.Errorf("verbs: gather info: %w", err)
		var ce *verbs.CallError
		if errors.As(err, &ce) || errors.Is(err, verbs.ErrProtocol) {
			cs.infoErr = err
		}
		return nil, err
	}
	base := costmodel.Params{BMem: cs.info.BMem, RCopy: cs.info.RCopy}
	if cs.moving, err = costmodel.NewMoving(base, 0); err != nil {
		cs.infoErr = fmt.Errorf("verbs: gather info: %w", err)
		return nil, cs.infoErr
	}
	cs.infoOK = true
	return &cs.info, nil
}

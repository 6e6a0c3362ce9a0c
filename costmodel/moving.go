package costmodel

import (
	"math"
	"strconv"
	"sync/atomic"
	"time"
)

// Moving keeps exponentially weighted moving averages of what the engine
// observes while it runs, and refreshes Params from them. It is safe for
// concurrent use: each measure is one atomic float64 updated by
// compare-and-swap, padded to its own cache line, so stages feeding
// different measures never contend.
//
// Packing is tracked as a ratio: each ObservePack sample is divided by the
// time the baseline (calibrated) BMem and RCopy predict for the same bytes
// and spans, and Refresh divides both baseline figures by the average
// ratio. One sample cannot separate the byte cost from the span cost
// (fixed-size rows make them proportional), but it can say how far the
// calibrated pair is off, and that is what the ratio keeps.
type Moving struct {
	alpha float64
	bMem  float64 // baseline packing bandwidth, bytes/s
	rCopy float64 // baseline small-copy rate, spans/s

	pack    ewma // observed / predicted pack time
	control ewma // seconds
	chunk   ewma // seconds per chunk
	rtt     ewma // seconds
	plan    ewma // seconds per span
	decode  ewma // seconds per span
}

// ewma is one moving average, stored as float64 bits. Zero bits mean "no
// sample yet"; samples are positive, so zero is never a real value.
type ewma struct {
	bits atomic.Uint64
	n    atomic.Uint64
	_    [48]byte
}

func (e *ewma) observe(x, alpha float64) {
	nb := math.Float64bits(x)
	for {
		old := e.bits.Load()
		if old != 0 {
			v := math.Float64frombits(old)
			nb = math.Float64bits(v + alpha*(x-v))
		}
		if e.bits.CompareAndSwap(old, nb) {
			e.n.Add(1)
			return
		}
	}
}

func (e *ewma) load() (float64, bool) {
	b := e.bits.Load()
	return math.Float64frombits(b), b != 0
}

// DefaultAlpha is a moving-average weight that follows a change within
// about ten samples.
const DefaultAlpha = 0.2

// NewMoving returns a Moving whose packing baseline is base.BMem and
// base.RCopy (normally from Calibrate). alpha is the weight of a new
// sample, in (0, 1]; zero means DefaultAlpha.
func NewMoving(base Params, alpha float64) (*Moving, error) {
	if alpha == 0 {
		alpha = DefaultAlpha
	}
	switch {
	case !(alpha > 0 && alpha <= 1):
		return nil, &FieldError{Field: "alpha", Value: fmtFloat(alpha), Reason: "must be in (0, 1]", Err: ErrInvalidOptions}
	case !positiveFinite(base.BMem):
		return nil, paramErr("BMem", fmtFloat(base.BMem), "must be a positive, finite bandwidth in bytes/s")
	case !positiveFinite(base.RCopy):
		return nil, paramErr("RCopy", fmtFloat(base.RCopy), "must be a positive, finite rate in spans/s")
	}
	return &Moving{alpha: alpha, bMem: base.BMem, rCopy: base.RCopy}, nil
}

// ObservePack records one worker packing bytes in spans spans in d.
func (m *Moving) ObservePack(bytes, spans int64, d time.Duration) error {
	switch {
	case bytes < 1:
		return sampleErr("bytes", strconv.FormatInt(bytes, 10))
	case spans < 1 || spans > bytes:
		return sampleErr("spans", strconv.FormatInt(spans, 10))
	case d <= 0:
		return sampleErr("duration", d.String())
	}
	ratio := d.Seconds() / (float64(bytes)/m.bMem + float64(spans)/m.rCopy)
	if !positiveFinite(ratio) {
		return sampleErr("duration", d.String())
	}
	// One sample moves the average at most as far as a ratio of twice (or
	// half) the current one would (the calibrated baseline, 1, before the
	// first): a single outlier (page faults of a cold table, a preempted
	// packer) must not swing the model so far that it stops choosing the
	// mode whose samples would correct it.
	cur, ok := m.pack.load()
	if !ok {
		cur = 1
	}
	m.pack.observe(min(max(ratio, cur/MaxPackStep), cur*MaxPackStep), m.alpha)
	return nil
}

// MaxPackStep bounds one sample: an ObservePack ratio, or a control,
// chunk or RTT duration after the first, counts as at most MaxPackStep
// times (or 1/MaxPackStep of) the current average.
const MaxPackStep = 2

// ObserveControl records one command's fixed control latency: its round
// trip, less the owner's handling and the command's bytes at the link's
// rate (Refresh's TControl is this latency; the caller adds its own
// command's bytes).
func (m *Moving) ObserveControl(d time.Duration) error { return m.observeDuration(&m.control, d) }

// ObserveChunk records the fixed cost of one chunk: lease, post and
// completion handling, without its packing and transfer time.
func (m *Moving) ObserveChunk(d time.Duration) error { return m.observeDuration(&m.chunk, d) }

// ObservePlan records the requester planning spans spans (normalizing,
// deciding, encoding the command) in d; Refresh's TPlanPerSpan is the
// moving d/spans. Samples should come from plans large enough that the
// fixed TPlan is a small part of d.
func (m *Moving) ObservePlan(spans int64, d time.Duration) error {
	return m.observePerSpan(&m.plan, spans, d)
}

// ObserveDecode records the owner decoding and validating a command of
// spans spans in d; Refresh's TDecodePerSpan is the moving d/spans.
func (m *Moving) ObserveDecode(spans int64, d time.Duration) error {
	return m.observePerSpan(&m.decode, spans, d)
}

func (m *Moving) observePerSpan(e *ewma, spans int64, d time.Duration) error {
	if spans < 1 {
		return sampleErr("spans", strconv.FormatInt(spans, 10))
	}
	if d <= 0 {
		return sampleErr("duration", d.String())
	}
	return m.observeDuration(e, time.Duration(max(int64(d)/spans, 1)))
}

// ObserveRTT records one round-trip time.
func (m *Moving) ObserveRTT(d time.Duration) error { return m.observeDuration(&m.rtt, d) }

func (m *Moving) observeDuration(e *ewma, d time.Duration) error {
	if d <= 0 {
		return sampleErr("duration", d.String())
	}
	x := d.Seconds()
	if cur, ok := e.load(); ok {
		// As for packing: one outlier moves the average at most as far as
		// a sample of MaxPackStep times the current value would.
		x = min(max(x, cur/MaxPackStep), cur*MaxPackStep)
	}
	e.observe(x, m.alpha)
	return nil
}

// MovingSnapshot is what a Moving holds at one moment. A measure with no
// sample yet reads zero.
type MovingSnapshot struct {
	// BMem and RCopy are the baseline scaled by the average pack ratio
	// (the baseline itself before the first pack sample).
	BMem, RCopy float64
	// PackRatio is the average observed/predicted pack time (1 before the
	// first sample).
	PackRatio float64
	// Control, ChunkFixed and RTT are the moving averages.
	Control, ChunkFixed, RTT time.Duration
	// PlanPerSpan and DecodePerSpan are the moving per-span costs.
	PlanPerSpan, DecodePerSpan time.Duration
	// Samples counts the samples behind each measure.
	PackSamples, ControlSamples, ChunkSamples, RTTSamples uint64
	PlanSamples, DecodeSamples                            uint64
}

// Snapshot reads every measure. Each is read atomically; the set is not
// one instant.
func (m *Moving) Snapshot() MovingSnapshot {
	s := MovingSnapshot{BMem: m.bMem, RCopy: m.rCopy, PackRatio: 1}
	if r, ok := m.pack.load(); ok {
		s.PackRatio, s.BMem, s.RCopy = r, m.bMem/r, m.rCopy/r
	}
	if v, ok := m.control.load(); ok {
		s.Control = duration(v)
	}
	if v, ok := m.chunk.load(); ok {
		s.ChunkFixed = duration(v)
	}
	if v, ok := m.rtt.load(); ok {
		s.RTT = duration(v)
	}
	if v, ok := m.plan.load(); ok {
		s.PlanPerSpan = duration(v)
	}
	if v, ok := m.decode.load(); ok {
		s.DecodePerSpan = duration(v)
	}
	s.PlanSamples = m.plan.n.Load()
	s.DecodeSamples = m.decode.n.Load()
	s.PackSamples = m.pack.n.Load()
	s.ControlSamples = m.control.n.Load()
	s.ChunkSamples = m.chunk.n.Load()
	s.RTTSamples = m.rtt.n.Load()
	return s
}

// Refresh returns p with the measured fields replaced: BMem and RCopy by
// the scaled baseline, TControl, TChunkFixed, L, TPlanPerSpan and
// TDecodePerSpan by their moving averages. Measures without samples leave
// p's value.
func (m *Moving) Refresh(p Params) Params {
	if r, ok := m.pack.load(); ok {
		p.BMem, p.RCopy = m.bMem/r, m.rCopy/r
	}
	if v, ok := m.control.load(); ok {
		p.TControl = duration(v)
	}
	if v, ok := m.chunk.load(); ok {
		p.TChunkFixed = duration(v)
	}
	if v, ok := m.rtt.load(); ok {
		p.L = duration(v)
	}
	if v, ok := m.plan.load(); ok {
		p.TPlanPerSpan = duration(v)
	}
	if v, ok := m.decode.load(); ok {
		p.TDecodePerSpan = duration(v)
	}
	return p
}

func sampleErr(field, value string) error {
	return &FieldError{Field: "sample." + field, Value: value, Reason: "must be positive (spans at most bytes)", Err: ErrInvalidSample}
}

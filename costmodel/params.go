package costmodel

import (
	"math"
	"strconv"
	"time"
)

// Limits on the bounded search.
const (
	// MaxPipelineWidth is the largest Params.MaxP accepted.
	MaxPipelineWidth = 1024

	// DefaultChunkSteps is the number of chunk sizes tried per pipeline
	// width when Params.ChunkSteps is zero.
	DefaultChunkSteps = 8

	// MaxChunkSteps is the largest Params.ChunkSteps accepted.
	MaxChunkSteps = 32
)

// Params are the inputs of the cost model. Units are SI throughout:
// bandwidths in bytes per second, rates in operations per second (float64),
// and times as time.Duration. The transport supplies BNet, RPost, Q and L;
// calibration (Calibrate, Moving) supplies BMem, RCopy, the control latency
// and the fixed per-chunk cost; the engine's configuration supplies the
// policy fields.
type Params struct {
	// BNet is the link bandwidth in bytes/s (B_net).
	BNet float64
	// RPost is the rate at which the transport posts work requests,
	// requests/s (R_post): doorbells, completions and per-request software
	// cost together.
	RPost float64
	// Q is the queue depth: work requests in flight at once (Q >= 1).
	Q int
	// L is the round-trip time of one request (L >= 0).
	L time.Duration

	// BMem is the packing bandwidth of one worker, bytes/s (B_mem):
	// streaming copy speed into staging.
	BMem float64
	// RCopy is the small-copy rate of one worker, spans/s (R_copy): the
	// per-span cost of random small copies, beyond their bytes.
	RCopy float64

	// TPlan is the fixed requester-side cost of building a gather command;
	// TPlanPerSpan is added per coalesced span (T_plan = TPlan +
	// M*TPlanPerSpan). Spans, not fragments: the command carries the
	// coalesced spans.
	TPlan, TPlanPerSpan time.Duration
	// TDecode and TDecodePerSpan are the owner-side decode and validation
	// cost of a command (T_decode = TDecode + M*TDecodePerSpan).
	TDecode, TDecodePerSpan time.Duration
	// TControl is the latency of delivering the command to the owner and
	// starting its execution (T_control).
	TControl time.Duration
	// TChunkFixed is the fixed cost of one chunk: lease, post and
	// completion handling (T_chunk_fixed). It sets C_min.
	TChunkFixed time.Duration
	// TDirectPerRequest is the requester's cost of one direct request
	// outside the link's window: planning it, posting it and reaping its
	// completion (T_direct adds N*TDirectPerRequest, as T_gather adds its
	// front). Zero prices direct by its window alone.
	TDirectPerRequest time.Duration

	// Epsilon is the share of a chunk's time the fixed per-chunk cost may
	// take (0 < Epsilon <= 1; 0.05 means 5%).
	Epsilon float64
	// Margin is the fraction by which gather must beat direct:
	// gather is chosen only when T_gather*(1+Margin) < T_direct.
	Margin float64
	// StagingBudget is the staging memory one operation may hold, bytes.
	// Every candidate keeps P*C <= StagingBudget. Zero disables gather.
	StagingBudget int64
	// MaxP is the largest pipeline width (pack workers, chunks in flight).
	MaxP int
	// RequestsOverlap prices direct as the RFC does, L + max(S/B_net,
	// N/R_post, ceil(N/Q)*L): a NIC that processes requests while earlier
	// bytes stream. False (software transports, where the same cores do
	// both) adds the two: L + max(S/B_net + N/R_post, ceil(N/Q)*L).
	RequestsOverlap bool
	// ParallelMin is the smallest chunk, in bytes, the packer splits over
	// its P workers: a candidate with a smaller chunk is priced packing on
	// one (its P still bounds the chunks in flight). Zero: every chunk is
	// split.
	ParallelMin int64
	// MaxChunk caps the chunk size (the largest lease or bulk transfer the
	// transport takes); zero means no cap beyond the staging budget.
	MaxChunk int64
	// ChunkSteps is the most chunk sizes tried per pipeline width: C_min
	// times powers of two, spaced evenly in whole octaves, and C_max; zero
	// means DefaultChunkSteps, one means C_min alone.
	ChunkSteps int
}

// Validate reports the first field that makes p unusable, as a
// *FieldError wrapping ErrInvalidParams.
func (p Params) Validate() error {
	switch {
	case !positiveFinite(p.BNet):
		return paramErr("BNet", fmtFloat(p.BNet), "must be a positive, finite bandwidth in bytes/s")
	case !positiveFinite(p.RPost):
		return paramErr("RPost", fmtFloat(p.RPost), "must be a positive, finite rate in requests/s")
	case p.Q < 1:
		return paramErr("Q", strconv.Itoa(p.Q), "queue depth must be at least 1")
	case p.L < 0:
		return paramErr("L", p.L.String(), "must not be negative")
	case !positiveFinite(p.BMem):
		return paramErr("BMem", fmtFloat(p.BMem), "must be a positive, finite bandwidth in bytes/s")
	case !positiveFinite(p.RCopy):
		return paramErr("RCopy", fmtFloat(p.RCopy), "must be a positive, finite rate in spans/s")
	case p.TPlan < 0:
		return paramErr("TPlan", p.TPlan.String(), "must not be negative")
	case p.TPlanPerSpan < 0:
		return paramErr("TPlanPerSpan", p.TPlanPerSpan.String(), "must not be negative")
	case p.TDecode < 0:
		return paramErr("TDecode", p.TDecode.String(), "must not be negative")
	case p.TDecodePerSpan < 0:
		return paramErr("TDecodePerSpan", p.TDecodePerSpan.String(), "must not be negative")
	case p.TControl < 0:
		return paramErr("TControl", p.TControl.String(), "must not be negative")
	case p.TChunkFixed < 0:
		return paramErr("TChunkFixed", p.TChunkFixed.String(), "must not be negative")
	case p.TDirectPerRequest < 0:
		return paramErr("TDirectPerRequest", p.TDirectPerRequest.String(), "must not be negative")
	case !(p.Epsilon > 0 && p.Epsilon <= 1):
		return paramErr("Epsilon", fmtFloat(p.Epsilon), "must be in (0, 1]")
	case !(p.Margin >= 0) || math.IsInf(p.Margin, 1):
		return paramErr("Margin", fmtFloat(p.Margin), "must be finite and not negative")
	case p.StagingBudget < 0:
		return paramErr("StagingBudget", strconv.FormatInt(p.StagingBudget, 10), "must not be negative")
	case p.MaxP < 1 || p.MaxP > MaxPipelineWidth:
		return paramErr("MaxP", strconv.Itoa(p.MaxP), "must be in [1, "+strconv.Itoa(MaxPipelineWidth)+"]")
	case p.ParallelMin < 0:
		return paramErr("ParallelMin", strconv.FormatInt(p.ParallelMin, 10), "must not be negative")
	case p.MaxChunk < 0:
		return paramErr("MaxChunk", strconv.FormatInt(p.MaxChunk, 10), "must not be negative")
	case p.ChunkSteps < 0 || p.ChunkSteps > MaxChunkSteps:
		return paramErr("ChunkSteps", strconv.Itoa(p.ChunkSteps), "must be in [0, "+strconv.Itoa(MaxChunkSteps)+"]")
	}
	return nil
}

// Geometry is the shape of one normalized operation, as the cost model
// sees it.
type Geometry struct {
	// S is the total payload in bytes.
	S int64
	// N is the number of fragments (source/destination range pairs).
	N int64
	// M is the number of spans left after coalescing adjacent fragments
	// (1 <= M <= N when N > 0).
	M int64
}

// Validate reports the first field that makes g impossible for a
// normalized operation, as a *FieldError wrapping ErrInvalidGeometry. The
// empty operation (all zero) is valid.
func (g Geometry) Validate() error { return g.validate("Geometry") }

func (g Geometry) validate(name string) error {
	switch {
	case g.S < 0:
		return geomErr(name, "S", g.S, "must not be negative")
	case g.N < 0:
		return geomErr(name, "N", g.N, "must not be negative")
	case g.M < 0:
		return geomErr(name, "M", g.M, "must not be negative")
	case g.M > g.N:
		return geomErr(name, "M", g.M, "more spans than fragments (N = "+strconv.FormatInt(g.N, 10)+")")
	case g.N > 0 && g.M == 0:
		return geomErr(name, "M", g.M, "fragments need at least one span")
	case g.S < g.N:
		return geomErr(name, "S", g.S, "fewer bytes than fragments (N = "+strconv.FormatInt(g.N, 10)+"); normalization drops empty fragments")
	case g.S > 0 && g.N == 0:
		return geomErr(name, "N", g.N, "bytes without fragments")
	}
	return nil
}

// add returns g+h, or false when a total overflows int64.
func (g Geometry) add(h Geometry) (Geometry, bool) {
	s, n, m := g.S+h.S, g.N+h.N, g.M+h.M
	if s < g.S || n < g.N || m < g.M {
		return Geometry{}, false
	}
	return Geometry{S: s, N: n, M: m}, true
}

func (g Geometry) sub(h Geometry) Geometry {
	return Geometry{S: g.S - h.S, N: g.N - h.N, M: g.M - h.M}
}

func positiveFinite(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

func paramErr(field, value, reason string) error {
	return &FieldError{Field: "Params." + field, Value: value, Reason: reason, Err: ErrInvalidParams}
}

func geomErr(name, field string, v int64, reason string) error {
	return &FieldError{Field: name + "." + field, Value: strconv.FormatInt(v, 10), Reason: reason, Err: ErrInvalidGeometry}
}

package reshard

import (
	"errors"
	"fmt"
)

// Tensor is a logical tensor: its shape (indices per axis, outermost axis
// first) and the size of one element in bytes. A reshard moves the bytes
// of one Tensor from one Layout to another; the tensor itself never
// exists whole anywhere.
type Tensor struct {
	Shape    []int64
	ElemSize int64
}

// Interval selects the indices Lo, Lo+Step, Lo+2*Step, ... below Hi of
// one axis. Step 1 is a contiguous range; a larger step describes cyclic
// placements (rank r of n holding heads r, r+n, r+2n, ...). An Interval
// with Hi <= Lo is empty.
type Interval struct {
	Lo, Hi, Step int64
}

// Len is the number of indices the interval selects.
func (iv Interval) Len() int64 {
	if iv.Hi <= iv.Lo || iv.Step < 1 {
		return 0
	}
	return (iv.Hi - iv.Lo + iv.Step - 1) / iv.Step
}

// Piece is one box of the logical tensor that a rank holds, and where its
// elements live in that rank's registered region.
//
// The box selects one Interval per axis. The element whose index along
// axis a is the k_a-th index Box[a] selects lives at byte
//
//	Offset + sum over a of k_a * Strides[a]
//
// of the rank's region. Strides are in bytes and may describe any
// arrangement in which no two elements of the piece overlap (row-major,
// column-major, padded, a page of a page pool, one head of an interleaved
// head layout ...).
type Piece struct {
	Box     []Interval
	Offset  int64
	Strides []int64
}

// Rank is what one rank holds: pieces of the tensor inside its registered
// region of RegionBytes bytes. Pieces of one rank must not overlap, in the
// tensor or in memory.
type Rank struct {
	Pieces      []Piece
	RegionBytes int64
}

// Layout is how a set of ranks holds a Tensor. Every element of the
// tensor is held by at least one rank. Two pieces may select the same
// elements only as replicas: on different ranks, with identical boxes (a
// data-parallel copy of a shard). A reshard reads each element from one
// replica.
type Layout struct {
	Tensor Tensor
	Ranks  []Rank
}

// Limits bound the work of validating and planning, so that a layout from
// an untrusted or mistaken source fails with an error instead of
// exhausting memory or time. A zero field takes its default.
type Limits struct {
	// MaxAxes bounds the tensor's rank (default 16).
	MaxAxes int
	// MaxPieces bounds the pieces of one layout, all ranks together
	// (default 1<<20).
	MaxPieces int
	// MaxRegions bounds the regions of a plan, all pairs together
	// (default 1<<22).
	MaxRegions int
	// MaxFragments bounds the contiguous fragments of one pair, the
	// ranges its scatter operation carries (default 1<<24, planfmt's
	// default limit of one plan).
	MaxFragments int64
}

// Defaults of Limits.
const (
	DefaultMaxAxes      = 16
	DefaultMaxPieces    = 1 << 20
	DefaultMaxRegions   = 1 << 22
	DefaultMaxFragments = 1 << 24
)

func (l Limits) withDefaults() Limits {
	if l.MaxAxes <= 0 {
		l.MaxAxes = DefaultMaxAxes
	}
	if l.MaxPieces <= 0 {
		l.MaxPieces = DefaultMaxPieces
	}
	if l.MaxRegions <= 0 {
		l.MaxRegions = DefaultMaxRegions
	}
	if l.MaxFragments <= 0 {
		l.MaxFragments = DefaultMaxFragments
	}
	return l
}

// Region is a strided set of contiguous fragments that move between one
// source rank and one destination rank: Inner bytes at
//
//	SrcOff + sum_i j_i*SrcStrides[i]  ->  DstOff + sum_i j_i*DstStrides[i]
//
// for every 0 <= j_i < Counts[i] (outermost loop first). With no loops
// the region is one fragment. Offsets are bytes within the ranks'
// regions. The fragments of a region never overlap on either side.
type Region struct {
	SrcOff, DstOff         int64
	Inner                  int64
	Counts                 []int64
	SrcStrides, DstStrides []int64
}

// Fragments is the number of contiguous fragments of the region.
func (r *Region) Fragments() int64 {
	n := int64(1)
	for _, c := range r.Counts {
		n *= c
	}
	return n
}

// Bytes is the region's payload.
func (r *Region) Bytes() int64 { return r.Fragments() * r.Inner }

// Pair is everything one source rank sends one destination rank.
type Pair struct {
	Src, Dst int
	Regions  []Region
	// Bytes and Fragments total the regions.
	Bytes, Fragments int64
}

// Plan is a reshard plan: the pairs of ranks that exchange bytes, in
// order of (Src, Dst).
type Plan struct {
	Tensor   Tensor
	Src, Dst *Layout
	Pairs    []Pair
	// Bytes is the tensor's payload (every destination element once,
	// replicas of the destination included).
	Bytes int64
}

// Sentinels for errors.Is; every error of the package wraps one of them.
var (
	// ErrLayout: a layout is malformed (shape, element size, interval,
	// stride, offset or rank out of range).
	ErrLayout = errors.New("reshard: invalid layout")
	// ErrCoverage: some element of the tensor is held by no rank.
	ErrCoverage = errors.New("reshard: layout does not cover the tensor")
	// ErrOverlap: two pieces hold the same element without being
	// replicas, or two pieces of one rank overlap in memory.
	ErrOverlap = errors.New("reshard: pieces overlap")
	// ErrMismatch: the source and destination layouts hold different
	// tensors.
	ErrMismatch = errors.New("reshard: layouts of different tensors")
	// ErrLimit: a planning limit was exceeded.
	ErrLimit = errors.New("reshard: planning limit exceeded")
)

// LayoutError says which rank and piece of a layout failed validation
// (Rank or Piece -1 when the error is not about one). Kind is one of the
// sentinels.
type LayoutError struct {
	Kind   error
	Rank   int
	Piece  int
	Reason string
}

func (e *LayoutError) Error() string {
	where := ""
	switch {
	case e.Rank >= 0 && e.Piece >= 0:
		where = fmt.Sprintf(" (rank %d, piece %d)", e.Rank, e.Piece)
	case e.Rank >= 0:
		where = fmt.Sprintf(" (rank %d)", e.Rank)
	}
	return fmt.Sprintf("%v%s: %s", e.Kind, where, e.Reason)
}

func (e *LayoutError) Unwrap() error { return e.Kind }

// LimitError names the limit a layout or plan exceeded.
type LimitError struct {
	Limit string
	Value int64
	Max   int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%v: %s %d exceeds %d", ErrLimit, e.Limit, e.Value, e.Max)
}

func (e *LimitError) Unwrap() error { return ErrLimit }

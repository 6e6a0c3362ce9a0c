package stage

import "sync/atomic"

// Stage names one timed step of a scatter operation. The values are part of
// the probe ABI: never renumber, only append.
type Stage uint64

const (
	// Op spans a whole operation, from Submit to its completion.
	Op Stage = 1
	// Plan is requester-side normalization, cost decision and encoding.
	Plan Stage = 2
	// Control is the gather command round trip as seen by the requester.
	Control Stage = 3
	// Decode is the owner's decoding and validation of a command.
	Decode Stage = 4
	// Pack is the owner packing one chunk into staging (per chunk).
	Pack Stage = 5
	// Post is posting one batch of work requests (per chunk or batch).
	Post Stage = 6
	// Complete is waiting for the last completions of an operation.
	Complete Stage = 7
	// Scatter is the owner unpacking one WRITE chunk into its regions.
	Scatter Stage = 8
)

var names = [...]string{
	Op: "op", Plan: "plan", Control: "control", Decode: "decode",
	Pack: "pack", Post: "post", Complete: "complete", Scatter: "scatter",
}

// String returns the stage's short name ("pack").
func (s Stage) String() string {
	if s < Stage(len(names)) && names[s] != "" {
		return names[s]
	}
	return "stage?"
}

// All lists every stage in numeric order.
func All() []Stage {
	return []Stage{Op, Plan, Control, Decode, Pack, Post, Complete, Scatter}
}

// ids numbers operations and gather commands process-wide.
var ids atomic.Uint64

// NewID returns a fresh operation or command id, unique in the process,
// so that the markers' (id, stage) pairs never collide between engines
// and gather services in one process (a profiler matches a begin to its
// end by that pair). Ids start at 1.
func NewID() uint64 { return ids.Add(1) }

// ChunkID derives the id that chunk stages of operation op use: the
// operation id in the high 40 bits and the chunk index in the low 24.
func ChunkID(op uint64, chunk int) uint64 {
	return op<<24 | uint64(chunk)&(1<<24-1)
}

// Begin marks the start of stage s of operation (or chunk) id.
func Begin(id uint64, s Stage) { begin(id, uint64(s)) }

// End marks the end of stage s of operation (or chunk) id, with the bytes
// that stage moved (0 where it moves none).
func End(id uint64, s Stage, bytes uint64) { end(id, uint64(s), bytes) }

// Next marks, at one instant, the end of stage from of id (with the bytes
// it moved) and the beginning of stage to of the same id: where one stage
// follows another directly, one marker call (one probe hit) instead of
// two. It is End(id, from, bytes) followed by Begin(id, to).
func Next(id uint64, from, to Stage, bytes uint64) { next(id, uint64(from), uint64(to), bytes) }

// EndWeighted is End for a sampled interval that stands for w intervals
// of its stage (see ChunkSample): a profiler counts it w times, its time
// and bytes w times over. The weight travels in the upper 32 bits of the
// stage argument; 0 and 1 both mean one.
func EndWeighted(id uint64, s Stage, bytes uint64, w int) { end(id, weighted(s, w), bytes) }

// NextWeighted is Next whose ended interval stands for w intervals.
func NextWeighted(id uint64, from, to Stage, bytes uint64, w int) {
	next(id, weighted(from, w), uint64(to), bytes)
}

func weighted(s Stage, w int) uint64 { return uint64(s) | uint64(uint32(max(w, 1)))<<32 }

// MaxMarkedChunks bounds how many chunks of one operation carry markers,
// so that the probes' cost stays a small share of an operation whatever
// its chunk count.
const MaxMarkedChunks = 16

// ChunkSample says whether chunk k of an operation of n chunks carries
// markers and, if so, how many chunks it stands for. With n at most
// MaxMarkedChunks every chunk is marked with weight 1; beyond, every s-th
// chunk is (s = ceil(n / MaxMarkedChunks)), standing for itself and the
// unmarked ones after it, so the weights add up to n.
func ChunkSample(k, n int) (marked bool, weight int) {
	if n <= MaxMarkedChunks {
		return k >= 0 && k < n, 1
	}
	s := (n + MaxMarkedChunks - 1) / MaxMarkedChunks
	if k < 0 || k >= n || k%s != 0 {
		return false, 0
	}
	return true, min(s, n-k)
}

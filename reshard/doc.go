// Package reshard moves a logical tensor (a KV cache, a set of weight
// shards) from one parallel layout to another without ever materializing
// it whole: the Reshard workload of scatterkit's adaptive scatter RFC.
//
// # Layouts
//
// A Tensor is a shape and an element size. A Layout says how a set of
// ranks holds it: each Rank holds Pieces, each a box of the tensor (one
// Interval per axis, contiguous or stepped, so cyclic placements such as
// interleaved heads are one piece) at an explicit place in the rank's
// registered region (a byte offset and a byte stride per axis). Splits
// along any axes (tensor, pipeline, data, expert parallel), replicas,
// head placements and paged layouts are all pieces: Sharded builds the
// common block and cyclic shardings with replicas and any memory order,
// Paginate cuts each rank's piece into fixed-size pages placed in a page
// pool through a page table, and anything else can be written out piece
// by piece. Layout.Validate checks a layout in O(pieces log pieces):
// shapes, bounds, pieces that overlap in memory, elements held twice
// (allowed only as replicas: identical boxes on different ranks) and
// coverage.
//
// # Planning
//
// NewPlan intersects the source pieces with the destination pieces and
// returns, per (source rank, destination rank) pair, Regions in compact
// strided form: contiguous bytes per fragment, loop counts and byte
// strides on both sides. Each part of a destination piece is read from one
// source replica, the least loaded so far. Planning works per piece and
// per region, never per element, under explicit Limits.
//
// # Execution
//
// Start lowers each pair of the ranks it runs into one generic scatter
// operation of the transfer engine (package verbs): a READ pulled by the
// destination rank (Pull) or a WRITE pushed by the source rank (Push),
// with ranges in destination order. The engine's cost model decides per
// operation, and per size class inside it, so large contiguous regions
// stay direct while small intersections are gathered by the owner into
// its bounded staging: a reshard is hybrid by construction. Each pair
// completes as one operation; Run.Wait completes the whole reshard, with
// per-pair results and the stage times. Nothing is submitted when any
// pair fails its checks; a pair that fails in transfer fails the run.
//
// Plan.Apply carries a plan out in local memory (both layouts in one
// process) and is the reference the tests hold the transfers to.
// Plan.Copies lowers a plan to 2-D copies (a strided region one copy, not
// one per fragment: the shape a device executor hands to cuMemcpy2D), and
// ApplyCopies carries those out on the host, checked against the ranks'
// memory first.
// Package reshard/mesh runs the ranks of both layouts in one process over
// the tcp or shm backend; the examples and scatterbench's reshard-kv and
// reshard-mixed workloads use it.
package reshard

// Package costmodel decides, per operation, how the transfer engine moves
// many small byte fragments: post them one by one (direct), have the data
// owner pack them into staging and send a few bulk transfers (gather), or
// split a mixed operation between the two (hybrid). It implements the cost
// model of the adaptive scatter RFC ("Adaptive direct, gather, and hybrid
// modes") and the calibration that feeds it.
//
// The package knows no transport, device or workload: everything it uses
// arrives as numbers in Params and Geometry.
//
// # Model
//
// For an operation of S bytes in N fragments, M spans after coalescing:
//
//	T_direct = N*T_direct_req + L + max(S/B_net + N/R_post, ceil(N/Q)*L)
//	           (RequestsOverlap: ... + L + max(S/B_net, N/R_post, ceil(N/Q)*L))
//
//	K        = ceil(S/C)
//	T_pack   = S/(P*B_mem) + M/(P*R_copy)
//	T_bulk   = L + max(S/B_net, K/R_post, ceil(K/Q)*L)
//	T_gather = T_plan + T_control + T_decode + C/B_mem
//	           + max(T_pack, T_bulk) + C/B_net
//
//	C_min = max(B_net*L, B_net*T_chunk_fixed/epsilon)
//	C_max = min(staging_budget/P, S)
//
// Direct pays one request per fragment: its bytes at the link's rate plus
// its requests at the post rate, or round trips when the queue is
// shallow. (The RFC takes the larger of the bytes' and the requests'
// times, as a NIC that overlaps them does: Params.RequestsOverlap, which
// the transport states; on this project's software transports they add:
// see TDirect.) T_direct_req (Params.TDirectPerRequest) is the
// requester's own work per request outside the link's window (planning,
// posting, completing), the counterpart of gather's front. Gather
// pays a fixed front (plan the command, deliver it, decode it), then packs
// with P workers while bulk chunks of C bytes stream out; C/B_mem is the
// pipeline fill and C/B_net its drain. Each formula is exported (TDirect,
// TPack, TBulk, TFront, TGather, CMin, CMax, Chunks) so tools can print
// them.
//
// Decide searches a bounded set of candidates: P in 1, 2, 4, ... up to
// MaxP, and for each P at most Params.ChunkSteps chunk sizes from C_min to
// C_max(P), a geometric series (C_min times powers of two, evenly spaced in
// octaves) ending at C_max; when C_min > C_max the staging bound wins and C
// is clamped to C_max. A candidate with fewer chunks than workers is
// skipped. Every candidate keeps P*C within the staging budget. Gather is
// chosen only when its best candidate beats direct by the margin:
// T_gather*(1+Margin) < T_direct. Decide allocates nothing and takes
// under a microsecond (a few dozen candidates), so the engine calls it per
// operation.
//
// Split handles a mixed operation given as runs (compatible groups of
// spans, each marked gatherable or not). Runs are classed by mean fragment
// size in one pass; each class boundary is a candidate threshold below
// which gatherable runs share one gather pipeline while the rest stay
// direct. The RFC gives no hybrid formula; THybrid takes the largest of
// the direct part's T_direct, the gather part's T_gather, and the shared
// link and queue carrying both parts' bytes and requests. The best
// threshold is compared with all-direct under the same margin.
//
// DecideStaged prices a staged READ, the gather a destination as
// fragmented as its source takes: a command per chunk with P calls in
// flight, each carrying its chunk through the owner's packing, the link
// and the requester's scatter (Staged: its copy rates and destination
// runs) one after the other. T_stag is the slower of the pipeline (the
// first P chunks packed at once, the slowest stage, the last chunk's
// transfer and scatter) and one call slot running its chunks back to back
// (TStaged); its search runs P up to Staged.MaxCalls (more calls than the
// owner's workers hide the calls' round trips; the owner's packing stays
// priced at MaxP workers) and starts at B_net*L/MaxCalls, a call's fixed
// cost being priced in the call.
//
// # Parameters and where they come from
//
// From the transport (its active contexts and configuration): BNet (link
// bandwidth, bytes/s), RPost (work requests posted per second), Q (queue
// depth), L (round-trip time).
//
// From calibration: BMem (streaming packing bandwidth of one worker,
// bytes/s) and RCopy (random small copies per second of one worker, the
// cost per span beyond its bytes) come from Calibrate, a startup probe of
// about 50 ms. It measures every time (median unit times, so a preempted
// goroutine does not read as slow memory); when its budget cannot fill a
// buffer larger than the last-level cache it says so (CacheResident), and
// RCopy is then optimistic. TControl (command latency), TChunkFixed (fixed cost per
// chunk) and L are refined while running by Moving, which keeps moving
// averages of what the engine observes and rescales BMem and RCopy by the
// observed/predicted packing time. TPlan/TPlanPerSpan and
// TDecode/TDecodePerSpan are the requester's command-building and the
// owner's decode-and-validate costs, fixed plus per span.
//
// Policy, from configuration: Epsilon (the share of a chunk's time its
// fixed cost may take, e.g. 0.05), Margin (how much gather must win by,
// e.g. 0.1), StagingBudget (bytes of staging one operation may hold),
// MaxP (largest pipeline width), MaxChunk (largest chunk the transport
// takes) and ChunkSteps (chunk sizes tried per width).
//
// Units are SI throughout: bytes, bytes/s, operations/s as float64, and
// times as time.Duration. Predictions saturate at Forever rather than
// overflow.
//
// # Reading an explanation
//
// Decision.String (or AppendExplain) prints the inputs, then one row per
// candidate:
//
//	mode    P  C       K      T_pack  T_bulk  total
//	direct  -  -       98304  -       -       655.38ms
//	gather  1  2.3MiB  11     ...     ...     ...
//
// P and C are the pipeline width and chunk size, K the requests posted
// (fragments for direct, chunks for gather), T_pack and T_bulk the two
// sides of the pipeline (the larger one bounds it: pack-bound or
// link-bound), and total the prediction. "(clamped)" marks a chunk cut to
// the staging bound below C_min. The chosen row starts with '*'. The last
// line gives the margin test that settled the choice. The explanation is
// recomputed from the decision's inputs on request; the hot path never
// builds it.
//
// # Errors
//
// Invalid input is reported with a *FieldError naming the field and
// wrapping ErrInvalidParams, ErrInvalidGeometry, ErrShortBuffer,
// ErrInvalidOptions or ErrInvalidSample. Decide and Split never fail
// outright: with invalid input they return direct, the path that needs no
// model, with Err set, and write nothing else.
package costmodel

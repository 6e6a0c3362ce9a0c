// Package bufferpool is registered staging memory for the transfer engine.
//
// A data owner packs random rows into leased staging chunks and bulk-writes
// them to the requester; a requester stages small WRITE fragments. Both lease
// chunks from a [Pool]: one arena of a fixed budget, registered with the
// transport once, carved into bounded, exactly-once leases. The package knows
// nothing about networks: a transport sees the arena through
// Config.Register or [Pool.Arena] and addresses a chunk by its arena
// offset ([Lease.Offset]).
//
// # Arena
//
// [New] makes one anonymous private mapping of the budget (rounded up to
// MinSlot). Unless Config.NoHugePages is set, a budget of at least one
// transparent huge page is aligned to and rounded up to whole huge pages and
// advised with MADV_HUGEPAGE, so random-row packing takes fewer TLB misses.
// The advice is best effort: a kernel without THP answers EINVAL, which New
// ignores; [ArenaStats] reports whether the advice took (HugePages, THPMode,
// HugePageErr). Config.Lock pins the arena with mlock: [LockRequire] fails
// New with a [*LockError] (wrapping [ErrLockRefused] and the errno) when
// the system refuses, [LockBestEffort] records the outcome (Locked, LockErr),
// [LockNone] does not try. Config.Prefault faults every page in during New
// (MADV_POPULATE_WRITE, else one write per page) so the first leases pay no
// page faults; a locked arena is resident already. The syscalls live in
// arena_linux.go; on other systems New returns [ErrNotSupported].
//
// # Size classes
//
// Leases come in power-of-two size classes from MinSlot (64 KiB by default)
// to MaxSlot. A binary buddy allocator manages the arena in MinSlot units: a
// request takes the smallest free block of its class or larger, splitting
// it, and a release merges the block with its free buddy as far as
// possible, so freed memory coalesces back and large chunks stay available
// after bursts of small ones. Acquire and release are O(log(MaxSlot/MinSlot))
// with no allocation. A budget that is not a power of two is cut into
// aligned roots, largest first (13 units: 8+4+1); a block never merges
// across roots, and MaxSlot is at most the largest root, so every class the
// pool accepts can be granted once enough leases are released. Requests
// above MaxSlot fail at once with [ErrTooLarge], they never wait.
//
// The cost of the policy is internal fragmentation: a request is rounded up
// to its class, at most doubling it. The engine's chunk size C is chosen by
// the cost model, so choose C a power of two (or the pool's class sizes)
// and P*C fits the budget exactly. Free blocks are reused last-in first-out,
// so a chunk released by one pipeline stage is handed, still warm in cache
// and TLB, to the next.
//
// # Leases
//
// A [Lease] is a small value (pool, offset, size, generation). Every grant
// stamps its block with a new generation; a release checks and bumps it. So
// exactly one Release per grant succeeds, on the value or any copy; a second
// one returns [ErrDoubleRelease] in a [*LeaseError] and changes nothing, and
// a stale handle kept after release can neither free the block's next
// holder nor see its memory ([Lease.Bytes] returns nil). Bytes has length
// Size and capacity clipped to Size, so an append cannot spill into a
// neighbour. Acquire and Release take one short critical section and
// allocate nothing in steady state (asserted by the tests).
//
// # Waiting and fairness
//
// [Pool.TryAcquire] never blocks: it returns [ErrExhausted] (the bare
// sentinel, no allocation, for the engine's fall-back-to-direct path).
// [Pool.Acquire] waits until the bytes are free, the context ends (an
// [*AcquireError] wrapping ErrExhausted and the context's error) or the
// pool is closed ([ErrClosed]); [Pool.AcquireTimeout] takes a duration
// instead. Waiters are served strictly first in, first out: a release grants
// the queue's head if its class is free, then the next, and stops at the
// first that does not fit. New acquires, TryAcquire included, never overtake
// a queued one. A large waiter therefore cannot be starved by a stream of
// small ones; the price is that small requests may wait behind it while
// smaller blocks are free. A waiter that gives up lets the queue move on.
//
// # Close and leaks
//
// [Pool.Close] refuses new acquires and wakes every waiter with ErrClosed.
// If leases are outstanding it returns a [*LeakError] listing each one
// (offset, size, class, the label given to [Pool.AcquireLabeled] and, with
// Config.TrackCallers, the function and line that acquired it) and keeps
// the arena mapped, so the leaked memory stays valid: the arena is never
// unmapped under a live lease. Release them and call Close again. When none
// is outstanding Close calls the deregister function returned by
// Config.Register, then unmaps; if deregistration fails the arena stays
// mapped and Close can be retried.
//
// # Statistics
//
// [Pool.Stats] reports the budget, bytes in use (by class and as
// requested), the peak, the largest free class, live leases, acquires,
// waits and time spent waiting, exhaustion and time-out counts, and the
// arena's huge-page, lock and prefault outcome: what the cost model needs
// for C_max = min(budget/P, S) and what scatterbench reports as peak
// staging bytes and leaked leases.
package bufferpool

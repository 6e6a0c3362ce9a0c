package bufferpool

import "time"

// Stats is a consistent snapshot of a pool, taken under its lock.
type Stats struct {
	Budget  int // bytes the allocator manages (Config.Budget rounded up to MinSlot)
	MinSlot int // smallest size class
	MaxSlot int // largest size class

	InUse       int // bytes of the size classes held by live leases (<= Budget)
	Requested   int // bytes requested by live leases (<= InUse)
	Peak        int // highest InUse since New
	LargestFree int // largest class free right now, 0 when none (queued waiters still go first)
	Leases      int // live leases

	Acquires  uint64        // leases granted
	Releases  uint64        // leases released
	Waits     uint64        // acquires that had to queue
	WaitTime  time.Duration // total time acquires spent queued
	Waiting   int           // acquires queued now
	Exhausted uint64        // TryAcquire calls answered ErrExhausted
	TimedOut  uint64        // queued acquires that gave up (context ended or timeout)

	Closed bool // Close was called
	Arena  ArenaStats
}

// ArenaStats describes the mapping behind the pool; it does not change after
// New, except Mapped, which turns false once Close unmaps the arena.
type ArenaStats struct {
	Mapped       bool   // the arena is mapped
	MappedBytes  int    // length of the mapping (capacity rounded up to the page or huge-page size)
	PageSize     int    // base page size
	HugePageSize int    // transparent huge page size used for alignment, 0 with NoHugePages
	HugePages    bool   // MADV_HUGEPAGE advice was accepted and THP is not disabled system-wide
	THPMode      string // the system's THP mode ("always", "madvise", "never"), "" when unknown
	HugePageErr  error  // why the advice did not take, if it did not (EINVAL when THP is not built in)
	Locked       bool   // the arena is mlocked
	LockErr      error  // mlock's error under LockBestEffort
	Prefaulted   bool   // every page was faulted in by New (Prefault, or a successful lock)
}

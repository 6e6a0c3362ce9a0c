package bufferpool

import (
	"fmt"
	"math"
	"math/bits"
	"os"
)

// LockMode says whether [New] pins the arena in RAM with mlock.
type LockMode uint8

const (
	// LockNone leaves the arena pageable (the default).
	LockNone LockMode = iota
	// LockBestEffort tries mlock and records the outcome in
	// [ArenaStats].Locked and LockErr; New succeeds either way.
	LockBestEffort
	// LockRequire fails New with a [*LockError] when mlock is refused.
	LockRequire
)

func (m LockMode) String() string {
	switch m {
	case LockNone:
		return "none"
	case LockBestEffort:
		return "best-effort"
	case LockRequire:
		return "require"
	}
	return fmt.Sprintf("LockMode(%d)", uint8(m))
}

// DefaultMinSlot is the smallest size class when Config.MinSlot is zero.
const DefaultMinSlot = 64 << 10

// maxCapacity bounds the arena (64 TiB): far above any machine here, low
// enough that offsets and unit counts never overflow.
const maxCapacity = 1 << 46

// Config describes a pool. Only Budget is required.
type Config struct {
	// Budget is the staging memory in bytes. It is rounded up to a multiple
	// of MinSlot; the rounded value is the pool's capacity (Stats.Budget).
	Budget int
	// MinSlot is the smallest size class: a power of two, at least the page
	// size. Zero means DefaultMinSlot (64 KiB). Every lease occupies at least
	// one MinSlot and starts at a multiple of it.
	MinSlot int
	// MaxSlot is the largest size class: a power of two between MinSlot and
	// the largest power of two not above the capacity. Zero means that
	// largest power of two. Larger requests fail at once with ErrTooLarge.
	MaxSlot int
	// Lock pins the arena with mlock (see LockMode).
	Lock LockMode
	// Prefault touches every page of the arena in New (MADV_POPULATE_WRITE,
	// falling back to one write per page) so the first leases pay no page
	// faults. A locked arena is already resident.
	Prefault bool
	// NoHugePages skips the MADV_HUGEPAGE advice and the huge-page alignment
	// of the mapping.
	NoHugePages bool
	// TrackCallers records the caller's program counter at each acquire so
	// the leak report names where a leaked lease was taken. It costs one
	// runtime.Callers per acquire.
	TrackCallers bool
	// Register, when set, is called once by New with the whole arena (the
	// slice Pool.Arena returns), so a transport registers it once. An error
	// fails New, which then unmaps the arena. The returned deregister
	// function, if not nil, is called once by Close before the arena is
	// unmapped.
	Register func(arena []byte) (deregister func() error, err error)
}

// geometry is a validated Config.
type geometry struct {
	capacity int  // bytes managed by the allocator
	minShift uint // log2(MinSlot)
	maxOrder int  // log2(MaxSlot/MinSlot)
	units    int  // capacity / MinSlot
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// floorPow2 returns the largest power of two <= n (n > 0).
func floorPow2(n int) int { return 1 << (bits.Len(uint(n)) - 1) }

func (c *Config) geometry() (geometry, error) {
	page := os.Getpagesize()
	if c.Budget <= 0 {
		return geometry{}, &ConfigError{Field: "Budget", Value: int64(c.Budget), Reason: "must be positive"}
	}
	if c.Budget > maxCapacity {
		return geometry{}, &ConfigError{Field: "Budget", Value: int64(c.Budget), Reason: fmt.Sprintf("above the %d-byte limit", maxCapacity)}
	}
	minSlot := c.MinSlot
	if minSlot == 0 {
		minSlot = DefaultMinSlot
	}
	if !isPow2(minSlot) || minSlot < page || minSlot > maxCapacity {
		return geometry{}, &ConfigError{Field: "MinSlot", Value: int64(c.MinSlot), Reason: fmt.Sprintf("must be a power of two, at least the page size %d", page)}
	}
	capacity := (c.Budget + minSlot - 1) &^ (minSlot - 1)
	units := capacity / minSlot
	if units > math.MaxInt32 {
		return geometry{}, &ConfigError{Field: "MinSlot", Value: int64(minSlot), Reason: fmt.Sprintf("Budget/MinSlot = %d slots, above %d", units, math.MaxInt32)}
	}
	largest := floorPow2(capacity)
	maxSlot := c.MaxSlot
	if maxSlot == 0 {
		maxSlot = largest
	}
	if !isPow2(maxSlot) || maxSlot < minSlot || maxSlot > largest {
		return geometry{}, &ConfigError{Field: "MaxSlot", Value: int64(c.MaxSlot), Reason: fmt.Sprintf("must be a power of two in [MinSlot %d, %d]", minSlot, largest)}
	}
	if c.Lock > LockRequire {
		return geometry{}, &ConfigError{Field: "Lock", Value: int64(c.Lock), Reason: "unknown LockMode"}
	}
	minShift := uint(bits.TrailingZeros(uint(minSlot)))
	return geometry{
		capacity: capacity,
		minShift: minShift,
		maxOrder: bits.TrailingZeros(uint(maxSlot)) - int(minShift),
		units:    units,
	}, nil
}

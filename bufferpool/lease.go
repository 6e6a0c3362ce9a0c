package bufferpool

// Lease is a handle on one block of the arena, returned by the acquire
// methods. It is a small value: copy it freely; exactly one Release across
// all copies succeeds. Each grant stamps the block with a new generation, and
// the handle carries the generation it was granted under, so a handle that
// was already released (or a stale copy of it) can neither free nor see the
// block after it was leased again: Release reports ErrDoubleRelease and
// Bytes returns nil.
//
// The zero Lease holds nothing: Bytes returns nil and Release reports
// ErrInvalidLease.
type Lease struct {
	p    *Pool
	off  int
	size int
	gen  uint64
}

// live reports whether the handle is the current grant of its block.
func (l Lease) live() bool {
	return l.p != nil && l.p.meta[l.off>>l.p.geo.minShift].gen.Load() == l.gen
}

// Bytes returns the leased memory: length Size, capacity clipped to Size so
// an append cannot spill into a neighbouring lease. It returns nil once the
// lease was released. The memory holds whatever the previous holder wrote.
func (l Lease) Bytes() []byte {
	if !l.live() {
		return nil
	}
	return l.p.arena[l.off : l.off+l.size : l.off+l.size]
}

// Offset returns the lease's offset from the start of the arena
// ([Pool.Arena]); transports address staging by the arena's registration
// plus this offset. It is a multiple of the pool's MinSlot.
func (l Lease) Offset() int { return l.off }

// Size returns the bytes requested.
func (l Lease) Size() int { return l.size }

// Class returns the bytes of the size class the lease holds (Size rounded up
// to MinSlot times a power of two), 0 for the zero Lease.
func (l Lease) Class() int {
	if l.p == nil {
		return 0
	}
	order, _ := l.p.orderFor(l.size)
	return l.p.classBytes(order)
}

// Release returns the block to the pool and wakes queued acquires it can
// satisfy. It succeeds exactly once per grant; later calls, on this value or
// any copy, return a [*LeaseError] wrapping ErrDoubleRelease and change
// nothing. Releasing after Close is allowed (that is how leaked leases are
// given back before Close is called again).
func (l Lease) Release() error {
	if l.p == nil {
		return &LeaseError{Offset: l.off, Size: l.size, Err: ErrInvalidLease}
	}
	return l.p.release(l)
}

package main

import (
	"math"
	"time"
	"unsafe"

	"github.com/scatterkit/scatterkit/engram"
)

// lookupArgs are sk_lookup's arguments as C passes them.
type lookupArgs struct {
	store, cols                   uint64
	t                             int64
	k                             int32
	ids                           unsafe.Pointer
	idBits                        int32
	out                           unsafe.Pointer
	outLen, off, tStride, kStride int64
	offsets                       unsafe.Pointer
}

// preparedLookup is a lookup whose arguments are Go values over the
// caller's memory: ids of exactly T*K elements, Buf of exactly out_len
// bytes, Offsets of exactly K values, so that nothing engram does with
// them can reach outside what the caller described.
type preparedLookup struct {
	st    *storeObj
	names []string
	ids   engram.IDs
	out   engram.Output
	opts  engram.LookupOptions
}

// span checks that n elements of size bytes at p describe memory: p not
// NULL when n > 0, the byte count and the end address not overflowing,
// and p aligned to size (Go reads ids and offsets as typed values).
func span(arg string, p unsafe.Pointer, n int64, size int) error {
	switch {
	case n < 0:
		return badArg(arg, "%d elements: negative", n)
	case n == 0:
		return nil
	case p == nil:
		return badArg(arg, "NULL for %d elements", n)
	case n > math.MaxInt/int64(size):
		return badArg(arg, "%d elements of %d bytes: larger than the address space", n, size)
	case uintptr(p)%uintptr(size) != 0:
		return badArg(arg, "address %#x not aligned to %d bytes", uintptr(p), size)
	case uintptr(p)+uintptr(n*int64(size))-1 < uintptr(p):
		return badArg(arg, "%d bytes at %#x: past the end of the address space", n*int64(size), uintptr(p))
	}
	return nil
}

// prepare resolves the handles and checks everything that describes
// memory before making a slice over it; engram's own check then decides
// the rest (shape, strides, overlap, rows inside out_len, the ids). It
// allocates nothing unless it fails.
func (a *lookupArgs) prepare(pl *preparedLookup) error {
	st, err := getStore(a.store)
	if err != nil {
		return err
	}
	c := columns.get(a.cols)
	if c == nil {
		return &HandleError{Handle: a.cols, Want: kindColumns}
	}
	if c.st != st {
		return badArg("cols", "a column set of another store")
	}
	k := int64(a.k)
	switch {
	case int64(len(c.names)) != k:
		return badArg("k", "%d, but the column set has %d names", k, len(c.names))
	case a.t < 0:
		return badArg("t", "%d: negative", a.t)
	case k > 0 && a.t > math.MaxInt64/k:
		return badArg("t", "%d x k %d ids: overflows", a.t, k)
	case a.idBits != 32 && a.idBits != 64:
		return badArg("id_bits", "%d: want 32 or 64", a.idBits)
	case int64(int(a.off)) != a.off || int64(int(a.tStride)) != a.tStride || int64(int(a.kStride)) != a.kStride:
		return badArg("off", "offset or stride beyond this platform's int")
	}
	n := a.t * k
	if err := span("ids", a.ids, n, int(a.idBits/8)); err != nil {
		return err
	}
	if err := span("out_base", a.out, a.outLen, 1); err != nil {
		return err
	}
	if a.offsets != nil {
		if err := span("offsets", a.offsets, k, 8); err != nil {
			return err
		}
	}
	pl.st, pl.names = st, c.names
	if a.idBits == 32 {
		pl.ids = engram.IDs32(unsafe.Slice((*int32)(a.ids), n), int(a.t), int(k))
	} else {
		pl.ids = engram.IDs64(unsafe.Slice((*int64)(a.ids), n), int(a.t), int(k))
	}
	pl.out = engram.Output{Buf: unsafe.Slice((*byte)(a.out), a.outLen), Off: int(a.off),
		TStride: int(a.tStride), KStride: int(a.kStride)}
	pl.opts.Offsets = nil
	if a.offsets != nil {
		pl.opts.Offsets = unsafe.Slice((*int64)(a.offsets), k)
	}
	return nil
}

func (pl *preparedLookup) run() error {
	return pl.st.s.Lookup(pl.names, pl.ids, pl.out, &pl.opts)
}

// lookup is sk_lookup.
func lookup(a *lookupArgs) error {
	var pl preparedLookup
	if err := a.prepare(&pl); err != nil {
		return err
	}
	return pl.run()
}

// benchLookup is sk_bench_lookup: the lookup n times, after one prepare,
// returning the total time of the n lookups.
func benchLookup(a *lookupArgs, n int64) (time.Duration, error) {
	if n < 1 {
		return 0, badArg("n", "%d: want at least 1", n)
	}
	var pl preparedLookup
	if err := a.prepare(&pl); err != nil {
		return 0, err
	}
	t0 := time.Now()
	for range n {
		if err := pl.run(); err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}

package main

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// kind is what a handle names; it is the handle's top byte, so a handle of
// one kind is never found in another kind's table.
type kind uint8

const (
	kindStore kind = 1 + iota
	kindColumns
	kindWriter
	kindBuffer
	kindServer
	kindDevice
)

func (k kind) String() string {
	switch k {
	case kindStore:
		return "store"
	case kindColumns:
		return "columns"
	case kindWriter:
		return "writer"
	case kindBuffer:
		return "buffer"
	case kindServer:
		return "server"
	case kindDevice:
		return "device"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// A handle is kind (8 bits) | generation (32 bits) | slot index (24
// bits). The slot's generation grows every time the slot is handed out,
// so a freed handle never names the slot's next object (until 2^32 reuses
// of one slot); the kind byte is never 0, so neither is a handle.
const (
	indexBits = 24
	genShift  = indexBits
	kindShift = 56

	pageBits = 10
	pageLen  = 1 << pageBits
	maxPages = 1024
	// maxHandles is how many handles of one kind may be live at once.
	maxHandles = pageLen * maxPages
)

// handles is a table of live objects of one kind. get is lock-free and
// allocation-free (the lookup path resolves two handles per call); add and
// take serialize on a mutex.
type handles[T any] struct {
	kind  kind
	pages [maxPages]atomic.Pointer[[pageLen]slot[T]]

	mu   sync.Mutex
	free []uint32 // slot indices to reuse, oldest first
	used uint32   // slots ever handed out
	live int
}

type slot[T any] struct {
	ent atomic.Pointer[entry[T]]
	gen uint32 // under handles.mu
}

type entry[T any] struct {
	h uint64
	v *T
}

func newHandles[T any](k kind) *handles[T] { return &handles[T]{kind: k} }

// add stores v and returns its new handle.
func (hs *handles[T]) add(v *T) (uint64, error) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var idx uint32
	switch {
	case len(hs.free) > 0:
		idx = hs.free[0]
		hs.free = hs.free[1:]
	case hs.used < maxHandles:
		idx = hs.used
		hs.used++
		if idx%pageLen == 0 {
			hs.pages[idx/pageLen].Store(new([pageLen]slot[T]))
		}
	default:
		return 0, fmt.Errorf("%w: %d %s handles live", errTooMany, hs.live, hs.kind)
	}
	s := &hs.pages[idx/pageLen].Load()[idx%pageLen]
	s.gen++
	h := uint64(hs.kind)<<kindShift | uint64(s.gen)<<genShift | uint64(idx)
	s.ent.Store(&entry[T]{h: h, v: v})
	hs.live++
	return h, nil
}

// slot returns h's slot, or nil when h is not of this table's kind or
// names a slot never handed out.
func (hs *handles[T]) slot(h uint64) *slot[T] {
	if kind(h>>kindShift) != hs.kind {
		return nil
	}
	idx := uint32(h & (1<<indexBits - 1))
	if idx >= maxHandles {
		return nil
	}
	p := hs.pages[idx/pageLen].Load()
	if p == nil {
		return nil
	}
	return &p[idx%pageLen]
}

// get returns h's object, or nil when h is not a live handle of this
// kind (freed, stale, of another kind, or never handed out).
func (hs *handles[T]) get(h uint64) *T {
	s := hs.slot(h)
	if s == nil {
		return nil
	}
	if e := s.ent.Load(); e != nil && e.h == h {
		return e.v
	}
	return nil
}

// take removes h and returns its object; exactly one of concurrent takes
// of one handle gets it, the others nil.
func (hs *handles[T]) take(h uint64) *T {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	s := hs.slot(h)
	if s == nil {
		return nil
	}
	e := s.ent.Load()
	if e == nil || e.h != h {
		return nil
	}
	s.ent.Store(nil)
	hs.free = append(hs.free, uint32(h&(1<<indexBits-1)))
	hs.live--
	return e.v
}

// len returns how many handles are live.
func (hs *handles[T]) len() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.live
}

package listener

import (
	"sync"
	"sync/atomic"

	"github.com/scatterkit/scatterkit/verbs"
)

// Handlers maps call methods to handlers. Lookups (one per CALL) read an
// immutable map through one atomic load; Set copies the map. The zero
// value is empty and ready to use.
type Handlers struct {
	mu sync.Mutex // serializes Set
	m  atomic.Pointer[map[uint16]verbs.Handler]
}

// Set registers h for method, replacing any earlier handler; a nil h
// removes it.
func (hs *Handlers) Set(method uint16, h verbs.Handler) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var old map[uint16]verbs.Handler
	if p := hs.m.Load(); p != nil {
		old = *p
	}
	m := make(map[uint16]verbs.Handler, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	if h == nil {
		delete(m, method)
	} else {
		m[method] = h
	}
	hs.m.Store(&m)
}

// Get returns the handler of method, or nil.
func (hs *Handlers) Get(method uint16) verbs.Handler {
	p := hs.m.Load()
	if p == nil {
		return nil
	}
	return (*p)[method]
}

package regtab

import (
	"fmt"
	"sync"

	"github.com/scatterkit/scatterkit/verbs"
)

// Cursor caches the last region resolved in a batch. The zero Cursor is
// empty; a Cursor must not outlive the lock (Registry) or Table it was
// used with.
type Cursor struct {
	key    verbs.Key
	mem    []byte
	access verbs.Access
}

// Entry is one registered region with the backend's data about it.
type Entry struct {
	Region *verbs.Region
	Data   any
	pins   int
}

// Registry is a transport's set of registered regions. Lookups happen
// under RLock, held by a Post for its whole batch, so Remove (which frees
// memory after it returns) cannot run in the middle of a copy.
type Registry struct {
	mu      sync.RWMutex
	entries map[verbs.Key]*Entry
	closed  bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{entries: make(map[verbs.Key]*Entry)} }

// Register makes a region of buf (see verbs.NewRegion) and adds it
// without backend data: caller-owned memory.
func (g *Registry) Register(buf []byte, access verbs.Access) (*verbs.Region, error) {
	r, err := verbs.NewRegion(buf, access)
	if err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	if err := g.Add(r, nil); err != nil {
		return nil, err
	}
	return r, nil
}

// Add registers r with backend data.
func (g *Registry) Add(r *verbs.Region, data any) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("register: %w", verbs.ErrClosed)
	}
	g.entries[r.Key()] = &Entry{Region: r, Data: data}
	return nil
}

func (g *Registry) lookupLocked(r *verbs.Region) (*Entry, error) {
	if r == nil {
		return nil, fmt.Errorf("nil region: %w", verbs.ErrInvalid)
	}
	e := g.entries[r.Key()]
	if e == nil || e.Region != r {
		return nil, fmt.Errorf("region %s is not registered here: %w", r.Key(), verbs.ErrBadKey)
	}
	return e, nil
}

// Remove unregisters r and returns its entry. It fails with ErrBadKey if
// r is not registered here and with ErrInUse while it is pinned.
func (g *Registry) Remove(r *verbs.Region) (*Entry, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, err := g.lookupLocked(r)
	if err != nil {
		return nil, fmt.Errorf("deregister: %w", err)
	}
	if e.pins > 0 {
		return nil, fmt.Errorf("deregister %s: %d users: %w", r.Key(), e.pins, verbs.ErrInUse)
	}
	delete(g.entries, r.Key())
	return e, nil
}

// Pin marks every region of exports as in use (all or nothing) and
// returns their entries in order.
func (g *Registry) Pin(exports []verbs.Export) ([]*Entry, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, verbs.ErrClosed
	}
	out := make([]*Entry, len(exports))
	for i, x := range exports {
		e, err := g.lookupLocked(x.Region)
		if err != nil {
			return nil, fmt.Errorf("export %q: %w", x.Name, err)
		}
		out[i] = e
	}
	for _, e := range out {
		e.pins++
	}
	return out, nil
}

// Unpin undoes Pin.
func (g *Registry) Unpin(entries []*Entry) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range entries {
		e.pins--
	}
}

// CloseAll marks the registry closed (Add and Pin fail from now on),
// removes every entry and returns them so the backend can free them.
func (g *Registry) CloseAll() []*Entry {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	out := make([]*Entry, 0, len(g.entries))
	for k, e := range g.entries {
		out = append(out, e)
		delete(g.entries, k)
	}
	return out
}

// RLock locks the registry for lookups (one batch).
func (g *Registry) RLock() { g.mu.RLock() }

// RUnlock ends the lookups.
func (g *Registry) RUnlock() { g.mu.RUnlock() }

// Local resolves the local side of a work request: a registered region
// with AccessLocal containing [off, off+n). The caller holds RLock. The
// error is ErrBadKey, ErrAccess or ErrBounds.
func (g *Registry) Local(c *Cursor, key verbs.Key, off uint64, n uint32) ([]byte, error) {
	if c.key != key || key == 0 {
		e := g.entries[key]
		if e == nil {
			return nil, verbs.ErrBadKey
		}
		c.key, c.mem, c.access = key, e.Region.Bytes(), e.Region.Access()
	}
	if c.access&verbs.AccessLocal == 0 {
		return nil, verbs.ErrAccess
	}
	b, ok := verbs.Span(c.mem, off, n)
	if !ok {
		return nil, verbs.ErrBounds
	}
	return b, nil
}

// TableEntry is one region of a Table: its description and its memory
// (in this process; for a remote shm region, the mapping).
type TableEntry struct {
	Info   verbs.RegionInfo
	Mem    []byte
	Hidden bool // resolvable but not listed by Infos (link probes)
}

// Table is an immutable set of regions that requests from one side of a
// connection may target. It is safe for concurrent use.
type Table struct {
	infos []verbs.RegionInfo
	keys  []verbs.Key
	mems  [][]byte
	acc   []verbs.Access
	index map[verbs.Key]int
}

// NewTable builds a table. Keys must be distinct.
func NewTable(entries []TableEntry) *Table {
	t := &Table{index: make(map[verbs.Key]int, len(entries))}
	for _, e := range entries {
		t.index[e.Info.Key] = len(t.keys)
		t.keys = append(t.keys, e.Info.Key)
		t.mems = append(t.mems, e.Mem)
		t.acc = append(t.acc, e.Info.Access)
		if !e.Hidden {
			t.infos = append(t.infos, e.Info)
		}
	}
	return t
}

// Infos lists the visible regions. The slice must not be modified.
func (t *Table) Infos() []verbs.RegionInfo { return t.infos }

// Resolve checks a request from the other side (or toward it) against the
// table: the key names a region, the region permits need
// (AccessRemoteRead or AccessRemoteWrite), and [off, off+n) lies inside
// it. It returns the bytes or the failure status.
func (t *Table) Resolve(c *Cursor, key verbs.Key, off uint64, n uint32, need verbs.Access) ([]byte, verbs.Status) {
	if c.key != key || key == 0 {
		i, ok := t.lookup(key)
		if !ok {
			return nil, verbs.StatusBadKey
		}
		c.key, c.mem, c.access = key, t.mems[i], t.acc[i]
	}
	if c.access&need != need {
		return nil, verbs.StatusAccess
	}
	b, ok := verbs.Span(c.mem, off, n)
	if !ok {
		return nil, verbs.StatusBounds
	}
	return b, verbs.StatusOK
}

// Mem returns the memory of the region named key.
func (t *Table) Mem(key verbs.Key) ([]byte, bool) {
	i, ok := t.lookup(key)
	if !ok {
		return nil, false
	}
	return t.mems[i], true
}

func (t *Table) lookup(key verbs.Key) (int, bool) {
	if key == 0 {
		return 0, false
	}
	if len(t.keys) <= 8 {
		for i, k := range t.keys {
			if k == key {
				return i, true
			}
		}
		return 0, false
	}
	i, ok := t.index[key]
	return i, ok
}

package discovery

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"
)

// Memory is an in-process Directory: a map under a mutex. Its owners are the
// registrations themselves, so a record lives until its Registration or the
// Memory is closed, or until it expires. The zero value is not usable; call
// NewMemory.
type Memory struct {
	mu       sync.Mutex
	records  map[string]*memReg
	rev      int64
	closed   bool
	done     chan struct{}            // closed by Close
	watchers map[chan struct{}]string // wake channel -> watched prefix
}

var _ Directory = (*Memory)(nil)

// NewMemory returns an empty in-process directory.
func NewMemory() *Memory {
	return &Memory{
		records:  make(map[string]*memReg),
		done:     make(chan struct{}),
		watchers: make(map[chan struct{}]string),
	}
}

type memReg struct {
	*regState
	m     *Memory
	rec   Record
	timer *time.Timer // fires at rec.Expires; nil when it has none
}

// Publish implements Directory.
func (m *Memory) Publish(ctx context.Context, r Record) (Registration, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := time.Now()
	rec, err := PreparePublish(r, now)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if old, ok := m.records[rec.Name]; ok {
		if !old.rec.Expired(now) {
			return nil, &ExistsError{Name: rec.Name, Holder: old.rec.Clone()}
		}
		m.dropLocked(old, ErrExpired)
	}
	m.rev++
	rec.Revision = m.rev
	reg := &memReg{regState: newRegState(), m: m, rec: rec}
	m.records[rec.Name] = reg
	if !rec.Expires.IsZero() {
		reg.timer = time.AfterFunc(rec.Expires.Sub(now), reg.expire)
	}
	m.notifyLocked(rec.Name)
	return reg, nil
}

// dropLocked removes reg's record and ends reg with why.
func (m *Memory) dropLocked(reg *memReg, why error) {
	if m.records[reg.rec.Name] == reg {
		delete(m.records, reg.rec.Name)
		m.notifyLocked(reg.rec.Name)
	}
	if reg.timer != nil {
		reg.timer.Stop()
	}
	reg.finish(why)
}

// notifyLocked wakes the watchers whose prefix covers name.
func (m *Memory) notifyLocked(name string) {
	for wake, prefix := range m.watchers {
		if strings.HasPrefix(name, prefix) {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}

// Lookup implements Directory. It does not allocate when the record has no
// Attrs.
func (m *Memory) Lookup(ctx context.Context, name string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	if err := ValidateName(name); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Record{}, ErrClosed
	}
	reg, ok := m.records[name]
	if !ok || reg.rec.Expired(time.Now()) {
		return Record{}, fmt.Errorf("lookup %q: %w", name, ErrNotFound)
	}
	return reg.rec.Clone(), nil
}

// List implements Directory.
func (m *Memory) List(ctx context.Context, prefix string) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	return m.snapshot(prefix)
}

// snapshot returns copies of the live records under prefix, sorted by name.
func (m *Memory) snapshot(prefix string) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	now := time.Now()
	var out []Record
	for name, reg := range m.records {
		if strings.HasPrefix(name, prefix) && !reg.rec.Expired(now) {
			out = append(out, reg.rec.Clone())
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Watch implements Directory. A watch starts no goroutine; it wakes on every
// change under its prefix and at the next expiry.
func (m *Memory) Watch(ctx context.Context, prefix string) (iter.Seq2[Event, error], error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	return func(yield func(Event, error) bool) {
		wake := make(chan struct{}, 1)
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			yield(Event{}, ErrClosed)
			return
		}
		m.watchers[wake] = prefix
		m.mu.Unlock()
		defer func() {
			m.mu.Lock()
			delete(m.watchers, wake)
			m.mu.Unlock()
		}()
		snapshotWatch{snapshot: m.snapshot, closed: m.done, wake: wake}.run(ctx, prefix, yield)
	}, nil
}

// Close implements Directory: every registration ends with ErrClosed and
// every watch with ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	close(m.done)
	for _, reg := range m.records {
		if reg.timer != nil {
			reg.timer.Stop()
		}
		reg.finish(ErrClosed)
	}
	clear(m.records)
	return nil
}

// Record implements Registration.
func (r *memReg) Record() Record { return r.rec.Clone() }

// Close implements Registration.
func (r *memReg) Close() error {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	r.m.dropLocked(r, ErrWithdrawn)
	return nil
}

func (r *memReg) expire() {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	if r.m.closed {
		return
	}
	r.m.dropLocked(r, ErrExpired)
}

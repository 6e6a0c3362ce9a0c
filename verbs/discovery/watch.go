package discovery

import (
	"context"
	"slices"
	"sync"
	"time"
)

// regState is the Done/Err half of a Registration, shared by the embedded
// backends.
type regState struct {
	done chan struct{}
	mu   sync.Mutex
	err  error
}

func newRegState() *regState { return &regState{done: make(chan struct{})} }

// finish records why the registration ended and closes done. Only the first
// call has an effect; it reports whether it was that call.
func (s *regState) finish(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	s.err = err
	close(s.done)
	return true
}

func (s *regState) Done() <-chan struct{} { return s.done }

func (s *regState) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// snapshotWatch is the watch loop of the embedded backends. It takes a
// snapshot of the live records under a prefix whenever something may have
// changed (a wake-up from a local change, a poll tick for changes made by
// other processes, or the next Expires time among the records it reported),
// and reports the difference with the previous snapshot. Because it compares
// states, it never queues events: a slow consumer only sees fewer, merged
// changes, and the final state is always reported. It starts no goroutine.
type snapshotWatch struct {
	// snapshot returns the live records under prefix, sorted by name, or
	// ErrClosed.
	snapshot func(prefix string) ([]Record, error)
	closed   <-chan struct{} // closed when the directory closes
	wake     <-chan struct{} // a send means something changed
	poll     time.Duration   // 0: no polling
}

func (w snapshotWatch) run(ctx context.Context, prefix string, yield func(Event, error) bool) {
	seen := make(map[string]Record)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			yield(Event{}, ctx.Err())
			return
		case <-w.closed:
			yield(Event{}, ErrClosed)
			return
		default:
		}
		recs, err := w.snapshot(prefix)
		if err != nil {
			yield(Event{}, err)
			return
		}
		var next time.Time
		for _, r := range recs {
			if !r.Expires.IsZero() && (next.IsZero() || r.Expires.Before(next)) {
				next = r.Expires
			}
		}
		if !w.report(seen, recs, yield) {
			return
		}

		wait := w.poll
		if !next.IsZero() {
			if d := time.Until(next); wait == 0 || d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		var tick <-chan time.Time
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			tick = timer.C
		}
		select {
		case <-ctx.Done():
		case <-w.closed:
		case <-w.wake:
		case <-tick:
		}
	}
}

// report yields the difference between seen and recs (sorted by name) in
// name order, updates seen, and reports whether the consumer wants more.
func (w snapshotWatch) report(seen map[string]Record, recs []Record, yield func(Event, error) bool) bool {
	// Deleted names are those in seen but not in recs; merge them into the
	// name order by collecting and sorting them first.
	var gone []string
	if len(seen) > 0 {
		live := make(map[string]struct{}, len(recs))
		for _, r := range recs {
			live[r.Name] = struct{}{}
		}
		for name := range seen {
			if _, ok := live[name]; !ok {
				gone = append(gone, name)
			}
		}
		slices.Sort(gone)
	}
	i := 0
	for _, r := range recs {
		for i < len(gone) && gone[i] < r.Name {
			if !w.yieldDelete(seen, gone[i], yield) {
				return false
			}
			i++
		}
		if old, ok := seen[r.Name]; ok && old.Revision == r.Revision {
			continue
		}
		seen[r.Name] = r
		if !yield(Event{Kind: EventPut, Record: r.Clone()}, nil) {
			return false
		}
	}
	for ; i < len(gone); i++ {
		if !w.yieldDelete(seen, gone[i], yield) {
			return false
		}
	}
	return true
}

func (snapshotWatch) yieldDelete(seen map[string]Record, name string, yield func(Event, error) bool) bool {
	r := seen[name]
	delete(seen, name)
	return yield(Event{Kind: EventDelete, Record: r}, nil)
}

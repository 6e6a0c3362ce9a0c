package discoverytest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// watcher runs one watch in a goroutine and hands its events to the test.
// The watch is canceled, and its goroutine waited for, at cleanup.
type watcher struct {
	prefix string
	events chan item
	cancel context.CancelFunc
	done   chan struct{}
}

type item struct {
	ev  discovery.Event
	err error
}

func startWatch(t *testing.T, d discovery.Directory, prefix string) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	seq, err := d.Watch(ctx, prefix)
	if err != nil {
		cancel()
		t.Fatalf("Watch(%q): %v", prefix, err)
	}
	w := &watcher{prefix: prefix, events: make(chan item, 1024), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ev, err := range seq {
			select {
			case w.events <- item{ev, err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			t.Errorf("watch %q did not end 10 s after its context was canceled", prefix)
		}
	})
	return w
}

// next returns the next event, failing on an error or after timeout.
func (w *watcher) next(t *testing.T, timeout time.Duration) discovery.Event {
	t.Helper()
	select {
	case it := <-w.events:
		require.NoError(t, it.err, "watch %q", w.prefix)
		return it.ev
	case <-time.After(timeout):
		t.Fatalf("watch %q: no event in %v", w.prefix, timeout)
	}
	return discovery.Event{}
}

// expect checks that the next event is kind for r.
func (w *watcher) expect(t *testing.T, timeout time.Duration, kind discovery.EventKind, r discovery.Record) {
	t.Helper()
	ev := w.next(t, timeout)
	require.Equal(t, kind, ev.Kind, "watch %q: event for %q", w.prefix, ev.Record.Name)
	if kind == discovery.EventDelete {
		// A delete names the record; backends report the last record they saw.
		require.Equal(t, r.Name, ev.Record.Name)
		if ev.Record.Revision != 0 {
			requireRecord(t, r, ev.Record)
		}
		return
	}
	requireRecord(t, r, ev.Record)
}

// quiet checks that no event arrives for d.
func (w *watcher) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case it := <-w.events:
		t.Fatalf("watch %q: unexpected event %v %+v (err %v)", w.prefix, it.ev.Kind, it.ev.Record, it.err)
	case <-time.After(d):
	}
}

// end waits for the watch to end and returns its final error, skipping any
// events before it.
func (w *watcher) end(t *testing.T, timeout time.Duration) error {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case it := <-w.events:
			if it.err != nil {
				select {
				case <-w.done:
				case <-deadline:
					t.Fatalf("watch %q: goroutine still running after its final error", w.prefix)
				}
				return it.err
			}
		case <-deadline:
			t.Fatalf("watch %q did not end in %v", w.prefix, timeout)
		}
	}
}

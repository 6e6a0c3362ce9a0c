package main

import (
	"io"
	"sync"
	"unsafe"

	"github.com/scatterkit/scatterkit/engram"
)

// populate is sk_populate: the whole table from the caller's memory,
// read during the call only.
func populate(h uint64, name string, rows unsafe.Pointer, n int64) error {
	st, err := getStore(h)
	if err != nil {
		return err
	}
	if err := span("rows", rows, n, 1); err != nil {
		return err
	}
	return st.s.Populate(name, unsafe.Slice((*byte)(rows), n))
}

// writerObj is a populate stream: sk_populate_write feeds an io.Pipe that
// Store.PopulateFrom reads on its own goroutine. The read that completes
// the table waits at a gate until sk_populate_commit (the rows go on and
// the table is published) or sk_populate_abort (the read fails, so
// nothing is published), so an abort after the last row still publishes
// nothing. Writes past the table's size are refused before they reach the
// pipe, so the gate is the only place the reader ever waits for the
// caller.
type writerObj struct {
	st   *storeObj
	size int64
	pw   *io.PipeWriter

	mu      sync.Mutex // serializes writes
	written int64      // under mu

	once    sync.Once
	commit  bool          // set before decided closes
	decided chan struct{} // closed by commit or abort

	done chan struct{} // closed when PopulateFrom has returned
	err  error         // PopulateFrom's result, set before done closes
}

// gate is the reader PopulateFrom reads: the pipe, held at the last byte
// until the writer's decision.
type gate struct {
	w   *writerObj
	pr  *io.PipeReader
	got int64
}

func (g *gate) Read(p []byte) (int, error) {
	n, err := g.pr.Read(p)
	g.got += int64(n)
	if err == nil && g.got == g.w.size {
		<-g.w.decided
		if !g.w.commit {
			return 0, errAborted
		}
	}
	return n, err
}

// beginPopulate is sk_populate_begin: the checks Populate would make
// first (a closed store, a remote store, an unknown or populated table)
// fail here, before any row is written.
func beginPopulate(h uint64, name string) (uint64, error) {
	st, err := getStore(h)
	if err != nil {
		return 0, err
	}
	if st.tr != nil {
		return 0, &engram.TableError{Table: name, Op: "populate", Err: engram.ErrReadOnly}
	}
	spec, err := st.s.TableSpec(name)
	if err != nil {
		return 0, err
	}
	if ok, err := st.s.Populated(name); err != nil {
		return 0, err
	} else if ok {
		return 0, &engram.TableError{Table: name, Op: "populate", Err: engram.ErrExists}
	}
	pr, pw := io.Pipe()
	w := &writerObj{st: st, size: spec.Size(), pw: pw, decided: make(chan struct{}), done: make(chan struct{})}
	wh, err := adopt(st, writers, w, writersOf)
	if err != nil {
		return 0, err
	}
	go w.run(name, &gate{w: w, pr: pr})
	return wh, nil
}

func (w *writerObj) run(name string, g *gate) {
	defer close(w.done)
	defer func() {
		if r := recover(); r != nil {
			w.err = &PanicError{Value: r}
			g.pr.CloseWithError(w.err)
		}
	}()
	w.err = w.st.s.PopulateFrom(name, g)
	// Writes after the end fail: with the populate's error, or, after a
	// success (possible only once committed), with ErrClosedPipe.
	g.pr.CloseWithError(w.err)
}

// write is sk_populate_write: p is copied into the stream before it
// returns.
func writePopulate(h uint64, p unsafe.Pointer, n int64) error {
	w := writers.get(h)
	if w == nil {
		return &HandleError{Handle: h, Want: kindWriter}
	}
	if err := span("p", p, n, 1); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n > w.size-w.written {
		return badArg("len", "%d bytes after %d: past the table's %d", n, w.written, w.size)
	}
	if n == 0 {
		return nil // an empty pipe write would wait for a reader
	}
	m, err := w.pw.Write(unsafe.Slice((*byte)(p), n))
	w.written += int64(m)
	if err != nil {
		<-w.done
		if w.err != nil {
			return w.err
		}
		return err
	}
	return nil
}

// finish decides the stream once: commit lets the last read through,
// anything else fails it; then the pipe closes (a short stream reads EOF
// and fails, so a short commit publishes nothing either) and it waits
// for PopulateFrom.
func (w *writerObj) finish(commit bool) error {
	w.once.Do(func() {
		w.commit = commit
		close(w.decided)
		if commit {
			w.pw.Close()
		} else {
			w.pw.CloseWithError(errAborted)
		}
	})
	<-w.done
	return w.err
}

func (w *writerObj) abort() { w.finish(false) }

// commitPopulate is sk_populate_commit.
func commitPopulate(h uint64) error {
	w := writers.take(h)
	if w == nil {
		return &HandleError{Handle: h, Want: kindWriter}
	}
	w.mu.Lock() // after a write in progress
	w.mu.Unlock()
	err := w.finish(true)
	disown(w.st, writersOf, h)
	return err
}

// abortPopulate is sk_populate_abort.
func abortPopulate(h uint64) error {
	w := writers.take(h)
	if w == nil {
		return &HandleError{Handle: h, Want: kindWriter}
	}
	w.abort()
	disown(w.st, writersOf, h)
	return nil
}

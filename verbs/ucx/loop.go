//go:build ucx

package ucx

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/ucx/internal/ucp"
)

// errLoopClosed: the loop ended before the function ran.
var errLoopClosed = fmt.Errorf("ucx: progress loop closed: %w", verbs.ErrClosed)

// job is work for the loop's thread; task is a submitted job and where
// its end is signalled (a channel with room for one token, which the
// submitter waits on; a queue reuses its own, so a post allocates
// nothing).
type job interface{ run() }

type task struct {
	j    job
	done chan struct{}
}

// funcJob runs a function as a job.
type funcJob func()

func (f funcJob) run() { f() }

// loop owns a UCX worker on one locked OS thread: every call on the
// worker (its endpoints, keys and operations, created single-threaded)
// runs there, submitted with do. Between submissions it progresses the
// worker while anything is in flight (the busy callbacks say so), and
// otherwise sleeps on the worker's event descriptor and its own wake-up
// descriptor, so an idle side costs no CPU and still serves what its
// peers' operations need of its worker (over tcp UCX's one-sided
// operations are messages the target's worker handles).
type loop struct {
	w    *ucp.Worker
	wake int // an eventfd: written by do, read by the loop

	mu     sync.Mutex
	queue  []task
	closed bool
	busy   []func() bool // polled each pass: true while work is in flight
	done   chan struct{}
}

// newLoop starts a loop on a new worker of ctx.
func newLoop(ctx *ucp.Context) (*loop, error) {
	l := &loop{done: make(chan struct{}), wake: -1}
	ready := make(chan error, 1)
	go l.run(ctx, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return l, nil
}

func (l *loop) run(ctx *ucp.Context, ready chan<- error) {
	runtime.LockOSThread()
	defer close(l.done)
	w, err := ctx.NewWorker()
	if err != nil {
		ready <- err
		return
	}
	defer w.Close()
	efd, err := w.EventFD()
	if err != nil {
		ready <- err
		return
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		ready <- err
		return
	}
	// (close closes wake once the loop has ended, under mu, so that no
	// kick writes a descriptor number reused meanwhile.)
	l.w, l.wake = w, wake
	ready <- nil
	var tasks []task
	fds := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
	var buf [8]byte
	for {
		l.mu.Lock()
		tasks, l.queue = l.queue, tasks[:0]
		closed := l.closed
		l.mu.Unlock()
		ran := len(tasks)
		for _, t := range tasks {
			t.j.run()
			t.done <- struct{}{}
		}
		clear(tasks)
		tasks = tasks[:0]
		if closed && ran == 0 {
			return
		}
		progressed := w.Progress() > 0
		inflight := false
		for _, b := range l.busy {
			if b() {
				inflight = true
			}
		}
		if progressed || inflight || ran > 0 {
			continue
		}
		// Idle: arm the worker's descriptor (busy: events came in, go
		// round again) and sleep until it or a submission wakes us. A
		// worker that cannot be armed is looked at every millisecond
		// instead.
		busy, err := w.Arm()
		if busy {
			continue
		}
		timeout := -1
		if err != nil {
			timeout = 1
		}
		l.mu.Lock()
		pending := len(l.queue) > 0 || l.closed
		l.mu.Unlock()
		if pending {
			continue
		}
		if _, err := unix.Poll(fds, timeout); err != nil && !errors.Is(err, unix.EINTR) {
			continue
		}
		_, _ = unix.Read(wake, buf[:])
	}
}

// do runs f on the loop's thread and waits for it.
func (l *loop) do(f func()) error { return l.submit(funcJob(f), make(chan struct{}, 1)) }

// submit runs j on the loop's thread and waits for it; done (room for one
// token, empty) is signalled when it has run. It fails with errLoopClosed
// if the loop ended first.
func (l *loop) submit(j job, done chan struct{}) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return errLoopClosed
	}
	l.queue = append(l.queue, task{j: j, done: done})
	l.kick()
	l.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-l.done:
		select {
		case <-done:
			return nil
		default:
			return errLoopClosed
		}
	}
}

// kick wakes the loop's thread; called with mu held, before close.
func (l *loop) kick() {
	one := [8]byte{1}
	_, _ = unix.Write(l.wake, one[:])
}

// watch adds a busy callback (run on the loop's thread each pass; true
// while it has work in flight). Call it from the loop's thread (in do).
func (l *loop) watch(b func() bool) { l.busy = append(l.busy, b) }

// close runs what was submitted, ends the loop and waits for it (the
// worker is destroyed on its thread: close its endpoints first).
func (l *loop) close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		l.kick()
	}
	l.mu.Unlock()
	<-l.done
	l.mu.Lock()
	if l.wake >= 0 {
		_ = unix.Close(l.wake)
		l.wake = -1
	}
	l.mu.Unlock()
}

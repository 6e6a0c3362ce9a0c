package engine

import (
	"time"

	"github.com/scatterkit/scatterkit/verbs"
)

// The abort fence. An operation whose context ends stops posting, but its
// transfers in flight (direct requests, a gather command the owner runs)
// may still land in the caller's memory, so it cannot simply return. The
// engine's watchdog looks at the running operations; one
// whose context has ended and that is still running AbortGrace later has
// its Conn closed, which ends everything in flight on it (the transports
// complete outstanding requests with ErrClosed only after nothing more
// can land), and the operation fails. The watch costs an operation two
// short critical sections.

// abortWatch is the engine's list of watched operations.
type abortWatch struct {
	ops     []*Operation // watched; op.watchIdx is each one's slot
	started bool         // the watchdog runs
}

// watchAbort adds op to the watch list. Every operation goes on it: to
// ask whether its context can end (Done) would make a cancelable
// context allocate its channel, per operation.
func (e *Engine) watchAbort(op *Operation) {
	e.watchMu.Lock()
	op.endedAt = time.Time{}
	op.watchIdx = len(e.watch.ops)
	e.watch.ops = append(e.watch.ops, op)
	if !e.watch.started {
		e.watch.started = true
		e.wg.Add(1)
		go e.abortWatchdog()
	}
	e.watchMu.Unlock()
}

// unwatchAbort takes op off the list (it completed).
func (e *Engine) unwatchAbort(op *Operation) {
	e.watchMu.Lock() // watchIdx moves when another operation leaves
	if op.watchIdx < 0 {
		e.watchMu.Unlock()
		return
	}
	last := len(e.watch.ops) - 1
	moved := e.watch.ops[last]
	e.watch.ops[op.watchIdx] = moved
	moved.watchIdx = op.watchIdx
	e.watch.ops[last] = nil
	e.watch.ops = e.watch.ops[:last]
	op.watchIdx = -1
	e.watchMu.Unlock()
}

// abortPeriod is how often the watchdog looks: a tenth of the grace,
// within [1 ms, 50 ms].
func (e *Engine) abortPeriod() time.Duration {
	return min(max(e.cfg.AbortGrace/10, time.Millisecond), 50*time.Millisecond)
}

// abortWatchdog runs until the engine closes.
func (e *Engine) abortWatchdog() {
	defer e.wg.Done()
	tick := time.NewTicker(e.abortPeriod())
	defer tick.Stop()
	var fence []verbs.Conn
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		fence = fence[:0]
		e.watchMu.Lock()
		for _, op := range e.watch.ops {
			if op.ctx.Err() == nil {
				continue
			}
			if op.endedAt.IsZero() {
				op.endedAt = now
				continue
			}
			if now.Sub(op.endedAt) < e.cfg.AbortGrace {
				continue
			}
			op.mu.Lock()
			already := op.fenced
			op.fenced = true
			op.mu.Unlock()
			if !already {
				fence = append(fence, op.cs.conn)
			}
		}
		e.watchMu.Unlock()
		for _, c := range fence {
			go c.Close() // may wait for the peer (shm: CloseGrace)
		}
	}
}

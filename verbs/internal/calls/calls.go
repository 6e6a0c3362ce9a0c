package calls

import (
	"context"
	"fmt"
	"sync"

	"github.com/scatterkit/scatterkit/verbs"
)

// Pending is one call waiting for its answer. The reader that claimed it
// fills Buf (or Status and Msg) and calls Finish exactly once.
type Pending struct {
	done   chan struct{}
	Ping   bool         // a PING, answered by PONG
	Buf    []byte       // the response, appended to the caller's buffer
	Status verbs.Status // the answer's status
	Msg    string       // error text of a failed call
	err    error
}

// Finish hands the answer (or err) to the caller.
func (p *Pending) Finish(err error) {
	p.err = err
	p.done <- struct{}{}
}

// keepPending bounds the answered Pendings a Table keeps for reuse.
const keepPending = 64

// Table holds a connection's pending calls.
type Table struct {
	mu    sync.Mutex
	m     map[uint64]*Pending
	free  []*Pending // answered, for reuse (a warm call allocates none)
	seq   uint64
	ended error
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{m: make(map[uint64]*Pending)} }

// Start registers a call and returns its id. resp is the caller's buffer.
func (t *Table) Start(ping bool, resp []byte) (uint64, *Pending, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended != nil {
		return 0, nil, t.ended
	}
	var p *Pending
	if n := len(t.free); n > 0 {
		p = t.free[n-1]
		t.free[n-1] = nil
		t.free = t.free[:n-1]
	} else {
		p = &Pending{done: make(chan struct{}, 1)}
	}
	p.Ping, p.Buf, p.Status, p.Msg, p.err = ping, resp[:0], verbs.StatusOK, "", nil
	t.seq++
	t.m[t.seq] = p
	return t.seq, p, nil
}

// Claim removes and returns the call with id, or nil if there is none
// (unknown, or its caller gave up).
func (t *Table) Claim(id uint64) *Pending {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.m[id]
	delete(t.m, id)
	return p
}

// Wait waits for the answer to call id and returns the response (resp on
// failure). A call whose context ends is abandoned: its answer, if it
// comes, is discarded by the reader.
func (t *Table) Wait(ctx context.Context, id uint64, p *Pending, method uint16, resp []byte) ([]byte, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		if t.Claim(id) == p {
			t.recycle(p)
			return resp, fmt.Errorf("verbs: call method %d: %w", method, ctx.Err())
		}
		<-p.done // a reader claimed it first; it finishes shortly
	}
	out, st, msg, err := p.Buf, p.Status, p.Msg, p.err
	t.recycle(p)
	if err != nil {
		return resp, err
	}
	if st != verbs.StatusOK {
		return resp, &verbs.CallError{Method: method, Status: st, Message: msg}
	}
	return out, nil
}

// recycle keeps an answered (or abandoned and unclaimed) p for reuse.
func (t *Table) recycle(p *Pending) {
	p.Buf, p.Msg, p.err = nil, "", nil
	t.mu.Lock()
	if len(t.free) < keepPending {
		t.free = append(t.free, p)
	}
	t.mu.Unlock()
}

// End fails every pending call, and every later Start, with err.
func (t *Table) End(err error) {
	t.mu.Lock()
	if t.ended == nil {
		t.ended = err
	}
	m := t.m
	t.m = make(map[uint64]*Pending)
	t.mu.Unlock()
	for _, p := range m {
		p.Finish(err)
	}
}

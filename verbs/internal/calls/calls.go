// Package calls tracks a requester's control calls (and pings) waiting
// for their answers: a table keyed by call id, answered by the connection's
// reader, abandoned by a caller whose context ended, failed all at once
// when the connection ends.
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

var pool = sync.Pool{New: func() any { return &Pending{done: make(chan struct{}, 1)} }}

// Finish hands the answer (or err) to the caller.
func (p *Pending) Finish(err error) {
	p.err = err
	p.done <- struct{}{}
}

// Table holds a connection's pending calls.
type Table struct {
	mu    sync.Mutex
	m     map[uint64]*Pending
	seq   uint64
	ended error
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{m: make(map[uint64]*Pending)} }

// Start registers a call and returns its id. resp is the caller's buffer.
func (t *Table) Start(ping bool, resp []byte) (uint64, *Pending, error) {
	p := pool.Get().(*Pending)
	p.Ping, p.Buf, p.Status, p.Msg, p.err = ping, resp[:0], verbs.StatusOK, "", nil
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended != nil {
		pool.Put(p)
		return 0, nil, t.ended
	}
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
			pool.Put(p)
			return resp, fmt.Errorf("verbs: call method %d: %w", method, ctx.Err())
		}
		<-p.done // a reader claimed it first; it finishes shortly
	}
	out, st, msg, err := p.Buf, p.Status, p.Msg, p.err
	p.Buf = nil
	pool.Put(p)
	if err != nil {
		return resp, err
	}
	if st != verbs.StatusOK {
		return resp, &verbs.CallError{Method: method, Status: st, Message: msg}
	}
	return out, nil
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

package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A group is one operation over several connections: the parts of a plan
// whose source (READ) or destination (WRITE) lies in several owners'
// segments, one ScatterOp per owner (planfmt.Splitter cuts a plan by its
// source extent), all in flight at once and ending together.

// GroupResult is the outcome of a completed group.
type GroupResult struct {
	// Parts holds each part's result, in the order the parts were given.
	Parts []Result
	// Bytes, Fragments and Spans sum the parts'.
	Bytes, Fragments, Spans uint64
	// SpanBytes sums the parts' SpanBytes span by span when every part has
	// the same number of completion spans (the parts planfmt.Splitter cuts
	// from one plan do: span j of the group is span j of the plan they came
	// from); otherwise it is nil and Parts[i].SpanBytes are the counts.
	SpanBytes []uint64
	// Total is the group's time from SubmitGroup to its last part's end;
	// the parts' own traces are in Parts.
	Total time.Duration
}

// GroupError is the error of a group that failed: at least one part failed,
// and the group failed whole. No part of a failed group is reported as
// done; the destination bytes the group names are undefined.
type GroupError struct {
	// Part is the first failed part, in the order the parts were given.
	Part int
	// Err is that part's error (an *OpError).
	Err error
	// Failed lists every part that failed, Part included, in order, and
	// Errs their errors (Errs[i] is part Failed[i]'s).
	Failed []int
	Errs   []error
}

func (e *GroupError) Error() string {
	return fmt.Sprintf("verbs: scatter group: part %d failed (failed parts: %v): %v", e.Part, e.Failed, e.Err)
}

// Unwrap returns the first failed part's error.
func (e *GroupError) Unwrap() error { return e.Err }

// Group is a running group of operations.
type Group struct {
	t0     time.Time
	cancel context.CancelFunc
	ops    []*Operation
	once   sync.Once
	res    GroupResult
	err    error
}

// SubmitGroup starts parts as one operation and returns without waiting:
// every part is checked and its plan normalized first, and if any is
// invalid, nothing starts and the error (an *InvalidOpError naming the
// part, or the plan's error) comes back at once. Then every part starts
// (each decides direct, gather or hybrid for itself, on its own
// connection) and runs beside the others. When a part fails, the others
// run to their end (a failure of one owner neither cancels nor fences
// the connections to the others, so a caller can retry just the failed
// parts, on replicas), and the group fails with a *GroupError listing
// every failed part. ctx bounds the whole group, as Submit's does one
// operation.
//
// Parts may share a connection. Their destinations (READ) must not
// overlap one another: the parts run at once, as the fragments of one
// plan would, and the engine does not compare different parts' plans.
func (e *Engine) SubmitGroup(ctx context.Context, parts []ScatterOp) (*Group, error) {
	return e.submitGroup(ctx, parts, false)
}

func (e *Engine) submitGroup(ctx context.Context, parts []ScatterOp, inline bool) (*Group, error) {
	t0 := time.Now()
	if len(parts) == 0 {
		return nil, &InvalidOpError{Field: "parts", Reason: "empty"}
	}
	gctx, cancel := context.WithCancel(ctx)
	ops := make([]*Operation, len(parts))
	for i := range parts {
		op, err := e.prepare(gctx, &parts[i])
		if err != nil {
			for _, o := range ops[:i] {
				o.discard()
			}
			cancel()
			var ie *InvalidOpError
			if errors.As(err, &ie) {
				return nil, &InvalidOpError{Field: fmt.Sprintf("parts[%d].%s", i, ie.Field), Reason: ie.Reason}
			}
			return nil, fmt.Errorf("verbs: scatter group: part %d: %w", i, err)
		}
		ops[i] = op
	}
	g := &Group{t0: t0, cancel: cancel, ops: ops}
	for i, op := range ops {
		// The last part of DoGroup runs a gather on the calling goroutine
		// (as Do does), once the others are on their way.
		op.start(inline && i == len(ops)-1)
	}
	return g, nil
}

// DoGroup runs parts as one operation (SubmitGroup) and waits for it; its
// last part runs a gather on the calling goroutine, as Do does.
func (e *Engine) DoGroup(ctx context.Context, parts []ScatterOp) (GroupResult, error) {
	g, err := e.submitGroup(ctx, parts, true)
	if err != nil {
		return GroupResult{}, err
	}
	return g.Wait(context.Background()) // ctx ends the group itself
}

// Wait waits for every part and returns the group's result: a failed group
// returns a *GroupError, with the result still describing the parts. If ctx
// ends first, Wait returns ctx.Err() and the group keeps running; a later
// Wait returns its result.
func (g *Group) Wait(ctx context.Context) (GroupResult, error) {
	if ctx.Done() == nil {
		g.once.Do(g.collect) // nothing can end the wait: no goroutine
		return g.res, g.err
	}
	done := make(chan struct{})
	go func() {
		g.once.Do(g.collect)
		close(done)
	}()
	select {
	case <-done:
		return g.res, g.err
	case <-ctx.Done():
		return GroupResult{}, ctx.Err()
	}
}

// collect waits for every part in turn (each is bounded by the group's
// context; none is cancelled for another's failure).
func (g *Group) collect() {
	n := len(g.ops)
	res := GroupResult{Parts: make([]Result, n)}
	errs := make([]error, n)
	first := -1
	for i, op := range g.ops {
		res.Parts[i], errs[i] = op.Wait(context.Background())
		g.ops[i] = nil
		if errs[i] != nil && first < 0 {
			first = i
		}
	}
	g.cancel()
	res.Total = time.Since(g.t0)
	spans := -1
	for i := range res.Parts {
		p := &res.Parts[i]
		res.Bytes += p.Bytes
		res.Fragments += p.Fragments
		res.Spans += p.Spans
		switch {
		case spans == -1:
			spans = len(p.SpanBytes)
		case spans != len(p.SpanBytes):
			spans = -2
		}
	}
	if spans >= 0 {
		res.SpanBytes = make([]uint64, spans)
		for i := range res.Parts {
			for j, b := range res.Parts[i].SpanBytes {
				res.SpanBytes[j] += b
			}
		}
	}
	g.res = res
	if first >= 0 {
		ge := &GroupError{Part: first, Err: errs[first]}
		for i, err := range errs {
			if err != nil {
				ge.Failed = append(ge.Failed, i)
				ge.Errs = append(ge.Errs, err)
			}
		}
		g.err = ge
	}
}

package calls

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
)

// Reuse bounds of a Jobs pool.
const (
	keepJobs = 16      // idle jobs kept
	keepReq  = 4 << 20 // request buffers larger than this are not kept
	respCap  = 4096    // response buffer of a new job
	keepResp = 1 << 20 // response buffers larger than this are not kept
)

// Job is one CALL on its way through a handler on the owner, reused
// across calls with its request and response buffers. Via is the
// backend's way back to the requester (the lane that read the CALL), if
// it needs one.
type Job[V any] struct {
	Via     V
	ID      uint64
	Method  uint16
	Handler verbs.Handler
	Req     []byte // the request, read into this job's buffer
	Resp    []byte // a buffer the handler may append its response to
}

// Jobs is a connection's pool of idle Jobs. The zero value is empty and
// ready to use. Keep, when set (before use), is the budget of buffer bytes
// that the pools of a whole segment may keep between calls: a job put back
// whose buffers do not fit goes back without them, so however many
// connections a peer opens, what their idle pools hold stays within it.
type Jobs[V any] struct {
	Keep *KeepBudget

	mu   sync.Mutex
	free []*Job[V]
}

// KeepBudget is the shared budget of Jobs pools' idle buffers.
type KeepBudget struct {
	Limit int64
	used  atomic.Int64
}

// Used returns the bytes kept now.
func (k *KeepBudget) Used() int64 { return k.used.Load() }

func (k *KeepBudget) take(n int64) bool {
	if k.used.Add(n) > k.Limit {
		k.used.Add(-n)
		return false
	}
	return true
}

// kept is what j's buffers count against a KeepBudget.
func kept[V any](j *Job[V]) int64 { return int64(cap(j.Req) + cap(j.Resp)) }

// Get returns an idle job (or a new one) with a request buffer of n bytes.
func (p *Jobs[V]) Get(n int) *Job[V] {
	p.mu.Lock()
	var j *Job[V]
	if k := len(p.free); k > 0 {
		j = p.free[k-1]
		p.free[k-1] = nil
		p.free = p.free[:k-1]
		if p.Keep != nil {
			p.Keep.used.Add(-kept(j))
		}
	}
	p.mu.Unlock()
	if j == nil {
		j = &Job[V]{Resp: make([]byte, 0, respCap)}
	}
	if cap(j.Req) < n {
		j.Req = make([]byte, n)
	}
	j.Req = j.Req[:n]
	return j
}

// Put keeps j for a later call (a bounded number of jobs, dropping
// oversized request buffers).
func (p *Jobs[V]) Put(j *Job[V]) {
	var zero V
	j.Via, j.Handler = zero, nil
	if cap(j.Req) > keepReq {
		j.Req = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) >= keepJobs {
		return
	}
	if p.Keep != nil && !p.Keep.take(kept(j)) {
		j.Req, j.Resp = nil, nil // the segment keeps enough: the job goes back bare
	}
	p.free = append(p.free, j)
}

// Drain empties the pool (its connection ended), giving its buffers back
// to the Keep budget.
func (p *Jobs[V]) Drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, j := range p.free {
		if p.Keep != nil {
			p.Keep.used.Add(-kept(j))
		}
		p.free[i] = nil
	}
	p.free = nil
}

// KeepResp makes resp, which a handler returned for j (and which has been
// copied out), j's response buffer for its next call when the handler
// grew it (within keepResp bytes). verbs.Handler's contract says a
// returned response is the transport's once the handler returns.
func KeepResp[V any](j *Job[V], resp []byte, err error) {
	if err == nil && cap(resp) > cap(j.Resp) && cap(resp) <= keepResp {
		j.Resp = resp[:0]
	}
}

// Reply returns the REPLY frame header and payload for a call whose
// handler returned resp and err: the response, or StatusHandler with the
// handler's error text (cut to verbs.MaxErrorMessage) or with a note
// that the response exceeds frame.MaxMessage.
func Reply(method uint16, id uint64, resp []byte, err error) (frame.Header, []byte) {
	r := frame.Header{Type: frame.TypeReply, Method: method, ID: id}
	payload := resp
	if err != nil {
		r.Status = verbs.StatusHandler
		payload = []byte(err.Error())
		payload = payload[:min(len(payload), verbs.MaxErrorMessage)]
	} else if len(payload) > frame.MaxMessage {
		r.Status = verbs.StatusHandler
		payload = fmt.Appendf(nil, "response of %d bytes exceeds %d", len(resp), frame.MaxMessage)
	}
	r.Len = uint32(len(payload))
	return r, payload
}

package tcp

import (
	"net"
	"sync"

	"github.com/scatterkit/scatterkit/verbs/internal/frame"
)

// Send-queue thresholds.
const (
	flushAt      = 256 << 10 // a lane reader submits its responses at least this often
	pendingLimit = 8 << 20   // a reader submitting responses waits while more is queued (backpressure)
	keepBuf      = 4 << 20   // batch buffers grown past this are dropped after use
	keepBatches  = 16        // recycled batches kept per lane
)

// seg is one piece of a batch: a range of the batch's buffer (headers and
// inline payloads) or an external slice (a payload sent straight from a
// region, which must not change until written).
type seg struct {
	ext    []byte
	lo, hi int
}

// batch is a run of whole frames filled by one producer without locks,
// then submitted to its lane's writer.
type batch struct {
	buf     []byte
	segs    []seg
	bytes   int
	reader  bool // filled by the lane reader; recycled to its own list
	checked bool // frames carry the checksum trailer (the lane's setting)
	// seals are the frames whose payload (by reference) is checksummed
	// when the batch is written, on the lane's writer: a Post of a large
	// WRITE does not checksum it on the posting goroutine (the owner's
	// gather pipeline, which has the next chunk to pack) under the queue's
	// lock, and the lanes checksum their batches in parallel.
	seals []seal
}

// seal is a frame at buf[at:] whose trailer awaits p's checksum.
type seal struct {
	at int
	p  []byte
}

// sealAll checksums the batch's deferred payloads into their trailers.
func (b *batch) sealAll() {
	for _, s := range b.seals {
		frame.SealChecked(b.buf[s.at:], frame.PayloadCRC(s.p))
	}
	clear(b.seals)
	b.seals = b.seals[:0]
}

func (b *batch) extend(lo int) {
	b.bytes += len(b.buf) - lo
	if n := len(b.segs); n > 0 && b.segs[n-1].ext == nil && b.segs[n-1].hi == lo {
		b.segs[n-1].hi = len(b.buf)
		return
	}
	b.segs = append(b.segs, seg{lo: lo, hi: len(b.buf)})
}

// header appends a frame without payload: its header and trailer (every
// frame on tcp is checked: see frame.TrailerSize).
func (b *batch) header(h *frame.Header) {
	lo := len(b.buf)
	if b.checked {
		b.buf = frame.AppendChecked(b.buf, h, 0)
	} else {
		b.buf = frame.Append(b.buf, h)
	}
	b.extend(lo)
}

// frame appends h, its trailer and payload p: by copy when p is at most
// inlineMax bytes, else by reference (p must not change until written).
func (b *batch) frame(h *frame.Header, p []byte, inlineMax int) {
	lo := len(b.buf)
	switch {
	case !b.checked:
		b.buf = frame.Append(b.buf, h)
	case len(p) > inlineMax:
		// By reference: checksummed when written (sealAll).
		b.buf = frame.AppendChecked(b.buf, h, 0)
		b.seals = append(b.seals, seal{at: lo, p: p})
	default:
		b.buf = frame.AppendChecked(b.buf, h, frame.PayloadCRC(p))
	}
	if len(p) <= inlineMax {
		b.buf = append(b.buf, p...)
		b.extend(lo)
		return
	}
	b.extend(lo)
	b.segs = append(b.segs, seg{ext: p})
	b.bytes += len(p)
}

// frameInline appends h, its trailer and a copy of p.
func (b *batch) frameInline(h *frame.Header, p []byte) { b.frame(h, p, len(p)) }

func (b *batch) reset() {
	clear(b.segs)
	clear(b.seals)
	b.buf, b.segs, b.seals, b.bytes = b.buf[:0], b.segs[:0], b.seals[:0], 0
}

// sendq hands batches from producers (Post, the lane's reader, handler
// replies, calls) to the lane's writer, which writes everything submitted
// so far with one writev (as few syscalls as the kernel's iovec limit
// allows). Frames never straddle batches, so batches of different
// producers may interleave.
type sendq struct {
	checked bool // the lane's frames carry checksum trailers (set before use)

	mu      sync.Mutex
	cond    sync.Cond
	ready   []*batch
	free    []*batch // recycled batches for Posts and replies
	rfree   []*batch // recycled batches for the lane reader, which keep their larger buffers
	pending int
	closed  bool
	writing bool // a writev is in progress (writer goroutine or a direct Post)

	// bufs is the writev argument, kept here so it does not escape to the
	// heap on every write; only the holder of writing touches it.
	bufs net.Buffers
}

// directPost makes Post write its batch on the posting goroutine when the
// lane's writer is idle, instead of waking the writer. Off by default:
// see BenchmarkReadSmall/direct for the measurement that decided it.
var directPost = false

func (q *sendq) init() { q.cond.L = &q.mu }

// getReader returns an empty batch for the lane reader.
func (q *sendq) getReader() *batch {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := len(q.rfree); n > 0 {
		b := q.rfree[n-1]
		q.rfree = q.rfree[:n-1]
		return b
	}
	return &batch{reader: true, checked: q.checked}
}

// get returns an empty batch.
func (q *sendq) get() *batch {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.getLocked()
}

func (q *sendq) getLocked() *batch {
	if n := len(q.free); n > 0 {
		b := q.free[n-1]
		q.free = q.free[:n-1]
		return b
	}
	return &batch{checked: q.checked}
}

// tailLocked returns the batch to append frames to under q.mu: the last
// one still waiting for the writer, or a new one queued behind it. Posts
// and replies coalesce this way, so however far the writer falls behind,
// a lane holds a few batches, not one per Post.
func (q *sendq) tailLocked() *batch {
	if n := len(q.ready); n > 0 && cap(q.ready[n-1].buf) <= keepBuf {
		return q.ready[n-1]
	}
	b := q.getLocked()
	q.ready = append(q.ready, b)
	return b
}

// appendFrames lets fill append whole frames to the lane's tail batch and
// wakes the writer. On a closed queue nothing is appended.
func (q *sendq) appendFrames(fill func(b *batch)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	b := q.tailLocked()
	before := b.bytes
	fill(b)
	q.pending += b.bytes - before
	if b.bytes == 0 { // nothing appended to a new batch
		q.ready = q.ready[:len(q.ready)-1]
		q.recycleLocked(b)
		return
	}
	q.cond.Broadcast()
}

// submit queues b for writing. With wait set it first blocks while more
// than pendingLimit bytes are queued. On a closed queue b is dropped.
func (q *sendq) submit(b *batch, wait bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for wait && q.pending > pendingLimit && !q.closed {
		q.cond.Wait()
	}
	if q.closed || b.bytes == 0 {
		q.recycleLocked(b)
		return
	}
	q.ready = append(q.ready, b)
	q.pending += b.bytes
	q.cond.Broadcast()
}

func (q *sendq) recycleLocked(b *batch) {
	b.reset()
	if cap(b.buf) > keepBuf {
		return
	}
	if b.reader {
		if len(q.rfree) < keepBatches {
			q.rfree = append(q.rfree, b)
		}
	} else if len(q.free) < keepBatches {
		q.free = append(q.free, b)
	}
}

// submitDirect is submit for Post with directPost: when no write is in
// progress it writes everything queued, and b, on the calling goroutine.
func (q *sendq) submitDirect(b *batch, nc net.Conn) error {
	q.mu.Lock()
	if q.writing || q.closed {
		q.mu.Unlock()
		q.submit(b, false)
		return nil
	}
	q.ready = append(q.ready, b)
	q.pending += b.bytes
	taken := append([]*batch(nil), q.ready...)
	clear(q.ready)
	q.ready, q.pending, q.writing = q.ready[:0], 0, true
	q.mu.Unlock()
	_, err := q.write(nc, taken, nil)
	q.mu.Lock()
	q.writing = false
	if len(q.ready) > 0 {
		q.cond.Broadcast() // the writer takes what came meanwhile
	}
	q.mu.Unlock()
	return err
}

// write writes batches with writev and recycles them; it returns iov
// (emptied) for reuse.
func (q *sendq) write(nc net.Conn, taken []*batch, iov [][]byte) ([][]byte, error) {
	for _, b := range taken {
		b.sealAll()
		for _, s := range b.segs {
			if s.ext != nil {
				iov = append(iov, s.ext)
			} else {
				iov = append(iov, b.buf[s.lo:s.hi])
			}
		}
	}
	q.bufs = iov
	frame.RaceRelease()
	_, err := q.bufs.WriteTo(nc)
	q.bufs = nil
	clear(iov)
	q.mu.Lock()
	for _, b := range taken {
		q.recycleLocked(b)
	}
	q.mu.Unlock()
	clear(taken)
	return iov[:0], err
}

// close drops queued output and stops the writer.
func (q *sendq) close() {
	q.mu.Lock()
	q.closed = true
	for _, b := range q.ready {
		b.reset()
	}
	clear(q.ready)
	q.ready, q.pending = q.ready[:0], 0
	q.cond.Broadcast()
	q.mu.Unlock()
}

// writeLoop is the lane's writer goroutine.
func (q *sendq) writeLoop(nc net.Conn) error {
	var (
		taken []*batch
		iov   [][]byte
	)
	for {
		q.mu.Lock()
		for (len(q.ready) == 0 || q.writing) && !q.closed {
			q.cond.Wait()
		}
		if q.closed {
			q.mu.Unlock()
			return nil
		}
		taken = append(taken[:0], q.ready...)
		clear(q.ready)
		q.ready, q.pending, q.writing = q.ready[:0], 0, true
		q.cond.Broadcast() // room for waiting submitters
		q.mu.Unlock()
		var err error
		iov, err = q.write(nc, taken, iov)
		q.mu.Lock()
		q.writing = false
		q.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

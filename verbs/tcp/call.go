package tcp

import (
	"context"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
)

// roundTrip sends a CALL (or PING when ping is set) and waits for the
// answer.
func (s *session) roundTrip(ctx context.Context, ping bool, method uint16, req, resp []byte) ([]byte, error) {
	if len(req) > frame.MaxMessage {
		return resp, fmt.Errorf("tcp: call request of %d bytes, at most %d: %w", len(req), frame.MaxMessage, verbs.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return resp, fmt.Errorf("tcp: call method %d: %w", method, err)
	}
	id, pc, err := s.calls.Start(ping, resp)
	if err != nil {
		return resp, err
	}
	lanes := s.postLanes()
	if len(lanes) > 0 {
		h := frame.Header{Type: frame.TypeCall, Method: method, ID: id, Len: uint32(len(req))}
		if ping {
			h = frame.Header{Type: frame.TypePing, ID: id}
		}
		lanes[id%uint64(len(lanes))].sq.appendFrames(func(b *batch) {
			b.frameInline(&h, req)
		})
	}
	// If the session ended meanwhile, finalize fails the call.
	return s.calls.Wait(ctx, id, pc, method, resp)
}

// onReply delivers a REPLY or PONG to its waiting call.
func (l *lane) onReply(h *frame.Header) error {
	if h.Len > uint32(l.rd.Buffered()) {
		l.idle()
	}
	return l.s.calls.Answer(l.rd, h, l.s.peer, closedErr)
}

// ping is one PING/PONG round trip.
func (s *session) ping(ctx context.Context) error {
	_, err := s.roundTrip(ctx, true, 0, nil, nil)
	return err
}

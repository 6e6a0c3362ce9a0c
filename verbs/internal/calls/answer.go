package calls

import (
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
)

// Answer delivers a REPLY or PONG (h, its body next in rd) to the call
// waiting for it: the body becomes the response on StatusOK, the error
// text (at most verbs.MaxErrorMessage bytes kept) otherwise. An answer
// nobody waits for any more is drained. A PONG for a call or a REPLY for
// a ping is a protocol error blamed on peer. On error the call is failed
// with ended(err), which wraps the error that ends the connection, and
// the error is returned so the reader stops.
func (t *Table) Answer(rd *frame.Reader, h *frame.Header, peer string, ended func(error) error) error {
	pc := t.Claim(h.ID)
	if pc == nil { // the caller gave up
		if err := rd.Discard(uint64(h.Len)); err != nil {
			return err
		}
		return rd.Verify()
	}
	if (h.Type == frame.TypePong) != pc.Ping {
		err := &verbs.ProtocolError{Peer: peer, Stage: "frame", Reason: h.Type.String() + " answers the wrong kind of request"}
		pc.Finish(ended(err))
		return err
	}
	var err error
	if h.Status == verbs.StatusOK {
		n := int(h.Len)
		if cap(pc.Buf) < n {
			pc.Buf = make([]byte, n)
		}
		pc.Buf = pc.Buf[:n]
		err = rd.ReadFull(pc.Buf)
	} else {
		keep := min(h.Len, verbs.MaxErrorMessage)
		msg := make([]byte, keep)
		if err = rd.ReadFull(msg); err == nil {
			err = rd.Discard(uint64(h.Len - keep))
		}
		pc.Msg = string(msg)
	}
	pc.Status = h.Status
	if err == nil {
		err = rd.Verify()
	}
	if err != nil {
		pc.Finish(ended(err))
		return err
	}
	pc.Finish(nil)
	return nil
}

package handshake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
)

// Err attributes err, which ended a handshake with peer, to that peer: a
// *verbs.ProtocolError gets Peer and Stage "handshake" set (in place);
// any other error is wrapped as "<backend>: handshake with <peer>: ...".
func Err(backend, peer string, err error) error {
	var pe *verbs.ProtocolError
	if errors.As(err, &pe) {
		pe.Peer, pe.Stage = peer, "handshake"
		return pe
	}
	return fmt.Errorf("%s: handshake with %s: %w", backend, peer, err)
}

// CtxErr prefers the context's error when the context ended the
// handshake: the socket deadline, set from the context's, may fire a
// moment before the context reports it, so an expired deadline counts as
// context.DeadlineExceeded. The original error stays in the text.
func CtxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) && errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return err
}

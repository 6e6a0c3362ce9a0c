package handshake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

func TestErr(t *testing.T) {
	pe := &verbs.ProtocolError{Stage: "frame", Reason: "bad magic"}
	err := Err("tcp", "10.0.0.1:7", fmt.Errorf("read: %w", pe))
	require.Same(t, pe, err, "a protocol error is returned itself")
	require.Equal(t, "10.0.0.1:7", pe.Peer)
	require.Equal(t, "handshake", pe.Stage)
	require.ErrorIs(t, err, verbs.ErrProtocol)

	boom := errors.New("boom")
	err = Err("shm", "unix:@x", boom)
	require.ErrorIs(t, err, boom)
	require.EqualError(t, err, "shm: handshake with unix:@x: boom")
}

func TestCtxErr(t *testing.T) {
	boom := errors.New("boom")
	timeout := fmt.Errorf("read: %w", os.ErrDeadlineExceeded)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want error
		same bool
	}{
		{"live", context.Background(), boom, boom, true},
		{"live-timeout", context.Background(), timeout, os.ErrDeadlineExceeded, true},
		{"canceled", canceled, boom, context.Canceled, false},
		{"expired", expired, timeout, context.DeadlineExceeded, false},
		{"socket-deadline-first", deadlineOnly{time.Now().Add(-time.Millisecond)}, timeout, context.DeadlineExceeded, false},
		{"deadline-ahead", deadlineOnly{time.Now().Add(time.Hour)}, timeout, os.ErrDeadlineExceeded, true},
		{"deadline-passed-other-error", deadlineOnly{time.Now().Add(-time.Millisecond)}, boom, boom, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CtxErr(tc.ctx, tc.err)
			require.ErrorIs(t, got, tc.want)
			if tc.same {
				require.Equal(t, tc.err, got)
			} else {
				require.Contains(t, got.Error(), tc.err.Error(), "the original error stays in the text")
			}
		})
	}
}

// deadlineOnly is a context whose deadline has passed but which has not
// reported it yet (Err is nil), as when the socket deadline fires first.
type deadlineOnly struct{ d time.Time }

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }
func (deadlineOnly) Done() <-chan struct{}         { return nil }
func (deadlineOnly) Err() error                    { return nil }
func (deadlineOnly) Value(any) any                 { return nil }

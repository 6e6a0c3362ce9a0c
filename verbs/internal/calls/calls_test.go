package calls

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

func TestAnswer(t *testing.T) {
	tab := NewTable()
	buf := make([]byte, 0, 16)
	id, p, err := tab.Start(false, buf)
	require.NoError(t, err)
	go func() {
		q := tab.Claim(id)
		q.Buf = append(q.Buf, "pong"...)
		q.Finish(nil)
	}()
	out, err := tab.Wait(context.Background(), id, p, 3, buf)
	require.NoError(t, err)
	require.Equal(t, "pong", string(out))
	require.Same(t, &buf[:1][0], &out[0], "the answer went into the caller's buffer")
	require.Nil(t, tab.Claim(id), "claimed twice")
}

func TestFailedAnswer(t *testing.T) {
	tab := NewTable()
	id, p, err := tab.Start(false, nil)
	require.NoError(t, err)
	q := tab.Claim(id)
	q.Status, q.Msg = verbs.StatusHandler, "no such row"
	q.Finish(nil)
	_, err = tab.Wait(context.Background(), id, p, 9, nil)
	var ce *verbs.CallError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint16(9), ce.Method)
	require.Equal(t, "no such row", ce.Message)
	require.ErrorIs(t, err, verbs.ErrHandler)
}

func TestAbandon(t *testing.T) {
	tab := NewTable()
	id, p, err := tab.Start(true, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err = tab.Wait(ctx, id, p, 0, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Nil(t, tab.Claim(id), "an abandoned call is gone")
}

func TestEnd(t *testing.T) {
	tab := NewTable()
	id, p, err := tab.Start(false, nil)
	require.NoError(t, err)
	gone := errors.New("gone")
	tab.End(gone)
	_, err = tab.Wait(context.Background(), id, p, 1, nil)
	require.ErrorIs(t, err, gone)
	_, _, err = tab.Start(false, nil)
	require.ErrorIs(t, err, gone)
}

func TestTableAllocs(t *testing.T) {
	tab := NewTable()
	buf := make([]byte, 0, 16)
	ctx := context.Background()
	run := func() {
		id, p, err := tab.Start(false, buf)
		if err != nil {
			t.Fatal(err)
		}
		q := tab.Claim(id)
		q.Buf = append(q.Buf, "pong"...)
		q.Finish(nil)
		out, err := tab.Wait(ctx, id, p, 3, buf)
		if err != nil || string(out) != "pong" {
			t.Fatalf("%q, %v", out, err)
		}
	}
	run()
	require.Zero(t, testing.AllocsPerRun(100, run))
}

package probe

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/cq"
)

// instant completes every posted request at once, failing the ones that
// read from bad.
type instant struct {
	q     *cq.Queue
	bad   verbs.Key
	posts int
}

func (f *instant) Post(wrs []verbs.WorkRequest) (int, error) {
	n, err := f.q.Reserve(len(wrs))
	if n == 0 {
		return 0, err
	}
	f.posts++
	cs := make([]verbs.Completion, n)
	for i, wr := range wrs[:n] {
		cs[i] = verbs.Completion{ID: wr.ID}
		if wr.RemoteKey == f.bad {
			cs[i].Status = verbs.StatusBadKey
			cs[i].Err = &verbs.RemoteError{ID: wr.ID, Status: verbs.StatusBadKey}
		}
	}
	f.q.Push(cs)
	return n, nil
}

func (f *instant) Wait(ctx context.Context, out []verbs.Completion, min int) (int, error) {
	return f.q.Wait(ctx, out, min)
}

func TestMeasure(t *testing.T) {
	q := &instant{q: cq.New(100), bad: 99}
	pings := 0
	tg := Target{Queue: q, Ping: func(context.Context) error { pings++; return nil }, LocalKey: 1, RemoteKey: 2, RemoteLen: Bulk}
	lp, err := Measure(context.Background(), tg, verbs.LinkParams{QueueDepth: 100})
	require.NoError(t, err)
	require.Equal(t, Pings, pings)
	require.Greater(t, lp.Bandwidth, 0.0)
	require.Greater(t, lp.PostRate, 0.0)
	require.Greater(t, lp.RTT, time.Duration(0))
	require.Equal(t, 100, lp.QueueDepth)
	require.Greater(t, q.posts, Small/100, "the small batch is posted as the depth allows")

	// Set fields are kept and not measured.
	pings = 0
	lp, err = Measure(context.Background(), tg, verbs.LinkParams{RTT: time.Second})
	require.NoError(t, err)
	require.Zero(t, pings)
	require.Equal(t, time.Second, lp.RTT)
	full := verbs.LinkParams{Bandwidth: 1, PostRate: 1, RTT: 1}
	lp, err = Measure(context.Background(), Target{}, full)
	require.NoError(t, err)
	require.Equal(t, full, lp)
}

func TestMeasureErrors(t *testing.T) {
	q := &instant{q: cq.New(100), bad: 2}
	tg := Target{Queue: q, Ping: func(context.Context) error { return nil }, LocalKey: 1, RemoteKey: 2, RemoteLen: Bulk}
	_, err := Measure(context.Background(), tg, verbs.LinkParams{RTT: 1})
	require.ErrorIs(t, err, verbs.ErrBadKey)
	tg.RemoteLen = Bulk - 1
	_, err = Measure(context.Background(), tg, verbs.LinkParams{})
	require.ErrorIs(t, err, verbs.ErrProtocol)
	boom := errors.New("boom")
	tg.RemoteLen = Bulk
	tg.Ping = func(context.Context) error { return boom }
	_, err = Measure(context.Background(), tg, verbs.LinkParams{})
	require.ErrorIs(t, err, boom)
}

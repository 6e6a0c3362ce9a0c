package linkprobe

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

func TestPattern(t *testing.T) {
	mem := make([]byte, 1000)
	Pattern(mem)
	distinct := map[byte]bool{}
	for i, b := range mem {
		require.Equal(t, byte(i*131+7), b)
		distinct[b] = true
	}
	require.Len(t, distinct, 256, "every byte value appears")
}

// registrar counts live scratch regions.
type registrar struct {
	live, total int
	fail        error
}

func (r *registrar) Register(buf []byte, access verbs.Access) (*verbs.Region, error) {
	if r.fail != nil {
		return nil, r.fail
	}
	reg, err := verbs.NewRegion(buf, access)
	if err == nil {
		r.live++
		r.total++
	}
	return reg, err
}

func (r *registrar) Deregister(*verbs.Region) error { r.live--; return nil }

func TestConnect(t *testing.T) {
	q := &instant{q: cq.New(100), bad: 99}
	pings := 0
	tg := Target{Queue: q, Ping: func(context.Context) error { pings++; return nil }, RemoteKey: 2, RemoteLen: Bulk}
	var reg registrar
	lp, err := Connect(context.Background(), verbs.ConnectOptions{QueueDepth: 100, Link: verbs.LinkParams{RTT: time.Second}}, &reg, tg)
	require.NoError(t, err)
	require.Equal(t, 100, lp.QueueDepth, "the connection's depth, not the option's link")
	require.Equal(t, time.Second, lp.RTT, "given fields are kept")
	require.Zero(t, pings)
	require.Greater(t, lp.Bandwidth, 0.0)
	require.Greater(t, lp.PostRate, 0.0)
	require.Equal(t, 1, reg.total)
	require.Zero(t, reg.live, "the scratch region is deregistered")

	full := verbs.LinkParams{Bandwidth: 1, PostRate: 2, RTT: 3, QueueDepth: 9}
	lp, err = Connect(context.Background(), verbs.ConnectOptions{QueueDepth: 50, Link: full}, &reg, Target{})
	require.NoError(t, err)
	want := full
	want.QueueDepth = 50
	require.Equal(t, want, lp)
	require.Equal(t, 1, reg.total, "a complete link registers nothing")

	boom := errors.New("boom")
	_, err = Connect(context.Background(), verbs.ConnectOptions{QueueDepth: 1}, &registrar{fail: boom}, tg)
	require.ErrorIs(t, err, boom)
}

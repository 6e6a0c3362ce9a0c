package owner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/gather"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs/faultproxy"
)

// gatherCmd encodes a READ gather of n random 264-byte rows of the data
// region into the requester's exposed region.
func gatherCmd(t *testing.T, o *Owner, r *requester, n int) []byte {
	t.Helper()
	rows := uint64(len(o.Data())) / 264
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64((uint64(i) * 7919) % rows)
	}
	data := region(t, r.conn, DefaultExport)
	dst := uint64(n) * 264
	c := planfmt.Command{Dir: planfmt.Read, Src: planfmt.Window{Key: uint64(data.Key), Len: data.Len},
		Dst: planfmt.Window{Key: uint64(r.local.Key()), Len: dst}, Chunk: 64 << 10, Pipeline: 8,
		Plan: planfmt.Plan{Form: planfmt.FormRows, SrcExtent: data.Len, DstExtent: dst,
			Rows: planfmt.Rows{RowSize: 264, TableRows: rows, IDs64: ids}}}
	b, err := planfmt.AppendCommand(nil, &c)
	require.NoError(t, err)
	return b
}

// stuckGathers connects through a proxy, stops everything the owner sends
// from reaching the requester (so its WRITEs are never acknowledged) and
// starts n gather READs there; it returns once the owner holds staging
// for them. The calls end when ctx does.
func stuckGathers(t *testing.T, ctx context.Context, o *Owner, n int) (wait func()) {
	t.Helper()
	px, err := faultproxy.New(o.Info().Addr, faultproxy.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, px.Close()) })
	r := connect(t, TransportTCP, px.Addr(), 64<<20)
	cmd := gatherCmd(t, o, r, 100_000)
	require.NoError(t, px.Set(faultproxy.Fault{Kind: faultproxy.Stall, Dir: faultproxy.Down}))
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := r.conn.Call(ctx, gather.MethodGather, cmd, nil)
			require.Error(t, err, "a gather whose WRITEs never arrive succeeded")
		})
	}
	require.Eventually(t, func() bool { return o.Stats().Leases > 0 }, 10*time.Second, time.Millisecond,
		"the stuck gathers never took staging")
	return wg.Wait
}

// TestStuckRequesterReleasesStaging: 16 gather READs whose requester
// never acknowledges the owner's WRITEs hold staging only until the
// owner's progress timeout evicts that requester; then every lease is
// back and another requester's gather runs (not falling back), while the
// owner keeps serving.
func TestStuckRequesterReleasesStaging(t *testing.T) {
	o := startOwner(t, Config{Transport: TransportTCP, Size: 64 << 20, StagingBytes: 4 << 20, ProgressTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wait := stuckGathers(t, ctx, o, 16)
	require.Eventually(t, func() bool { return o.Stats().Leases == 0 }, 10*time.Second, 5*time.Millisecond,
		"staging still leased after the progress timeout")
	st := o.svc.Stats()
	require.GreaterOrEqual(t, st.Stalled, uint64(1))

	good := connect(t, TransportTCP, o.Info().Addr, 64<<20)
	_, err := good.conn.Call(testContext(t), gather.MethodGather, gatherCmd(t, o, good, 20_000), nil)
	require.NoError(t, err, "another requester's gather after the stuck one was evicted")
	cancel()
	wait()
}

// TestCloseWithStuckRequester: an owner whose requester is stuck mid-gather
// (and whose progress timeout is far away) still shuts down within 5 s,
// with no staging leaked: Close ends the connections before it waits for
// the gather service.
func TestCloseWithStuckRequester(t *testing.T) {
	o, err := Start(testContext(t), Config{Transport: TransportTCP, Size: 64 << 20, StagingBytes: 4 << 20, ProgressTimeout: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wait := stuckGathers(t, ctx, o, 4)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		rep, err := o.Close()
		if err == nil && rep.LeakedLeases != 0 {
			err = ErrLeak
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting 10 s after it was called")
	}
	require.Less(t, time.Since(start), 5*time.Second)
	cancel()
	wait()
}

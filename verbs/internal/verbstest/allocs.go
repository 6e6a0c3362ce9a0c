package verbstest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

// testAllocs checks that a steady stream of small READ batches allocates
// nothing anywhere (testing.AllocsPerRun counts every goroutine: the
// poster, and the backend's readers and writers on both sides).
func testAllocs(t *testing.T, b Backend) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r := NewRand(t)
	p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"t", 1 << 20, verbs.AccessRemoteRead}}, Connect: verbs.ConnectOptions{Lanes: 2, QueueDepth: 128}})
	local, err := p.Req.Alloc(512*264, verbs.AccessLocal)
	require.NoError(t, err)
	key := RemoteKey(t, p.Conn, "t")
	wrs := make([]verbs.WorkRequest, 512)
	for i := range wrs {
		wrs[i] = verbs.WorkRequest{ID: uint64(i), Op: verbs.OpRead, Len: 264, LocalKey: local.Key(),
			LocalOff: uint64(i) * 264, RemoteKey: key, RemoteOff: uint64(r.IntN(1<<20/264)) * 264}
	}
	cs := make([]verbs.Completion, len(wrs))
	ctx := Context(t)
	run := func() {
		if _, err := Drive(ctx, p.Conn, wrs, cs); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 { // warm: batch buffers, waiter channels, socket buffers
		run()
	}
	allocs := testing.AllocsPerRun(50, run)
	t.Logf("%s: %.2f allocations per 512-READ operation", b.Name, allocs)
	require.Zero(t, allocs)
}

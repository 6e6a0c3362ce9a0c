package tcp_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/faultproxy"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// TestAdmit: the owner's policy sees the peer's address (and no
// credentials on tcp); a refused peer's Connect fails with
// ErrNotAdmitted; a peer admitted read-only sees the writable export as
// read-only and its WRITEs to it fail with StatusAccess while its READs
// work, and a fully admitted peer on the same segment still writes.
func TestAdmit(t *testing.T) {
	r := verbstest.NewRand(t)
	owner := tcp.New(tcp.Config{})
	defer owner.Close()
	req := tcp.New(tcp.Config{})
	defer req.Close()
	rw, err := owner.Alloc(8192, verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	verbstest.Fill(r, rw.Bytes())
	var seen []verbs.PeerIdentity
	seg, err := owner.Listen("127.0.0.1:0", []verbs.Export{{Name: "rw", Region: rw}}, verbs.ListenOptions{
		Admit: func(id verbs.PeerIdentity) (verbs.Access, error) {
			seen = append(seen, id)
			if len(seen) == 1 {
				return 0, errors.New("first peer refused")
			}
			if len(seen) == 2 {
				return verbs.AccessRemoteRead, nil
			}
			return verbs.AccessRemoteRead | verbs.AccessRemoteWrite, nil
		},
	})
	require.NoError(t, err)
	defer seg.Close()

	_, err = req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{Lanes: 2})
	require.ErrorIs(t, err, verbs.ErrNotAdmitted)
	require.Equal(t, "tcp", seen[0].Transport)
	require.NotEmpty(t, seen[0].Addr)
	require.Nil(t, seen[0].Cred)

	local, err := req.Alloc(8192, verbs.AccessLocal)
	require.NoError(t, err)
	verbstest.Fill(r, local.Bytes())
	ro, err := req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{Lanes: 2})
	require.NoError(t, err)
	defer ro.Close()
	ri, ok := verbs.FindRegion(ro.Remote(), "rw")
	require.True(t, ok)
	require.Equal(t, verbs.AccessRemoteRead, ri.Access)
	before := append([]byte(nil), rw.Bytes()...)
	cs := make([]verbs.Completion, 2)
	_, err = verbstest.Drive(verbstest.Context(t), ro, []verbs.WorkRequest{
		{ID: 1, Op: verbs.OpWrite, Len: 4096, LocalKey: local.Key(), RemoteKey: ri.Key},
		{ID: 2, Op: verbs.OpRead, Len: 4096, LocalKey: local.Key(), LocalOff: 4096, RemoteKey: ri.Key, RemoteOff: 4096},
	}, cs)
	require.NoError(t, err)
	for _, c := range cs {
		if c.ID == 1 {
			require.ErrorIs(t, c.Err, verbs.ErrAccess)
		} else {
			require.NoError(t, c.Err)
		}
	}
	require.Equal(t, before, rw.Bytes(), "a read-only peer wrote")
	require.Equal(t, rw.Bytes()[4096:], local.Bytes()[4096:])

	full, err := req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{})
	require.NoError(t, err)
	defer full.Close()
	ri, _ = verbs.FindRegion(full.Remote(), "rw")
	require.Equal(t, verbs.AccessRemoteRead|verbs.AccessRemoteWrite, ri.Access)
	_, err = verbstest.Drive(verbstest.Context(t), full, []verbs.WorkRequest{
		{ID: 3, Op: verbs.OpWrite, Len: 4096, LocalKey: local.Key(), RemoteKey: ri.Key}}, cs[:1])
	require.NoError(t, err)
	verbstest.RequireOK(t, cs[:1])
	require.Equal(t, local.Bytes()[:4096], rw.Bytes()[:4096])
}

// TestMaxLanes: a requester asking more lanes than the segment allows is
// refused with the reason; one within the limit connects.
func TestMaxLanes(t *testing.T) {
	owner := tcp.New(tcp.Config{})
	defer owner.Close()
	req := tcp.New(tcp.Config{})
	defer req.Close()
	reg, err := owner.Alloc(4096, verbs.AccessRemoteRead)
	require.NoError(t, err)
	seg, err := owner.Listen("127.0.0.1:0", []verbs.Export{{Name: "a", Region: reg}}, verbs.ListenOptions{MaxLanes: 2})
	require.NoError(t, err)
	defer seg.Close()
	_, err = req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{Lanes: 3})
	require.ErrorIs(t, err, verbs.ErrNotAdmitted)
	require.ErrorContains(t, err, "asks 3 lanes, at most 2")
	c, err := req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{Lanes: 2})
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// TestChecksumsNegotiated: frames go unchecked only when both sides set
// NoChecksums; then a damaged payload is not noticed (what the option
// gives up), while with checksums on either side the same damage ends the
// connection.
func TestChecksumsNegotiated(t *testing.T) {
	for _, tc := range []struct {
		name           string
		owner, req     bool
		damageDetected bool
	}{
		{"both-unchecked", true, true, false},
		{"owner-insists", false, true, true},
		{"requester-insists", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			owner := tcp.New(tcp.Config{NoChecksums: tc.owner})
			defer owner.Close()
			req := tcp.New(tcp.Config{NoChecksums: tc.req})
			defer req.Close()
			reg, err := owner.Alloc(1<<20, verbs.AccessRemoteRead)
			require.NoError(t, err)
			verbstest.Fill(r, reg.Bytes())
			seg, err := owner.Listen("127.0.0.1:0", []verbs.Export{{Name: "a", Region: reg}}, verbs.ListenOptions{})
			require.NoError(t, err)
			defer seg.Close()
			px, err := faultproxy.New(seg.Addr(), faultproxy.Options{})
			require.NoError(t, err)
			defer px.Close()
			c, err := req.Connect(verbstest.Context(t), px.Addr(), verbs.ConnectOptions{Lanes: 1})
			require.NoError(t, err)
			defer c.Close()
			local, err := req.Alloc(1<<20, verbs.AccessLocal)
			require.NoError(t, err)
			// Flip one byte of the DATA payload answering a 1 MiB READ:
			// well past its header and trailer.
			require.NoError(t, px.Set(faultproxy.Fault{Kind: faultproxy.Corrupt, Dir: faultproxy.Down, After: 4096}))
			cs := make([]verbs.Completion, 1)
			_, err = verbstest.Drive(verbstest.Context(t), c, []verbs.WorkRequest{{ID: 1, Op: verbs.OpRead, Len: 1 << 20,
				LocalKey: local.Key(), RemoteKey: verbstest.RemoteKey(t, c, "a")}}, cs)
			if tc.damageDetected {
				if err == nil {
					err = cs[0].Err
				}
				require.ErrorIs(t, err, verbs.ErrClosed, "damaged DATA completed")
				return
			}
			require.NoError(t, err)
			require.NoError(t, cs[0].Err)
			require.NotEqual(t, reg.Bytes(), local.Bytes(), "the damage went unnoticed, as NoChecksums allows")
		})
	}
}

// TestSegmentLanes: the lanes of all connections together are bounded; a
// requester whose lanes would pass the bound is refused with the reason,
// and a closed connection gives its lanes back.
func TestSegmentLanes(t *testing.T) {
	owner := tcp.New(tcp.Config{})
	defer owner.Close()
	req := tcp.New(tcp.Config{})
	defer req.Close()
	reg, err := owner.Alloc(4096, verbs.AccessRemoteRead)
	require.NoError(t, err)
	seg, err := owner.Listen("127.0.0.1:0", []verbs.Export{{Name: "a", Region: reg}}, verbs.ListenOptions{MaxSegmentLanes: 4})
	require.NoError(t, err)
	defer seg.Close()
	a, err := req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{Lanes: 2})
	require.NoError(t, err)
	b, err := req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{Lanes: 2})
	require.NoError(t, err)
	defer b.Close()
	_, err = req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{Lanes: 1})
	require.ErrorIs(t, err, verbs.ErrNotAdmitted)
	require.ErrorContains(t, err, "serves 4 of at most 4")
	require.NoError(t, a.Close())
	require.Eventually(t, func() bool {
		c, err := req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{Lanes: 2})
		if err != nil {
			return false
		}
		return c.Close() == nil
	}, 10*time.Second, 5*time.Millisecond, "the closed connection's lanes never came back")
}

// TestHandshakesBounded: connections that never say HELLO hold at most
// MaxHandshakes handshakes; the next requester waits (it is not accepted
// meanwhile) and gets in once one of them times out; a segment Close ends
// the handshakes in progress at once, not at their timeout.
func TestHandshakesBounded(t *testing.T) {
	owner := tcp.New(tcp.Config{HandshakeTimeout: 500 * time.Millisecond})
	defer owner.Close()
	req := tcp.New(tcp.Config{})
	defer req.Close()
	reg, err := owner.Alloc(4096, verbs.AccessRemoteRead)
	require.NoError(t, err)
	seg, err := owner.Listen("127.0.0.1:0", []verbs.Export{{Name: "a", Region: reg}}, verbs.ListenOptions{MaxHandshakes: 2})
	require.NoError(t, err)
	silent := func() net.Conn {
		nc, err := net.Dial("tcp", seg.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	silent()
	silent()
	time.Sleep(50 * time.Millisecond) // both accepted and waiting for HELLO
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	_, err = req.Connect(ctx, seg.Addr(), verbs.ConnectOptions{Lanes: 1})
	cancel()
	require.Error(t, err, "a third handshake ran while two were in progress")
	c, err := req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{Lanes: 1})
	require.NoError(t, err, "admitted once a silent handshake timed out")
	require.NoError(t, c.Close())

	// Close with silent handshakes in progress.
	slow := tcp.New(tcp.Config{HandshakeTimeout: time.Hour})
	defer slow.Close()
	reg2, err := slow.Alloc(4096, verbs.AccessRemoteRead)
	require.NoError(t, err)
	seg2, err := slow.Listen("127.0.0.1:0", []verbs.Export{{Name: "a", Region: reg2}}, verbs.ListenOptions{MaxHandshakes: 2})
	require.NoError(t, err)
	for range 3 {
		nc, err := net.Dial("tcp", seg2.Addr())
		require.NoError(t, err)
		defer nc.Close()
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	require.NoError(t, seg2.Close())
	require.Less(t, time.Since(start), 5*time.Second, "Close waited for handshakes that never end")
	require.NoError(t, seg.Close())
}

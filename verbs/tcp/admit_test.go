package tcp_test

import (
	"errors"
	"testing"

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

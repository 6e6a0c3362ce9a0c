package verbs_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

func TestUIDPolicy(t *testing.T) {
	p := verbs.UIDPolicy{Write: []uint32{0, 1000}, Read: []uint32{65534}}
	const rw = verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	for _, tc := range []struct {
		name string
		cred *verbs.PeerCred
		want verbs.Access
	}{
		{"writer", &verbs.PeerCred{UID: 1000}, rw},
		{"reader", &verbs.PeerCred{UID: 65534}, verbs.AccessRemoteRead},
		{"stranger", &verbs.PeerCred{UID: 7}, 0},
		{"no-credentials", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := verbs.Admit(p.Admit, verbs.PeerIdentity{Transport: "shm", Addr: "@x", Cred: tc.cred})
			if tc.want == 0 {
				require.ErrorIs(t, err, verbs.ErrNotAdmitted)
				var ae *verbs.AdmitError
				require.ErrorAs(t, err, &ae)
				require.Equal(t, "@x", ae.Peer.Addr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestNetPolicy(t *testing.T) {
	const rw = verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	p := verbs.NetPolicy{Write: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, Read: []netip.Prefix{netip.MustParsePrefix("fd00::/8")}}
	local := verbs.LoopbackPolicy()
	for _, tc := range []struct {
		policy verbs.NetPolicy
		addr   string
		want   verbs.Access
	}{
		{p, "10.1.2.3:7400", rw},
		{p, "[::ffff:10.1.2.3]:7400", rw}, // an IPv4 peer on a dual-stack socket
		{p, "[fd00::5]:1", verbs.AccessRemoteRead},
		{p, "10.2.0.1:7400", 0},
		{p, "127.0.0.1:5", 0},
		{p, "@socket", 0}, // no ip:port
		{p, "", 0},
		{local, "127.0.0.1:40000", rw},
		{local, "127.3.4.5:1", rw},
		{local, "[::1]:9", rw},
		{local, "192.168.1.1:9", 0},
		{local, "[::ffff:127.0.0.1]:9", rw},
	} {
		got, err := verbs.Admit(tc.policy.Admit, verbs.PeerIdentity{Transport: "ucx", Addr: tc.addr})
		if tc.want == 0 {
			require.ErrorIs(t, err, verbs.ErrNotAdmitted, tc.addr)
			continue
		}
		require.NoError(t, err, tc.addr)
		require.Equal(t, tc.want, got, tc.addr)
	}
}

func TestAdmitGrant(t *testing.T) {
	id := verbs.PeerIdentity{Transport: "tcp", Addr: "1.2.3.4:5"}
	got, err := verbs.Admit(nil, id)
	require.NoError(t, err)
	require.Equal(t, verbs.AccessRemoteRead|verbs.AccessRemoteWrite, got)
	got, err = verbs.Admit(func(verbs.PeerIdentity) (verbs.Access, error) { return verbs.AccessRemoteRead | verbs.AccessLocal, nil }, id)
	require.NoError(t, err)
	require.Equal(t, verbs.AccessRemoteRead, got, "a grant is clipped to the remote bits")
	_, err = verbs.Admit(func(verbs.PeerIdentity) (verbs.Access, error) { return verbs.AccessRemoteWrite, nil }, id)
	require.ErrorIs(t, err, verbs.ErrNotAdmitted, "a grant without read refuses")
	cause := errors.New("blocked subnet")
	_, err = verbs.Admit(func(verbs.PeerIdentity) (verbs.Access, error) { return 0, cause }, id)
	require.ErrorIs(t, err, verbs.ErrNotAdmitted)
	require.ErrorIs(t, err, cause)
	require.Contains(t, err.Error(), "1.2.3.4:5")
}

func TestGrantedInfos(t *testing.T) {
	const rw = verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	infos := []verbs.RegionInfo{{Name: "a", Key: 1, Len: 8, Access: rw}, {Name: "b", Key: 2, Len: 8, Access: verbs.AccessRemoteRead},
		{Name: "c", Key: 3, Len: 8, Access: verbs.AccessRemoteWrite}}
	require.Equal(t, infos, verbs.GrantedInfos(infos, rw, nil))
	require.Equal(t, []verbs.RegionInfo{{Name: "a", Key: 1, Len: 8, Access: verbs.AccessRemoteRead}, infos[1]},
		verbs.GrantedInfos(infos, verbs.AccessRemoteRead, nil), "write cleared; a write-only region left out")
	require.Equal(t, []verbs.RegionInfo{infos[1]},
		verbs.GrantedInfos(infos, verbs.AccessRemoteRead, func(verbs.RegionInfo) bool { return true }), "withheld")
	require.Equal(t, rw, infos[0].Access, "the input is not changed")
}

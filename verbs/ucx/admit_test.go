//go:build ucx

package ucx_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
)

// hostAddr is an address of this host other than loopback, if it has one.
func hostAddr(t *testing.T) netip.Addr {
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() && !ip.IsLoopback() {
				return ip.Unmap()
			}
		}
	}
	t.Skip("no address of this host but loopback")
	return netip.Addr{}
}

// TestDefaultAdmitsThisHostOnly: a ucx segment without an Admit policy
// refuses a peer that connects from an address other than loopback
// (verbs.LoopbackPolicy; UCX would parse its worker address unvalidated),
// and serves it once a policy names its network.
func TestDefaultAdmitsThisHostOnly(t *testing.T) {
	be := backend(t, "tcp")
	ip := hostAddr(t)
	r := verbstest.NewRand(t)
	owner, req := be.Transport(t), be.Transport(t)
	table, err := owner.Alloc(4096, verbs.AccessRemoteRead)
	require.NoError(t, err)
	verbstest.Fill(r, table.Bytes())
	for _, tc := range []struct {
		name   string
		admit  verbs.AdmitFunc
		refuse bool
	}{
		{"default", nil, true},
		{"its network", verbs.NetPolicy{Write: []netip.Prefix{netip.PrefixFrom(ip, 32)}}.Admit, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seg, err := owner.Listen(netip.AddrPortFrom(ip, 0).String(), []verbs.Export{{Name: "table", Region: table}}, verbs.ListenOptions{Admit: tc.admit})
			require.NoError(t, err)
			defer seg.Close()
			c, err := req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{})
			if tc.refuse {
				require.ErrorIs(t, err, verbs.ErrNotAdmitted)
				return
			}
			require.NoError(t, err)
			require.NoError(t, c.Close())
		})
	}
}

package transports_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/shm"
	"github.com/scatterkit/scatterkit/verbs/tcp"
	"github.com/scatterkit/scatterkit/verbs/transports"
	"github.com/scatterkit/scatterkit/verbs/ucx"
)

func TestNames(t *testing.T) {
	require.Equal(t, []string{"tcp", "shm", "ucx"}, transports.Names())
	names := transports.Names()
	names[0] = "changed"
	require.Equal(t, []string{"tcp", "shm", "ucx"}, transports.Names(), "Names returns a copy")
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  transports.Config
		want any
	}{
		{"tcp", transports.Config{}, &tcp.Transport{}},
		{"tcp", transports.Config{TCP: tcp.Config{NoChecksums: true}, SHM: shm.Config{CopyWorkers: 3}}, &tcp.Transport{}},
		{"shm", transports.Config{}, &shm.Transport{}},
		{"shm", transports.Config{SHM: shm.Config{CopyWorkers: 1}}, &shm.Transport{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, transports.Check(tc.name))
			tr, err := transports.New(tc.name, tc.cfg)
			require.NoError(t, err)
			require.IsType(t, tc.want, tr)
			require.Equal(t, tc.name, tr.Name())
			require.NoError(t, tr.Close())
		})
	}
}

func TestUnknown(t *testing.T) {
	for _, name := range []string{"", "udp", "TCP", "shm "} {
		t.Run(name, func(t *testing.T) {
			check := transports.Check(name)
			tr, err := transports.New(name, transports.Config{})
			require.Nil(t, tr)
			_, aerr := transports.LocalAddr(name, "x")
			for _, err := range []error{check, err, aerr} {
				require.ErrorIs(t, err, transports.ErrUnknown)
				var ue *transports.UnknownError
				require.True(t, errors.As(err, &ue))
				require.Equal(t, name, ue.Name)
				require.Equal(t, "want tcp or shm or ucx", ue.Want())
				require.EqualError(t, err, `transports: unknown transport "`+name+`": want tcp or shm or ucx`)
			}
		})
	}
}

func TestLocalAddr(t *testing.T) {
	a, err := transports.LocalAddr("tcp", "x")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:0", a)
	a, err = transports.LocalAddr("shm", "scatterkit-test")
	require.NoError(t, err)
	b, err := transports.LocalAddr("shm", "scatterkit-test")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(a, "@scatterkit-test-"), a)
	require.NotEqual(t, a, b)
}

// TestServe: every transport New builds serves a segment at its LocalAddr
// and connects to it.
func TestServe(t *testing.T) {
	for _, name := range transports.Names() {
		t.Run(name, func(t *testing.T) {
			if name == "shm" && runtime.GOOS != "linux" {
				t.Skip("shm needs linux (verbs.ErrNotSupported)")
			}
			if name == "ucx" && !ucx.Supported() {
				_, err := transports.New(name, transports.Config{})
				require.ErrorIs(t, err, verbs.ErrNotSupported)
				t.Skip("ucx needs the ucx build tag (verbs.ErrNotSupported)")
			}
			owner, err := transports.New(name, transports.Config{})
			require.NoError(t, err)
			defer func() { require.NoError(t, owner.Close()) }()
			req, err := transports.New(name, transports.Config{})
			require.NoError(t, err)
			defer func() { require.NoError(t, req.Close()) }()
			reg, err := owner.Alloc(4096, verbs.AccessRemoteRead)
			require.NoError(t, err)
			addr, err := transports.LocalAddr(name, "scatterkit-transports-test")
			require.NoError(t, err)
			seg, err := owner.Listen(addr, []verbs.Export{{Name: "r", Region: reg}}, verbs.ListenOptions{})
			require.NoError(t, err)
			defer func() { require.NoError(t, seg.Close()) }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			link := verbs.LinkParams{Bandwidth: 1e9, PostRate: 1e6, RTT: time.Millisecond}
			c, err := req.Connect(ctx, seg.Addr(), verbs.ConnectOptions{Link: link})
			require.NoError(t, err)
			defer func() { require.NoError(t, c.Close()) }()
			ri, ok := verbs.FindRegion(c.Remote(), "r")
			require.True(t, ok)
			require.Equal(t, reg.Key(), ri.Key)
		})
	}
}

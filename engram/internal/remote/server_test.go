package remote

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

func TestServeRejects(t *testing.T) {
	tr := tcpBackend.new()
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	rows := make([]byte, 10*8)
	ok := func() ServerConfig {
		return ServerConfig{Transport: tr, Addr: "127.0.0.1:0", Namespace: "ns",
			Tables: []Table{{Name: "a", NumRows: 10, RowBytes: 8, Rows: rows}}}
	}
	for _, tc := range []struct {
		name  string
		edit  func(*ServerConfig)
		field string
	}{
		{"no transport", func(c *ServerConfig) { c.Transport = nil }, "Transport"},
		{"no address", func(c *ServerConfig) { c.Addr = "" }, "Addr"},
		{"negative staging", func(c *ServerConfig) { c.StagingBytes = -1 }, "StagingBytes"},
		{"tiny staging", func(c *ServerConfig) { c.StagingBytes = 4096 }, "StagingBytes"},
		{"empty namespace", func(c *ServerConfig) { c.Namespace = "" }, "Namespace"},
		{"namespace with a space", func(c *ServerConfig) { c.Namespace = "a b" }, "Namespace"},
		{"long namespace", func(c *ServerConfig) { c.Namespace = strings.Repeat("n", MaxNamespaceLen+1) }, "Namespace"},
		{"no tables", func(c *ServerConfig) { c.Tables = nil }, "Tables"},
		{"too many tables", func(c *ServerConfig) { c.Tables = make([]Table, MaxTables+1) }, "Tables"},
		{"empty name", func(c *ServerConfig) { c.Tables[0].Name = "" }, "Tables[0].Name"},
		{"control byte in name", func(c *ServerConfig) { c.Tables[0].Name = "a\x01" }, "Tables[0].Name"},
		{"long name", func(c *ServerConfig) { c.Tables[0].Name = strings.Repeat("x", MaxNameLen+1) }, "Tables[0].Name"},
		{"zero rows", func(c *ServerConfig) { c.Tables[0].NumRows = 0 }, "Tables[0].NumRows"},
		{"zero row bytes", func(c *ServerConfig) { c.Tables[0].RowBytes = 0 }, "Tables[0].RowBytes"},
		{"huge rows", func(c *ServerConfig) { c.Tables[0].RowBytes = MaxRowBytes + 1 }, "Tables[0].RowBytes"},
		{"size overflow", func(c *ServerConfig) { c.Tables[0].NumRows = 1 << 61 }, "Tables[0].NumRows"},
		{"rows of the wrong length", func(c *ServerConfig) { c.Tables[0].Rows = rows[:79] }, "Tables[0].Rows"},
		{"duplicate name", func(c *ServerConfig) {
			c.Tables = append(c.Tables, Table{Name: "a", NumRows: 1, RowBytes: 8, Rows: rows[:8]})
		}, "Tables[1].Name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.edit(&c)
			s, err := Serve(c)
			require.Nil(t, s)
			require.ErrorIs(t, err, ErrInvalid)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.field, ce.Field)
		})
	}
	t.Run("listen fails", func(t *testing.T) {
		c := ok()
		c.Addr = "256.0.0.1:99999"
		s, err := Serve(c)
		require.Nil(t, s)
		require.Error(t, err)
		// Everything was released: the same rows serve again.
		s, err = Serve(ok())
		require.NoError(t, err)
		require.NoError(t, s.Close())
	})
}

func TestServeAndDial(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := newRand(t)
			e := newEnv(t, r, envConfig{backend: be})
			require.Equal(t, be.name == "shm", e.srv.Copied(), "shm serves copies, tcp the caller's rows")
			require.Equal(t, be.name != "shm", e.cli.Exposed(), "tcp and ucx expose the output arena, shm cannot")
			require.Empty(t, cmp.Diff(testSpecs, e.srv.Specs()))
			require.Empty(t, cmp.Diff(testSpecs, e.cli.Specs()))
			require.Equal(t, testNamespace, e.cli.Namespace())
			require.Equal(t, testNamespace, e.srv.Namespace())
			s, ok := e.cli.Spec("ngram.l3")
			require.True(t, ok)
			require.Equal(t, testSpecs[1], s)
			_, ok = e.cli.Spec("nope")
			require.False(t, ok)
			// The segment exports exactly the tables, read-only.
			regions := e.cli.conn.Remote()
			require.Len(t, regions, len(testSpecs))
			for _, sp := range testSpecs {
				info, ok := verbs.FindRegion(regions, ExportName(testNamespace, sp.Name))
				require.True(t, ok, sp.Name)
				require.Equal(t, verbs.AccessRemoteRead, info.Access, "%s is exported for remote read only", sp.Name)
				require.Equal(t, uint64(sp.Bytes()), info.Len)
			}
			rtt, err := e.cli.Ping(testContext(t))
			require.NoError(t, err)
			require.Positive(t, rtt)
			t.Logf("ping %v", rtt)
		})
	}
}

func TestDialRejects(t *testing.T) {
	r := newRand(t)
	e := newEnv(t, r, envConfig{backend: tcpBackend})
	ctx := testContext(t)
	ok := ClientConfig{Transport: e.reqTr, Addr: e.srv.Addr(), Namespace: testNamespace, OutputBytes: 1 << 20,
		Connect: verbs.ConnectOptions{Link: testLink}}
	for _, tc := range []struct {
		name string
		edit func(*ClientConfig)
		want error
	}{
		{"no transport", func(c *ClientConfig) { c.Transport = nil }, ErrInvalid},
		{"no address", func(c *ClientConfig) { c.Addr = "" }, ErrInvalid},
		{"bad namespace", func(c *ClientConfig) { c.Namespace = "" }, ErrInvalid},
		{"negative output", func(c *ClientConfig) { c.OutputBytes = -1 }, ErrInvalid},
		{"tiny output", func(c *ClientConfig) { c.OutputBytes = 100 }, ErrInvalid},
		{"bad mode", func(c *ClientConfig) { c.Mode = engine.ModeHybrid + 1 }, ErrInvalid},
		{"other namespace", func(c *ClientConfig) { c.Namespace = "other" }, ErrNamespace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			cli, err := Dial(ctx, c)
			require.Nil(t, cli)
			require.ErrorIs(t, err, tc.want)
			t.Log(err)
		})
	}
	t.Run("nobody listening", func(t *testing.T) {
		c := ok
		c.Addr = "127.0.0.1:1"
		cli, err := Dial(ctx, c)
		require.Nil(t, cli)
		require.Error(t, err)
	})
	t.Run("not an engram owner", func(t *testing.T) {
		// A plain segment without MethodTables.
		tr := tcpBackend.new()
		t.Cleanup(func() { require.NoError(t, tr.Close()) })
		reg, err := tr.Alloc(4096, verbs.AccessRemoteRead)
		require.NoError(t, err)
		seg, err := tr.Listen("127.0.0.1:0", []verbs.Export{{Name: "x", Region: reg}}, verbs.ListenOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, seg.Close()) })
		c := ok
		c.Addr = seg.Addr()
		cli, err := Dial(ctx, c)
		require.Nil(t, cli)
		require.ErrorIs(t, err, verbs.ErrNotSupported)
	})
	t.Run("lying owner", func(t *testing.T) {
		// An owner whose table list names a table it does not export, or
		// with the wrong size, is refused.
		for _, tc := range []struct {
			name string
			list TableList
		}{
			{"missing export", TableList{Namespace: testNamespace, Tables: []TableSpec{{Name: "ghost", NumRows: 1, RowBytes: 8}}}},
			{"wrong size", TableList{Namespace: testNamespace, Tables: []TableSpec{{Name: "x", NumRows: 2, RowBytes: 4096}}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tr := tcpBackend.new()
				t.Cleanup(func() { require.NoError(t, tr.Close()) })
				reg, err := tr.Alloc(4096, verbs.AccessRemoteRead)
				require.NoError(t, err)
				seg, err := tr.Listen("127.0.0.1:0", []verbs.Export{{Name: ExportName(testNamespace, "x"), Region: reg}}, verbs.ListenOptions{})
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, seg.Close()) })
				reply, err := AppendTables(nil, &tc.list)
				require.NoError(t, err)
				seg.Handle(MethodTables, verbs.HandlerFunc(func(_ context.Context, _ verbs.Peer, _, resp []byte) ([]byte, error) {
					return append(resp, reply...), nil
				}))
				c := ok
				c.Addr = seg.Addr()
				cli, err := Dial(ctx, c)
				require.Nil(t, cli)
				require.ErrorIs(t, err, ErrMismatch)
				t.Log(err)
			})
		}
	})
	t.Run("malformed table list", func(t *testing.T) {
		tr := tcpBackend.new()
		t.Cleanup(func() { require.NoError(t, tr.Close()) })
		reg, err := tr.Alloc(4096, verbs.AccessRemoteRead)
		require.NoError(t, err)
		seg, err := tr.Listen("127.0.0.1:0", []verbs.Export{{Name: "x", Region: reg}}, verbs.ListenOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, seg.Close()) })
		seg.Handle(MethodTables, verbs.HandlerFunc(func(_ context.Context, _ verbs.Peer, _, resp []byte) ([]byte, error) {
			return append(resp, "SKET garbage"...), nil
		}))
		c := ok
		c.Addr = seg.Addr()
		cli, err := Dial(ctx, c)
		require.Nil(t, cli)
		require.ErrorIs(t, err, ErrTruncated)
	})
}

func TestServerCloseIdempotent(t *testing.T) {
	r := newRand(t)
	e := newEnv(t, r, envConfig{backend: tcpBackend})
	addr := e.srv.Addr()
	require.NoError(t, e.srv.Close())
	require.NoError(t, e.srv.Close())
	require.Equal(t, addr, e.srv.Addr())
	require.Equal(t, gather.Stats{}, e.srv.Stats())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Dial(ctx, ClientConfig{Transport: e.reqTr, Addr: addr, Namespace: testNamespace, OutputBytes: 1 << 20})
	require.Error(t, err, "a closed owner accepts no client")
}

package etcd_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/discovery/etcd"
)

func TestParseURI(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want etcd.URI
	}{
		{"etcd://10.0.0.1:2379", etcd.URI{Endpoints: []string{"10.0.0.1:2379"}, Prefix: etcd.DefaultPrefix}},
		{"etcd://a:1,b:2/lab/pool1", etcd.URI{Endpoints: []string{"a:1", "b:2"}, Prefix: "/lab/pool1/"}},
		{"etcd://host/", etcd.URI{Endpoints: []string{"host:2379"}, Prefix: etcd.DefaultPrefix}},
		{"etcd://[::1]:23/p/?ttl=3s&timeout=250ms", etcd.URI{Endpoints: []string{"[::1]:23"}, Prefix: "/p/", TTL: 3 * time.Second, Timeout: 250 * time.Millisecond}},
		{"etcds://u:pw@h:9/x?cacert=/ca.pem&cert=/c.pem&key=/k.pem", etcd.URI{Endpoints: []string{"h:9"}, TLS: true, Username: "u", Password: "pw",
			Prefix: "/x/", CACert: "/ca.pem", Cert: "/c.pem", Key: "/k.pem"}},
	} {
		got, err := etcd.ParseURI(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
	for _, in := range []string{
		"", "/tmp/discovery.json", "http://h:2379", "etcd:", "etcd://", "etcd:///prefix",
		"etcd://h:0", "etcd://h:70000", "etcd://h:x", "etcd://h:1,", "etcd://:1",
		"etcd://h:1/p?ttl=0s", "etcd://h:1/p?ttl=soon", "etcd://h:1/p?timeout=-1s",
		"etcd://h:1/p?ttl=1s&ttl=2s", "etcd://h:1/p?color=red", "etcd://h:1/p#frag",
		"etcd://h:1/p?cacert=/ca.pem", "etcds://h:1/p?cert=/c.pem", "etcds://h:1/p?cacert=",
		"etcd://:pw@h:1/p",
	} {
		_, err := etcd.ParseURI(in)
		var ue *etcd.URIError
		require.ErrorAs(t, err, &ue, "%q", in)
		require.ErrorIs(t, err, etcd.ErrInvalidURI, "%q", in)
	}
	_, err := etcd.ParseURI("etcd://u:secret@h:1/p?color=red")
	require.ErrorIs(t, err, etcd.ErrInvalidURI)
	require.NotContains(t, err.Error(), "secret", "passwords stay out of errors")
	require.True(t, etcd.IsURI("etcd://h"))
	require.True(t, etcd.IsURI("etcds://h"))
	require.False(t, etcd.IsURI("/dev/shm/etcd://x"))
}

// TestDial: a directory Dial opened publishes and reads through a client of
// its own, which its Close closes (TestMain's leak check sees any client
// goroutine left), withdrawing its records.
func TestDial(t *testing.T) {
	prefix := freshPrefix()
	uri := "etcd://" + serverEndpoint(t) + prefix + "?ttl=2s&timeout=3s"
	d, err := etcd.Dial(t.Context(), uri)
	require.NoError(t, err)
	require.Equal(t, prefix, d.Prefix())
	require.Equal(t, 2*time.Second, d.TTL())
	reg, err := d.Publish(t.Context(), discovery.Record{Name: "owner/a", Transport: "tcp", Addr: "127.0.0.1:1"})
	require.NoError(t, err)

	other, err := etcd.Dial(t.Context(), strings.TrimSuffix(uri, "?ttl=2s&timeout=3s"), etcd.WithTTL(4*time.Second))
	require.NoError(t, err)
	require.Equal(t, 4*time.Second, other.TTL(), "options override the URI")
	got, err := other.Lookup(t.Context(), "owner/a")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:1", got.Addr)

	require.NoError(t, d.Close())
	<-reg.Done()
	_, err = other.Lookup(t.Context(), "owner/a")
	require.ErrorIs(t, err, discovery.ErrNotFound, "Close withdrew the record")
	require.NoError(t, other.Close())
	_, err = other.Lookup(context.Background(), "owner/a")
	require.ErrorIs(t, err, discovery.ErrClosed)
}

// TestDialUnreachable: nothing listens at the endpoint; Dial fails within
// the URI's timeout with an *UnreachableError instead of a directory that
// stalls at its first call.
func TestDialUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	_, err = etcd.Dial(t.Context(), "etcd://"+addr+"/x?timeout=300ms")
	var ue *etcd.UnreachableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, []string{addr}, ue.Endpoints)
	require.Less(t, time.Since(start), 10*time.Second)
}

func TestDialBadTLSFiles(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("not a certificate"), 0o600))
	for _, q := range []string{"cacert=" + filepath.Join(dir, "absent.pem"), "cacert=" + junk, "cert=" + junk + "&key=" + junk} {
		_, err := etcd.Dial(t.Context(), "etcds://127.0.0.1:1/x?"+q)
		require.ErrorIs(t, err, etcd.ErrInvalidURI, q)
	}
}

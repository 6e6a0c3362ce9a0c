package dirspec_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/tools/internal/dirspec"
	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/discovery/etcd"
	"github.com/scatterkit/scatterkit/verbs/discovery/etcd/etcdtest"
)

func TestOpen(t *testing.T) {
	for _, off := range []string{"", dirspec.Off} {
		d, err := dirspec.Open(t.Context(), off)
		require.NoError(t, err)
		require.Nil(t, d)
	}
	path := filepath.Join(t.TempDir(), "d.json")
	for _, spec := range []string{path, "file://" + path} {
		d, err := dirspec.Open(t.Context(), spec)
		require.NoError(t, err, spec)
		_, err = d.Publish(t.Context(), discovery.Record{Name: "x/" + filepath.Base(spec), Transport: "tcp", Addr: "127.0.0.1:1"})
		require.NoError(t, err)
		require.NoError(t, d.Close())
	}
	for _, bad := range []string{"http://h:1/x", "file://"} {
		_, err := dirspec.Open(t.Context(), bad)
		require.ErrorIs(t, err, dirspec.ErrSpec, bad)
	}
	_, err := dirspec.Open(t.Context(), "etcd://h:0/x")
	require.ErrorIs(t, err, etcd.ErrInvalidURI)
	require.ErrorIs(t, err, dirspec.ErrSpec)

	srv, err := etcdtest.Start()
	require.NoError(t, err)
	defer srv.Close()
	d, err := dirspec.Open(t.Context(), srv.URI("/dirspec/", "ttl=2s"))
	require.NoError(t, err)
	_, err = d.Publish(t.Context(), discovery.Record{Name: "a", Transport: "tcp", Addr: "127.0.0.1:1"})
	require.NoError(t, err)
	recs, err := d.List(t.Context(), "")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.NoError(t, d.Close())
}

func TestDescribe(t *testing.T) {
	require.Equal(t, "/dev/shm/d.json", dirspec.Describe("/dev/shm/d.json"))
	require.Equal(t, "etcd://u:xxxxx@h:1/p", dirspec.Describe("etcd://u:secret@h:1/p"))
	require.Equal(t, "etcd://h:1/p?ttl=2s", dirspec.Describe("etcd://h:1/p?ttl=2s"))
}

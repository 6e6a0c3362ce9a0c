//go:build !cuda

package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/discovery/etcd/etcdtest"
)

// TestServePublishedEtcd is TestServePublished over a real etcd server
// (embedded). Not in the cuda-tagged test binary: it is carried to the GPU
// machine, and the embedded server would double its size.
func TestServePublishedEtcd(t *testing.T) {
	srv, err := etcdtest.Start()
	require.NoError(t, err)
	defer srv.Close()
	testServePublished(t, srv.URI("/capi-test/", "ttl=2s"))
}

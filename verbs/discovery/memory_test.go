package discovery_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/discovery/discoverytest"
)

func TestMemoryConformance(t *testing.T) {
	discoverytest.Run(t, discoverytest.Backend{
		New: func(t *testing.T) discovery.Directory {
			m := discovery.NewMemory()
			t.Cleanup(func() { m.Close() })
			return m
		},
	})
}

func TestMemoryLookupAllocs(t *testing.T) {
	m := discovery.NewMemory()
	defer m.Close()
	ctx := context.Background()
	reg, err := m.Publish(ctx, discovery.Record{Name: "engram/t0", Transport: "tcp", Addr: "127.0.0.1:7000"})
	require.NoError(t, err)
	defer reg.Close()
	var got discovery.Record
	allocs := testing.AllocsPerRun(100, func() {
		got, err = m.Lookup(ctx, "engram/t0")
	})
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7000", got.Addr)
	require.Zero(t, allocs, "Lookup of a record without Attrs allocates")
}

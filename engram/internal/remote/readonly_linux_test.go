package remote

import (
	"math/rand/v2"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/scatterkit/scatterkit/verbs"
)

// TestServeReadOnlyMemory serves tables from memory the kernel refuses to
// write (PROT_READ, as an mmap'd snapshot is): any write by the owner would
// crash the test. Lookups, gathered and direct, read it correctly.
func TestServeReadOnlyMemory(t *testing.T) {
	r := newRand(t)
	const rows, rb = 5000, 264
	mem, err := unix.Mmap(-1, 0, rows*rb, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, unix.Munmap(mem)) })
	fill(r, mem)
	require.NoError(t, unix.Mprotect(mem, unix.PROT_READ))

	ownerTr, reqTr := tcpBackend.new(), tcpBackend.new()
	t.Cleanup(func() {
		require.NoError(t, ownerTr.Close())
		require.NoError(t, reqTr.Close())
	})
	tbl := Table{Name: "snapshot", NumRows: rows, RowBytes: rb, Rows: mem}
	srv, err := Serve(ServerConfig{Transport: ownerTr, Addr: "127.0.0.1:0", Namespace: "ro", Tables: []Table{tbl},
		StagingBytes: 1 << 20, Gather: gather.Config{Calibration: &testCalibration}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	require.False(t, srv.Copied())
	for _, mode := range []engine.Mode{engine.ModeDirect, engine.ModeGather} {
		t.Run(mode.String(), func(t *testing.T) {
			cli, err := Dial(testContext(t), ClientConfig{Transport: reqTr, Addr: srv.Addr(), Namespace: "ro",
				OutputBytes: 4 << 20, Mode: mode, Connect: verbs.ConnectOptions{Link: testLink}})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, cli.Close()) })
			e := &env{tables: map[string]Table{"snapshot": tbl}, cli: cli}
			p := pattern{columns: func(_ *rand.Rand, k int) ([]string, []int64) { return repeat("snapshot", k), nil }}
			for _, l := range layouts {
				checkLookup[int64](t, r, e, p, l, 100, 24, 0)
			}
			require.Zero(t, cli.Stats().Fallbacks)
		})
	}
}

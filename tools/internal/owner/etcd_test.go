package owner

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/tools/internal/dirspec"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/discovery/etcd/etcdtest"
	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// TestOwnersInEtcd: three scatterd processes publish their records in a
// real etcd server (embedded, loopback) on one-second leases; a requester
// finds them by name in the cluster alone and reads random rows from all
// three in one multi-owner engine operation (every byte checked against
// its owner's seed). One owner is then killed (SIGKILL: it withdraws
// nothing) and its record expires with its lease while the others' stay;
// those, stopped by SIGTERM, withdraw theirs at once and report no leaked
// staging lease.
func TestOwnersInEtcd(t *testing.T) {
	r := newRand(t)
	srv, err := etcdtest.Start()
	require.NoError(t, err)
	defer srv.Close()
	uri := srv.URI("/owners-test/", "ttl=1s&timeout=5s")

	const n, size = 3, 264
	seeds := make([]uint64, n)
	owners := make([]*childOwner, n)
	for i := range owners {
		seeds[i] = r.Uint64N(1 << 62)
		owners[i] = startChildOwner(t, "-size", fmt.Sprint(1+i)+"MiB", "-seed", strconv.FormatUint(seeds[i], 10),
			"-staging", "4MiB", "-discovery", uri, "-name", fmt.Sprintf("pool/o%d", i), "-attr", fmt.Sprintf("shard=%d", i))
		require.Equal(t, dirspec.Describe(uri), owners[i].ready.Directory)
	}

	dir, err := dirspec.Open(testContext(t), uri)
	require.NoError(t, err)
	defer dir.Close()
	recs, err := dir.List(testContext(t), "pool/")
	require.NoError(t, err)
	require.Len(t, recs, n)

	tr := tcp.New(tcp.Config{})
	defer func() { require.NoError(t, tr.Close()) }()
	const rows = 4_000
	local, err := tr.Alloc(n*rows*size, verbs.AccessLocal|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	eng, err := engine.New(engine.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, eng.Close()) }()

	parts := make([]engine.ScatterOp, n)
	ids := make([][]int64, n)
	for i := range owners {
		rec, err := dir.Lookup(testContext(t), fmt.Sprintf("pool/o%d", i))
		require.NoError(t, err)
		require.Equal(t, owners[i].ready.Addr, rec.Addr)
		require.Equal(t, fmt.Sprint(i), rec.Attrs["shard"], "what the owner holds, from -attr")
		require.Equal(t, fmt.Sprint((1+i)<<20), rec.Attrs["bytes"])
		conn, err := tr.Connect(testContext(t), rec.Addr, verbs.ConnectOptions{Expose: []verbs.Export{{Name: "dst", Region: local}}})
		require.NoError(t, err)
		defer func() { require.NoError(t, conn.Close()) }()
		table, ok := verbs.FindRegion(conn.Remote(), DefaultExport)
		require.True(t, ok)
		tableRows := table.Len / size
		ids[i] = make([]int64, rows)
		for j := range ids[i] {
			ids[i][j] = int64(r.Uint64N(tableRows))
		}
		parts[i] = engine.ScatterOp{Conn: conn, Dir: verbs.OpRead, Remote: table, Local: local, Mode: engine.ModeAuto,
			Plan: &planfmt.Plan{Form: planfmt.FormRows, SrcExtent: table.Len, DstExtent: uint64(local.Len()),
				Rows: planfmt.Rows{RowSize: size, TableRows: tableRows, IDs64: ids[i], DstBase: uint64(i * rows * size)}}}
	}
	res, err := eng.DoGroup(testContext(t), parts)
	require.NoError(t, err)
	require.Len(t, res.Parts, n)
	require.Equal(t, uint64(n*rows*size), res.Bytes)
	for i := range owners {
		for j, id := range ids[i] {
			at := (i*rows + j) * size
			require.Equal(t, -1, pattern.Check(local.Bytes()[at:at+size], seeds[i], uint64(id)*size), "owner %d row %d (id %d)", i, j, id)
		}
	}

	victim := r.IntN(n)
	require.NoError(t, owners[victim].cmd.Process.Signal(syscall.SIGKILL))
	<-owners[victim].exited
	killed := time.Now()
	name := fmt.Sprintf("pool/o%d", victim)
	require.Eventually(t, func() bool {
		_, err := dir.Lookup(testContext(t), name)
		return err != nil
	}, 10*time.Second, 20*time.Millisecond, "the killed owner's record outlived its lease")
	_, err = dir.Lookup(testContext(t), name)
	require.ErrorIs(t, err, discovery.ErrNotFound)
	t.Logf("the killed owner's record expired %v after the kill (ttl 1s)", time.Since(killed).Round(10*time.Millisecond))
	recs, err = dir.List(testContext(t), "pool/")
	require.NoError(t, err)
	require.Len(t, recs, n-1, "the live owners' records stay")

	for i, o := range owners {
		if i == victim {
			continue
		}
		closed := o.stop(t)
		require.Zero(t, closed.LeakedLeases, "owner %d", i)
		_, err := dir.Lookup(testContext(t), fmt.Sprintf("pool/o%d", i))
		require.ErrorIs(t, err, discovery.ErrNotFound, "owner %d withdrew its record at SIGTERM", i)
	}
	recs, err = dir.List(testContext(t), "pool/")
	require.NoError(t, err)
	require.Empty(t, recs)
}

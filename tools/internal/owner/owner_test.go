package owner

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/tcp"
	"github.com/scatterkit/scatterkit/verbs/transports"
	"github.com/scatterkit/scatterkit/verbs/ucx"
)

func newTransport(t *testing.T, name string) verbs.Transport {
	t.Helper()
	tr, err := transports.New(name, transports.Config{})
	require.NoError(t, err)
	return tr
}

// requester is a connection to an owner with a local region exposed to it.
type requester struct {
	tr    verbs.Transport
	conn  verbs.Conn
	local *verbs.Region
}

func connect(t *testing.T, transport, addr string, localBytes int) *requester {
	t.Helper()
	r := &requester{tr: newTransport(t, transport)}
	t.Cleanup(func() { require.NoError(t, r.tr.Close()) })
	var err error
	r.local, err = r.tr.Alloc(localBytes, verbs.AccessLocal|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	r.conn, err = r.tr.Connect(testContext(t), addr, verbs.ConnectOptions{Lanes: 2,
		Expose: []verbs.Export{{Name: "dst", Region: r.local}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.conn.Close()) })
	return r
}

// post runs wrs and waits for all their completions, failing on any error.
func (r *requester) post(t *testing.T, wrs []verbs.WorkRequest) {
	t.Helper()
	n, err := r.conn.Post(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)
	cs := make([]verbs.Completion, len(wrs))
	for done := 0; done < len(wrs); {
		k, err := r.conn.Wait(testContext(t), cs[done:], len(wrs)-done)
		require.NoError(t, err)
		done += k
	}
	for _, c := range cs {
		require.NoError(t, c.Err)
	}
}

func region(t *testing.T, c verbs.Conn, name string) verbs.RegionInfo {
	t.Helper()
	ri, ok := verbs.FindRegion(c.Remote(), name)
	require.True(t, ok, "region %q exported", name)
	return ri
}

func startOwner(t *testing.T, cfg Config) *Owner {
	t.Helper()
	o, err := Start(testContext(t), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		rep, err := o.Close()
		require.NoError(t, err)
		require.Zero(t, rep.LeakedLeases)
	})
	return o
}

func TestServeGenerated(t *testing.T) {
	for _, tr := range transports.Names() {
		t.Run(tr, func(t *testing.T) {
			if tr == "ucx" && !ucx.Supported() {
				t.Skip("ucx needs the ucx build tag")
			}
			r := newRand(t)
			seed := r.Uint64()
			dir := discovery.NewMemory()
			t.Cleanup(func() { require.NoError(t, dir.Close()) })
			const size = 8 << 20
			o := startOwner(t, Config{Transport: tr, Size: size, Seed: seed, Scratch: 1 << 20, ScratchSeed: seed + 1,
				Directory: dir, Name: "test/" + tr, StagingBytes: 4 << 20, PackWorkers: 2, BenchControl: true})
			rec, err := dir.Lookup(testContext(t), "test/"+tr)
			require.NoError(t, err)
			require.Equal(t, o.Info().Addr, rec.Addr)
			require.Equal(t, tr, rec.Transport)
			require.Equal(t, "table", rec.Attrs["export"])

			q := connect(t, tr, rec.Addr, 1<<20)
			table, scratch := region(t, q.conn, "table"), region(t, q.conn, "scratch")
			require.Equal(t, uint64(size), table.Len)
			require.Equal(t, verbs.AccessRemoteRead, table.Access, "generated data is read-only by default")
			require.True(t, scratch.Access.Has(verbs.AccessRemoteRead|verbs.AccessRemoteWrite))

			// Random 264-byte rows carry the pattern of the seed.
			var wrs []verbs.WorkRequest
			var offs []uint64
			for i := range 64 {
				off := r.Uint64N(size - 264)
				offs = append(offs, off)
				wrs = append(wrs, verbs.WorkRequest{ID: uint64(i), Op: verbs.OpRead, Len: 264, LocalKey: q.local.Key(),
					LocalOff: uint64(i) * 264, RemoteKey: table.Key, RemoteOff: off})
			}
			q.post(t, wrs)
			for i, off := range offs {
				require.Equal(t, -1, pattern.Check(q.local.Bytes()[i*264:(i+1)*264], seed, off), "row %d at %d", i, off)
			}
			// The scratch region starts as its own stream and takes WRITEs.
			q.post(t, []verbs.WorkRequest{{ID: 1, Op: verbs.OpRead, Len: 4096, LocalKey: q.local.Key(), RemoteKey: scratch.Key, RemoteOff: 8192}})
			require.Equal(t, -1, pattern.Check(q.local.Bytes()[:4096], seed+1, 8192))

			// Control: ping, stats, pack-only.
			resp, err := q.conn.Call(testContext(t), MethodPing, nil, nil)
			require.NoError(t, err)
			require.Empty(t, resp)
			resp, err = q.conn.Call(testContext(t), MethodStats, nil, nil)
			require.NoError(t, err)
			st, err := DecodeStats(resp)
			require.NoError(t, err)
			require.Zero(t, st.Leases)
			require.Equal(t, uint64(4<<20), st.Budget)

			plan := rowsPlan(r, size, 5000, 264)
			enc, err := planfmt.AppendPlan(nil, plan)
			require.NoError(t, err)
			resp, err = q.conn.Call(testContext(t), MethodPackOnly, AppendPackRequest(nil, &PackRequest{Op: PackLoad, PlanID: 9, Plan: enc}), nil)
			require.NoError(t, err)
			var rep PackReply
			require.NoError(t, DecodePackReply(&rep, PackLoad, resp))
			require.Equal(t, uint64(5000*264), rep.Payload)
			require.Equal(t, uint64(5000), rep.Fragments)
			resp, err = q.conn.Call(testContext(t), MethodPackOnly, AppendPackRequest(nil, &PackRequest{Op: PackRun, PlanID: 9, Chunk: 1 << 20, Reps: 3}), nil)
			require.NoError(t, err)
			require.NoError(t, DecodePackReply(&rep, PackRun, resp))
			require.Len(t, rep.Times, 3)
			for _, d := range rep.Times {
				require.Positive(t, d)
			}
			require.Equal(t, uint32(2), rep.Workers, "1 MiB chunks are split among the 2 pack workers")
			// A plan id of another connection, or never loaded, is refused.
			_, err = q.conn.Call(testContext(t), MethodPackOnly, AppendPackRequest(nil, &PackRequest{Op: PackRun, PlanID: 10, Chunk: 1 << 20, Reps: 1}), nil)
			var ce *verbs.CallError
			require.True(t, errors.As(err, &ce))
			require.Contains(t, ce.Message, "not loaded")

			// The gather service answers an engine's gather READ.
			eng, err := engine.New(engine.Config{})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, eng.Close()) })
			gp := rowsPlan(r, size, 3000, 264)
			res, err := eng.Do(testContext(t), &engine.ScatterOp{Conn: q.conn, Dir: verbs.OpRead, Remote: table, Local: q.local, Plan: gp, Mode: engine.ModeGather})
			require.NoError(t, err)
			require.Equal(t, engine.ModeGather, res.Mode, "fallback %v: %v", res.Fallback, res.FallbackErr)
			for i, id := range gp.Rows.IDs32 {
				require.Equal(t, -1, pattern.Check(q.local.Bytes()[i*264:(i+1)*264], seed, uint64(id)*264), "row %d", i)
			}
			require.Equal(t, uint64(1), o.Stats().Commands)
		})
	}
}

// rowsPlan is n random rows of size bytes from a table of tableBytes,
// landing contiguously.
func rowsPlan(r *rand.Rand, tableBytes, n int, size uint64) *planfmt.Plan {
	rows := uint64(tableBytes) / size
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.Uint64N(rows))
	}
	return &planfmt.Plan{Form: planfmt.FormRows, SrcExtent: uint64(tableBytes), DstExtent: uint64(n) * size,
		Rows: planfmt.Rows{RowSize: size, TableRows: rows, IDs32: ids}}
}

func TestServeFile(t *testing.T) {
	r := newRand(t)
	content := make([]byte, 3<<20+77)
	seed := r.Uint64()
	pattern.Fill(content, seed, 0)
	path := filepath.Join(t.TempDir(), "data.bin")
	require.NoError(t, os.WriteFile(path, content, 0o600))
	for _, tc := range []struct {
		name      string
		transport string
		writable  bool
	}{
		{"tcp-ro", TransportTCP, false},
		{"tcp-rw", TransportTCP, true},
		{"shm-copy", TransportSHM, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(path, content, 0o600))
			o, err := Start(testContext(t), Config{Transport: tc.transport, File: path, Writable: tc.writable, StagingBytes: 1 << 20})
			require.NoError(t, err)
			q := connect(t, tc.transport, o.Info().Addr, 1<<20)
			table := region(t, q.conn, "table")
			require.Equal(t, uint64(len(content)), table.Len)
			require.Equal(t, tc.writable, table.Access.Has(verbs.AccessRemoteWrite))
			off := uint64(len(content) - 5000)
			q.post(t, []verbs.WorkRequest{{ID: 1, Op: verbs.OpRead, Len: 5000, LocalKey: q.local.Key(), RemoteKey: table.Key, RemoteOff: off}})
			require.Equal(t, content[off:], q.local.Bytes()[:5000])
			if tc.writable {
				pattern.Fill(q.local.Bytes()[:4096], seed+7, 0)
				q.post(t, []verbs.WorkRequest{{ID: 2, Op: verbs.OpWrite, Len: 4096, LocalKey: q.local.Key(), RemoteKey: table.Key, RemoteOff: 12345}})
			}
			require.NoError(t, q.conn.Close())
			rep, err := o.Close()
			require.NoError(t, err)
			require.Zero(t, rep.LeakedLeases)
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			if tc.writable {
				require.Equal(t, -1, pattern.Check(got[12345:12345+4096], seed+7, 0), "the WRITE reached the file")
				require.True(t, bytes.Equal(content[:12345], got[:12345]))
			} else {
				require.True(t, bytes.Equal(content, got), "a read-only file is unchanged")
			}
		})
	}
}

func TestServeFileErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	for _, tc := range []struct {
		name string
		file string
		want error
	}{
		{"missing", filepath.Join(dir, "nope"), os.ErrNotExist},
		{"empty", empty, ErrConfig},
		{"directory", dir, ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Start(testContext(t), Config{Transport: TransportTCP, File: tc.file})
			require.Nil(t, o)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestCloseReportsLeak(t *testing.T) {
	o, err := Start(testContext(t), Config{Transport: TransportTCP, Size: 1 << 20, StagingBytes: 1 << 20, PackWorkers: 1})
	require.NoError(t, err)
	l, err := o.staging.Pool().AcquireLabeled(context.Background(), 64<<10, "test leak")
	require.NoError(t, err)
	rep, err := o.Close()
	require.ErrorIs(t, err, ErrLeak)
	require.Equal(t, 1, rep.LeakedLeases)
	require.Contains(t, rep.Leak, "test leak")
	require.NoError(t, l.Release())
	rep2, err2 := o.Close()
	require.Equal(t, rep, rep2, "Close is idempotent")
	require.ErrorIs(t, err2, ErrLeak)
}

func TestPublishConflict(t *testing.T) {
	dir := discovery.NewMemory()
	t.Cleanup(func() { require.NoError(t, dir.Close()) })
	cfg := Config{Transport: TransportTCP, Size: 1 << 20, StagingBytes: 1 << 20, Directory: dir, Name: "dup"}
	startOwner(t, cfg)
	o, err := Start(testContext(t), cfg)
	require.Nil(t, o)
	require.ErrorIs(t, err, discovery.ErrExists, "a live owner keeps its name; the second owner released everything")
}

// TestAllowNets: a tcp owner given networks serves only peers in them
// (verbs.NetPolicy): a loopback requester is refused when only another
// network is allowed, served when its address is, and read-only when it
// is in ReadNets.
func TestAllowNets(t *testing.T) {
	for _, tc := range []struct {
		name        string
		allow, read []netip.Prefix
		want        verbs.Access // 0: refused
	}{
		{"other network", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, nil, 0},
		{"this host", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, nil, verbs.AccessRemoteRead | verbs.AccessRemoteWrite},
		{"read only", nil, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, verbs.AccessRemoteRead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := startOwner(t, Config{Transport: TransportTCP, Size: 1 << 20, Scratch: 4096, StagingBytes: 4 << 20, PackWorkers: 1,
				AllowNets: tc.allow, ReadNets: tc.read})
			tr := tcp.New(tcp.Config{})
			defer tr.Close()
			c, err := tr.Connect(testContext(t), o.Info().Addr, verbs.ConnectOptions{})
			if tc.want == 0 {
				require.ErrorIs(t, err, verbs.ErrNotAdmitted)
				return
			}
			require.NoError(t, err)
			defer c.Close()
			require.Equal(t, tc.want&verbs.AccessRemoteWrite != 0, region(t, c, DefaultScratchName).Access.Has(verbs.AccessRemoteWrite))
		})
	}
}

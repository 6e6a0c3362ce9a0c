package engine_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

// ownerFixture adds what the hand-crafted command tests need: a
// read-only export, a write-only export and a requester region exposed
// read-only.
type ownerFixture struct {
	*fixture
	ro, wo         *verbs.Region
	roInfo, woInfo verbs.RegionInfo
	rodst          *verbs.Region
}

func newOwnerFixture(t testing.TB, be backend) *ownerFixture {
	t.Helper()
	r := verbstest.NewRand(t)
	of := &ownerFixture{fixture: &fixture{owner: be.new(), req: be.new()}}
	f := of.fixture
	t.Cleanup(func() {
		require.NoError(t, f.owner.Close())
		require.NoError(t, f.req.Close())
	})
	var err error
	alloc := func(tr verbs.Transport, n int, a verbs.Access) *verbs.Region {
		reg, err := tr.Alloc(n, a)
		require.NoError(t, err)
		verbstest.Fill(r, reg.Bytes())
		return reg
	}
	f.table = alloc(f.owner, 256<<10, verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	of.ro = alloc(f.owner, 64<<10, verbs.AccessRemoteRead)
	of.wo = alloc(f.owner, 64<<10, verbs.AccessRemoteWrite)
	exports := []verbs.Export{{Name: "table", Region: f.table}, {Name: "ro", Region: of.ro}, {Name: "wo", Region: of.wo}}
	f.seg, err = f.owner.Listen(be.addr(), exports, verbs.ListenOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.seg.Close()) })
	f.ownerStaging, err = staging.New(f.owner, bufferpool.Config{Budget: 1 << 20, MinSlot: 64 << 10, NoHugePages: true}, verbs.AccessLocal)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.ownerStaging.Close()) })
	f.svc, err = gather.NewService(gather.Config{Segment: f.seg, Exports: exports, Staging: f.ownerStaging,
		Calibration: &testCalibration, PackWorkers: 1, Limits: planfmt.Limits{MaxFragments: 4096}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.svc.Close()) })
	f.local = alloc(f.req, 128<<10, verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	of.rodst = alloc(f.req, 16<<10, verbs.AccessLocal|verbs.AccessRemoteRead)
	f.conn, err = f.req.Connect(verbstest.Context(t), f.seg.Addr(), verbs.ConnectOptions{Link: manySmallLink,
		Expose: []verbs.Export{{Name: "dst", Region: f.local}, {Name: "rodst", Region: of.rodst}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.conn.Close()) })
	f.tableInfo, _ = verbs.FindRegion(f.conn.Remote(), "table")
	of.roInfo, _ = verbs.FindRegion(f.conn.Remote(), "ro")
	of.woInfo, _ = verbs.FindRegion(f.conn.Remote(), "wo")
	return of
}

// readCmd is a valid READ command of n rows of 264 bytes from the table
// into the exposed region.
func (of *ownerFixture) readCmd(n int) planfmt.Command {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32((i * 37) % 900)
	}
	return planfmt.Command{OpID: 7, Dir: planfmt.Read,
		Src:   planfmt.Window{Key: uint64(of.table.Key()), Off: 0, Len: 900 * 264},
		Dst:   planfmt.Window{Key: uint64(of.local.Key()), Off: 0, Len: uint64(n) * 264},
		Chunk: 64 << 10, Pipeline: 2,
		Plan: planfmt.Plan{Form: planfmt.FormRows, SrcExtent: 900 * 264, DstExtent: uint64(n) * 264,
			Rows: planfmt.Rows{RowSize: 264, TableRows: 900, IDs32: ids}}}
}

// writeCmd is a valid WRITE command: two ranges of the requester's
// exposed region, read in order, scattered into the table.
func (of *ownerFixture) writeCmd() planfmt.Command {
	return planfmt.Command{OpID: 8, Dir: planfmt.Write,
		Src:   planfmt.Window{Key: uint64(of.local.Key()), Off: 4096, Len: 8192},
		Dst:   planfmt.Window{Key: uint64(of.table.Key()), Off: 0, Len: 64 << 10},
		Chunk: 64 << 10, Pipeline: 2,
		Plan: planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: 8192, DstExtent: 64 << 10,
			Ranges: []planfmt.Range{{Src: 0, Dst: 30000, Len: 5000}, {Src: 5000, Dst: 100, Len: 3192}}}}
}

func encode(t *testing.T, c planfmt.Command) []byte {
	t.Helper()
	b, err := planfmt.AppendCommand(nil, &c)
	require.NoError(t, err)
	return b
}

// TestServiceRefuses sends hand-crafted bad commands straight through
// Conn.Call: each must be refused with nothing read into or written to
// either side.
func TestServiceRefuses(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			of := newOwnerFixture(t, be)
			other, err := of.req.Alloc(4096, verbs.AccessLocal|verbs.AccessRemoteWrite)
			require.NoError(t, err)
			mutate := func(base planfmt.Command, fn func(c *planfmt.Command)) func(*testing.T) []byte {
				return func(t *testing.T) []byte {
					c := base
					fn(&c)
					return encode(t, c)
				}
			}
			rd, wr := of.readCmd(200), of.writeCmd()
			for _, tc := range []struct {
				name string
				msg  func(t *testing.T) []byte
			}{
				{"unknown-source-key", mutate(rd, func(c *planfmt.Command) { c.Src.Key ^= 0x5a5a })},
				{"source-window-past-region", mutate(rd, func(c *planfmt.Command) { c.Src.Off = 256<<10 - 1000 })},
				{"source-not-readable", mutate(rd, func(c *planfmt.Command) { c.Src.Key = uint64(of.wo.Key()) })},
				{"destination-not-exposed", mutate(rd, func(c *planfmt.Command) { c.Dst.Key = uint64(other.Key()) })},
				{"destination-not-writable", mutate(rd, func(c *planfmt.Command) { c.Dst.Key = uint64(of.rodst.Key()) })},
				{"destination-past-exposure", mutate(rd, func(c *planfmt.Command) { c.Dst.Off = 128<<10 - 100 })},
				{"destination-is-owner-region", mutate(rd, func(c *planfmt.Command) { c.Dst.Key = uint64(of.table.Key()) })},
				{"too-many-fragments", func(t *testing.T) []byte { return encode(t, of.readCmd(5000)) }},
				{"overlapping-destinations", mutate(rd, func(c *planfmt.Command) {
					c.Plan = planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: c.Src.Len, DstExtent: c.Dst.Len,
						Ranges: []planfmt.Range{{Src: 0, Dst: 0, Len: 1000}, {Src: 5000, Dst: 999, Len: 10}}}
				})},
				{"write-into-read-only", mutate(wr, func(c *planfmt.Command) { c.Dst.Key = uint64(of.ro.Key()) })},
				{"write-from-unexposed", mutate(wr, func(c *planfmt.Command) { c.Src.Key = uint64(other.Key()) })},
				{"write-unsorted-sources", mutate(wr, func(c *planfmt.Command) {
					c.Plan.Ranges = []planfmt.Range{{Src: 5000, Dst: 30000, Len: 3192}, {Src: 0, Dst: 100, Len: 5000}}
				})},
				{"write-rows-form", mutate(wr, func(c *planfmt.Command) {
					c.Plan = planfmt.Plan{Form: planfmt.FormRows, SrcExtent: 8192, DstExtent: 64 << 10,
						Rows: planfmt.Rows{RowSize: 64, TableRows: 128, IDs32: []int32{3, 1, 2}}}
				})},
				{"corrupt-checksum", func(t *testing.T) []byte {
					b := encode(t, rd)
					b[len(b)-1] ^= 0xff
					return b
				}},
				{"truncated", func(t *testing.T) []byte { b := encode(t, rd); return b[:len(b)-3] }},
				{"plan-not-command", func(t *testing.T) []byte {
					b, err := planfmt.AppendPlan(nil, &rd.Plan)
					require.NoError(t, err)
					return b
				}},
				{"garbage", func(t *testing.T) []byte { return bytes.Repeat([]byte{0xA5}, 300) }},
				{"empty", func(t *testing.T) []byte { return nil }},
			} {
				t.Run(tc.name, func(t *testing.T) {
					localBefore := bytes.Clone(of.local.Bytes())
					tableBefore := bytes.Clone(of.table.Bytes())
					refused := of.svc.Stats().Refused
					_, err := of.conn.Call(verbstest.Context(t), gatherwire.MethodGather, tc.msg(t), nil)
					var ce *verbs.CallError
					require.ErrorAs(t, err, &ce)
					require.ErrorIs(t, err, verbs.ErrHandler)
					require.True(t, strings.HasPrefix(ce.Message, "verbs: gather refused: "), "message %q", ce.Message)
					require.True(t, bytes.Equal(localBefore, of.local.Bytes()), "requester memory changed")
					require.True(t, bytes.Equal(tableBefore, of.table.Bytes()), "owner memory changed")
					require.Equal(t, refused+1, of.svc.Stats().Refused)
					require.Zero(t, of.ownerStaging.Pool().Stats().Leases)
				})
			}
			t.Run("valid-read", func(t *testing.T) {
				c := of.readCmd(200)
				want := verbstest.Expect(&c.Plan, of.table.Bytes(), 0, of.local.Bytes(), 0)
				resp, err := of.conn.Call(verbstest.Context(t), gatherwire.MethodGather, encode(t, c), nil)
				require.NoError(t, err)
				require.NotEmpty(t, resp)
				require.True(t, bytes.Equal(want, of.local.Bytes()))
			})
			t.Run("valid-write", func(t *testing.T) {
				c := of.writeCmd()
				want := verbstest.Expect(&c.Plan, of.local.Bytes(), c.Src.Off, of.table.Bytes(), c.Dst.Off)
				_, err := of.conn.Call(verbstest.Context(t), gatherwire.MethodGather, encode(t, c), nil)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want, of.table.Bytes()))
			})
			t.Run("info-with-payload", func(t *testing.T) {
				_, err := of.conn.Call(verbstest.Context(t), gatherwire.MethodGatherInfo, []byte{1}, nil)
				var ce *verbs.CallError
				require.ErrorAs(t, err, &ce)
				require.True(t, strings.HasPrefix(ce.Message, "verbs: gather refused: "), "message %q", ce.Message)
			})
		})
	}
}

// TestPrepareReportsOwner checks the capability answer.
func TestPrepareReportsOwner(t *testing.T) {
	of := newOwnerFixture(t, backends[1])
	eng, err := engine.New(engine.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, eng.Close()) }()
	info, err := eng.Prepare(verbstest.Context(t), of.conn)
	require.NoError(t, err)
	require.Equal(t, testCalibration.BMem, info.BMem)
	require.Equal(t, testCalibration.RCopy, info.RCopy)
	require.Equal(t, 1, info.PackWorkers)
	require.Equal(t, int64(64<<10), info.MinChunk)
	require.Len(t, info.Exposed, 2)
	keys := map[verbs.Key]verbs.Access{}
	for _, e := range info.Exposed {
		keys[e.Key] = e.Access
	}
	require.Equal(t, of.local.Access(), keys[of.local.Key()])
	require.Equal(t, of.rodst.Access(), keys[of.rodst.Key()])
}

// TestSubmitRejects checks invalid operations fail at Submit with
// nothing started.
func TestSubmitRejects(t *testing.T) {
	r := verbstest.NewRand(t)
	f := newFixture(t, r, fixtureConfig{backend: backends[1], tableBytes: 1 << 20, localBytes: 1 << 20})
	ro, err := f.req.Alloc(4096, verbs.AccessRemoteRead)
	require.NoError(t, err)
	good := func() *engine.ScatterOp {
		return f.op(verbs.OpRead, rowsPlan(r, 1<<20, 100, 264, 0, 0), engine.ModeAuto)
	}
	for _, tc := range []struct {
		name string
		fn   func(op *engine.ScatterOp)
		is   error
	}{
		{"nil-conn", func(op *engine.ScatterOp) { op.Conn = nil }, verbs.ErrInvalid},
		{"nil-plan", func(op *engine.ScatterOp) { op.Plan = nil }, verbs.ErrInvalid},
		{"nil-local", func(op *engine.ScatterOp) { op.Local = nil }, verbs.ErrInvalid},
		{"bad-dir", func(op *engine.ScatterOp) { op.Dir = 9 }, verbs.ErrInvalid},
		{"bad-mode", func(op *engine.ScatterOp) { op.Mode = 9 }, verbs.ErrInvalid},
		{"local-not-local", func(op *engine.ScatterOp) { op.Local = ro }, verbs.ErrInvalid},
		{"remote-extent-too-long", func(op *engine.ScatterOp) { op.RemoteOff = 1 }, verbs.ErrInvalid},
		{"local-extent-too-long", func(op *engine.ScatterOp) { op.LocalOff = 1<<20 - 10 }, verbs.ErrInvalid},
		{"zero-remote-key", func(op *engine.ScatterOp) { op.Remote.Key = 0 }, verbs.ErrInvalid},
		{"remote-not-writable", func(op *engine.ScatterOp) {
			op.Dir = verbs.OpWrite
			op.Remote.Access = verbs.AccessRemoteRead
		}, verbs.ErrInvalid},
		{"plan-out-of-bounds", func(op *engine.ScatterOp) { op.Plan.Rows.IDs32[3] = 1 << 30 }, planfmt.ErrBounds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := bytes.Clone(f.local.Bytes())
			op := good()
			tc.fn(op)
			o, err := f.eng.Submit(verbstest.Context(t), op)
			require.Nil(t, o)
			require.ErrorIs(t, err, tc.is)
			require.True(t, bytes.Equal(before, f.local.Bytes()))
		})
	}
	require.Zero(t, f.eng.Stats().Ops)
	require.NoError(t, f.eng.Close())
	_, err = f.eng.Submit(verbstest.Context(t), good())
	require.True(t, errors.Is(err, verbs.ErrClosed))
}

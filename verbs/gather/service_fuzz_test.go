package gather_test

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

var updateSeeds = flag.Bool("engine.update-seeds", false, "rewrite testdata/fuzz/FuzzGatherCommand seeds")

// Key selectors: a fuzz message names regions by a small number in the
// low byte of a key field (the other 7 bytes zero); the harness puts the
// real key there before sending.
const (
	selTable = 1 // owner export, read and write
	selRO    = 2 // owner export, read only
	selDst   = 3 // requester exposure, read and write
	selRODst = 4 // requester exposure, read only
)

// fuzzLimits bound the service in the fuzz harness.
var fuzzLimits = planfmt.Limits{MaxFragments: 4096, MaxMessageBytes: 1 << 20, MaxCompletions: 64, MaxPipeline: 16, MaxChunkBytes: 1 << 20}

type fuzzHarness struct {
	owner, req       verbs.Transport
	table, ro        *verbs.Region
	dst, rodst       *verbs.Region
	seg              verbs.Segment
	staging          *staging.Staging
	svc              *gather.Service
	conn             verbs.Conn
	keys             map[byte]verbs.Key
	ownOf, peerOf    map[verbs.Key]*verbs.Region
	tableSz, dstSize int
}

// fuzzCalibration is a fixed packing calibration, and fuzzLink a link
// that makes small requests expensive, so the owner's decisions do not
// depend on the machine.
var (
	fuzzCalibration = costmodel.Calibration{BMem: 5e9, RCopy: 8e6}
	fuzzLink        = verbs.LinkParams{Bandwidth: 3e9, PostRate: 1e6, RTT: 30 * time.Microsecond}
)

func newFuzzHarness(tb testing.TB) *fuzzHarness {
	h := &fuzzHarness{owner: tcp.New(tcp.Config{}), req: tcp.New(tcp.Config{}), tableSz: 64 << 10, dstSize: 64 << 10}
	tb.Cleanup(func() {
		_ = h.owner.Close()
		_ = h.req.Close()
	})
	r := verbstest.NewRand(tb)
	alloc := func(tr verbs.Transport, n int, a verbs.Access) *verbs.Region {
		reg, err := tr.Alloc(n, a)
		require.NoError(tb, err)
		verbstest.Fill(r, reg.Bytes())
		return reg
	}
	h.table = alloc(h.owner, h.tableSz, verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	h.ro = alloc(h.owner, 4096, verbs.AccessRemoteRead)
	exports := []verbs.Export{{Name: "table", Region: h.table}, {Name: "ro", Region: h.ro}}
	var err error
	h.seg, err = h.owner.Listen("127.0.0.1:0", exports, verbs.ListenOptions{})
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, h.seg.Close()) })
	h.staging, err = staging.New(h.owner, bufferpool.Config{Budget: 1 << 20, MinSlot: 4096, NoHugePages: true}, verbs.AccessLocal)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, h.staging.Close()) })
	h.svc, err = gather.NewService(gather.Config{Segment: h.seg, Exports: exports, Staging: h.staging,
		Calibration: &fuzzCalibration, PackWorkers: 1, Limits: fuzzLimits, MaxChunk: 64 << 10, CommandBudget: 256 << 10})
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, h.svc.Close()) })
	h.dst = alloc(h.req, h.dstSize, verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	h.rodst = alloc(h.req, 4096, verbs.AccessLocal|verbs.AccessRemoteRead)
	h.conn, err = h.req.Connect(verbstest.Context(tb), h.seg.Addr(), verbs.ConnectOptions{Link: fuzzLink, Lanes: 1,
		Expose: []verbs.Export{{Name: "dst", Region: h.dst}, {Name: "rodst", Region: h.rodst}}})
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, h.conn.Close()) })
	h.keys = map[byte]verbs.Key{selTable: h.table.Key(), selRO: h.ro.Key(), selDst: h.dst.Key(), selRODst: h.rodst.Key()}
	h.ownOf = map[verbs.Key]*verbs.Region{h.table.Key(): h.table, h.ro.Key(): h.ro}
	h.peerOf = map[verbs.Key]*verbs.Region{h.dst.Key(): h.dst, h.rodst.Key(): h.rodst}
	return h
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// patch replaces key selectors with real keys and makes the length and
// checksum fields agree with the message, so mutations reach past them.
func (h *fuzzHarness) patch(msg []byte) {
	if len(msg) < 16 {
		return
	}
	if len(msg) >= 64 {
		for _, at := range []int{32, 56} {
			if k, ok := h.keys[msg[at]]; ok && bytes.Equal(msg[at+1:at+8], make([]byte, 7)) {
				binary.LittleEndian.PutUint64(msg[at:], uint64(k))
			}
		}
	}
	binary.LittleEndian.PutUint32(msg[8:], uint32(len(msg)))
	binary.LittleEndian.PutUint32(msg[12:], 0)
	binary.LittleEndian.PutUint32(msg[12:], crc32.Checksum(msg, castagnoli))
}

// FuzzGatherCommand sends arbitrary commands to a gather service over a
// real connection. A refused command must leave both sides untouched; an
// accepted one must produce exactly what the decoded plan says, and the
// staging pool must end with nothing leased.
func FuzzGatherCommand(f *testing.F) {
	dir := filepath.Join("testdata", "fuzz", "FuzzGatherCommand")
	if *updateSeeds {
		writeFuzzSeeds(f, dir)
	}
	ents, err := os.ReadDir(dir)
	require.NoError(f, err)
	require.NotEmpty(f, ents, "no seeds in %s", dir)
	h := newFuzzHarness(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		msg := bytes.Clone(data)
		h.patch(msg)
		tableBefore, dstBefore := bytes.Clone(h.table.Bytes()), bytes.Clone(h.dst.Bytes())
		_, err := h.conn.Call(verbstest.Context(t), gather.MethodGather, msg, nil)
		require.Zero(t, h.staging.Pool().Stats().Leases, "staging leaked")
		if err != nil {
			var ce *verbs.CallError
			require.ErrorAs(t, err, &ce)
			require.True(t, strings.HasPrefix(ce.Message, "verbs: gather refused: "), "message %q", ce.Message)
			require.True(t, bytes.Equal(tableBefore, h.table.Bytes()), "refused command changed the owner")
			require.True(t, bytes.Equal(dstBefore, h.dst.Bytes()), "refused command changed the requester")
			return
		}
		var cmd planfmt.Command
		require.NoError(t, fuzzLimits.DecodeCommand(&cmd, msg), "accepted a command that does not decode")
		wantTable, wantDst := tableBefore, dstBefore
		if cmd.Dir == planfmt.Read {
			own := h.ownOf[verbs.Key(cmd.Src.Key)]
			require.NotNil(t, own)
			wantDst = verbstest.Expect(&cmd.Plan, own.Bytes(), cmd.Src.Off, dstBefore, cmd.Dst.Off)
		} else {
			peer := h.peerOf[verbs.Key(cmd.Src.Key)]
			require.NotNil(t, peer)
			wantTable = verbstest.Expect(&cmd.Plan, peer.Bytes(), cmd.Src.Off, tableBefore, cmd.Dst.Off)
		}
		require.True(t, bytes.Equal(wantTable, h.table.Bytes()), "owner memory differs from the plan")
		require.True(t, bytes.Equal(wantDst, h.dst.Bytes()), "requester memory differs from the plan")
	})
}

// writeFuzzSeeds writes the seed corpus: valid commands of each shape
// (with key selectors) and a few broken ones.
func writeFuzzSeeds(tb testing.TB, dir string) {
	require.NoError(tb, os.MkdirAll(dir, 0o755))
	sel := func(s byte) uint64 { return uint64(s) }
	ids := func(n, rows int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32((i*131 + 7) % rows)
			if i%17 == 5 {
				out[i] = -1
			}
		}
		return out
	}
	seeds := map[string]planfmt.Command{
		"read-rows": {OpID: 1, Dir: planfmt.Read, Src: planfmt.Window{Key: sel(selTable), Len: 64 << 10},
			Dst: planfmt.Window{Key: sel(selDst), Off: 128, Len: 200 * 264}, Chunk: 8192, Pipeline: 3,
			Plan: planfmt.Plan{Form: planfmt.FormRows, SrcExtent: 64 << 10, DstExtent: 200 * 264,
				Rows: planfmt.Rows{RowSize: 264, TableRows: 248, IDs32: ids(200, 248)}}},
		"read-rows-strided": {OpID: 2, Dir: planfmt.Read, Src: planfmt.Window{Key: sel(selTable), Off: 64, Len: 32 << 10},
			Dst: planfmt.Window{Key: sel(selDst), Len: 40 * (3*100 + 20)}, Chunk: 4096, Pipeline: 2,
			Plan: planfmt.Plan{Form: planfmt.FormRows, SrcExtent: 32 << 10, DstExtent: 40 * (3*100 + 20),
				Rows: planfmt.Rows{RowSize: 100, TableRows: 300, IDs32: ids(120, 300),
					Layout: planfmt.Layout{Kind: planfmt.LayoutStrided, Cols: 3, RowStride: 320, ColStride: 100}},
				CompletionEnds: []uint32{60, 120}}},
		"read-ranges": {OpID: 3, Dir: planfmt.Read, Src: planfmt.Window{Key: sel(selRO), Len: 4096},
			Dst: planfmt.Window{Key: sel(selDst), Off: 1000, Len: 20000}, Chunk: 4096, Pipeline: 2,
			Plan: planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: 4096, DstExtent: 20000,
				Ranges: []planfmt.Range{{Src: 10, Dst: 0, Len: 3000}, {Src: 4000, Dst: 5000, Len: 96}, {Src: 0, Dst: 9000, Len: 4096}}}},
		"write-ranges": {OpID: 4, Dir: planfmt.Write, Src: planfmt.Window{Key: sel(selDst), Off: 512, Len: 9000},
			Dst: planfmt.Window{Key: sel(selTable), Off: 4096, Len: 40000}, Chunk: 4096, Pipeline: 2,
			Plan: planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: 9000, DstExtent: 40000,
				Ranges: []planfmt.Range{{Src: 0, Dst: 30000, Len: 5000}, {Src: 5000, Dst: 0, Len: 1}, {Src: 5001, Dst: 100, Len: 3999}}}},
		"write-into-read-only": {OpID: 5, Dir: planfmt.Write, Src: planfmt.Window{Key: sel(selRODst), Len: 4096},
			Dst: planfmt.Window{Key: sel(selRO), Len: 4096}, Chunk: 4096, Pipeline: 1,
			Plan: planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: 4096, DstExtent: 4096,
				Ranges: []planfmt.Range{{Src: 0, Dst: 0, Len: 4096}}}},
	}
	for name, c := range seeds {
		b, err := planfmt.AppendCommand(nil, &c)
		require.NoError(tb, err, name)
		writeSeed(tb, dir, name, b)
	}
	writeSeed(tb, dir, "short", []byte("SKCM\x01\x02"))
}

func writeSeed(tb testing.TB, dir, name string, b []byte) {
	body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
	require.NoError(tb, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
}

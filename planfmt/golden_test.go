package planfmt

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenCase is one message kept byte for byte in testdata/golden.
type goldenCase struct {
	name string
	desc string
	plan *Plan    // for plan messages
	cmd  *Command // for command messages
}

func goldenCases() []goldenCase {
	return []goldenCase{
		{
			name: "plan-rows-contiguous",
			desc: "5 ids (one -1) from a 1000-row table of 264-byte rows into a contiguous output; 2-byte ids",
			plan: &Plan{Form: FormRows, SrcExtent: 1000 * 264, DstExtent: 5 * 264,
				Rows: Rows{RowSize: 264, TableRows: 1000, IDs32: []int32{17, 18, -1, 999, 3}}},
		},
		{
			name: "plan-rows-strided",
			desc: "[2 tokens, 3 heads] token-major with a 16-byte pad per token, 384,000,000-row table, two completion spans; 4-byte ids",
			plan: &Plan{Form: FormRows, SrcExtent: 384_000_000 * 264, DstExtent: 2*(3*264+16) + 4096,
				Rows: Rows{RowSize: 264, SrcBase: 0, TableRows: 384_000_000, DstBase: 4096,
					IDs64:  []int64{383_999_999, 0, -1, 123_456_789, 123_456_790, 42},
					Layout: Layout{Kind: LayoutStrided, Cols: 3, RowStride: 3*264 + 16, ColStride: 264}},
				CompletionEnds: []uint32{3, 6}},
		},
		{
			name: "plan-ranges",
			desc: "4 ranges with source, destination and length columns stored (3-, 2- and 2-byte)",
			plan: rangesPlan(1<<24, 1<<16,
				Range{Src: 1 << 20, Dst: 0, Len: 4096},
				Range{Src: 7, Dst: 8192, Len: 64},
				Range{Src: 3 << 20, Dst: 4096, Len: 4096},
				Range{Src: 900_000, Dst: 9000, Len: 1}),
		},
		{
			name: "plan-ranges-sequential",
			desc: "3 ranges packed back to back in the destination: the destination column takes no bytes",
			plan: rangesPlan(1<<20, 1<<20,
				Range{Src: 5000, Dst: 100, Len: 300},
				Range{Src: 100, Dst: 400, Len: 200},
				Range{Src: 20000, Dst: 600, Len: 300}),
		},
		{
			name: "plan-empty",
			desc: "an empty ranges plan",
			plan: rangesPlan(0, 0),
		},
		{
			name: "command-engram-read",
			desc: "READ of 4 rows head-major ([2 tokens, 2 heads], row stride 264, column stride 528), per-span events",
			cmd: &Command{OpID: 0x0102030405060708, Dir: Read, Chunk: 256 << 10, Pipeline: 4, Flags: FlagSpanEvents,
				Src: Window{Key: 0xaa, Off: 1 << 30, Len: 1 << 20 * 264},
				Dst: Window{Key: 0xbb, Off: 8192, Len: 4 * 264},
				Plan: Plan{Form: FormRows, SrcExtent: 1 << 20 * 264, DstExtent: 4 * 264,
					Rows: Rows{RowSize: 264, TableRows: 1 << 20, IDs32: []int32{10, 11, 500_000, -1},
						Layout: Layout{Kind: LayoutStrided, Cols: 2, RowStride: 264, ColStride: 528}},
					CompletionEnds: []uint32{2, 4}}},
		},
		{
			name: "command-ranges-write",
			desc: "WRITE of 2 ranges into an owner window",
			cmd: &Command{OpID: 99, Dir: Write, Chunk: 1 << 20, Pipeline: 2,
				Src: Window{Key: 1, Off: 0, Len: 1 << 16}, Dst: Window{Key: 2, Off: 1 << 40, Len: 1 << 16},
				Plan: *rangesPlan(1<<16, 1<<16, Range{Src: 0, Dst: 512, Len: 256}, Range{Src: 256, Dst: 0, Len: 256})},
		},
	}
}

func (c goldenCase) encode(t *testing.T) []byte {
	t.Helper()
	var b []byte
	var err error
	if c.cmd != nil {
		b, err = AppendCommand(nil, c.cmd)
	} else {
		b, err = AppendPlan(nil, c.plan)
	}
	require.NoError(t, err)
	return b
}

func TestGolden(t *testing.T) {
	dir := filepath.Join("testdata", "golden")
	if *update {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			b := c.encode(t)
			text := annotate(b, c.name, c.desc)
			binPath, txtPath := filepath.Join(dir, c.name+".bin"), filepath.Join(dir, c.name+".txt")
			if *update {
				require.NoError(t, os.WriteFile(binPath, b, 0o644))
				require.NoError(t, os.WriteFile(txtPath, []byte(text), 0o644))
			}
			wantBin, err := os.ReadFile(binPath)
			require.NoError(t, err, "run go test -run Golden -update to create it")
			wantTxt, err := os.ReadFile(txtPath)
			require.NoError(t, err)
			require.Equal(t, wantBin, b, "encoding drifted from %s", binPath)
			require.Equal(t, string(wantTxt), text, "annotation drifted from %s", txtPath)

			// The committed bytes decode to the case's plan.
			if c.cmd != nil {
				var got Command
				require.NoError(t, DecodeCommand(&got, wantBin))
				require.Equal(t, viewOf(&c.cmd.Plan), viewOf(&got.Plan))
			} else {
				var got Plan
				require.NoError(t, DecodePlan(&got, wantBin))
				require.Equal(t, viewOf(c.plan), viewOf(&got))
			}
		})
	}
}

// dumper writes one annotated line per field. It is a reader of the format
// written independently of the decoder, so a golden file documents the
// layout rather than echoing the encoder.
type dumper struct {
	b   []byte
	off int
	sb  strings.Builder
}

func (d *dumper) take(n int) uint64 {
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(d.b[d.off+i])
	}
	return v
}

func (d *dumper) field(n int, format string, args ...any) uint64 {
	v := d.take(n)
	hex := make([]string, n)
	for i := range n {
		hex[i] = fmt.Sprintf("%02x", d.b[d.off+i])
	}
	fmt.Fprintf(&d.sb, "%06x  %-23s  %s\n", d.off, strings.Join(hex, " "), fmt.Sprintf(format, args...))
	d.off += n
	return v
}

func (d *dumper) u(n int, name string) uint64 {
	return d.field(n, "%s = %d", name, d.take(n))
}

func (d *dumper) section(name string) {
	fmt.Fprintf(&d.sb, "# %s\n", name)
}

// annotate renders a message as an annotated hex dump.
func annotate(b []byte, name, desc string) string {
	d := &dumper{b: b}
	fmt.Fprintf(&d.sb, "# %s: %s\n# %d bytes; offset, bytes (little-endian), field\n", name, desc, len(b))
	d.section("header")
	d.field(4, "magic = %q", string(b[:4]))
	d.u(1, "version")
	form := d.field(1, "form = %d (%s)", b[5], Form(b[5]))
	d.u(2, "flags")
	d.u(4, "length")
	d.field(4, "crc32c = 0x%08x", d.take(4))
	n := int(d.u(4, "fragments N"))
	g := int(d.u(4, "completion ends G"))
	if string(b[:4]) == "SKCM" {
		d.section("command")
		d.field(8, "operation id = 0x%016x", d.take(8))
		d.field(8, "source region key = 0x%x", d.take(8))
		d.u(8, "source window offset")
		d.u(8, "source window length")
		d.field(8, "destination region key = 0x%x", d.take(8))
		d.u(8, "destination window offset")
		d.u(8, "destination window length")
		d.u(8, "chunk size C")
		d.u(4, "pipeline width P")
		d.field(4, "command flags = 0x%x", d.take(4))
		d.field(1, "direction = %d (%s)", b[d.off], Direction(b[d.off]))
		d.u(7, "reserved")
	}
	if Form(form) == FormRows {
		d.section("rows descriptor")
		d.u(8, "source extent")
		d.u(8, "destination extent")
		d.u(8, "row size R")
		d.u(8, "source base")
		d.u(8, "table rows")
		d.u(8, "destination base")
		d.u(8, "layout cols K")
		d.u(8, "layout row stride")
		d.u(8, "layout column stride")
		w := int(d.u(1, "id width w"))
		d.u(1, "layout (0 contiguous, 1 strided)")
		d.u(6, "reserved")
		d.ends(g)
		d.section("ids")
		allOnes := uint64(1)<<(8*w) - 1
		for i := range n {
			if d.take(w) == allOnes {
				d.field(w, "id[%d] = -1 (skip)", i)
			} else {
				d.u(w, fmt.Sprintf("id[%d]", i))
			}
		}
		return d.sb.String()
	}
	d.section("ranges descriptor")
	d.u(8, "source extent")
	d.u(8, "destination extent")
	srcLo := d.u(8, "srcLo")
	dstLo := d.u(8, "dstLo")
	ws := int(d.u(1, "source offset width"))
	wd := int(d.u(1, "destination offset width"))
	wl := int(d.u(1, "length width"))
	d.u(5, "reserved")
	d.ends(g)
	d.column("source offsets", "src", n, ws, srcLo)
	d.column("destination offsets", "dst", n, wd, dstLo)
	d.section("lengths")
	for i := range n {
		d.u(wl, fmt.Sprintf("len[%d]", i))
	}
	return d.sb.String()
}

func (d *dumper) ends(g int) {
	if g == 0 {
		d.section("completion ends: none (one span)")
		return
	}
	d.section("completion ends")
	for j := range g {
		d.u(4, fmt.Sprintf("end[%d]", j))
	}
}

func (d *dumper) column(title, name string, n, w int, lo uint64) {
	if w == 0 {
		d.section(title + ": width 0, sequential from the base")
		return
	}
	d.section(title)
	for i := range n {
		rel := d.take(w)
		d.field(w, "%s[%d] = %d + %d = %d", name, i, lo, rel, lo+rel)
	}
}

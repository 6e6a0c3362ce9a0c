//go:build linux

package snapshot

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files and fuzz seeds in testdata")

// The golden table: 600 rows of 24 bytes in checksum blocks of at least
// 4 KiB, so 171 rows each (170 rows would be 4080 bytes): 4 blocks, the
// last one short.
var goldenSpec = Spec{Name: "golden.table-1", NumRows: 600, RowBytes: 24}

const goldenKey = 1

// annotate renders a header and checksum table as an annotated hex dump.
func annotate(b []byte) string {
	h, err := DecodeHeader(b)
	if err != nil {
		return "undecodable: " + err.Error()
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "# table %v in checksum blocks of %d rows\n", h.Spec, h.BlockRows)
	fmt.Fprintf(&sb, "# header and checksum table (regenerate: go test -run TestGolden -update)\n")
	le := binary.LittleEndian
	line := func(off, n int, what string, args ...any) {
		fmt.Fprintf(&sb, "%06x  %-23s  %s\n", off, fmt.Sprintf("% x", b[off:off+n]), fmt.Sprintf(what, args...))
	}
	line(offMagic, 8, `magic "\x89ENGRAM\n"`)
	line(offVersion, 2, "version = %d", le.Uint16(b[offVersion:]))
	line(offFlags, 2, "flags = %d", le.Uint16(b[offFlags:]))
	line(offHeaderLen, 4, "header length = %d", le.Uint32(b[offHeaderLen:]))
	line(offNumRows, 8, "num rows = %d", h.Spec.NumRows)
	line(offRowBytes, 8, "row bytes = %d", h.Spec.RowBytes)
	line(offBlockRows, 8, "block rows = %d", h.BlockRows)
	line(offNumBlocks, 8, "num blocks = %d", h.NumBlocks)
	line(offSumsOffset, 8, "checksum table offset = %d", h.SumsOffset)
	line(offRowOffset, 8, "row offset = %d", h.RowOffset)
	line(offFileSize, 8, "file size = %d", h.FileSize)
	line(offSumsCRC, 4, "checksum table CRC32C = %#08x", h.SumsCRC)
	line(offNameLen, 2, "name length = %d", len(h.Spec.Name))
	line(offReserved, 2, "reserved")
	for off := offName; off < offName+len(h.Spec.Name); off += 8 {
		n := min(8, offName+len(h.Spec.Name)-off)
		line(off, n, "name %q", b[off:off+n])
	}
	if pad := int(h.HeaderLen) - 4 - offName - len(h.Spec.Name); pad > 0 {
		line(offName+len(h.Spec.Name), pad, "zero padding")
	}
	line(int(h.HeaderLen)-4, 4, "header CRC32C = %#08x", le.Uint32(b[h.HeaderLen-4:]))
	for i := range h.NumBlocks {
		first, end := h.BlockRowRange(i)
		line(int(h.SumsOffset+4*i), 4, "CRC32C of block %d, rows %d-%d = %#08x", i, first, end-1, le.Uint32(b[h.SumsOffset+4*i:]))
	}
	fmt.Fprintf(&sb, "%06x  zero padding to the row offset\n%06x  rows, %d bytes each, to the end of the file at %d\n",
		h.SumsOffset+4*h.NumBlocks, h.RowOffset, h.Spec.RowBytes, h.FileSize)
	return sb.String()
}

// fuzzSeeds derives the fuzz seeds from a valid header and checksum table.
func fuzzSeeds(valid []byte) map[string][]byte {
	h, err := DecodeHeader(valid)
	if err != nil {
		panic(err)
	}
	head := valid[:h.HeaderLen]
	mut := func(f func(b []byte), fix bool) []byte {
		b := bytes.Clone(head)
		f(b)
		if fix {
			fixCRC(b)
		}
		return b
	}
	long := Spec{Name: strings.Repeat("L", MaxNameLen), NumRows: 1 << 30, RowBytes: 264}
	lh := newHeader(long, blockRowsFor(long, DefaultBlockBytes))
	one := Spec{Name: "one", NumRows: 1, RowBytes: 1}
	oh := newHeader(one, 1)
	return map[string][]byte{
		"valid.bin":     valid,
		"long-name.bin": appendHeader(nil, &lh),
		"one-byte.bin":  appendHeader(nil, &oh),
		"bad-magic.bin": mut(func(b []byte) { b[3] ^= 0x20 }, false),
		"version-2.bin": mut(func(b []byte) { b[offVersion] = 2 }, true),
		"bad-crc.bin":   mut(func(b []byte) { b[h.HeaderLen-1] ^= 0xff }, false),
		"truncated.bin": bytes.Clone(head[:60]),
		"bad-row-offset.bin": mut(func(b []byte) {
			binary.LittleEndian.PutUint64(b[offRowOffset:], uint64(h.RowOffset+4096))
		}, true),
		"bad-block-rows.bin": mut(func(b []byte) {
			binary.LittleEndian.PutUint64(b[offBlockRows:], uint64(h.BlockRows-1))
		}, true),
	}
}

// TestGolden pins the file format: a table written by Create must match the
// committed header and checksum table byte for byte, with zero padding and
// the rows where the format says.
func TestGolden(t *testing.T) {
	dir := newDir(t, "golden")
	rows := makeRows(goldenSpec, goldenKey)
	require.NoError(t, Create(dir, goldenSpec, rows, &CreateOptions{BlockBytes: MinBlockBytes}))
	file, err := os.ReadFile(filepath.Join(dir, FileName(goldenSpec.Name)))
	require.NoError(t, err)
	h, err := DecodeHeader(file)
	require.NoError(t, err)
	require.Equal(t, int64(171), h.BlockRows)
	require.Equal(t, int64(4), h.NumBlocks)
	require.Equal(t, int64(len(file)), h.FileSize)
	head := file[:h.SumsOffset+4*h.NumBlocks]
	require.Equal(t, make([]byte, h.RowOffset-int64(len(head))), file[len(head):h.RowOffset], "zero padding")
	require.Equal(t, rows, file[h.RowOffset:], "rows")

	seeds := fuzzSeeds(bytes.Clone(head))
	txt := annotate(head)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Join("testdata", "headers"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join("testdata", "golden-v1.hdr"), head, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join("testdata", "golden-v1.txt"), []byte(txt), 0o644))
		for name, b := range seeds {
			require.NoError(t, os.WriteFile(filepath.Join("testdata", "headers", name), b, 0o644))
		}
	}
	want, err := os.ReadFile(filepath.Join("testdata", "golden-v1.hdr"))
	require.NoError(t, err)
	require.Equal(t, want, head, "header and checksum table differ from testdata/golden-v1.hdr:\n%s", txt)
	wantTxt, err := os.ReadFile(filepath.Join("testdata", "golden-v1.txt"))
	require.NoError(t, err)
	require.Equal(t, string(wantTxt), txt)
	require.Equal(t, seeds, readSeeds(t), "testdata/headers is stale: run with -update")
}

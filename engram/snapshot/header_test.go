package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// need64 skips a test whose tables exceed what a 32-bit system can map.
func need64(t *testing.T) {
	if math.MaxInt == math.MaxInt32 {
		t.Skip("uses tables over 2 GiB, which need a 64-bit system")
	}
}

// testHeader encodes a header of spec with the default block size.
func testHeader(spec Spec, sumsCRC uint32) (Header, []byte) {
	h := newHeader(spec, blockRowsFor(spec, DefaultBlockBytes))
	h.SumsCRC = sumsCRC
	return h, appendHeader(nil, &h)
}

// fixCRC recomputes the header CRC after a mutation.
func fixCRC(b []byte) {
	hl := len(b)
	binary.LittleEndian.PutUint32(b[hl-4:], crc32.Checksum(b[:hl-4], castagnoli))
}

// checkLayout asserts the invariants of a decoded header.
func checkLayout(t testing.TB, h *Header) {
	t.Helper()
	require.NoError(t, h.Spec.Validate())
	require.Equal(t, Version, h.Version)
	require.Equal(t, headerLen(len(h.Spec.Name)), h.HeaderLen)
	require.Zero(t, h.HeaderLen%8)
	require.LessOrEqual(t, h.HeaderLen, int64(MaxHeaderLen))
	require.Equal(t, h.HeaderLen, h.SumsOffset)
	require.Zero(t, h.RowOffset%RowAlign, "rows are aligned")
	require.GreaterOrEqual(t, h.RowOffset, h.SumsOffset+4*h.NumBlocks, "rows follow the checksum table")
	require.Less(t, h.RowOffset-RowAlign, h.SumsOffset+4*h.NumBlocks, "no more padding than alignment needs")
	require.Equal(t, h.RowOffset+h.Spec.Size(), h.FileSize)
	require.GreaterOrEqual(t, h.BlockRows, int64(1))
	require.LessOrEqual(t, h.BlockRows, h.Spec.NumRows)
	require.Equal(t, (h.Spec.NumRows+h.BlockRows-1)/h.BlockRows, h.NumBlocks)
	first, end := h.BlockRowRange(h.NumBlocks - 1)
	require.Equal(t, h.Spec.NumRows, end, "the last block ends the table")
	require.Less(t, first, end)
}

func TestHeaderRoundTrip(t *testing.T) {
	need64(t)
	rng := newRand(t)
	specs := []Spec{
		{Name: "a", NumRows: 1, RowBytes: 1},
		{Name: strings.Repeat("z", MaxNameLen), NumRows: 1, RowBytes: 1},
		{Name: "engram.l07", NumRows: 400_000_000, RowBytes: 264},
		{Name: "huge-row", NumRows: 3, RowBytes: min(3<<30, math.MaxInt/4)},
		{Name: "max", NumRows: maxSize(), RowBytes: 1},
	}
	for range 200 {
		name := make([]byte, 1+rng.IntN(MaxNameLen))
		const alphabet = "abcXYZ019._-"
		for i := range name {
			name[i] = alphabet[rng.IntN(len(alphabet))]
		}
		name[0] = 'n'
		rb := 1 + rng.IntN(1<<rng.IntN(24))
		s := Spec{Name: string(name), NumRows: 1 + rng.Int64N(1<<rng.IntN(30)), RowBytes: rb}
		if s.Validate() == nil { // always on 64-bit systems
			specs = append(specs, s)
		}
	}
	for _, spec := range specs {
		require.NoError(t, spec.Validate(), "%v", spec)
		for _, target := range []int{MinBlockBytes, DefaultBlockBytes, MaxBlockBytes, 5000 + rng.IntN(1<<20)} {
			h := newHeader(spec, blockRowsFor(spec, target))
			h.SumsCRC = rng.Uint32()
			b := appendHeader([]byte("prefix"), &h)
			require.Equal(t, "prefix", string(b[:6]), "appends")
			got, err := DecodeHeader(append(b[6:], "trailing bytes"...))
			require.NoError(t, err, "%v target %d", spec, target)
			if d := cmp.Diff(h, got); d != "" {
				t.Fatalf("%v target %d: decoded header differs (-want +got):\n%s", spec, target, d)
			}
			checkLayout(t, &got)
			bb := got.BlockBytes()
			require.True(t, got.BlockRows == spec.NumRows || bb >= MinBlockBytes, "block of %d bytes", bb)
			require.True(t, got.BlockRows == 1 || bb <= int64(target) || bb < MinBlockBytes+int64(spec.RowBytes),
				"block of %d bytes over target %d", bb, target)
		}
	}
}

func TestBlockRowsFor(t *testing.T) {
	need64(t)
	for _, tc := range []struct {
		rows   int64
		bytes  int
		target int
		want   int64
	}{
		{1000, 264, DefaultBlockBytes, 3971},                 // capped at the table's 1000 rows
		{1_000_000, 264, DefaultBlockBytes, 3971},            // floor(1 MiB / 264)
		{1_000_000, 264, MinBlockBytes, 16},                  // 15 rows are 3960 B < 4 KiB: 16
		{600, 24, MinBlockBytes, 171},                        // 170 rows are 4080 B < 4 KiB: 171
		{10, 1, DefaultBlockBytes, 10},                       // the whole table
		{5, 5000, MinBlockBytes, 1},                          // one row, over the minimum
		{5, min(3<<30, math.MaxInt/8), DefaultBlockBytes, 1}, // one row, over the maximum
		{1 << 20, 1 << 20, MaxBlockBytes, 1024},              // exactly the maximum
		{1 << 40, 1, MaxBlockBytes, MaxBlockBytes},           // many tiny rows
		{1 << 40, 3, DefaultBlockBytes, 349525},              // floor(1 MiB / 3)
		{1 << 40, 4097, DefaultBlockBytes, 255},              // floor(1 MiB / 4097)
		{1 << 40, 4097, MinBlockBytes, 1},                    // one row of 4097 B
		{1 << 40, 2000, MinBlockBytes, 3},                    // 2 rows are 4000 B: 3
		{1 << 30, (1 << 20) + 1, DefaultBlockBytes, 1},       // one row over the target
	} {
		spec := Spec{Name: "t", NumRows: tc.rows, RowBytes: tc.bytes}
		want := min(tc.want, tc.rows)
		require.Equal(t, want, blockRowsFor(spec, tc.target), "%v target %d", spec, tc.target)
		h := newHeader(spec, blockRowsFor(spec, tc.target))
		got, err := DecodeHeader(appendHeader(nil, &h))
		require.NoError(t, err, "%v target %d", spec, tc.target)
		require.Equal(t, h, got)
	}
}

func TestDecodeHeaderErrors(t *testing.T) {
	need64(t)
	base, good := testHeader(Spec{Name: "t1", NumRows: 100_000, RowBytes: 264}, 0x1234abcd)
	require.Equal(t, int64(88), base.HeaderLen, "name 't1' leaves 2 padding bytes")
	le := binary.LittleEndian
	u16 := func(off int, v uint16) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint16(b[off:], v); return b }
	}
	u32 := func(off int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint32(b[off:], v); return b }
	}
	u64 := func(off int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint64(b[off:], v); return b }
	}
	at := func(off int, c byte) func([]byte) []byte {
		return func(b []byte) []byte { b[off] = c; return b }
	}
	cut := func(n int) func([]byte) []byte { return func(b []byte) []byte { return b[:n] } }
	// tiny: a one-block table of small rows, to reach the block size rules.
	_, tiny := testHeader(Spec{Name: "t1", NumRows: 100, RowBytes: 8}, 1)
	// big: rows of 1 MiB.
	_, big := testHeader(Spec{Name: "t1", NumRows: 2048, RowBytes: 1 << 20}, 1)

	for _, tc := range []struct {
		desc   string
		from   []byte
		mutate func([]byte) []byte
		fix    bool // recompute the header CRC after mutating
		field  string
		err    error
	}{
		{"empty", good, cut(0), false, "header", ErrTruncated},
		{"magic prefix only", good, cut(5), false, "header", ErrTruncated},
		{"short fixed part", good, cut(79), false, "header", ErrTruncated},
		{"short name part", good, cut(87), false, "header", ErrTruncated},
		{"magic", good, at(1, 'e'), false, "magic", ErrCorrupt},
		{"magic short garbage", good, func(b []byte) []byte { return []byte("PK\x03") }, false, "magic", ErrCorrupt},
		{"version 2", good, u16(offVersion, 2), false, "version", ErrVersion},
		{"version 0", good, u16(offVersion, 0), true, "version", ErrVersion},
		{"flags", good, u16(offFlags, 1), true, "flags", ErrCorrupt},
		{"name length over max", good, u16(offNameLen, MaxNameLen+1), true, "name length", ErrCorrupt},
		{"header length", good, u32(offHeaderLen, 96), true, "header length", ErrCorrupt},
		{"name length vs header length", good, u16(offNameLen, 20), true, "header length", ErrCorrupt},
		{"header crc", good, at(87, good[87]^1), false, "header crc", ErrCorrupt},
		{"field flip without crc fix", good, at(offNumRows, good[offNumRows]^0x10), false, "header crc", ErrCorrupt},
		{"reserved", good, u16(offReserved, 7), true, "reserved", ErrCorrupt},
		{"padding", good, at(83, 1), true, "padding", ErrCorrupt},
		{"name bad byte", good, at(offName+1, '/'), true, "name", ErrCorrupt},
		{"name hidden", good, at(offName, '.'), true, "name", ErrCorrupt},
		{"name empty", good, func(b []byte) []byte {
			b = append(b[:offName], make([]byte, 8)...)
			le.PutUint16(b[offNameLen:], 0)
			le.PutUint32(b[offHeaderLen:], 88)
			return b
		}, true, "name", ErrCorrupt},
		{"num rows 0", good, u64(offNumRows, 0), true, "num rows", ErrCorrupt},
		{"num rows negative", good, u64(offNumRows, 1<<63), true, "num rows", ErrCorrupt},
		{"num rows too many", good, u64(offNumRows, uint64(MaxTableBytes)), true, "num rows", ErrCorrupt},
		{"row bytes 0", good, u64(offRowBytes, 0), true, "row bytes", ErrCorrupt},
		{"row bytes huge", good, u64(offRowBytes, math.MaxUint64), true, "row bytes", ErrCorrupt},
		{"block rows 0", good, u64(offBlockRows, 0), true, "block rows", ErrCorrupt},
		{"block rows over num rows", good, u64(offBlockRows, 100_001), true, "block rows", ErrCorrupt},
		{"block under min", good, u64(offBlockRows, 15), true, "block rows", ErrCorrupt},
		{"tiny block under min", tiny, u64(offBlockRows, 99), true, "block rows", ErrCorrupt},
		{"block over max", big, u64(offBlockRows, 1025), true, "block rows", ErrCorrupt},
		{"num blocks", good, u64(offNumBlocks, uint64(base.NumBlocks+1)), true, "num blocks", ErrCorrupt},
		{"checksum table offset", good, u64(offSumsOffset, 96), true, "checksum table offset", ErrCorrupt},
		{"row offset unaligned", good, u64(offRowOffset, uint64(base.RowOffset+4096)), true, "row offset", ErrCorrupt},
		{"row offset overlapping", good, u64(offRowOffset, 0), true, "row offset", ErrCorrupt},
		{"file size field", good, u64(offFileSize, uint64(base.FileSize-1)), true, "file size field", ErrCorrupt},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			b := tc.mutate(bytes.Clone(tc.from))
			if tc.fix {
				fixCRC(b)
			}
			_, err := DecodeHeader(b)
			require.ErrorIs(t, err, tc.err)
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.field, ce.Field, "%v", err)
			require.NotEmpty(t, ce.Detail)
			require.Contains(t, err.Error(), tc.field)
			for _, other := range []error{ErrCorrupt, ErrTruncated, ErrVersion} {
				if other != tc.err {
					require.NotErrorIs(t, err, other)
				}
			}
		})
	}
	h, err := DecodeHeader(good)
	require.NoError(t, err, "the base header is valid")
	require.Equal(t, base, h)
}

// readSeeds returns the fuzz seeds committed in testdata/headers.
func readSeeds(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "headers", "*.bin"))
	require.NoError(t, err)
	require.NotEmpty(t, paths, "testdata/headers holds the seeds (regenerate with -update)")
	seeds := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		seeds[filepath.Base(p)] = b
	}
	return seeds
}

// FuzzReadHeader feeds arbitrary file prefixes to the header reader: it
// must never panic, must fail with a *CorruptError naming the file, and
// must accept only self-consistent headers: ones that re-encode to the same
// bytes and satisfy every layout invariant.
func FuzzReadHeader(f *testing.F) {
	for _, b := range readSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := readHeaderAt(bytes.NewReader(data), int64(len(data)), "fuzz.engram")
		if err != nil {
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, "fuzz.engram", ce.Path)
			require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTruncated) || errors.Is(err, ErrVersion), "%v", err)
			return
		}
		require.Equal(t, data[:h.HeaderLen], appendHeader(nil, &h), "accepted only canonical bytes")
		checkLayout(t, &h)
		want := newHeader(h.Spec, h.BlockRows)
		want.SumsCRC = h.SumsCRC
		require.Equal(t, want, h)
	})
}

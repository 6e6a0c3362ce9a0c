//go:build linux

package snapshot

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// victim is the table the corruption tests damage: 9 checksum blocks of
// 248 rows (64 KiB target), the last one short.
var victim = Spec{Name: "victim", NumRows: 2000, RowBytes: 264}

func victimFile(t testing.TB, key uint64) (rows, file []byte, h Header) {
	t.Helper()
	dir := newDir(t, "src")
	rows = makeRows(victim, key)
	require.NoError(t, Create(dir, victim, rows, &CreateOptions{BlockBytes: 64 << 10}))
	file, err := os.ReadFile(filepath.Join(dir, FileName(victim.Name)))
	require.NoError(t, err)
	h, err = DecodeHeader(file)
	require.NoError(t, err)
	require.Equal(t, int64(248), h.BlockRows)
	require.Equal(t, int64(9), h.NumBlocks)
	return rows, file, h
}

func TestOpenCorruptFiles(t *testing.T) {
	rng := newRand(t)
	rows, orig, h := victimFile(t, rng.Uint64())
	bb := h.BlockBytes()
	block := 1 + rng.Int64N(h.NumBlocks-2) // a middle block
	inBlock := rng.Int64N(bb)
	t.Logf("damaging block %d at byte %d of it", block, inBlock)
	flip := func(off int64) func([]byte) []byte {
		return func(b []byte) []byte { b[off] ^= 0x5a; return b }
	}
	withCRC := func(f func([]byte) []byte) func([]byte) []byte {
		return func(b []byte) []byte {
			b = f(b)
			binary.LittleEndian.PutUint32(b[h.HeaderLen-4:], crc32.Checksum(b[:h.HeaderLen-4], castagnoli))
			return b
		}
	}
	set64 := func(off int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint64(b[off:], v); return b }
	}
	cut := func(n int64) func([]byte) []byte { return func(b []byte) []byte { return b[:n] } }
	grow := func(n int) func([]byte) []byte {
		return func(b []byte) []byte { return append(b, bytes.Repeat([]byte{7}, n)...) }
	}
	rowsErr := func(blk int64) *CorruptError {
		first, end := h.BlockRowRange(blk)
		return &CorruptError{Field: fieldRows, Offset: h.RowOffset + first*int64(victim.RowBytes), FirstRow: first, EndRow: end}
	}
	for _, tc := range []struct {
		desc    string
		mutate  func([]byte) []byte
		field   string
		err     error
		rows    *CorruptError // for row damage: the block it must name
		skipped bool          // SkipRowChecksums lets it through
	}{
		{"magic", flip(2), "magic", ErrCorrupt, nil, false},
		{"version", set64(offVersion, 2), "version", ErrVersion, nil, false},
		{"num rows", flip(offNumRows), "header crc", ErrCorrupt, nil, false},
		{"name", flip(offName), "header crc", ErrCorrupt, nil, false},
		{"header crc", flip(h.HeaderLen - 1), "header crc", ErrCorrupt, nil, false},
		{"num rows, crc fixed", withCRC(set64(offNumRows, 1999)), "file size field", ErrCorrupt, nil, false},
		{"row offset, crc fixed", withCRC(set64(offRowOffset, uint64(h.RowOffset+4096))), "row offset", ErrCorrupt, nil, false},
		{"checksum table entry", flip(h.SumsOffset + 4*block + 1), fieldSums, ErrCorrupt, nil, false},
		{"checksum table crc, crc fixed", withCRC(flip(offSumsCRC)), fieldSums, ErrCorrupt, nil, false},
		{"first padding byte", flip(h.SumsOffset + 4*h.NumBlocks), fieldPadding, ErrCorrupt, nil, false},
		{"middle padding byte", flip(h.SumsOffset + 4*h.NumBlocks + rng.Int64N(h.RowOffset-h.SumsOffset-4*h.NumBlocks)), fieldPadding, ErrCorrupt, nil, false},
		{"last padding byte", flip(h.RowOffset - 1), fieldPadding, ErrCorrupt, nil, false},
		{"first row byte", flip(h.RowOffset), fieldRows, ErrCorrupt, rowsErr(0), true},
		{"row byte", flip(h.RowOffset + block*bb + inBlock), fieldRows, ErrCorrupt, rowsErr(block), true},
		{"last byte", flip(h.FileSize - 1), fieldRows, ErrCorrupt, rowsErr(h.NumBlocks - 1), true},
		{"one byte short", cut(h.FileSize - 1), fieldSize, ErrTruncated, nil, false},
		{"rows missing", cut(h.RowOffset), fieldSize, ErrTruncated, nil, false},
		{"cut in checksum table", cut(h.SumsOffset + 2), fieldSize, ErrTruncated, nil, false},
		{"cut in header", cut(50), "header", ErrTruncated, nil, false},
		{"empty", cut(0), "header", ErrTruncated, nil, false},
		{"one byte long", grow(1), fieldSize, ErrCorrupt, nil, false},
		{"a page long", grow(4096), fieldSize, ErrCorrupt, nil, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := newDir(t, "d")
			path := filepath.Join(dir, FileName(victim.Name))
			require.NoError(t, os.WriteFile(path, tc.mutate(bytes.Clone(orig)), 0o444))
			check := func(err error) {
				t.Helper()
				require.ErrorIs(t, err, tc.err)
				var ce *CorruptError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, tc.field, ce.Field, "%v", err)
				require.Equal(t, path, ce.Path)
				require.Contains(t, err.Error(), path)
				if tc.rows != nil {
					require.Equal(t, tc.rows.Offset, ce.Offset)
					require.Equal(t, tc.rows.FirstRow, ce.FirstRow)
					require.Equal(t, tc.rows.EndRow, ce.EndRow)
				}
			}
			for _, pin := range []PinMode{PinNone, PinRequired} {
				tbl, err := Open(dir, victim.Name, &victim, &OpenOptions{Pin: pin})
				require.Nil(t, tbl)
				check(err)
			}
			check(Verify(path))
			require.False(t, mapped(t, path), "nothing stays mapped")

			tbl, err := Open(dir, victim.Name, &victim, &OpenOptions{SkipRowChecksums: true})
			if !tc.skipped {
				check(err)
				_, err := List(dir)
				require.ErrorIs(t, err, tc.err, "List checks all but the rows")
				return
			}
			require.NoError(t, err, "only the rows are damaged")
			require.False(t, tbl.Verified)
			require.NotEqual(t, rows, tbl.Rows)
			require.NoError(t, tbl.Close())
			specs, err := List(dir)
			require.NoError(t, err)
			require.Equal(t, []Spec{victim}, specs)
		})
	}

	t.Run("renamed", func(t *testing.T) {
		dir := newDir(t, "d")
		path := filepath.Join(dir, FileName("other"))
		require.NoError(t, os.WriteFile(path, orig, 0o444))
		_, err := Open(dir, "other", nil, nil)
		require.ErrorIs(t, err, ErrCorrupt)
		var ce *CorruptError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "name", ce.Field)
		require.ErrorIs(t, Verify(path), ErrCorrupt)
		_, err = List(dir)
		require.ErrorIs(t, err, ErrCorrupt)
		h, err := ReadHeader(path)
		require.NoError(t, err, "ReadHeader reads the header whatever the file's name")
		require.Equal(t, victim, h.Spec)
	})
	t.Run("not a file", func(t *testing.T) {
		dir := newDir(t, "d")
		require.NoError(t, os.Mkdir(filepath.Join(dir, FileName(victim.Name)), 0o755))
		_, err := Open(dir, victim.Name, nil, nil)
		var ce *CorruptError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "file type", ce.Field)

		// A FIFO would block an open for reading until a writer comes.
		require.NoError(t, unix.Mkfifo(filepath.Join(dir, FileName("fifo")), 0o644))
		_, err = Open(dir, "fifo", nil, nil)
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "file type", ce.Field)
		_, err = List(dir)
		require.ErrorIs(t, err, ErrCorrupt)
	})
}

// mapped reports whether the process maps path.
func mapped(t testing.TB, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	return strings.Contains(string(b), path)
}

func TestOpenErrors(t *testing.T) {
	spec := Spec{Name: "t", NumRows: 100, RowBytes: 264}
	rows := makeRows(spec, 3)
	dir := newDir(t, "d")
	require.NoError(t, Create(dir, spec, rows, nil))
	for _, tc := range []struct {
		desc string
		name string
		want *Spec
		opts *OpenOptions
		err  error
	}{
		{"missing", "nope", nil, nil, ErrNotExist},
		{"bad name", "a/b", nil, nil, ErrBadName},
		{"hidden name", ".t", nil, nil, ErrBadName},
		{"want other rows", "t", &Spec{Name: "t", NumRows: 101, RowBytes: 264}, nil, ErrSpecMismatch},
		{"want other row bytes", "t", &Spec{Name: "t", NumRows: 100, RowBytes: 256}, nil, ErrSpecMismatch},
		{"want other name", "t", &Spec{Name: "u", NumRows: 100, RowBytes: 264}, nil, ErrBadSpec},
		{"want invalid", "t", &Spec{Name: "t", NumRows: 0, RowBytes: 264}, nil, ErrBadSpec},
		{"bad pin mode", "t", nil, &OpenOptions{Pin: PinRequired + 1}, ErrBadOptions},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tbl, err := Open(dir, tc.name, tc.want, tc.opts)
			require.Nil(t, tbl)
			require.ErrorIs(t, err, tc.err)
			t.Log(err)
		})
	}
	_, err := Open(dir, spec.Name, &Spec{Name: "t", NumRows: 7, RowBytes: 264}, nil)
	var me *SpecMismatchError
	require.ErrorAs(t, err, &me)
	require.Equal(t, SpecMismatchError{Path: filepath.Join(dir, "t.engram"), Want: Spec{Name: "t", NumRows: 7, RowBytes: 264}, Got: spec}, *me)
	_, err = Open(filepath.Join(dir, "missing-dir"), "t", nil, nil)
	require.ErrorIs(t, err, ErrNotExist)
	require.ErrorIs(t, Verify(filepath.Join(dir, "t.txt")), ErrBadName)
	require.ErrorIs(t, Verify(filepath.Join(dir, "nope.engram")), ErrNotExist)
	_, err = ReadHeader(filepath.Join(dir, "nope.engram"))
	require.ErrorIs(t, err, ErrNotExist)
	require.False(t, mapped(t, filepath.Join(dir, "t.engram")))
	openVerified(t, dir, spec, rows, nil)
}

// residentKB returns the resident kB of the mapping holding b.
func residentKB(t testing.TB, b []byte) map[string]int64 {
	t.Helper()
	kb, err := smapsOf(unsafe.SliceData(b))
	require.NoError(t, err)
	return kb
}

func TestPinModes(t *testing.T) {
	spec := Spec{Name: "pinned", NumRows: 4000, RowBytes: 264}
	rows := makeRows(spec, 12)
	dir := newDir(t, "d")
	require.NoError(t, Create(dir, spec, rows, nil))
	path := filepath.Join(dir, FileName(spec.Name))
	page := int64(os.Getpagesize())
	fullKB := (spec.Size() + page - 1) / page * page / 1024
	refuse := func([]byte) error { return unix.EPERM }
	noAdvice := func([]byte, int) error { return unix.EINVAL }
	probe := make([]byte, spec.Size())
	privileged := unix.Mlock(probe) == nil
	if privileged {
		require.NoError(t, unix.Munlock(probe))
	}
	t.Logf("mlock of %d bytes allowed: %v", len(probe), privileged)

	t.Run("none", func(t *testing.T) {
		tbl, err := Open(dir, spec.Name, nil, &OpenOptions{Pin: PinNone, SkipRowChecksums: true})
		require.NoError(t, err)
		defer tbl.Close()
		require.False(t, tbl.Locked)
		require.NoError(t, tbl.PinErr)
		require.Zero(t, residentKB(t, tbl.Rows)["Rss"], "nothing faulted in yet")
		require.True(t, bytes.Equal(rows, tbl.Rows))
		require.Equal(t, fullKB, residentKB(t, tbl.Rows)["Rss"], "all faulted in by reading")
	})
	for _, mode := range []PinMode{PinBestEffort, PinRequired} {
		t.Run(mode.String(), func(t *testing.T) {
			tbl, err := Open(dir, spec.Name, nil, &OpenOptions{Pin: mode, SkipRowChecksums: true})
			if !privileged && mode == PinRequired {
				require.ErrorIs(t, err, ErrPin)
				return
			}
			require.NoError(t, err)
			defer tbl.Close()
			kb := residentKB(t, tbl.Rows)
			require.Equal(t, fullKB, kb["Rss"], "populated")
			if privileged {
				require.True(t, tbl.Locked)
				require.NoError(t, tbl.PinErr)
				require.Equal(t, fullKB, kb["Locked"], "locked")
			} else {
				require.False(t, tbl.Locked)
				require.ErrorIs(t, tbl.PinErr, ErrPin)
			}
			require.True(t, bytes.Equal(rows, tbl.Rows))
		})
	}
	for _, tc := range []struct {
		desc string
		sys  pinSys
	}{
		{"refused, populated by advice", pinSys{mlock: refuse, madvise: hostSys.madvise}},
		{"refused, populated by touch", pinSys{mlock: refuse, madvise: noAdvice}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tbl, err := openPath(path, spec.Name, nil, OpenOptions{Pin: PinBestEffort, SkipRowChecksums: true}, tc.sys)
			require.NoError(t, err)
			defer tbl.Close()
			require.False(t, tbl.Locked)
			require.ErrorIs(t, tbl.PinErr, ErrPin)
			require.ErrorIs(t, tbl.PinErr, unix.EPERM)
			kb := residentKB(t, tbl.Rows)
			require.Equal(t, fullKB, kb["Rss"], "populated though not locked")
			require.Zero(t, kb["Locked"])
			require.True(t, bytes.Equal(rows, tbl.Rows))

			_, err = openPath(path, spec.Name, nil, OpenOptions{Pin: PinRequired}, tc.sys)
			var pe *PinError
			require.ErrorAs(t, err, &pe)
			require.ErrorIs(t, err, ErrPin)
			require.ErrorIs(t, err, unix.EPERM)
			require.Equal(t, path, pe.Path)
			require.Equal(t, "mlock", pe.Op)
			require.GreaterOrEqual(t, pe.Bytes, spec.Size())
		})
	}
	require.False(t, mapped(t, path), "every table closed, nothing mapped")
}

func TestCheckRowsParallel(t *testing.T) {
	rng := newRand(t)
	spec := Spec{Name: "p", NumRows: 1 << 14, RowBytes: 64} // 1 MiB
	rows := makeRows(spec, rng.Uint64())
	h := newHeader(spec, blockRowsFor(spec, MinBlockBytes))
	w := &rowWriter{blockBytes: h.BlockBytes()}
	w.sum(rows)
	w.finish()
	sums := w.sums
	require.Equal(t, 4*h.NumBlocks, int64(len(sums)))
	for _, workers := range []int{1, 2, 3, 8} {
		require.Equal(t, int64(-1), checkRows(rows, sums, &h, workers))
	}
	for range 20 {
		damaged := bytes.Clone(rows)
		var bad []int64
		for range 1 + rng.IntN(4) {
			off := rng.Int64N(spec.Size())
			damaged[off] ^= byte(1 + rng.IntN(255))
			bad = append(bad, off/h.BlockBytes())
		}
		want := slices.Min(bad)
		for _, workers := range []int{1, 2, 3, 8} {
			require.Equal(t, want, checkRows(damaged, sums, &h, workers), "workers %d, damaged blocks %v", workers, bad)
		}
	}
}

func TestAllocs(t *testing.T) {
	spec := Spec{Name: "allocs", NumRows: 1 << 12, RowBytes: 264}
	rows := makeRows(spec, 2)
	h := newHeader(spec, blockRowsFor(spec, MinBlockBytes))
	w := &rowWriter{blockBytes: h.BlockBytes()}
	w.sum(rows)
	w.finish()
	require.Zero(t, testing.AllocsPerRun(20, func() {
		if checkRows(rows, w.sums, &h, 1) != -1 {
			t.Fatal("bad block")
		}
	}), "checking rows")
	dir := newDir(t, "d")
	require.NoError(t, Create(dir, spec, rows, nil))
	tbl := openVerified(t, dir, spec, rows, nil)
	var sink int
	require.Zero(t, testing.AllocsPerRun(100, func() { sink += len(tbl.Row(int64(sink % 4096))) }), "Row")
	b := appendHeader(nil, &h)
	require.Equal(t, float64(1), testing.AllocsPerRun(100, func() {
		if _, err := DecodeHeader(b); err != nil {
			t.Fatal(err)
		}
	}), "DecodeHeader allocates only the name")
	buf := make([]byte, 0, MaxHeaderLen)
	require.Zero(t, testing.AllocsPerRun(100, func() { buf = appendHeader(buf[:0], &h) }), "appendHeader into capacity")
}

// TestPaddingMustBeZero damages the zero padding between the checksum
// table and row 0, which no checksum covers: Open (with or without the
// row checksums), Verify and List must all refuse it and name the byte.
func TestPaddingMustBeZero(t *testing.T) {
	rng := newRand(t)
	_, orig, h := victimFile(t, rng.Uint64())
	lo, hi := h.SumsOffset+4*h.NumBlocks, h.RowOffset
	require.Positive(t, hi-lo, "the victim has padding")
	require.Less(t, hi-lo, int64(RowAlign), "padding is less than RowAlign")
	for _, tc := range []struct {
		desc string
		off  int64
		val  byte
	}{
		{"first byte", lo, 1},
		{"random byte", lo + rng.Int64N(hi-lo), byte(1 + rng.IntN(255))},
		{"last byte", hi - 1, 0xff},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := newDir(t, "d")
			path := filepath.Join(dir, FileName(victim.Name))
			b := bytes.Clone(orig)
			b[tc.off] = tc.val
			require.NoError(t, os.WriteFile(path, b, 0o444))
			check := func(err error) {
				t.Helper()
				require.ErrorIs(t, err, ErrCorrupt)
				var ce *CorruptError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, fieldPadding, ce.Field, "%v", err)
				require.Equal(t, tc.off, ce.Offset)
				require.Equal(t, path, ce.Path)
			}
			for _, skip := range []bool{false, true} {
				tbl, err := Open(dir, victim.Name, &victim, &OpenOptions{SkipRowChecksums: skip})
				require.Nil(t, tbl)
				check(err)
			}
			check(Verify(path))
			_, err := List(dir)
			check(err)
			require.False(t, mapped(t, path), "nothing stays mapped")
		})
	}
}

package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"syscall"
)

// Format constants; see the package documentation's Format section.
const (
	// Version is the format version this package writes and reads.
	Version = 1
	// RowAlign is the alignment of the row region in the file: 64 KiB, a
	// multiple of every Linux page size, so the rows can be mapped from an
	// aligned offset on any of them.
	RowAlign = 64 << 10
	// MaxHeaderLen is the longest header (a name of MaxNameLen bytes).
	MaxHeaderLen = (fixedHeaderLen + MaxNameLen + 4 + 7) &^ 7
	// MinBlockBytes is the smallest checksum block a file may use, unless
	// the whole table is one block.
	MinBlockBytes = 4 << 10
	// MaxBlockBytes is the largest checksum block, unless a block is one row.
	MaxBlockBytes = 1 << 30
	// DefaultBlockBytes is the checksum block size Create aims for.
	DefaultBlockBytes = 1 << 20
)

// magic opens every table file. The high first byte catches 7-bit
// transfers, the newline catches line-ending conversion.
const magic = "\x89ENGRAM\n"

// Byte offsets of the header fields.
const (
	offMagic       = 0
	offVersion     = 8
	offFlags       = 10
	offHeaderLen   = 12
	offNumRows     = 16
	offRowBytes    = 24
	offBlockRows   = 32
	offNumBlocks   = 40
	offSumsOffset  = 48
	offRowOffset   = 56
	offFileSize    = 64
	offSumsCRC     = 72
	offNameLen     = 76
	offReserved    = 78
	offName        = 80
	fixedHeaderLen = offName
)

// Field names used in CorruptError.Field.
const (
	fieldRows = "rows"
	fieldSums = "checksum table"
	fieldSize = "file size"
	// fieldPadding is the zero padding between the checksum table and row 0.
	fieldPadding = "row padding"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded header of a table file: the spec and the layout.
type Header struct {
	Version    int    // format version, 1
	Spec       Spec   // name and shape
	HeaderLen  int64  // header bytes, its CRC included
	BlockRows  int64  // rows per checksum block (the last block may hold fewer)
	NumBlocks  int64  // checksum blocks: ceil(NumRows/BlockRows)
	SumsOffset int64  // file offset of the checksum table (= HeaderLen)
	RowOffset  int64  // file offset of row 0, a multiple of RowAlign
	FileSize   int64  // exact file size: RowOffset + Spec.Size()
	SumsCRC    uint32 // CRC32C of the checksum table
}

// BlockBytes returns the bytes of a full checksum block.
func (h *Header) BlockBytes() int64 { return h.BlockRows * int64(h.Spec.RowBytes) }

// BlockRowRange returns the rows [first, end) of checksum block i.
func (h *Header) BlockRowRange(i int64) (first, end int64) {
	first = i * h.BlockRows
	return first, min(first+h.BlockRows, h.Spec.NumRows)
}

// headerLen is the header length for a name of n bytes: the fixed part,
// the name, zero padding and the CRC, rounded up to 8 bytes.
func headerLen(n int) int64 { return int64(fixedHeaderLen+n+4+7) &^ 7 }

func roundUp(x, align int64) int64 { return (x + align - 1) / align * align }

// blockRowsFor returns the rows per checksum block for a target block size
// (in [MinBlockBytes, MaxBlockBytes]): as many whole rows as fit the
// target, at least one, at least MinBlockBytes, at most the whole table.
func blockRowsFor(s Spec, target int) int64 {
	rb := int64(s.RowBytes)
	br := max(int64(target)/rb, 1)
	if br*rb < MinBlockBytes {
		br = (MinBlockBytes + rb - 1) / rb
	}
	return min(br, s.NumRows)
}

// newHeader lays out a table of a valid spec with the given block rows.
func newHeader(s Spec, blockRows int64) Header {
	h := Header{
		Version:   Version,
		Spec:      s,
		HeaderLen: headerLen(len(s.Name)),
		BlockRows: blockRows,
		NumBlocks: (s.NumRows + blockRows - 1) / blockRows,
	}
	h.SumsOffset = h.HeaderLen
	h.RowOffset = roundUp(h.SumsOffset+4*h.NumBlocks, RowAlign)
	h.FileSize = h.RowOffset + s.Size()
	return h
}

// appendHeader appends the encoded header (HeaderLen bytes, CRC included).
func appendHeader(dst []byte, h *Header) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(h.Version))
	dst = binary.LittleEndian.AppendUint16(dst, 0) // flags
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.HeaderLen))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.Spec.NumRows))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.Spec.RowBytes))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.BlockRows))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.NumBlocks))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.SumsOffset))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.RowOffset))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.FileSize))
	dst = binary.LittleEndian.AppendUint32(dst, h.SumsCRC)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(h.Spec.Name)))
	dst = binary.LittleEndian.AppendUint16(dst, 0) // reserved
	dst = append(dst, h.Spec.Name...)
	for int64(len(dst)-start) < h.HeaderLen-4 {
		dst = append(dst, 0)
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// DecodeHeader decodes and checks the header at the start of b (b may hold
// more, e.g. a file's first MaxHeaderLen bytes). It accepts only headers
// this package would write: the magic, version 1, zero flags and padding,
// a header length matching the name, the header CRC, a valid name and
// spec, and the exact layout the spec and block rows determine. It returns
// a [*CorruptError] (with an empty Path) wrapping ErrCorrupt, ErrVersion or,
// when b is too short, ErrTruncated.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	n := min(len(b), len(magic))
	if string(b[:n]) != magic[:n] {
		return h, corrupt(ErrCorrupt, "magic", offMagic, fmt.Sprintf("% x is not a snapshot file's magic", b[:n]))
	}
	if len(b) < fixedHeaderLen {
		return h, corrupt(ErrTruncated, "header", int64(len(b)), fmt.Sprintf("%d bytes, a header has at least %d", len(b), fixedHeaderLen))
	}
	le := binary.LittleEndian
	if v := le.Uint16(b[offVersion:]); v != Version {
		return h, corrupt(ErrVersion, "version", offVersion, fmt.Sprintf("version %d, this package reads %d", v, Version))
	}
	if f := le.Uint16(b[offFlags:]); f != 0 {
		return h, corrupt(ErrCorrupt, "flags", offFlags, fmt.Sprintf("%#04x, version 1 defines none", f))
	}
	nameLen := int(le.Uint16(b[offNameLen:]))
	if nameLen > MaxNameLen {
		return h, corrupt(ErrCorrupt, "name length", offNameLen, fmt.Sprintf("%d, longer than %d", nameLen, MaxNameLen))
	}
	hl := int64(le.Uint32(b[offHeaderLen:]))
	if want := headerLen(nameLen); hl != want {
		return h, corrupt(ErrCorrupt, "header length", offHeaderLen, fmt.Sprintf("%d, a %d-byte name needs %d", hl, nameLen, want))
	}
	if int64(len(b)) < hl {
		return h, corrupt(ErrTruncated, "header", int64(len(b)), fmt.Sprintf("%d bytes, the header has %d", len(b), hl))
	}
	stored, computed := le.Uint32(b[hl-4:]), crc32.Checksum(b[:hl-4], castagnoli)
	if stored != computed {
		return h, corrupt(ErrCorrupt, "header crc", hl-4, fmt.Sprintf("stored %#08x, computed %#08x", stored, computed))
	}
	if r := le.Uint16(b[offReserved:]); r != 0 {
		return h, corrupt(ErrCorrupt, "reserved", offReserved, fmt.Sprintf("%#04x, must be zero", r))
	}
	for i := int64(offName + nameLen); i < hl-4; i++ {
		if b[i] != 0 {
			return h, corrupt(ErrCorrupt, "padding", i, fmt.Sprintf("byte %#02x, must be zero", b[i]))
		}
	}
	name := b[offName : offName+nameLen]
	if err := validNameBytes(name); err != nil {
		return h, corrupt(ErrCorrupt, "name", offName, err.Error())
	}

	field := func(off int) int64 {
		v := le.Uint64(b[off:])
		if v > math.MaxInt64 {
			return -1
		}
		return int64(v)
	}
	numRows, rowBytes := field(offNumRows), field(offRowBytes)
	limit := maxSize()
	if numRows < 1 {
		return h, corrupt(ErrCorrupt, "num rows", offNumRows, fmt.Sprintf("%d, must be at least 1", le.Uint64(b[offNumRows:])))
	}
	if rowBytes < 1 || rowBytes > limit {
		return h, corrupt(ErrCorrupt, "row bytes", offRowBytes, fmt.Sprintf("%d, must be in [1, %d]", le.Uint64(b[offRowBytes:]), limit))
	}
	if numRows > limit/rowBytes {
		return h, corrupt(ErrCorrupt, "num rows", offNumRows, fmt.Sprintf("%d rows of %d bytes exceed %d bytes", numRows, rowBytes, limit))
	}
	spec := Spec{Name: string(name), NumRows: numRows, RowBytes: int(rowBytes)}

	blockRows := field(offBlockRows)
	if blockRows < 1 || blockRows > numRows {
		return h, corrupt(ErrCorrupt, "block rows", offBlockRows, fmt.Sprintf("%d, must be in [1, %d]", le.Uint64(b[offBlockRows:]), numRows))
	}
	if bb := blockRows * rowBytes; blockRows != numRows && bb < MinBlockBytes || blockRows != 1 && bb > MaxBlockBytes {
		return h, corrupt(ErrCorrupt, "block rows", offBlockRows, fmt.Sprintf("%d rows make %d-byte blocks, outside [%d, %d]", blockRows, bb, MinBlockBytes, MaxBlockBytes))
	}
	h = newHeader(spec, blockRows)
	for _, f := range [...]struct {
		name string
		off  int
		want int64
	}{
		{"num blocks", offNumBlocks, h.NumBlocks},
		{"checksum table offset", offSumsOffset, h.SumsOffset},
		{"row offset", offRowOffset, h.RowOffset},
		{"file size field", offFileSize, h.FileSize},
	} {
		if got := le.Uint64(b[f.off:]); got != uint64(f.want) {
			return Header{}, corrupt(ErrCorrupt, f.name, int64(f.off), fmt.Sprintf("%d, the layout needs %d", got, f.want))
		}
	}
	h.SumsCRC = le.Uint32(b[offSumsCRC:])
	return h, nil
}

// validNameBytes is ValidName for a byte slice, without allocating.
func validNameBytes(b []byte) error {
	if len(b) == 0 || len(b) > MaxNameLen || b[0] == '.' {
		return ValidName(string(b))
	}
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return ValidName(string(b))
		}
	}
	return nil
}

func corrupt(err error, field string, off int64, detail string) *CorruptError {
	return &CorruptError{Field: field, Offset: off, Detail: detail, Err: err}
}

// ReadHeader reads and checks the header of the table file at path (see
// DecodeHeader), for inspection tools. It does not check the file size,
// the checksum table or the rows: [Verify] does.
func ReadHeader(path string) (Header, error) {
	f, err := openRead(path)
	if err != nil {
		return Header{}, openFileError("read header", path, "", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Header{}, &OpError{Op: "read header", Dir: filepath.Dir(path), Step: "stat file", Err: err}
	}
	return readHeaderAt(f, st.Size(), path)
}

// readHeaderAt reads and decodes the header of a file of size bytes.
func readHeaderAt(r io.ReaderAt, size int64, path string) (Header, error) {
	var buf [MaxHeaderLen]byte
	b := buf[:min(size, MaxHeaderLen)]
	if _, err := readFullAt(r, b, 0); err != nil {
		return Header{}, &OpError{Op: "read header", Dir: filepath.Dir(path), Step: "read header", Err: err}
	}
	h, err := DecodeHeader(b)
	if err != nil {
		err.(*CorruptError).Path = path
		return Header{}, err
	}
	return h, nil
}

// readFullAt fills b from offset off, treating io.EOF as a short file.
func readFullAt(r io.ReaderAt, b []byte, off int64) (int, error) {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return n, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// openRead opens a file for reading without blocking, so a FIFO or device
// that happens to carry a table's name is refused by the file type check
// instead of hanging the caller.
func openRead(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// openFileError wraps a failure to open a table file; a missing file
// matches ErrNotExist as well as fs.ErrNotExist.
func openFileError(op, path, name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("%w: %w", ErrNotExist, err)
	}
	return &OpError{Op: op, Dir: filepath.Dir(path), Name: name, Step: "open file", Err: err}
}

// checkFile reads and checks everything of an open table file except the
// rows: header, name (when name is not ""), exact size, the expected spec
// (when want is not nil), the checksum table, which it returns, and the
// zero padding between it and row 0.
func checkFile(f *os.File, path, name string, want *Spec) (Header, []byte, error) {
	st, err := f.Stat()
	if err != nil {
		return Header{}, nil, &OpError{Op: "open", Dir: filepath.Dir(path), Name: name, Step: "stat file", Err: err}
	}
	if !st.Mode().IsRegular() {
		return Header{}, nil, &CorruptError{Path: path, Field: "file type", Detail: fmt.Sprintf("%v is not a regular file", st.Mode().Type()), Err: ErrCorrupt}
	}
	h, err := readHeaderAt(f, st.Size(), path)
	if err != nil {
		return Header{}, nil, err
	}
	if name != "" && h.Spec.Name != name {
		return Header{}, nil, &CorruptError{Path: path, Field: "name", Offset: offName,
			Detail: fmt.Sprintf("the file holds table %q, its file name says %q", clip(h.Spec.Name), clip(name)), Err: ErrCorrupt}
	}
	if size := st.Size(); size != h.FileSize {
		e := &CorruptError{Path: path, Field: fieldSize, Offset: min(size, h.FileSize),
			Detail: fmt.Sprintf("%d bytes, the header says %d", size, h.FileSize), Err: ErrCorrupt}
		if size < h.FileSize {
			e.Err = ErrTruncated
		}
		return Header{}, nil, e
	}
	if want != nil && *want != h.Spec {
		return Header{}, nil, &SpecMismatchError{Path: path, Want: *want, Got: h.Spec}
	}
	// One read takes the checksum table and the padding after it, which
	// is shorter than RowAlign.
	between := make([]byte, h.RowOffset-h.SumsOffset)
	if _, err := readFullAt(f, between, h.SumsOffset); err != nil {
		return Header{}, nil, &OpError{Op: "open", Dir: filepath.Dir(path), Name: name, Step: "read checksum table", Err: err}
	}
	sums, pad := between[:4*h.NumBlocks:4*h.NumBlocks], between[4*h.NumBlocks:]
	if got := crc32.Checksum(sums, castagnoli); got != h.SumsCRC {
		return Header{}, nil, &CorruptError{Path: path, Field: fieldSums, Offset: h.SumsOffset,
			Detail: fmt.Sprintf("CRC %#08x, the header says %#08x", got, h.SumsCRC), Err: ErrCorrupt}
	}
	if i := firstNonZero(pad); i >= 0 {
		off := h.SumsOffset + 4*h.NumBlocks + int64(i)
		return Header{}, nil, &CorruptError{Path: path, Field: fieldPadding, Offset: off,
			Detail: fmt.Sprintf("byte %#02x between the checksum table and row 0, must be zero", pad[i]), Err: ErrCorrupt}
	}
	return h, sums, nil
}

// firstNonZero returns the index of the first nonzero byte of b, or -1.
func firstNonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return -1
}

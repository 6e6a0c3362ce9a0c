package planfmt

import (
	"encoding/binary"
	"hash/crc32"
	"math"
)

// Version is the wire format version this package writes and reads.
const Version = 1

// Sizes of the fixed parts of a message (see the package doc, # Format).
const (
	headerSize      = 24
	commandSize     = 80
	rowsDescSize    = 80
	rangesDescSize  = 40
	endSize         = 4
	maxMessageBytes = math.MaxUint32
)

// Header field offsets.
const (
	offMagic     = 0
	offVersion   = 4
	offForm      = 5
	offFlags     = 6
	offLength    = 8
	offCRC       = 12
	offFragments = 16
	offGroups    = 20
)

var (
	planMagic    = [4]byte{'S', 'K', 'P', 'L'}
	commandMagic = [4]byte{'S', 'K', 'C', 'M'}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

// Limits bounds what a decoder accepts from an untrusted peer. A zero field
// takes its default. The decoder never allocates more than a small multiple
// of the message length, whatever the limits: counts are checked against the
// bytes actually present before anything is sized from them.
type Limits struct {
	MaxFragments    int    // ids or ranges per plan; default 1<<24
	MaxMessageBytes int    // whole message; default 256 MiB
	MaxCompletions  int    // completion spans per plan; default 1<<16
	MaxPipeline     uint32 // command pipeline width P; default 1024
	MaxChunkBytes   uint64 // command chunk size C; default 1 GiB
}

// DefaultLimits are the limits used by DecodePlan and DecodeCommand.
var DefaultLimits = Limits{
	MaxFragments:    1 << 24,
	MaxMessageBytes: 256 << 20,
	MaxCompletions:  1 << 16,
	MaxPipeline:     1024,
	MaxChunkBytes:   1 << 30,
}

func (l *Limits) withDefaults() Limits {
	out := *l
	d := DefaultLimits
	if out.MaxFragments <= 0 {
		out.MaxFragments = d.MaxFragments
	}
	if out.MaxMessageBytes <= 0 {
		out.MaxMessageBytes = d.MaxMessageBytes
	}
	if out.MaxCompletions <= 0 {
		out.MaxCompletions = d.MaxCompletions
	}
	if out.MaxPipeline == 0 {
		out.MaxPipeline = d.MaxPipeline
	}
	if out.MaxChunkBytes == 0 {
		out.MaxChunkBytes = d.MaxChunkBytes
	}
	return out
}

// header is the decoded common header.
type header struct {
	form   Form
	length int
	n, g   int
}

func putHeader(msg []byte, magic [4]byte, form Form, n, g int) {
	copy(msg[offMagic:], magic[:])
	msg[offVersion] = Version
	msg[offForm] = byte(form)
	binary.LittleEndian.PutUint16(msg[offFlags:], 0)
	binary.LittleEndian.PutUint32(msg[offLength:], uint32(len(msg)))
	binary.LittleEndian.PutUint32(msg[offCRC:], 0)
	binary.LittleEndian.PutUint32(msg[offFragments:], uint32(n))
	binary.LittleEndian.PutUint32(msg[offGroups:], uint32(g))
}

// seal writes the CRC32C of msg, computed with the CRC field zero.
func seal(msg []byte) {
	binary.LittleEndian.PutUint32(msg[offCRC:], 0)
	binary.LittleEndian.PutUint32(msg[offCRC:], crc32.Checksum(msg, castagnoli))
}

// crcZero stands in for the CRC field while checking a message (a package
// variable: a local one would escape through crc32's dispatch and allocate).
var crcZero [4]byte

// checksum computes the CRC32C of msg as if its CRC field were zero.
func checksum(msg []byte) uint32 {
	c := crc32.Update(0, castagnoli, msg[:offCRC])
	c = crc32.Update(c, castagnoli, crcZero[:])
	return crc32.Update(c, castagnoli, msg[offCRC+4:])
}

// parseHeader checks everything the common header alone can tell: size,
// magic, version, length, checksum, flags, form and counts against limits.
func parseHeader(b []byte, magic [4]byte, lim *Limits) (header, error) {
	return readHeader(b, magic, lim, true)
}

// readHeader is parseHeader, with the checksum checked only if crc is set.
func readHeader(b []byte, magic [4]byte, lim *Limits, crc bool) (header, error) {
	var h header
	if len(b) > lim.MaxMessageBytes {
		return h, decodeErr(0, "length", ErrTooLarge)
	}
	if len(b) < headerSize {
		if len(b) >= 4 && [4]byte(b[:4]) != magic {
			return h, decodeErr(offMagic, "magic", ErrCorrupt)
		}
		return h, decodeErr(len(b), "header", ErrTruncated)
	}
	if [4]byte(b[:4]) != magic {
		return h, decodeErr(offMagic, "magic", ErrCorrupt)
	}
	if b[offVersion] != Version {
		return h, decodeErr(offVersion, "version", ErrVersion)
	}
	length := binary.LittleEndian.Uint32(b[offLength:])
	switch {
	case uint64(length) > uint64(lim.MaxMessageBytes):
		return h, decodeErr(offLength, "length", ErrTooLarge)
	case int(length) > len(b):
		return h, decodeErr(len(b), "length", ErrTruncated)
	case int(length) < len(b):
		return h, decodeErr(int(length), "length", ErrCorrupt)
	}
	if crc && binary.LittleEndian.Uint32(b[offCRC:]) != checksum(b) {
		return h, decodeErr(offCRC, "crc32c", ErrChecksum)
	}
	if binary.LittleEndian.Uint16(b[offFlags:]) != 0 {
		return h, decodeErr(offFlags, "flags", ErrCorrupt)
	}
	h.form = Form(b[offForm])
	if h.form != FormRanges && h.form != FormRows {
		return h, decodeErr(offForm, "form", ErrCorrupt)
	}
	n := binary.LittleEndian.Uint32(b[offFragments:])
	if uint64(n) > uint64(lim.MaxFragments) {
		return h, decodeErr(offFragments, "fragments", ErrTooLarge)
	}
	g := binary.LittleEndian.Uint32(b[offGroups:])
	if uint64(g) > uint64(lim.MaxCompletions) {
		return h, decodeErr(offGroups, "completions", ErrTooLarge)
	}
	h.length, h.n, h.g = int(length), int(n), int(g)
	return h, nil
}

// putUint writes the low w bytes of v little-endian.
func putUint(b []byte, v uint64, w int) {
	switch w {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	case 8:
		binary.LittleEndian.PutUint64(b, v)
	default:
		for i := range w {
			b[i] = byte(v >> (8 * i))
		}
	}
}

// loadUint reads w little-endian bytes.
func loadUint(b []byte, w int) uint64 {
	switch w {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	case 8:
		return binary.LittleEndian.Uint64(b)
	}
	var v uint64
	for i := w - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// loadCol reads a w-byte value at b[off:]: one 8-byte load and a mask when
// the message has 8 bytes left there, else byte by byte.
func loadCol(b []byte, off, w int, mask uint64) uint64 {
	if off+8 <= len(b) {
		return binary.LittleEndian.Uint64(b[off:]) & mask
	}
	return loadUint(b[off:], w)
}

// fastEntries is how many of a column's n entries of w bytes, starting
// at off in a message of size bytes, can be read with one unchecked
// 8-byte load each (load8): those whose 8 bytes end inside the message.
func fastEntries(size, off, w, n int) int {
	if w == 0 {
		return n
	}
	if room := size - off - 8; room >= 0 {
		return min(n, room/w+1)
	}
	return 0
}

// load8 reads a column value with one 8-byte load; the caller has made
// sure the 8 bytes lie inside b (fastEntries). Unlike loadCol it inlines.
func load8(b []byte, off int, mask uint64) uint64 {
	return binary.LittleEndian.Uint64(b[off:off+8:off+8]) & mask
}

// storeCol writes a value that fits in w bytes at b[off:]. With 8 bytes of
// room it stores 8: the extra zero bytes land on values written later (the
// encoder fills each column, then the next, in increasing order).
func storeCol(b []byte, off int, v uint64, w int) {
	if off+8 <= len(b) {
		binary.LittleEndian.PutUint64(b[off:], v)
		return
	}
	putUint(b[off:], v, w)
}

// widthMask returns the mask of the low w bytes.
func widthMask(w int) uint64 {
	if w >= 8 {
		return math.MaxUint64
	}
	return 1<<(8*w) - 1
}

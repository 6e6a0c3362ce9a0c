package frame

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// TrailerSize is what a checked frame (verbs/tcp) carries after its
// header: a CRC32C of the 32 header bytes and the 4 that follow, then the
// CRC32C of the frame's payload (0 for none). So the header check covers
// the payload's checksum too.
const TrailerSize = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// PayloadCRC returns the checksum a checked frame carries for payload.
func PayloadCRC(payload []byte) uint32 { return crc32.Update(0, castagnoli, payload) }

// AppendChecked appends h and its trailer, for a payload whose checksum
// is payloadCRC (PayloadCRC; 0 when there is none), to dst.
func AppendChecked(dst []byte, h *Header, payloadCRC uint32) []byte {
	n := len(dst)
	dst = Append(dst, h)
	dst = binary.LittleEndian.AppendUint32(dst, 0) // the header check, below
	dst = binary.LittleEndian.AppendUint32(dst, payloadCRC)
	// (No local arrays: a slice of one escapes through crc32's dispatch.)
	binary.LittleEndian.PutUint32(dst[n+HeaderSize:], headerCRC(dst[n:n+HeaderSize], dst[n+HeaderSize+4:n+HeaderSize+8]))
	return dst
}

// SealChecked fills in the trailer of a frame that AppendChecked wrote
// with a payload checksum of 0 (f starts at its header): the payload's
// checksum, and the header check over the header and it. A sender can so
// append a frame's header at once and checksum a large payload later, on
// the goroutine that writes it.
func SealChecked(f []byte, payloadCRC uint32) {
	binary.LittleEndian.PutUint32(f[HeaderSize+4:], payloadCRC)
	binary.LittleEndian.PutUint32(f[HeaderSize:], headerCRC(f[:HeaderSize], f[HeaderSize+4:HeaderSize+8]))
}

// headerCRC is the header check: over the header and the payload's
// checksum.
func headerCRC(header, payloadCRC []byte) uint32 {
	return crc32.Update(crc32.Checksum(header, castagnoli), castagnoli, payloadCRC)
}

// AppendCheckedFrame appends a whole checked frame: h, its trailer and
// payload.
func AppendCheckedFrame(dst []byte, h *Header, payload []byte) []byte {
	return append(AppendChecked(dst, h, PayloadCRC(payload)), payload...)
}

// checkHeader verifies the header checksum of a checked frame in b
// (header and trailer) and returns the payload checksum it announces.
func checkHeader(b []byte) (uint32, error) {
	want := binary.LittleEndian.Uint32(b[HeaderSize:])
	if got := headerCRC(b[:HeaderSize], b[HeaderSize+4:HeaderSize+8]); got != want {
		return 0, bad("frame", fmt.Sprintf("header checksum %#08x, the frame says %#08x", got, want))
	}
	return binary.LittleEndian.Uint32(b[HeaderSize+4:]), nil
}

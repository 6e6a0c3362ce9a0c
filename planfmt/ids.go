package planfmt

import "encoding/binary"

// Row ids travel as w-byte little-endian unsigned values, w = idWidth(table
// rows); -1 travels as the all-ones w-byte value. Both directions use one
// trick to validate without a branch per id: with x = (id+1) mod 2^(8w),
// valid ids map to [1, tableRows], -1 maps to 0 and everything else above
// tableRows, so one running maximum of x decides the whole slice.

// encodeIDs writes ids into buf (len(ids)*w bytes) and returns the maximum of
// id+1 (as uint64, so negative ids below -1 come out huge).
func encodeIDs[T int32 | int64](buf []byte, ids []T, w int) uint64 {
	var mx uint64
	switch w {
	case 1:
		buf = buf[:len(ids)]
		for i, id := range ids {
			mx = max(mx, uint64(int64(id)+1))
			buf[i] = byte(id)
		}
	case 2:
		buf = buf[:2*len(ids)]
		for i, id := range ids {
			mx = max(mx, uint64(int64(id)+1))
			binary.LittleEndian.PutUint16(buf[2*i:], uint16(id))
		}
	case 3:
		buf = buf[:3*len(ids)]
		for i, id := range ids {
			mx = max(mx, uint64(int64(id)+1))
			b := buf[3*i : 3*i+3]
			b[0], b[1], b[2] = byte(id), byte(id>>8), byte(id>>16)
		}
	case 4:
		// Blocks of 4 ids: one bounds check per block and independent
		// maxima, so the loop is not one long dependency chain.
		var m1, m2, m3 uint64
		for len(ids) >= 4 && len(buf) >= 16 {
			v, b := (*[4]T)(ids), (*[16]byte)(buf)
			mx = max(mx, uint64(int64(v[0])+1))
			m1 = max(m1, uint64(int64(v[1])+1))
			m2 = max(m2, uint64(int64(v[2])+1))
			m3 = max(m3, uint64(int64(v[3])+1))
			binary.LittleEndian.PutUint32(b[0:], uint32(v[0]))
			binary.LittleEndian.PutUint32(b[4:], uint32(v[1]))
			binary.LittleEndian.PutUint32(b[8:], uint32(v[2]))
			binary.LittleEndian.PutUint32(b[12:], uint32(v[3]))
			ids, buf = ids[4:], buf[16:]
		}
		mx = max(mx, m1, m2, m3)
		for i, id := range ids {
			mx = max(mx, uint64(int64(id)+1))
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(id))
		}
	case 8:
		buf = buf[:8*len(ids)]
		for i, id := range ids {
			mx = max(mx, uint64(int64(id)+1))
			binary.LittleEndian.PutUint64(buf[8*i:], uint64(id))
		}
	default:
		for i, id := range ids {
			mx = max(mx, uint64(int64(id)+1))
			putUint(buf[w*i:], uint64(int64(id)), w)
		}
	}
	return mx
}

// firstBadID returns the index of the first id outside {-1} ∪ [0, tableRows).
func firstBadID[T int32 | int64](ids []T, tableRows uint64) int {
	for i, id := range ids {
		if uint64(int64(id)+1) > tableRows {
			return i
		}
	}
	return -1
}

// scanIDs returns the maximum of (v+1) mod 2^(8w) over n encoded ids in b.
func scanIDs(b []byte, w int) uint64 {
	switch w {
	case 1:
		var mx uint8
		for _, v := range b {
			mx = max(mx, v+1)
		}
		return uint64(mx)
	case 2:
		var mx uint16
		for i := 0; i+2 <= len(b); i += 2 {
			mx = max(mx, binary.LittleEndian.Uint16(b[i:])+1)
		}
		return uint64(mx)
	case 3:
		var mx uint32
		for i := 0; i+3 <= len(b); i += 3 {
			s := b[i : i+3]
			v := uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16
			mx = max(mx, (v+1)&0xFFFFFF)
		}
		return uint64(mx)
	case 4:
		var mx, m1, m2, m3 uint32
		for len(b) >= 16 {
			q := (*[16]byte)(b)
			mx = max(mx, binary.LittleEndian.Uint32(q[0:])+1)
			m1 = max(m1, binary.LittleEndian.Uint32(q[4:])+1)
			m2 = max(m2, binary.LittleEndian.Uint32(q[8:])+1)
			m3 = max(m3, binary.LittleEndian.Uint32(q[12:])+1)
			b = b[16:]
		}
		mx = max(mx, m1, m2, m3)
		for i := 0; i+4 <= len(b); i += 4 {
			mx = max(mx, binary.LittleEndian.Uint32(b[i:])+1)
		}
		return uint64(mx)
	case 8:
		var mx uint64
		for i := 0; i+8 <= len(b); i += 8 {
			mx = max(mx, binary.LittleEndian.Uint64(b[i:])+1)
		}
		return mx
	}
	var mx uint64
	mask := uint64(1)<<(8*w) - 1
	for i := 0; i+w <= len(b); i += w {
		mx = max(mx, (loadUint(b[i:], w)+1)&mask)
	}
	return mx
}

// firstBadEncodedID returns the index of the first encoded id that is
// neither all-ones nor below tableRows.
func firstBadEncodedID(b []byte, w int, tableRows uint64) int {
	mask := uint64(1)<<(8*w) - 1 // all ones for w == 8: the shift yields 0
	for i := 0; i+w <= len(b); i += w {
		if (loadUint(b[i:], w)+1)&mask > tableRows {
			return i / w
		}
	}
	return -1
}

// decodeIDs32 fills dst from validated ids of width w <= 4.
func decodeIDs32(dst []int32, b []byte, w int) {
	switch w {
	case 1:
		b = b[:len(dst)]
		for i, v := range b {
			dst[i] = int32(v+1) - 1
		}
	case 2:
		b = b[:2*len(dst)]
		for i := range dst {
			dst[i] = int32(binary.LittleEndian.Uint16(b[2*i:])+1) - 1
		}
	case 3:
		b = b[:3*len(dst)]
		for i := range dst {
			s := b[3*i : 3*i+3]
			v := uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16
			dst[i] = int32((v+1)&0xFFFFFF) - 1
		}
	default: // 4: all-ones is int32(-1) already
		for len(dst) >= 4 && len(b) >= 16 {
			d, q := (*[4]int32)(dst), (*[16]byte)(b)
			d[0] = int32(binary.LittleEndian.Uint32(q[0:]))
			d[1] = int32(binary.LittleEndian.Uint32(q[4:]))
			d[2] = int32(binary.LittleEndian.Uint32(q[8:]))
			d[3] = int32(binary.LittleEndian.Uint32(q[12:]))
			dst, b = dst[4:], b[16:]
		}
		b = b[:4*len(dst)]
		for i := range dst {
			dst[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
}

// decodeIDs64 fills dst from validated ids of width w >= 4.
func decodeIDs64(dst []int64, b []byte, w int) {
	switch w {
	case 4:
		b = b[:4*len(dst)]
		for i := range dst {
			dst[i] = int64(binary.LittleEndian.Uint32(b[4*i:])+1) - 1
		}
	case 8: // all-ones is int64(-1) already
		b = b[:8*len(dst)]
		for i := range dst {
			dst[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
	default:
		mask := uint64(1)<<(8*w) - 1
		for i := range dst {
			dst[i] = int64((loadUint(b[w*i:], w)+1)&mask) - 1
		}
	}
}

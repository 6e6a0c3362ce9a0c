package ucx

import (
	"encoding/binary"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
)

// The UCX attachment travels beside a side's handshake (the regions it
// exports or exposes, as the other backends list them): what a peer
// needs to reach those regions one-sidedly. Its decoder is strict
// because UCX parses the worker address and the packed keys without
// validating them: only well-framed, bounded blobs, one per listed
// region, ever reach it.
//
//	0  magic "SKUX" (0x58554b53)   4  version (1, u16)   6  regions (u16)
//	8  worker address length (u32) 12 worker address
//	then per region: key (u64) base address (u64) packed key length (u16)
//	packed key
const (
	attachMagic   = 0x58554b53
	attachVersion = 1
	attachFixed   = 12
	attachRegion  = 18

	// MaxWorkerAddress and MaxPackedKey bound the blobs a peer may send
	// (UCX's are a few hundred bytes with every transport listed).
	MaxWorkerAddress = 8 << 10
	MaxPackedKey     = 4 << 10
	// MaxAttachRegions is the most regions one attachment lists.
	MaxAttachRegions = 252
)

// RegionKey is how a peer reaches one listed region: its key in the
// handshake, its base address in the owning process and UCX's packed
// remote key for it.
type RegionKey struct {
	Key    verbs.Key
	Base   uint64
	Packed []byte
}

// Attachment is a side's worker address and one RegionKey per region it
// listed.
type Attachment struct {
	Worker  []byte
	Regions []RegionKey
}

// AttachError is a malformed attachment: what is wrong with which field.
type AttachError struct {
	Field, Reason string
}

func (e *AttachError) Error() string { return "ucx: attachment: " + e.Field + ": " + e.Reason }

// Unwrap makes a malformed attachment a protocol violation.
func (e *AttachError) Unwrap() error { return verbs.ErrProtocol }

// AppendAttachment appends a's encoding. It fails (appending nothing) on
// what DecodeAttachment would refuse of its own bounds.
func AppendAttachment(dst []byte, a *Attachment) ([]byte, error) {
	switch {
	case len(a.Worker) == 0 || len(a.Worker) > MaxWorkerAddress:
		return dst, &AttachError{"worker address", fmt.Sprintf("%d bytes, want 1 to %d", len(a.Worker), MaxWorkerAddress)}
	case len(a.Regions) > MaxAttachRegions:
		return dst, &AttachError{"regions", fmt.Sprintf("%d, at most %d", len(a.Regions), MaxAttachRegions)}
	}
	for i, r := range a.Regions {
		if len(r.Packed) == 0 || len(r.Packed) > MaxPackedKey {
			return dst, &AttachError{fmt.Sprintf("region %d packed key", i), fmt.Sprintf("%d bytes, want 1 to %d", len(r.Packed), MaxPackedKey)}
		}
	}
	var h [attachFixed]byte
	binary.LittleEndian.PutUint32(h[0:], attachMagic)
	binary.LittleEndian.PutUint16(h[4:], attachVersion)
	binary.LittleEndian.PutUint16(h[6:], uint16(len(a.Regions)))
	binary.LittleEndian.PutUint32(h[8:], uint32(len(a.Worker)))
	dst = append(dst, h[:]...)
	dst = append(dst, a.Worker...)
	for _, r := range a.Regions {
		var e [attachRegion]byte
		binary.LittleEndian.PutUint64(e[0:], uint64(r.Key))
		binary.LittleEndian.PutUint64(e[8:], r.Base)
		binary.LittleEndian.PutUint16(e[16:], uint16(len(r.Packed)))
		dst = append(dst, e[:]...)
		dst = append(dst, r.Packed...)
	}
	return dst, nil
}

// DecodeAttachment decodes b, the attachment of a side whose handshake
// listed regions, into a (its blobs are copies). It refuses a wrong magic
// or version; a worker address or packed key empty or over its bound; a
// count that differs from the listed regions'; a key listed twice, or
// not listed in the handshake; a base address whose region (its listed
// length) would wrap the address space; and bytes short or left over.
func DecodeAttachment(a *Attachment, b []byte, regions []verbs.RegionInfo) error {
	bad := func(field, format string, args ...any) error {
		return &AttachError{field, fmt.Sprintf(format, args...)}
	}
	if len(b) < attachFixed {
		return bad("length", "%d bytes, shorter than the %d-byte header", len(b), attachFixed)
	}
	if m := binary.LittleEndian.Uint32(b); m != attachMagic {
		return bad("magic", "%#x", m)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != attachVersion {
		return bad("version", "%d, this side speaks %d", v, attachVersion)
	}
	n := int(binary.LittleEndian.Uint16(b[6:]))
	if n != len(regions) {
		return bad("regions", "%d keys for %d listed regions", n, len(regions))
	}
	wl := int(binary.LittleEndian.Uint32(b[8:]))
	if wl == 0 || wl > MaxWorkerAddress {
		return bad("worker address", "%d bytes, want 1 to %d", wl, MaxWorkerAddress)
	}
	b = b[attachFixed:]
	if len(b) < wl {
		return bad("worker address", "%d bytes, %d left", wl, len(b))
	}
	a.Worker = append(a.Worker[:0], b[:wl]...)
	b = b[wl:]
	a.Regions = a.Regions[:0]
	for i := range n {
		if len(b) < attachRegion {
			return bad(fmt.Sprintf("region %d", i), "%d bytes left, want %d", len(b), attachRegion)
		}
		k := verbs.Key(binary.LittleEndian.Uint64(b))
		base := binary.LittleEndian.Uint64(b[8:])
		pl := int(binary.LittleEndian.Uint16(b[16:]))
		b = b[attachRegion:]
		if pl == 0 || pl > MaxPackedKey {
			return bad(fmt.Sprintf("region %d packed key", i), "%d bytes, want 1 to %d", pl, MaxPackedKey)
		}
		if len(b) < pl {
			return bad(fmt.Sprintf("region %d packed key", i), "%d bytes, %d left", pl, len(b))
		}
		ri := -1
		for j, r := range regions {
			if r.Key == k {
				ri = j
				break
			}
		}
		if ri < 0 {
			return bad(fmt.Sprintf("region %d key", i), "%v is not a listed region", k)
		}
		for _, o := range a.Regions {
			if o.Key == k {
				return bad(fmt.Sprintf("region %d key", i), "%v given twice", k)
			}
		}
		if l := regions[ri].Len; base+l < base {
			return bad(fmt.Sprintf("region %d base", i), "%#x + %d wraps", base, l)
		}
		a.Regions = append(a.Regions, RegionKey{Key: k, Base: base, Packed: append([]byte(nil), b[:pl]...)})
		b = b[pl:]
	}
	if len(b) != 0 {
		return bad("length", "%d bytes after the last region", len(b))
	}
	return nil
}

package proto

import (
	"encoding/binary"
	"math"
	"time"
)

// InfoReply is the owner's capability answer.
type InfoReply struct {
	Arena      uint64 // the region's size
	MaxInline  uint64 // 0: no inline methods
	ReserveTTL time.Duration
	HoldTTL    time.Duration
	Gather     bool // a gather service runs on the segment
	Limits     ManifestLimits
	Region     string // the export name of the object region
	Namespace  string
}

func (m *InfoReply) Append(dst []byte) []byte {
	dst = appendHeader(dst, MethodInfo, true)
	dst = appendU64(dst, m.Arena)
	dst = appendU64(dst, m.MaxInline)
	dst = appendU64(dst, ttlWire(m.ReserveTTL))
	dst = appendU64(dst, ttlWire(m.HoldTTL))
	var flags uint32
	if m.Gather {
		flags |= flagGather
	}
	dst = appendU32(dst, flags)
	dst = append(dst, byte(len(m.Region)), byte(len(m.Namespace)), 0, 0)
	dst = appendInfoLimits(dst, &m.Limits)
	dst = append(dst, m.Region...)
	return append(dst, m.Namespace...)
}

func (m *InfoReply) Decode(b []byte, _ *Limits) error {
	d := msgDecoder{b: b, method: MethodInfo, reply: true}
	fixed := infoFixedSize + 8*infoLimitFields
	if err := d.header(fixed); err != nil {
		return err
	}
	r, s := int(b[44]), int(b[45])
	if err := d.exact(uint64(fixed + r + s)); err != nil {
		return err
	}
	if err := d.zero("reserved", 46, 48); err != nil {
		return err
	}
	var v InfoReply
	v.Arena = d.u64(8)
	v.MaxInline = d.u64(16)
	if v.MaxInline > MaxInlineLimit {
		return d.fail("max inline", "%d bytes, above %d", v.MaxInline, MaxInlineLimit)
	}
	var err error
	if v.ReserveTTL, err = d.ttl("reserve TTL", d.u64(24)); err != nil {
		return err
	}
	if v.HoldTTL, err = d.ttl("hold TTL", d.u64(32)); err != nil {
		return err
	}
	flags := d.u32(40)
	if flags&^flagGather != 0 {
		return d.fail("flags", "unknown bits %#x", flags&^flagGather)
	}
	v.Gather = flags&flagGather != 0
	if err := decodeInfoLimits(&d, &v.Limits, b[infoFixedSize:fixed]); err != nil {
		return err
	}
	if r == 0 {
		return d.fail("region", "empty name")
	}
	v.Region = string(b[fixed : fixed+r])
	v.Namespace = string(b[fixed+r:])
	*m = v
	return nil
}

// ReserveRequest asks for Size bytes of pending space.
type ReserveRequest struct{ Size uint64 }

func (m *ReserveRequest) Append(dst []byte) []byte {
	return appendU64(appendHeader(dst, MethodReserve, false), m.Size)
}

func (m *ReserveRequest) Decode(b []byte, _ *Limits) error {
	d := msgDecoder{b: b, method: MethodReserve}
	if err := d.header(16); err != nil {
		return err
	}
	if err := d.exact(16); err != nil {
		return err
	}
	m.Size = d.u64(8)
	return nil
}

// ReserveReply is a reservation: its id, where it lies in the region,
// its length and how long it stays pending.
type ReserveReply struct {
	ID, Off, Length uint64
	TTL             time.Duration
}

func (m *ReserveReply) Append(dst []byte) []byte {
	dst = appendHeader(dst, MethodReserve, true)
	dst = appendU64(dst, m.ID)
	dst = appendU64(dst, m.Off)
	dst = appendU64(dst, m.Length)
	return appendU64(dst, ttlWire(m.TTL))
}

func (m *ReserveReply) Decode(b []byte, _ *Limits) error {
	d := msgDecoder{b: b, method: MethodReserve, reply: true}
	if err := d.header(40); err != nil {
		return err
	}
	if err := d.exact(40); err != nil {
		return err
	}
	v := ReserveReply{ID: d.u64(8), Off: d.u64(16), Length: d.u64(24)}
	switch {
	case v.ID == 0:
		return d.fail("id", "zero")
	case v.Off%Align != 0 || v.Length%Align != 0:
		return d.fail("extent", "offset %d, length %d not multiples of %d", v.Off, v.Length, Align)
	case v.Off+v.Length < v.Off:
		return d.fail("extent", "offset %d + length %d overflows", v.Off, v.Length)
	}
	var err error
	if v.TTL, err = d.ttl("TTL", d.u64(32)); err != nil {
		return err
	}
	*m = v
	return nil
}

// CommitRequest installs reservation ID under Key with Manifest. Key
// and Manifest alias the decoded message.
type CommitRequest struct {
	ID       uint64
	Key      []byte
	Manifest []byte
}

func (m *CommitRequest) Append(dst []byte) []byte {
	dst = appendHeader(dst, MethodCommit, false)
	dst = appendU64(dst, m.ID)
	dst = appendU16(dst, uint16(len(m.Key)))
	dst = appendU16(dst, 0)
	dst = appendU32(dst, uint32(len(m.Manifest)))
	dst = append(dst, m.Key...)
	return append(dst, m.Manifest...)
}

func (m *CommitRequest) Decode(b []byte, lim *Limits) error {
	d := msgDecoder{b: b, method: MethodCommit}
	if err := d.header(24); err != nil {
		return err
	}
	k, n := d.u16(16), uint64(d.u32(20))
	if err := d.key(k); err != nil {
		return err
	}
	if err := d.zero("reserved", 18, 20); err != nil {
		return err
	}
	if err := d.manifest(n, lim); err != nil {
		return err
	}
	if err := d.exact(24 + uint64(k) + n); err != nil {
		return err
	}
	m.ID = d.u64(8)
	if m.ID == 0 {
		return d.fail("id", "zero")
	}
	m.Key = b[24 : 24+int(k)]
	m.Manifest = b[24+int(k):]
	return nil
}

// IDRequest is a message that carries one id (Abort and Close
// requests).
type IDRequest struct {
	Method uint16
	ID     uint64
}

func (m *IDRequest) Append(dst []byte) []byte {
	return appendU64(appendHeader(dst, m.Method, false), m.ID)
}

func (m *IDRequest) Decode(b []byte, _ *Limits) error {
	d := msgDecoder{b: b, method: m.Method}
	if err := d.header(16); err != nil {
		return err
	}
	if err := d.exact(16); err != nil {
		return err
	}
	if m.ID = d.u64(8); m.ID == 0 {
		return d.fail("id", "zero")
	}
	return nil
}

// EmptyReply is a reply without a body (Abort, Close).
type EmptyReply struct{ Method uint16 }

func (m *EmptyReply) Append(dst []byte) []byte { return appendHeader(dst, m.Method, true) }

func (m *EmptyReply) Decode(b []byte, _ *Limits) error {
	d := msgDecoder{b: b, method: m.Method, reply: true}
	if err := d.header(headerSize); err != nil {
		return err
	}
	return d.exact(headerSize)
}

// EmptyRequest is a request without a body (Info).
type EmptyRequest struct{ Method uint16 }

func (m *EmptyRequest) Append(dst []byte) []byte { return appendHeader(dst, m.Method, false) }

func (m *EmptyRequest) Decode(b []byte, _ *Limits) error {
	d := msgDecoder{b: b, method: m.Method}
	if err := d.header(headerSize); err != nil {
		return err
	}
	return d.exact(headerSize)
}

// VersionReply carries a version (Commit, Delete and PutInline replies).
type VersionReply struct {
	Method  uint16
	Version uint64
}

func (m *VersionReply) Append(dst []byte) []byte {
	return appendU64(appendHeader(dst, m.Method, true), m.Version)
}

func (m *VersionReply) Decode(b []byte, _ *Limits) error {
	d := msgDecoder{b: b, method: m.Method, reply: true}
	if err := d.header(16); err != nil {
		return err
	}
	if err := d.exact(16); err != nil {
		return err
	}
	if m.Version = d.u64(8); m.Version == 0 {
		return d.fail("version", "zero")
	}
	return nil
}

// KeyRequest names a key (Open and Delete requests). Key aliases the
// decoded message.
type KeyRequest struct {
	Method uint16
	Key    []byte
}

func (m *KeyRequest) Append(dst []byte) []byte {
	dst = appendHeader(dst, m.Method, false)
	dst = appendU16(dst, uint16(len(m.Key)))
	dst = append(dst, 0, 0, 0, 0, 0, 0)
	return append(dst, m.Key...)
}

func (m *KeyRequest) Decode(b []byte, _ *Limits) error {
	d := msgDecoder{b: b, method: m.Method}
	if err := d.header(16); err != nil {
		return err
	}
	k := d.u16(8)
	if err := d.key(k); err != nil {
		return err
	}
	if err := d.zero("reserved", 10, 16); err != nil {
		return err
	}
	if err := d.exact(16 + uint64(k)); err != nil {
		return err
	}
	m.Key = b[16:]
	return nil
}

// OpenReply is a hold on one object version, whose payload starts at Off
// in the region. Manifest aliases the decoded message.
type OpenReply struct {
	Hold, Version, Off uint64
	TTL                time.Duration
	Manifest           []byte
}

func (m *OpenReply) Append(dst []byte) []byte {
	dst = appendHeader(dst, MethodOpen, true)
	dst = appendU64(dst, m.Hold)
	dst = appendU64(dst, m.Version)
	dst = appendU64(dst, m.Off)
	dst = appendU64(dst, ttlWire(m.TTL))
	dst = appendU32(dst, uint32(len(m.Manifest)))
	dst = appendU32(dst, 0)
	return append(dst, m.Manifest...)
}

func (m *OpenReply) Decode(b []byte, lim *Limits) error {
	d := msgDecoder{b: b, method: MethodOpen, reply: true}
	if err := d.header(48); err != nil {
		return err
	}
	n := uint64(d.u32(40))
	if err := d.zero("reserved", 44, 48); err != nil {
		return err
	}
	if err := d.manifest(n, lim); err != nil {
		return err
	}
	if err := d.exact(48 + n); err != nil {
		return err
	}
	v := OpenReply{Hold: d.u64(8), Version: d.u64(16), Off: d.u64(24), Manifest: b[48:]}
	switch {
	case v.Hold == 0:
		return d.fail("hold", "zero")
	case v.Version == 0:
		return d.fail("version", "zero")
	case v.Off%Align != 0:
		return d.fail("offset", "%d not a multiple of %d", v.Off, Align)
	}
	var err error
	if v.TTL, err = d.ttl("TTL", d.u64(32)); err != nil {
		return err
	}
	*m = v
	return nil
}

// PutInlineRequest stores Key with Manifest and the Payload inside the
// call. Key, Manifest and Payload alias the decoded message.
type PutInlineRequest struct {
	Key, Manifest, Payload []byte
}

// AppendPutInlineHead appends a PutInline request up to its payload,
// which the caller appends next (payload bytes exactly, from as many
// buffers as it likes).
func AppendPutInlineHead(dst, key, manifest []byte, payload uint64) []byte {
	dst = appendHeader(dst, MethodPutInline, false)
	dst = appendU16(dst, uint16(len(key)))
	dst = appendU16(dst, 0)
	dst = appendU32(dst, uint32(len(manifest)))
	dst = appendU64(dst, payload)
	dst = append(dst, key...)
	return append(dst, manifest...)
}

func (m *PutInlineRequest) Append(dst []byte) []byte {
	return append(AppendPutInlineHead(dst, m.Key, m.Manifest, uint64(len(m.Payload))), m.Payload...)
}

func (m *PutInlineRequest) Decode(b []byte, lim *Limits) error {
	d := msgDecoder{b: b, method: MethodPutInline}
	if err := d.header(24); err != nil {
		return err
	}
	k, n, p := d.u16(8), uint64(d.u32(12)), d.u64(16)
	if err := d.key(k); err != nil {
		return err
	}
	if err := d.zero("reserved", 10, 12); err != nil {
		return err
	}
	if err := d.manifest(n, lim); err != nil {
		return err
	}
	if p > lim.Inline {
		return d.fail("payload", "%d bytes, inline limit %d", p, lim.Inline)
	}
	if err := d.exact(24 + uint64(k) + n + p); err != nil {
		return err
	}
	m.Key = b[24 : 24+int(k)]
	m.Manifest = b[24+int(k) : 24+int(k)+int(n)]
	m.Payload = b[24+int(k)+int(n):]
	return nil
}

// ByteRange is a range of an object's payload: [Off, Off+Len).
type ByteRange struct{ Off, Len uint64 }

// GetInlineRequest asks for Key's manifest and Ranges of its payload
// (none: the whole payload). Key aliases the decoded message; Decode
// reuses Ranges.
type GetInlineRequest struct {
	Key    []byte
	Ranges []ByteRange
}

func (m *GetInlineRequest) Append(dst []byte) []byte {
	dst = appendHeader(dst, MethodGetInline, false)
	dst = appendU16(dst, uint16(len(m.Key)))
	dst = appendU16(dst, 0)
	dst = appendU32(dst, uint32(len(m.Ranges)))
	dst = append(dst, m.Key...)
	for _, r := range m.Ranges {
		dst = appendU64(dst, r.Off)
		dst = appendU64(dst, r.Len)
	}
	return dst
}

func (m *GetInlineRequest) Decode(b []byte, lim *Limits) error {
	d := msgDecoder{b: b, method: MethodGetInline}
	if err := d.header(16); err != nil {
		return err
	}
	k, n := d.u16(8), d.u32(12)
	if err := d.key(k); err != nil {
		return err
	}
	if err := d.zero("reserved", 10, 12); err != nil {
		return err
	}
	if n > MaxInlineRanges {
		return d.fail("ranges", "%d, at most %d", n, MaxInlineRanges)
	}
	if err := d.exact(16 + uint64(k) + 16*uint64(n)); err != nil {
		return err
	}
	rs := m.Ranges[:0]
	var total uint64
	for i := range int(n) {
		at := 16 + int(k) + 16*i
		r := ByteRange{d.u64(at), d.u64(at + 8)}
		if r.Len == 0 || r.Off+r.Len < r.Off {
			return d.fail("ranges", "range %d [%d,+%d) empty or overflowing", i, r.Off, r.Len)
		}
		if r.Len > lim.Inline-total {
			return d.fail("ranges", "more than the inline limit of %d bytes", lim.Inline)
		}
		total += r.Len
		rs = append(rs, r)
	}
	m.Key = b[16 : 16+int(k)]
	m.Ranges = rs
	return nil
}

// GetInlineReply is an object's version, manifest and requested bytes.
// Manifest and Data alias the decoded message.
type GetInlineReply struct {
	Version        uint64
	Manifest, Data []byte
}

// AppendGetInlineHead appends a GetInline reply up to its data, which
// the caller appends next (data bytes exactly).
func AppendGetInlineHead(dst []byte, version uint64, manifest []byte, data uint64) []byte {
	dst = appendHeader(dst, MethodGetInline, true)
	dst = appendU64(dst, version)
	dst = appendU32(dst, uint32(len(manifest)))
	dst = appendU32(dst, 0)
	dst = appendU64(dst, data)
	return append(dst, manifest...)
}

func (m *GetInlineReply) Append(dst []byte) []byte {
	return append(AppendGetInlineHead(dst, m.Version, m.Manifest, uint64(len(m.Data))), m.Data...)
}

func (m *GetInlineReply) Decode(b []byte, lim *Limits) error {
	d := msgDecoder{b: b, method: MethodGetInline, reply: true}
	if err := d.header(32); err != nil {
		return err
	}
	n, p := uint64(d.u32(16)), d.u64(24)
	if err := d.zero("reserved", 20, 24); err != nil {
		return err
	}
	if err := d.manifest(n, lim); err != nil {
		return err
	}
	if p > lim.Inline {
		return d.fail("data", "%d bytes, inline limit %d", p, lim.Inline)
	}
	if err := d.exact(32 + n + p); err != nil {
		return err
	}
	v := GetInlineReply{Version: d.u64(8), Manifest: b[32 : 32+int(n)], Data: b[32+int(n):]}
	if v.Version == 0 {
		return d.fail("version", "zero")
	}
	*m = v
	return nil
}

// infoLimitFields is the number of u64 fields of the manifest limits in
// the Info reply: MaxMembers, MaxDims, MaxMeta, MaxMetaBytes, MaxBytes.
const infoLimitFields = 5

func appendInfoLimits(dst []byte, l *ManifestLimits) []byte {
	for _, v := range [infoLimitFields]int{l.MaxMembers, l.MaxDims, l.MaxMeta, l.MaxMetaBytes, l.MaxBytes} {
		dst = appendU64(dst, uint64(max(v, 0)))
	}
	return dst
}

func decodeInfoLimits(d *msgDecoder, l *ManifestLimits, b []byte) error {
	var v [infoLimitFields]int
	for i := range v {
		x := binary.LittleEndian.Uint64(b[8*i:])
		if x == 0 || x > math.MaxUint32 {
			return d.fail("limits", "field %d is %d, want 1..%d", i, x, uint64(math.MaxUint32))
		}
		v[i] = int(x)
	}
	if uint64(v[4]) > MaxManifestBytes {
		return d.fail("limits", "manifest bytes %d above %d", v[4], MaxManifestBytes)
	}
	*l = ManifestLimits{MaxMembers: v[0], MaxDims: v[1], MaxMeta: v[2], MaxMetaBytes: v[3], MaxBytes: v[4]}
	return nil
}

// RequestKey returns the key the request names (Keyed).
func (m *CommitRequest) RequestKey() []byte    { return m.Key }
func (m *KeyRequest) RequestKey() []byte       { return m.Key }
func (m *PutInlineRequest) RequestKey() []byte { return m.Key }
func (m *GetInlineRequest) RequestKey() []byte { return m.Key }

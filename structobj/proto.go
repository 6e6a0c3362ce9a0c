package structobj

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Control methods of the Structured Object protocol (see "Control
// protocol" in the package documentation).
const (
	// MethodInfo asks for the owner's capabilities.
	MethodInfo uint16 = 0x5301 + iota
	// MethodReserve takes pending space for one payload.
	MethodReserve
	// MethodCommit installs a reserved, written payload under a key.
	MethodCommit
	// MethodAbort gives a reservation back.
	MethodAbort
	// MethodOpen takes a hold on a key's current object.
	MethodOpen
	// MethodClose releases a hold.
	MethodClose
	// MethodDelete removes a key.
	MethodDelete
	// MethodPutInline stores an object whose payload is inside the call.
	MethodPutInline
	// MethodGetInline returns an object's manifest and payload ranges
	// inside the reply.
	MethodGetInline
)

// Protocol constants.
const (
	// RegionName is the export name of the owner's object region.
	RegionName = "objects"
	// MaxKeyLen is the longest key a message may carry. The naming rules
	// (see NewOwner) make the usable length shorter by the record name's
	// prefix.
	MaxKeyLen = 255
	// MaxInlineRanges bounds the ranges of one GetInline request.
	MaxInlineRanges = 1 << 16
	// MaxInlineLimit caps OwnerConfig.MaxInline: an inline message (up to
	// 16 MiB in the transports) carries the payload plus key and manifest.
	MaxInlineLimit = 8 << 20
	// MaxManifestBytes caps the encoded manifest a message carries (the
	// owner lowers Limits.MaxBytes to it), so that a manifest and an
	// inline payload of MaxInlineLimit bytes fit one control message.
	MaxManifestBytes = 7 << 20
	// MaxTTL is the longest reservation or hold TTL the protocol carries.
	MaxTTL = 24 * time.Hour
)

const (
	protoVersion = 1
	headerSize   = 8
	replyBit     = 0x80
	methodBase   = 0x5300
	// infoFixedSize is the Info reply up to its limits.
	infoFixedSize = 48
	flagGather    = 1
)

var protoMagic = [4]byte{'S', 'K', 'S', 'O'}

// wireLimits bound what a msgDecoder accepts.
type wireLimits struct {
	manifest uint64 // longest manifest
	inline   uint64 // largest inline payload or data
}

// msgKind returns the header kind of method's request (reply: true for its
// reply).
func msgKind(method uint16, reply bool) byte {
	k := byte(method - methodBase)
	if reply {
		k |= replyBit
	}
	return k
}

// messageName names a message in errors.
func messageName(method uint16, reply bool) string {
	names := [...]string{"info", "reserve", "commit", "abort", "open", "close", "delete", "put-inline", "get-inline"}
	n := "unknown"
	if i := int(method) - int(MethodInfo); i >= 0 && i < len(names) {
		n = names[i]
	}
	if reply {
		return n + " reply"
	}
	return n + " request"
}

// appendHeader appends the common header of method's request or reply.
func appendHeader(dst []byte, method uint16, reply bool) []byte {
	return append(dst, protoMagic[0], protoMagic[1], protoMagic[2], protoMagic[3], protoVersion, msgKind(method, reply), 0, 0)
}

// msgDecoder checks one message of method (its reply when reply is set).
type msgDecoder struct {
	b      []byte
	method uint16
	reply  bool
}

func (d *msgDecoder) fail(field, format string, args ...any) error {
	return &MessageError{Message: messageName(d.method, d.reply), Field: field, Reason: fmt.Sprintf(format, args...)}
}

// header checks the header and that the message has at least fixed
// bytes.
func (d *msgDecoder) header(fixed int) error {
	b := d.b
	if len(b) < fixed {
		return d.fail("length", "%d bytes, at least %d", len(b), fixed)
	}
	if [4]byte(b[0:4]) != protoMagic {
		return d.fail("magic", "not SKSO")
	}
	if b[4] != protoVersion {
		return d.fail("version", "%d, want %d", b[4], protoVersion)
	}
	if want := msgKind(d.method, d.reply); b[5] != want {
		return d.fail("kind", "%#x, want %#x", b[5], want)
	}
	if b[6] != 0 || b[7] != 0 {
		return d.fail("reserved", "header bytes 6-7 not zero")
	}
	return nil
}

// exact checks that the message is exactly n bytes long.
func (d *msgDecoder) exact(n uint64) error {
	if uint64(len(d.b)) != n {
		return d.fail("length", "%d bytes, want %d", len(d.b), n)
	}
	return nil
}

func (d *msgDecoder) u16(off int) uint16 { return binary.LittleEndian.Uint16(d.b[off:]) }
func (d *msgDecoder) u32(off int) uint32 { return binary.LittleEndian.Uint32(d.b[off:]) }
func (d *msgDecoder) u64(off int) uint64 { return binary.LittleEndian.Uint64(d.b[off:]) }

func (d *msgDecoder) zero(field string, from, to int) error {
	for _, c := range d.b[from:to] {
		if c != 0 {
			return d.fail(field, "reserved bytes not zero")
		}
	}
	return nil
}

func (d *msgDecoder) key(n uint16) error {
	if n == 0 || n > MaxKeyLen {
		return d.fail("key", "%d bytes, want 1..%d", n, MaxKeyLen)
	}
	return nil
}

func (d *msgDecoder) manifest(m uint64, lim *wireLimits) error {
	if m > lim.manifest {
		return d.fail("manifest", "%d bytes, limit %d", m, lim.manifest)
	}
	return nil
}

func (d *msgDecoder) ttl(field string, v uint64) (time.Duration, error) {
	if v == 0 || v > uint64(MaxTTL) {
		return 0, d.fail(field, "%d ns, want 1..%d", v, uint64(MaxTTL))
	}
	return time.Duration(v), nil
}

func appendU16(dst []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(dst, v) }
func appendU32(dst []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(dst, v) }
func appendU64(dst []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(dst, v) }

// ttlWire encodes a TTL, clamped to what the protocol carries.
func ttlWire(d time.Duration) uint64 { return uint64(min(max(d, 1), MaxTTL)) }

// infoReply is the owner's capability answer.
type infoReply struct {
	arena      uint64
	maxInline  uint64 // 0: no inline methods
	reserveTTL time.Duration
	holdTTL    time.Duration
	gather     bool
	limits     Limits
	region     string
	namespace  string
}

func (m *infoReply) appendTo(dst []byte) []byte {
	dst = appendHeader(dst, MethodInfo, true)
	dst = appendU64(dst, m.arena)
	dst = appendU64(dst, m.maxInline)
	dst = appendU64(dst, ttlWire(m.reserveTTL))
	dst = appendU64(dst, ttlWire(m.holdTTL))
	var flags uint32
	if m.gather {
		flags |= flagGather
	}
	dst = appendU32(dst, flags)
	dst = append(dst, byte(len(m.region)), byte(len(m.namespace)), 0, 0)
	dst = appendInfoLimits(dst, &m.limits)
	dst = append(dst, m.region...)
	return append(dst, m.namespace...)
}

func (m *infoReply) decodeFrom(b []byte, _ *wireLimits) error {
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
	var v infoReply
	v.arena = d.u64(8)
	v.maxInline = d.u64(16)
	if v.maxInline > MaxInlineLimit {
		return d.fail("max inline", "%d bytes, above %d", v.maxInline, MaxInlineLimit)
	}
	var err error
	if v.reserveTTL, err = d.ttl("reserve TTL", d.u64(24)); err != nil {
		return err
	}
	if v.holdTTL, err = d.ttl("hold TTL", d.u64(32)); err != nil {
		return err
	}
	flags := d.u32(40)
	if flags&^flagGather != 0 {
		return d.fail("flags", "unknown bits %#x", flags&^flagGather)
	}
	v.gather = flags&flagGather != 0
	if err := decodeInfoLimits(&d, &v.limits, b[infoFixedSize:fixed]); err != nil {
		return err
	}
	if r == 0 {
		return d.fail("region", "empty name")
	}
	v.region = string(b[fixed : fixed+r])
	v.namespace = string(b[fixed+r:])
	*m = v
	return nil
}

// reserveRequest asks for size bytes of pending space.
type reserveRequest struct{ size uint64 }

func (m *reserveRequest) appendTo(dst []byte) []byte {
	return appendU64(appendHeader(dst, MethodReserve, false), m.size)
}

func (m *reserveRequest) decodeFrom(b []byte, _ *wireLimits) error {
	d := msgDecoder{b: b, method: MethodReserve}
	if err := d.header(16); err != nil {
		return err
	}
	if err := d.exact(16); err != nil {
		return err
	}
	m.size = d.u64(8)
	return nil
}

// reserveReply is a reservation: its id, where it lies in the region,
// its length and how long it stays pending.
type reserveReply struct {
	id, off, length uint64
	ttl             time.Duration
}

func (m *reserveReply) appendTo(dst []byte) []byte {
	dst = appendHeader(dst, MethodReserve, true)
	dst = appendU64(dst, m.id)
	dst = appendU64(dst, m.off)
	dst = appendU64(dst, m.length)
	return appendU64(dst, ttlWire(m.ttl))
}

func (m *reserveReply) decodeFrom(b []byte, _ *wireLimits) error {
	d := msgDecoder{b: b, method: MethodReserve, reply: true}
	if err := d.header(40); err != nil {
		return err
	}
	if err := d.exact(40); err != nil {
		return err
	}
	v := reserveReply{id: d.u64(8), off: d.u64(16), length: d.u64(24)}
	switch {
	case v.id == 0:
		return d.fail("id", "zero")
	case v.off%Align != 0 || v.length%Align != 0:
		return d.fail("extent", "offset %d, length %d not multiples of %d", v.off, v.length, Align)
	case v.off+v.length < v.off:
		return d.fail("extent", "offset %d + length %d overflows", v.off, v.length)
	}
	var err error
	if v.ttl, err = d.ttl("TTL", d.u64(32)); err != nil {
		return err
	}
	*m = v
	return nil
}

// commitRequest installs reservation id under key with manifest. key
// and manifest alias the decoded message.
type commitRequest struct {
	id       uint64
	key      []byte
	manifest []byte
}

func (m *commitRequest) appendTo(dst []byte) []byte {
	dst = appendHeader(dst, MethodCommit, false)
	dst = appendU64(dst, m.id)
	dst = appendU16(dst, uint16(len(m.key)))
	dst = appendU16(dst, 0)
	dst = appendU32(dst, uint32(len(m.manifest)))
	dst = append(dst, m.key...)
	return append(dst, m.manifest...)
}

func (m *commitRequest) decodeFrom(b []byte, lim *wireLimits) error {
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
	m.id = d.u64(8)
	if m.id == 0 {
		return d.fail("id", "zero")
	}
	m.key = b[24 : 24+int(k)]
	m.manifest = b[24+int(k):]
	return nil
}

// idMessage is a message that carries one id (Abort and Close
// requests).
type idMessage struct {
	method uint16
	id     uint64
}

func (m *idMessage) appendTo(dst []byte) []byte {
	return appendU64(appendHeader(dst, m.method, false), m.id)
}

func (m *idMessage) decodeFrom(b []byte, _ *wireLimits) error {
	d := msgDecoder{b: b, method: m.method}
	if err := d.header(16); err != nil {
		return err
	}
	if err := d.exact(16); err != nil {
		return err
	}
	if m.id = d.u64(8); m.id == 0 {
		return d.fail("id", "zero")
	}
	return nil
}

// emptyReply is a reply without a body (Abort, Close).
type emptyReply struct{ method uint16 }

func (m *emptyReply) appendTo(dst []byte) []byte { return appendHeader(dst, m.method, true) }

func (m *emptyReply) decodeFrom(b []byte, _ *wireLimits) error {
	d := msgDecoder{b: b, method: m.method, reply: true}
	if err := d.header(headerSize); err != nil {
		return err
	}
	return d.exact(headerSize)
}

// emptyRequest is a request without a body (Info).
type emptyRequest struct{ method uint16 }

func (m *emptyRequest) appendTo(dst []byte) []byte { return appendHeader(dst, m.method, false) }

func (m *emptyRequest) decodeFrom(b []byte, _ *wireLimits) error {
	d := msgDecoder{b: b, method: m.method}
	if err := d.header(headerSize); err != nil {
		return err
	}
	return d.exact(headerSize)
}

// versionReply carries a version (Commit, Delete and PutInline replies).
type versionReply struct {
	method  uint16
	version uint64
}

func (m *versionReply) appendTo(dst []byte) []byte {
	return appendU64(appendHeader(dst, m.method, true), m.version)
}

func (m *versionReply) decodeFrom(b []byte, _ *wireLimits) error {
	d := msgDecoder{b: b, method: m.method, reply: true}
	if err := d.header(16); err != nil {
		return err
	}
	if err := d.exact(16); err != nil {
		return err
	}
	if m.version = d.u64(8); m.version == 0 {
		return d.fail("version", "zero")
	}
	return nil
}

// keyRequest names a key (Open and Delete requests). key aliases the
// decoded message.
type keyRequest struct {
	method uint16
	key    []byte
}

func (m *keyRequest) appendTo(dst []byte) []byte {
	dst = appendHeader(dst, m.method, false)
	dst = appendU16(dst, uint16(len(m.key)))
	dst = append(dst, 0, 0, 0, 0, 0, 0)
	return append(dst, m.key...)
}

func (m *keyRequest) decodeFrom(b []byte, _ *wireLimits) error {
	d := msgDecoder{b: b, method: m.method}
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
	m.key = b[16:]
	return nil
}

// openReply is a hold on one object version. manifest aliases the
// decoded message.
type openReply struct {
	hold, version, off uint64
	ttl                time.Duration
	manifest           []byte
}

func (m *openReply) appendTo(dst []byte) []byte {
	dst = appendHeader(dst, MethodOpen, true)
	dst = appendU64(dst, m.hold)
	dst = appendU64(dst, m.version)
	dst = appendU64(dst, m.off)
	dst = appendU64(dst, ttlWire(m.ttl))
	dst = appendU32(dst, uint32(len(m.manifest)))
	dst = appendU32(dst, 0)
	return append(dst, m.manifest...)
}

func (m *openReply) decodeFrom(b []byte, lim *wireLimits) error {
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
	v := openReply{hold: d.u64(8), version: d.u64(16), off: d.u64(24), manifest: b[48:]}
	switch {
	case v.hold == 0:
		return d.fail("hold", "zero")
	case v.version == 0:
		return d.fail("version", "zero")
	case v.off%Align != 0:
		return d.fail("offset", "%d not a multiple of %d", v.off, Align)
	}
	var err error
	if v.ttl, err = d.ttl("TTL", d.u64(32)); err != nil {
		return err
	}
	*m = v
	return nil
}

// putInlineRequest stores key with manifest and the payload inside the
// call. key, manifest and payload alias the decoded message.
type putInlineRequest struct {
	key, manifest, payload []byte
}

// appendPutInlineHead appends a PutInline request up to its payload,
// which the caller appends next (payload bytes exactly, from as many
// buffers as it likes).
func appendPutInlineHead(dst, key, manifest []byte, payload uint64) []byte {
	dst = appendHeader(dst, MethodPutInline, false)
	dst = appendU16(dst, uint16(len(key)))
	dst = appendU16(dst, 0)
	dst = appendU32(dst, uint32(len(manifest)))
	dst = appendU64(dst, payload)
	dst = append(dst, key...)
	return append(dst, manifest...)
}

func (m *putInlineRequest) appendTo(dst []byte) []byte {
	return append(appendPutInlineHead(dst, m.key, m.manifest, uint64(len(m.payload))), m.payload...)
}

func (m *putInlineRequest) decodeFrom(b []byte, lim *wireLimits) error {
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
	if p > lim.inline {
		return d.fail("payload", "%d bytes, inline limit %d", p, lim.inline)
	}
	if err := d.exact(24 + uint64(k) + n + p); err != nil {
		return err
	}
	m.key = b[24 : 24+int(k)]
	m.manifest = b[24+int(k) : 24+int(k)+int(n)]
	m.payload = b[24+int(k)+int(n):]
	return nil
}

// byteRange is a range of an object's payload: [off, off+len).
type byteRange struct{ off, len uint64 }

// getInlineRequest asks for key's manifest and ranges of its payload
// (none: the whole payload). key aliases the decoded message; ranges is
// reused.
type getInlineRequest struct {
	key    []byte
	ranges []byteRange
}

func (m *getInlineRequest) appendTo(dst []byte) []byte {
	dst = appendHeader(dst, MethodGetInline, false)
	dst = appendU16(dst, uint16(len(m.key)))
	dst = appendU16(dst, 0)
	dst = appendU32(dst, uint32(len(m.ranges)))
	dst = append(dst, m.key...)
	for _, r := range m.ranges {
		dst = appendU64(dst, r.off)
		dst = appendU64(dst, r.len)
	}
	return dst
}

func (m *getInlineRequest) decodeFrom(b []byte, lim *wireLimits) error {
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
	rs := m.ranges[:0]
	var total uint64
	for i := range int(n) {
		at := 16 + int(k) + 16*i
		r := byteRange{d.u64(at), d.u64(at + 8)}
		if r.len == 0 || r.off+r.len < r.off {
			return d.fail("ranges", "range %d [%d,+%d) empty or overflowing", i, r.off, r.len)
		}
		if r.len > lim.inline-total {
			return d.fail("ranges", "more than the inline limit of %d bytes", lim.inline)
		}
		total += r.len
		rs = append(rs, r)
	}
	m.key = b[16 : 16+int(k)]
	m.ranges = rs
	return nil
}

// getInlineReply is an object's version, manifest and requested bytes.
// manifest and data alias the decoded message.
type getInlineReply struct {
	version        uint64
	manifest, data []byte
}

// appendGetInlineHead appends a GetInline reply up to its data, which
// the caller appends next (data bytes exactly).
func appendGetInlineHead(dst []byte, version uint64, manifest []byte, data uint64) []byte {
	dst = appendHeader(dst, MethodGetInline, true)
	dst = appendU64(dst, version)
	dst = appendU32(dst, uint32(len(manifest)))
	dst = appendU32(dst, 0)
	dst = appendU64(dst, data)
	return append(dst, manifest...)
}

func (m *getInlineReply) appendTo(dst []byte) []byte {
	return append(appendGetInlineHead(dst, m.version, m.manifest, uint64(len(m.data))), m.data...)
}

func (m *getInlineReply) decodeFrom(b []byte, lim *wireLimits) error {
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
	if p > lim.inline {
		return d.fail("data", "%d bytes, inline limit %d", p, lim.inline)
	}
	if err := d.exact(32 + n + p); err != nil {
		return err
	}
	v := getInlineReply{version: d.u64(8), manifest: b[32 : 32+int(n)], data: b[32+int(n):]}
	if v.version == 0 {
		return d.fail("version", "zero")
	}
	*m = v
	return nil
}

// infoLimitFields is the number of u64 fields of the manifest limits in
// the Info reply: MaxMembers, MaxDims, MaxMeta, MaxMetaBytes, MaxBytes.
const infoLimitFields = 5

func appendInfoLimits(dst []byte, l *Limits) []byte {
	for _, v := range [infoLimitFields]int{l.MaxMembers, l.MaxDims, l.MaxMeta, l.MaxMetaBytes, l.MaxBytes} {
		dst = appendU64(dst, uint64(max(v, 0)))
	}
	return dst
}

func decodeInfoLimits(d *msgDecoder, l *Limits, b []byte) error {
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
	*l = Limits{MaxMembers: v[0], MaxDims: v[1], MaxMeta: v[2], MaxMetaBytes: v[3], MaxBytes: v[4]}
	return nil
}

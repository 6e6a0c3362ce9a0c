package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Control methods (see the package documentation).
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

// Protocol constants. Package structobj exports each under the same name.
const (
	// RegionName is the export name of the owner's object region.
	RegionName = "objects"
	// Align is the alignment of every region offset and length a message
	// carries: the owner's allocator hands out extents of multiples of
	// it, so payloads start on cache-line boundaries.
	Align = 64
	// MaxKeyLen is the longest key a message may carry. The naming rules
	// (see structobj.NewOwner) make the usable length shorter by the
	// record name's prefix.
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
	version    = 1
	headerSize = 8
	replyBit   = 0x80
	methodBase = 0x5300
	// infoFixedSize is the Info reply up to its limits.
	infoFixedSize = 48
	flagGather    = 1
)

var magic = [4]byte{'S', 'K', 'S', 'O'}

// ErrProtocol: a message could not be decoded. See MessageError. Package
// structobj exports it as structobj.ErrProtocol.
var ErrProtocol = errors.New("structobj: malformed message")

// MessageError reports a message that could not be decoded. It matches
// ErrProtocol.
type MessageError struct {
	Message string // the message's name, "commit request"
	Field   string
	Reason  string
}

func (e *MessageError) Error() string {
	return fmt.Sprintf("structobj: %s: %s: %s", e.Message, e.Field, e.Reason)
}

// Unwrap returns ErrProtocol.
func (e *MessageError) Unwrap() error { return ErrProtocol }

// Limits bound what a decoder accepts.
type Limits struct {
	Manifest uint64 // longest manifest
	Inline   uint64 // largest inline payload or data
}

// ManifestLimits are the manifest limits an Info reply carries: the
// fields of structobj.Limits, which converts to and from it.
type ManifestLimits struct {
	MaxMembers, MaxDims, MaxMeta, MaxMetaBytes, MaxBytes int
}

// Message is a control message: a request or a reply.
type Message interface {
	// Append appends the message's encoding to dst.
	Append(dst []byte) []byte
	// Decode decodes b, which must be exactly one message of this kind
	// within lim, into the message; a message it rejects is a
	// *MessageError. Slices of the message alias b.
	Decode(b []byte, lim *Limits) error
}

// Keyed is a request that names a key: Commit, Open, Delete, PutInline
// and GetInline.
type Keyed interface {
	Message
	// RequestKey returns the key (aliasing the decoded message).
	RequestKey() []byte
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

// MessageName names a message in errors.
func MessageName(method uint16, reply bool) string {
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
	return append(dst, magic[0], magic[1], magic[2], magic[3], version, msgKind(method, reply), 0, 0)
}

// msgDecoder checks one message of method (its reply when reply is set).
type msgDecoder struct {
	b      []byte
	method uint16
	reply  bool
}

func (d *msgDecoder) fail(field, format string, args ...any) error {
	return &MessageError{Message: MessageName(d.method, d.reply), Field: field, Reason: fmt.Sprintf(format, args...)}
}

// header checks the header and that the message has at least fixed
// bytes.
func (d *msgDecoder) header(fixed int) error {
	b := d.b
	if len(b) < fixed {
		return d.fail("length", "%d bytes, at least %d", len(b), fixed)
	}
	if [4]byte(b[0:4]) != magic {
		return d.fail("magic", "not SKSO")
	}
	if b[4] != version {
		return d.fail("version", "%d, want %d", b[4], version)
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

func (d *msgDecoder) manifest(m uint64, lim *Limits) error {
	if m > lim.Manifest {
		return d.fail("manifest", "%d bytes, limit %d", m, lim.Manifest)
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

package frame

import (
	"encoding/binary"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
)

// Handshake constants.
const (
	Magic      = 0x31564b53 // "SKV1" little-endian
	Version    = 2          // 2: tcp frames are checked (TrailerSize)
	MaxRegions = 252        // SCM_RIGHTS carries at most 253 fds; shm adds a probe region

	helloFixed  = 56
	regionFixed = 18
)

// Hello is the body of HELLO (requester: Lanes, QueueDepth, exposed
// Regions) and WELCOME (owner: ConnID, Token, probe region, exported
// Regions) frames. Unused fields are zero.
type Hello struct {
	Flags      HelloFlags
	Lanes      uint16
	QueueDepth uint32
	ConnID     uint64
	Token      uint64
	ProbeKey   verbs.Key
	ProbeLen   uint64
	Regions    []verbs.RegionInfo
}

// AppendRefusal appends the WELCOME that tells a requester the owner
// refused it (its admission policy, or a limit): status access and the
// reason as text (cut to verbs.MaxErrorMessage bytes), no hello body.
func AppendRefusal(dst []byte, reason string, checked bool) []byte {
	reason = reason[:min(len(reason), verbs.MaxErrorMessage)]
	h := &Header{Type: TypeWelcome, Status: verbs.StatusAccess, Len: uint32(len(reason))}
	if checked {
		return AppendCheckedFrame(dst, h, []byte(reason))
	}
	return append(Append(dst, h), reason...)
}

// Refused reports whether h, a decoded WELCOME header, is a refusal; its
// body is the reason.
func Refused(h *Header) bool { return h.Type == TypeWelcome && h.Status == verbs.StatusAccess }

// RefusedErr is the requester's error for a refusal whose body is reason.
func RefusedErr(reason []byte) error {
	return fmt.Errorf("the owner refused this peer: %s: %w", reason, verbs.ErrNotAdmitted)
}

// HelloFlags are the options a HELLO proposes and its WELCOME settles.
type HelloFlags uint32

const (
	// FlagUnchecked, in HELLO, proposes that the frames after the
	// handshake carry no checksum trailer; in WELCOME, the owner agrees.
	// The handshake itself is always checked.
	FlagUnchecked HelloFlags = 1 << iota

	knownFlags = FlagUnchecked
)

// HelloSize returns the encoded size of h.
func HelloSize(h *Hello) int {
	n := helloFixed
	for _, r := range h.Regions {
		n += regionFixed + len(r.Name)
	}
	return n
}

// AppendHello appends the encoding of h to dst. Names longer than
// verbs.MaxNameLen must have been rejected by the caller.
func AppendHello(dst []byte, h *Hello) []byte {
	var b [helloFixed]byte
	binary.LittleEndian.PutUint32(b[0:], Magic)
	binary.LittleEndian.PutUint16(b[4:], Version)
	binary.LittleEndian.PutUint16(b[6:], h.Lanes)
	binary.LittleEndian.PutUint32(b[8:], h.QueueDepth)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(h.Regions)))
	binary.LittleEndian.PutUint64(b[16:], h.ConnID)
	binary.LittleEndian.PutUint64(b[24:], h.Token)
	binary.LittleEndian.PutUint64(b[32:], uint64(h.ProbeKey))
	binary.LittleEndian.PutUint64(b[40:], h.ProbeLen)
	binary.LittleEndian.PutUint32(b[48:], uint32(h.Flags))
	dst = append(dst, b[:]...)
	for _, r := range h.Regions {
		var e [regionFixed]byte
		binary.LittleEndian.PutUint64(e[0:], uint64(r.Key))
		binary.LittleEndian.PutUint64(e[8:], r.Len)
		e[16] = byte(r.Access)
		e[17] = byte(len(r.Name))
		dst = append(dst, e[:]...)
		dst = append(dst, r.Name...)
	}
	return dst
}

// DecodeHello decodes b into h, reusing h.Regions. It rejects a wrong
// magic or version, more than MaxRegions regions, a zero key or length,
// access without a remote bit or with unknown bits, empty names, duplicate
// keys or names, a probe length without a key (or the reverse), and
// trailing bytes.
func DecodeHello(h *Hello, b []byte) error {
	if len(b) < helloFixed {
		return bad("handshake", "short body")
	}
	if m := binary.LittleEndian.Uint32(b[0:]); m != Magic {
		return bad("handshake", fmt.Sprintf("bad magic %#x", m))
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != Version {
		return bad("handshake", fmt.Sprintf("unsupported version %d", v))
	}
	h.Lanes = binary.LittleEndian.Uint16(b[6:])
	h.QueueDepth = binary.LittleEndian.Uint32(b[8:])
	count := binary.LittleEndian.Uint32(b[12:])
	h.ConnID = binary.LittleEndian.Uint64(b[16:])
	h.Token = binary.LittleEndian.Uint64(b[24:])
	h.ProbeKey = verbs.Key(binary.LittleEndian.Uint64(b[32:]))
	h.ProbeLen = binary.LittleEndian.Uint64(b[40:])
	h.Flags = HelloFlags(binary.LittleEndian.Uint32(b[48:]))
	if h.Flags&^knownFlags != 0 || binary.LittleEndian.Uint32(b[52:]) != 0 {
		return bad("handshake", fmt.Sprintf("unknown flags %#x or reserved bits set", uint32(h.Flags)))
	}
	if count > MaxRegions {
		return bad("handshake", fmt.Sprintf("%d regions, at most %d", count, MaxRegions))
	}
	if (h.ProbeKey == 0) != (h.ProbeLen == 0) {
		return bad("handshake", "probe key and length disagree")
	}
	h.Regions = h.Regions[:0]
	p := b[helloFixed:]
	for i := uint32(0); i < count; i++ {
		if len(p) < regionFixed {
			return bad("handshake", "truncated region table")
		}
		r := verbs.RegionInfo{
			Key:    verbs.Key(binary.LittleEndian.Uint64(p[0:])),
			Len:    binary.LittleEndian.Uint64(p[8:]),
			Access: verbs.Access(p[16]),
		}
		nl := int(p[17])
		p = p[regionFixed:]
		if len(p) < nl {
			return bad("handshake", "truncated region name")
		}
		switch {
		case r.Key == 0:
			return bad("handshake", "region with key 0")
		case r.Key == h.ProbeKey:
			return bad("handshake", "region key equals probe key")
		case r.Len == 0:
			return bad("handshake", "region of 0 bytes")
		case !r.Access.Valid() || r.Access&(verbs.AccessRemoteRead|verbs.AccessRemoteWrite) == 0:
			return bad("handshake", fmt.Sprintf("region access %s", r.Access))
		case nl == 0:
			return bad("handshake", "region without a name")
		}
		name := p[:nl]
		p = p[nl:]
		for _, o := range h.Regions {
			if o.Key == r.Key {
				return bad("handshake", "duplicate region key")
			}
			if o.Name == string(name) {
				return bad("handshake", "duplicate region name")
			}
		}
		r.Name = string(name)
		h.Regions = append(h.Regions, r)
	}
	if len(p) != 0 {
		return bad("handshake", fmt.Sprintf("%d trailing bytes", len(p)))
	}
	return nil
}

package frame

import (
	"encoding/binary"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
)

// HeaderSize is the size of every frame header.
const HeaderSize = 32

// Type is a frame type.
type Type uint8

// Frame types. Requests and responses use the same types in both
// directions: an owner's handler posts READ/WRITE toward the requester and
// gets DATA/ACK back.
const (
	TypeHello   Type = 1  // requester -> owner, first frame of lane 0
	TypeWelcome Type = 2  // owner -> requester, answers HELLO
	TypeJoin    Type = 3  // requester -> owner, first frame of lanes 1..n-1
	TypeJoined  Type = 4  // owner -> requester, answers JOIN
	TypeRead    Type = 5  // READ Len bytes at Key+Off
	TypeWrite   Type = 6  // WRITE the Len-byte payload at Key+Off
	TypeData    Type = 7  // answers READ: Status, then Len payload bytes
	TypeAck     Type = 8  // answers WRITE: Status
	TypeCall    Type = 9  // control call: Method, Len-byte request
	TypeReply   Type = 10 // answers CALL: Status, Len-byte response or error text
	TypePing    Type = 11 // round-trip probe
	TypePong    Type = 12 // answers PING
	TypeParams  Type = 13 // requester -> owner: measured LinkParams (ParamsSize bytes)

	typeCount = 14
)

var typeNames = [typeCount]string{"", "HELLO", "WELCOME", "JOIN", "JOINED", "READ", "WRITE", "DATA", "ACK", "CALL", "REPLY", "PING", "PONG", "PARAMS"}

func (t Type) String() string {
	if t > 0 && t < typeCount {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Limits enforced by Decode.
const (
	// MaxMessage bounds CALL and REPLY payloads.
	MaxMessage = 16 << 20
	// MaxHello bounds HELLO and WELCOME payloads.
	MaxHello = helloFixed + MaxRegions*(regionFixed+verbs.MaxNameLen)
)

// Header is a decoded frame header. Field meaning depends on Type (see the
// verbs/tcp package doc).
type Header struct {
	Type   Type
	Status verbs.Status
	Method uint16
	Len    uint32
	ID     uint64
	Key    uint64
	Off    uint64
}

// Put encodes h into b[:HeaderSize].
func (h *Header) Put(b []byte) {
	_ = b[HeaderSize-1]
	b[0] = byte(h.Type)
	b[1] = byte(h.Status)
	binary.LittleEndian.PutUint16(b[2:], h.Method)
	binary.LittleEndian.PutUint32(b[4:], h.Len)
	binary.LittleEndian.PutUint64(b[8:], h.ID)
	binary.LittleEndian.PutUint64(b[16:], h.Key)
	binary.LittleEndian.PutUint64(b[24:], h.Off)
}

// Append appends the encoding of h to dst.
func Append(dst []byte, h *Header) []byte {
	n := len(dst)
	if cap(dst)-n < HeaderSize {
		dst = append(dst, make([]byte, HeaderSize)...)
	} else {
		dst = dst[:n+HeaderSize]
	}
	h.Put(dst[n:])
	return dst
}

// Decode decodes and validates the header in b[:HeaderSize]. It accepts
// only known types whose unused fields are zero and whose lengths are in
// range; see the verbs/tcp package doc for the rules.
func Decode(h *Header, b []byte) error {
	if len(b) < HeaderSize {
		return bad("frame", "short header")
	}
	h.Type = Type(b[0])
	h.Status = verbs.Status(b[1])
	h.Method = binary.LittleEndian.Uint16(b[2:])
	h.Len = binary.LittleEndian.Uint32(b[4:])
	h.ID = binary.LittleEndian.Uint64(b[8:])
	h.Key = binary.LittleEndian.Uint64(b[16:])
	h.Off = binary.LittleEndian.Uint64(b[24:])
	return h.check()
}

// allow* describe which fields a type may set.
const (
	allowStatus = 1 << iota
	allowMethod
	allowLen
	allowKey
	allowOff
	allowID
)

var allowed = [typeCount]uint8{
	TypeHello:   allowLen,
	TypeWelcome: allowLen | allowStatus,
	TypeJoin:    allowID | allowKey | allowOff,
	TypeJoined:  0,
	TypeRead:    allowID | allowLen | allowKey | allowOff,
	TypeWrite:   allowID | allowLen | allowKey | allowOff,
	TypeData:    allowID | allowStatus | allowLen,
	TypeAck:     allowID | allowStatus,
	TypeCall:    allowID | allowMethod | allowLen,
	TypeReply:   allowID | allowStatus | allowMethod | allowLen,
	TypePing:    allowID,
	TypePong:    allowID,
	TypeParams:  allowLen,
}

func (h *Header) check() error {
	if h.Type == 0 || h.Type >= typeCount {
		return bad("frame", fmt.Sprintf("unknown type %d", uint8(h.Type)))
	}
	a := allowed[h.Type]
	switch {
	case h.Status != 0 && a&allowStatus == 0,
		h.Method != 0 && a&allowMethod == 0,
		h.Len != 0 && a&allowLen == 0,
		h.ID != 0 && a&allowID == 0,
		h.Key != 0 && a&allowKey == 0,
		h.Off != 0 && a&allowOff == 0:
		return bad("frame", fmt.Sprintf("%s with a field it does not use", h.Type))
	}
	if !h.Status.Valid() {
		return bad("frame", fmt.Sprintf("%s with unknown status %d", h.Type, uint8(h.Status)))
	}
	switch h.Type {
	case TypeHello, TypeWelcome:
		if h.Type == TypeWelcome && h.Status != verbs.StatusOK {
			// The owner's admission policy refused the peer.
			if h.Status != verbs.StatusAccess || h.Len > verbs.MaxErrorMessage {
				return bad("frame", fmt.Sprintf("refusing WELCOME with status %s and a %d-byte reason", h.Status, h.Len))
			}
			return nil
		}
		if h.Len < helloFixed || h.Len > MaxHello {
			return bad("frame", fmt.Sprintf("%s body of %d bytes", h.Type, h.Len))
		}
	case TypeData:
		if h.Status != verbs.StatusOK && h.Len != 0 {
			return bad("frame", "failed DATA with a payload")
		}
		if h.Status > verbs.StatusBounds {
			return bad("frame", fmt.Sprintf("DATA with status %s", h.Status))
		}
	case TypeAck:
		if h.Status > verbs.StatusBounds {
			return bad("frame", fmt.Sprintf("ACK with status %s", h.Status))
		}
	case TypeCall, TypeReply:
		if h.Len > MaxMessage {
			return bad("frame", fmt.Sprintf("%s payload of %d bytes", h.Type, h.Len))
		}
		if h.Type == TypeReply && h.Status != verbs.StatusOK && h.Status != verbs.StatusNotSupported && h.Status != verbs.StatusHandler {
			return bad("frame", fmt.Sprintf("REPLY with status %s", h.Status))
		}
	case TypeParams:
		if h.Len != ParamsSize {
			return bad("frame", fmt.Sprintf("PARAMS body of %d bytes", h.Len))
		}
	case TypeJoin:
		if h.Key == 0 || h.Off == 0 || h.Off >= verbs.MaxLanes {
			return bad("frame", "JOIN without token or with lane out of range")
		}
	}
	return nil
}

func bad(stage, reason string) error {
	return &verbs.ProtocolError{Stage: stage, Reason: reason}
}

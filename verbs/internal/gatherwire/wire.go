package gatherwire

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
)

// Control methods of the gather service (see the package doc, # Format).
const (
	// MethodGatherInfo asks a segment's gather service for its capability:
	// the owner's packing calibration, staging limits and the requester's
	// exposed regions as the owner sees them. A segment without a gather
	// service answers it with ErrNotSupported.
	MethodGatherInfo uint16 = 0x4701
	// MethodGather carries one planfmt command (READ: the owner packs its
	// source window into the requester's exposed destination; WRITE: the
	// owner reads the requester's staged bytes and scatters them into its
	// destination window) and answers with the owner's stage timings.
	MethodGather uint16 = 0x4702
)

// Sizes and versions of the gather wire messages.
const (
	gatherWireVersion = 3
	infoFixedSize     = 72
	infoEntrySize     = 24
	ReplySize         = 88
	// maxInfoExposures bounds the exposures an info reply lists.
	maxInfoExposures = 1024
)

var (
	infoMagic  = [4]byte{'S', 'K', 'G', 'I'}
	replyMagic = [4]byte{'S', 'K', 'G', 'R'}
)

// OwnerInfo is the gather service's answer to MethodGatherInfo: what the
// requester's cost model needs to know about the owner.
type OwnerInfo struct {
	// BMem and RCopy are the owner's packing calibration per pack worker:
	// streaming copy bandwidth (bytes/s) and small-copy rate (spans/s).
	BMem, RCopy float64
	// PackWorkers is how many goroutines pack one chunk at most; the cost
	// model's pipeline width P is capped by it.
	PackWorkers int
	// MaxSlots is the most staging slots one command may hold (the
	// command's pipeline width).
	MaxSlots int
	// StagingBudget is the most staging bytes one command may hold
	// (slots times chunk size).
	StagingBudget int64
	// MinChunk and MaxChunk bound the chunk size: the staging pool's
	// smallest and largest size class.
	MinChunk, MaxChunk int64
	// InlineMax is the largest READ payload the owner returns inside its
	// reply when the command allows it (gather.Config.InlineMax); zero
	// means never.
	InlineMax int64
	// ParallelMin is the smallest chunk, in bytes, the owner packs on
	// more than one worker (gather.Config.ParallelMin): smaller chunks
	// pack on one.
	ParallelMin int64
	// Exposed lists the regions the requester exposed on this connection
	// (Peer.Remote on the owner). Names are not carried.
	Exposed []verbs.RegionInfo
}

// exposed reports whether the region with key k is exposed with access a.
func (o *OwnerInfo) Covers(k verbs.Key, a verbs.Access, need uint64) bool {
	for _, r := range o.Exposed {
		if r.Key == k && r.Access.Has(a) && r.Len >= need {
			return true
		}
	}
	return false
}

// appendInfo appends the encoding of o (see # Format).
func AppendInfo(dst []byte, o *OwnerInfo) []byte {
	n := min(len(o.Exposed), maxInfoExposures)
	var h [infoFixedSize]byte
	copy(h[0:4], infoMagic[:])
	h[4] = gatherWireVersion
	binary.LittleEndian.PutUint16(h[6:], uint16(n))
	binary.LittleEndian.PutUint64(h[8:], math.Float64bits(o.BMem))
	binary.LittleEndian.PutUint64(h[16:], math.Float64bits(o.RCopy))
	binary.LittleEndian.PutUint64(h[24:], uint64(o.StagingBudget))
	binary.LittleEndian.PutUint64(h[32:], uint64(o.MaxChunk))
	binary.LittleEndian.PutUint64(h[40:], uint64(o.MinChunk))
	binary.LittleEndian.PutUint32(h[48:], uint32(o.MaxSlots))
	binary.LittleEndian.PutUint32(h[52:], uint32(o.PackWorkers))
	binary.LittleEndian.PutUint64(h[56:], uint64(max(o.InlineMax, 0)))
	binary.LittleEndian.PutUint64(h[64:], uint64(max(o.ParallelMin, 0)))
	dst = append(dst, h[:]...)
	for _, r := range o.Exposed[:n] {
		var e [infoEntrySize]byte
		binary.LittleEndian.PutUint64(e[0:], uint64(r.Key))
		binary.LittleEndian.PutUint64(e[8:], r.Len)
		e[16] = byte(r.Access)
		dst = append(dst, e[:]...)
	}
	return dst
}

// decodeInfo decodes an info reply into o, reusing o.Exposed.
func DecodeInfo(o *OwnerInfo, b []byte) error {
	bad := func(field, reason string) error {
		return &WireError{Message: "info", Field: field, Reason: reason}
	}
	if len(b) < infoFixedSize {
		return bad("length", fmt.Sprintf("%d bytes, at least %d", len(b), infoFixedSize))
	}
	if [4]byte(b[0:4]) != infoMagic {
		return bad("magic", "not SKGI")
	}
	if b[4] != gatherWireVersion {
		return bad("version", fmt.Sprintf("%d, want %d", b[4], gatherWireVersion))
	}
	if b[5] != 0 {
		return bad("reserved", "not zero")
	}
	n := int(binary.LittleEndian.Uint16(b[6:]))
	if n > maxInfoExposures || len(b) != infoFixedSize+n*infoEntrySize {
		return bad("count", fmt.Sprintf("%d exposures in %d bytes", n, len(b)))
	}
	var v OwnerInfo
	v.BMem = math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))
	v.RCopy = math.Float64frombits(binary.LittleEndian.Uint64(b[16:]))
	v.StagingBudget = int64(binary.LittleEndian.Uint64(b[24:]))
	v.MaxChunk = int64(binary.LittleEndian.Uint64(b[32:]))
	v.MinChunk = int64(binary.LittleEndian.Uint64(b[40:]))
	v.MaxSlots = int(binary.LittleEndian.Uint32(b[48:]))
	v.PackWorkers = int(binary.LittleEndian.Uint32(b[52:]))
	inline := binary.LittleEndian.Uint64(b[56:])
	v.InlineMax = int64(inline)
	pmin := binary.LittleEndian.Uint64(b[64:])
	v.ParallelMin = int64(pmin)
	switch {
	case inline > MaxInlineReply:
		return bad("inline", fmt.Sprintf("%d bytes, above MaxInlineReply", inline))
	case pmin > math.MaxInt64:
		return bad("parallel", fmt.Sprintf("%d bytes, above the largest int64", pmin))
	case !(v.BMem > 0) || math.IsInf(v.BMem, 0):
		return bad("BMem", "not a positive finite rate")
	case !(v.RCopy > 0) || math.IsInf(v.RCopy, 0):
		return bad("RCopy", "not a positive finite rate")
	case v.StagingBudget < 1 || v.MinChunk < 1 || v.MaxChunk < v.MinChunk || v.MaxChunk > v.StagingBudget:
		return bad("staging", "budget and chunk bounds inconsistent")
	case v.MaxSlots < 1 || v.PackWorkers < 1 || v.MaxSlots > 1<<16 || v.PackWorkers > 1<<16:
		return bad("workers", "slots or pack workers out of range")
	}
	v.Exposed = o.Exposed[:0]
	for i := range n {
		e := b[infoFixedSize+i*infoEntrySize:]
		a := verbs.Access(e[16])
		if !a.Valid() || [7]byte(e[17:24]) != [7]byte{} {
			return bad("exposure", fmt.Sprintf("entry %d malformed", i))
		}
		v.Exposed = append(v.Exposed, verbs.RegionInfo{Key: verbs.Key(binary.LittleEndian.Uint64(e[0:])),
			Len: binary.LittleEndian.Uint64(e[8:]), Access: a})
	}
	*o = v
	return nil
}

// ownerStats is the gather service's reply to MethodGather: the owner's
// stage timings for one command (see # Format).
type Stats struct {
	Dir     verbs.Op
	Decode  time.Duration // decode and validation
	Pack    time.Duration // READ: packing into staging; WRITE: scatter
	Window  time.Duration // first bulk post to last completion
	Handler time.Duration // receipt of the command to the reply
	Fill    time.Duration // receipt of the command to the first bulk post
	Payload uint64
	Peak    uint64 // staging bytes held at once
	Chunk   uint64 // chunk size used
	Chunks  uint32
	Slots   uint32 // staging slots used (pipeline width)
	Workers uint32 // pack workers used
	// inline: the READ payload follows the record in the reply (see
	// planfmt.FlagInlineReply).
	Inline bool
}

// replyInline is the reply flag bit saying the payload follows.
const replyInline = 1

// Inline replies (see "Inline reply" in the package doc).
const (
	// DefaultInlineMax is the default of engine.Config.InlineMax and
	// gather.Config.InlineMax: the largest READ payload carried inside
	// the gather reply.
	DefaultInlineMax = 256 << 10
	// MaxInlineReply caps both: a reply is one control message.
	MaxInlineReply = 8 << 20
)

// appendReply appends the encoding of s.
func AppendReply(dst []byte, s *Stats) []byte {
	var b [ReplySize]byte
	copy(b[0:4], replyMagic[:])
	b[4] = gatherWireVersion
	b[5] = byte(s.Dir)
	if s.Inline {
		b[6] = replyInline
	}
	for i, d := range [...]time.Duration{s.Decode, s.Pack, s.Window, s.Handler, s.Fill} {
		binary.LittleEndian.PutUint64(b[8+8*i:], uint64(max(d, 0)))
	}
	binary.LittleEndian.PutUint64(b[48:], s.Payload)
	binary.LittleEndian.PutUint64(b[56:], s.Peak)
	binary.LittleEndian.PutUint64(b[64:], s.Chunk)
	binary.LittleEndian.PutUint32(b[72:], s.Chunks)
	binary.LittleEndian.PutUint32(b[76:], s.Slots)
	binary.LittleEndian.PutUint32(b[80:], s.Workers)
	return append(dst, b[:]...)
}

// decodeReply decodes a gather reply: its stage record and, for an
// inline reply, the payload after it (exactly s.payload bytes).
func DecodeReply(s *Stats, b []byte) error {
	bad := func(field, reason string) error {
		return &WireError{Message: "reply", Field: field, Reason: reason}
	}
	if len(b) < ReplySize {
		return bad("length", fmt.Sprintf("%d bytes, want at least %d", len(b), ReplySize))
	}
	if [4]byte(b[0:4]) != replyMagic {
		return bad("magic", "not SKGR")
	}
	if b[4] != gatherWireVersion {
		return bad("version", fmt.Sprintf("%d, want %d", b[4], gatherWireVersion))
	}
	if d := verbs.Op(b[5]); d != verbs.OpRead && d != verbs.OpWrite {
		return bad("direction", fmt.Sprintf("%d", b[5]))
	}
	if b[6]&^replyInline != 0 || b[7] != 0 {
		return bad("reserved", "not zero")
	}
	var v Stats
	v.Dir = verbs.Op(b[5])
	v.Inline = b[6]&replyInline != 0
	if v.Inline && v.Dir != verbs.OpRead {
		return bad("flags", "inline payload on a WRITE reply")
	}
	for i, d := range [...]*time.Duration{&v.Decode, &v.Pack, &v.Window, &v.Handler, &v.Fill} {
		x := binary.LittleEndian.Uint64(b[8+8*i:])
		if x > math.MaxInt64 {
			return bad("duration", "negative")
		}
		*d = time.Duration(x)
	}
	v.Payload = binary.LittleEndian.Uint64(b[48:])
	v.Peak = binary.LittleEndian.Uint64(b[56:])
	v.Chunk = binary.LittleEndian.Uint64(b[64:])
	v.Chunks = binary.LittleEndian.Uint32(b[72:])
	v.Slots = binary.LittleEndian.Uint32(b[76:])
	v.Workers = binary.LittleEndian.Uint32(b[80:])
	if [4]byte(b[84:88]) != [4]byte{} {
		return bad("reserved", "not zero")
	}
	switch {
	case v.Inline && uint64(len(b)-ReplySize) != v.Payload:
		return bad("length", fmt.Sprintf("%d bytes of inline payload, the record says %d", len(b)-ReplySize, v.Payload))
	case !v.Inline && len(b) != ReplySize:
		return bad("length", fmt.Sprintf("%d bytes, want %d", len(b), ReplySize))
	}
	*s = v
	return nil
}

// GatherCode classifies why the gather service refused or abandoned a
// command. It travels in the error text of a [*CallError] (see # Format)
// so the requester can tell a refusal from exhaustion.
type GatherCode uint8

const (
	// GatherRefused: the command failed validation (decode, bounds,
	// keys, access, overlap, limits). Nothing was read or written.
	GatherRefused GatherCode = 1
	// GatherExhausted: no staging slot was free within the owner's
	// deadline. Nothing was written.
	GatherExhausted GatherCode = 2
	// GatherAborted: a transfer failed after the command started (the
	// requester's region vanished, the connection ended); some bytes of
	// the destination may have been written.
	GatherAborted GatherCode = 3
)

var gatherCodeNames = [...]string{GatherRefused: "refused", GatherExhausted: "exhausted", GatherAborted: "aborted"}

// String returns the code's wire name ("refused").
func (c GatherCode) String() string {
	if int(c) < len(gatherCodeNames) && gatherCodeNames[c] != "" {
		return gatherCodeNames[c]
	}
	return fmt.Sprintf("GatherCode(%d)", uint8(c))
}

// gatherErrPrefix starts the error text of every gather service error.
const gatherErrPrefix = "verbs: gather "

// parseGatherCode recovers the code from a handler's error text.
func ParseGatherCode(msg string) (GatherCode, bool) {
	rest, ok := strings.CutPrefix(msg, gatherErrPrefix)
	if !ok {
		return 0, false
	}
	for c := GatherRefused; c <= GatherAborted; c++ {
		if strings.HasPrefix(rest, c.String()+":") {
			return c, true
		}
	}
	return 0, false
}

package planfmt

import (
	"encoding/binary"
	"slices"
	"strconv"
)

// Direction says which way a gather command moves bytes.
type Direction uint8

const (
	// Read: the owner packs from its source window into the requester's
	// destination window.
	Read Direction = 1
	// Write: the requester's packed bytes land in the owner's destination
	// window, which the owner scatters them into.
	Write Direction = 2
)

func (d Direction) String() string {
	switch d {
	case Read:
		return "READ"
	case Write:
		return "WRITE"
	}
	return "Direction(" + strconv.Itoa(int(d)) + ")"
}

// CommandFlags are option bits of a Command. Bits not defined here are
// reserved: AppendCommand refuses them and DecodeCommand rejects them.
type CommandFlags uint32

const (
	// FlagSpanEvents asks the owner to report each completion span as it
	// finishes rather than only the whole command.
	FlagSpanEvents CommandFlags = 1 << 0
	// FlagInlineReply allows the owner to return a READ's packed payload
	// inside its reply (in stream order) instead of WRITEing it into the
	// destination window, when the payload is at most the owner's inline
	// limit. The requester then copies it into place. For latency-sized
	// READs this saves the bulk WRITEs' acknowledgement round trip and
	// the staging lease.
	FlagInlineReply CommandFlags = 1 << 1

	knownFlags = FlagSpanEvents | FlagInlineReply
)

// Window is a byte window of a registered region: Len bytes at offset Off of
// the region named by Key. Plan offsets are relative to the window start.
type Window struct {
	Key uint64
	Off uint64
	Len uint64
}

// Command is the gather command a requester sends to a data owner: which
// regions and windows, which way, with what pipeline shape, and the plan.
// The plan's SrcExtent and DstExtent must equal Src.Len and Dst.Len.
type Command struct {
	OpID     uint64
	Dir      Direction
	Src      Window
	Dst      Window
	Chunk    uint64 // C: bytes per pipeline chunk, at least 1
	Pipeline uint32 // P: chunks in flight, at least 1
	Flags    CommandFlags
	Plan     Plan
}

// check validates the command fields an encoder controls.
func (c *Command) check() error {
	switch {
	case c.Dir != Read && c.Dir != Write:
		return invalid("Command.Dir", "must be Read or Write")
	case c.Flags&^knownFlags != 0:
		return invalid("Command.Flags", "reserved bits set")
	case c.Chunk == 0:
		return invalid("Command.Chunk", "must be at least 1")
	case c.Pipeline == 0:
		return invalid("Command.Pipeline", "must be at least 1")
	}
	if _, ok := add3(c.Src.Off, c.Src.Len, 0); !ok {
		return invalid("Command.Src", "window end overflows")
	}
	if _, ok := add3(c.Dst.Off, c.Dst.Len, 0); !ok {
		return invalid("Command.Dst", "window end overflows")
	}
	if c.Plan.SrcExtent != c.Src.Len || c.Plan.DstExtent != c.Dst.Len {
		return invalid("Command.Plan", "plan extents differ from the window lengths")
	}
	return nil
}

// EncodedCommandSize returns the number of bytes AppendCommand would append
// for c, or the error it would return (except for an invalid row id).
func EncodedCommandSize(c *Command) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	e, err := prepareBody(&c.Plan)
	if err != nil {
		return 0, err
	}
	return messageSize(headerSize + commandSize + e.size())
}

// AppendCommand appends the encoding of c to dst (see # Format). It validates
// c and its plan as DecodeCommand would. On error it returns dst unchanged in
// length and content (bytes past len(dst) may have been written).
func AppendCommand(dst []byte, c *Command) ([]byte, error) {
	if err := c.check(); err != nil {
		return dst, err
	}
	p := &c.Plan
	e, err := prepareBody(p)
	if err != nil {
		return dst, err
	}
	size, err := messageSize(headerSize + commandSize + e.size())
	if err != nil {
		return dst, err
	}
	out := slices.Grow(dst, size)
	base := len(dst)
	out = out[:base+size]
	msg := out[base:]
	putHeader(msg, commandMagic, p.Form, e.n, e.g)
	le := binary.LittleEndian
	f := msg[headerSize:]
	le.PutUint64(f[0:], c.OpID)
	le.PutUint64(f[8:], c.Src.Key)
	le.PutUint64(f[16:], c.Src.Off)
	le.PutUint64(f[24:], c.Src.Len)
	le.PutUint64(f[32:], c.Dst.Key)
	le.PutUint64(f[40:], c.Dst.Off)
	le.PutUint64(f[48:], c.Dst.Len)
	le.PutUint64(f[56:], c.Chunk)
	le.PutUint32(f[64:], c.Pipeline)
	le.PutUint32(f[68:], uint32(c.Flags))
	f[72] = byte(c.Dir)
	clear(f[73:commandSize])
	if err := writeBody(msg[headerSize+commandSize:], p, &e); err != nil {
		return dst, err
	}
	seal(msg)
	return out, nil
}

// CommandShape is what a command message's header declares, read by
// Limits.PeekCommand without decoding the message.
type CommandShape struct {
	Form        Form
	Fragments   int // ids or ranges of the plan, skipped ones included
	Completions int // completion spans
}

// PeekCommand reads the shape a command message declares, checking its
// magic, version, length, flags, form and counts against l but not its
// checksum or body: enough to price a command before paying for its
// decode. DecodeCommand checks everything; a message whose header lies
// fails there.
func (l Limits) PeekCommand(b []byte) (CommandShape, error) {
	lim := l.withDefaults()
	h, err := readHeader(b, commandMagic, &lim, false)
	if err != nil {
		return CommandShape{}, err
	}
	return CommandShape{Form: h.form, Fragments: h.n, Completions: h.g}, nil
}

// DecodeCommand decodes a command message into dst under DefaultLimits. See
// Limits.DecodeCommand.
func DecodeCommand(dst *Command, b []byte) error {
	return DefaultLimits.DecodeCommand(dst, b)
}

// DecodeCommand decodes a command message into dst: everything
// Limits.DecodePlan checks, plus the command fields (direction, reserved
// bits, chunk and pipeline within l, windows that do not overflow, plan
// extents equal to the window lengths). On error dst is unchanged; on success
// the plan lives in dst.Plan's own storage and nothing is allocated once that
// storage is warm.
func (l Limits) DecodeCommand(dst *Command, b []byte) error {
	lim := l.withDefaults()
	h, err := parseHeader(b, commandMagic, &lim)
	if err != nil {
		return err
	}
	if len(b) < headerSize+commandSize {
		return decodeErr(offLength, "length", ErrCorrupt)
	}
	le := binary.LittleEndian
	f := b[headerSize : headerSize+commandSize]
	c := Command{
		OpID:     le.Uint64(f[0:]),
		Src:      Window{Key: le.Uint64(f[8:]), Off: le.Uint64(f[16:]), Len: le.Uint64(f[24:])},
		Dst:      Window{Key: le.Uint64(f[32:]), Off: le.Uint64(f[40:]), Len: le.Uint64(f[48:])},
		Chunk:    le.Uint64(f[56:]),
		Pipeline: le.Uint32(f[64:]),
		Flags:    CommandFlags(le.Uint32(f[68:])),
		Dir:      Direction(f[72]),
	}
	switch {
	case c.Dir != Read && c.Dir != Write:
		return decodeErr(headerSize+72, "direction", ErrCorrupt)
	case !allZero(f[73:]):
		return decodeErr(headerSize+73, "reserved", ErrCorrupt)
	case c.Flags&^knownFlags != 0:
		return decodeErr(headerSize+68, "command flags", ErrCorrupt)
	case c.Chunk == 0:
		return decodeErr(headerSize+56, "chunk", ErrCorrupt)
	case c.Chunk > lim.MaxChunkBytes:
		return decodeErr(headerSize+56, "chunk", ErrTooLarge)
	case c.Pipeline == 0:
		return decodeErr(headerSize+64, "pipeline", ErrCorrupt)
	case c.Pipeline > lim.MaxPipeline:
		return decodeErr(headerSize+64, "pipeline", ErrTooLarge)
	}
	if _, ok := add3(c.Src.Off, c.Src.Len, 0); !ok {
		return decodeErr(headerSize+16, "src window", ErrCorrupt)
	}
	if _, ok := add3(c.Dst.Off, c.Dst.Len, 0); !ok {
		return decodeErr(headerSize+40, "dst window", ErrCorrupt)
	}
	d, err := parseBody(b, headerSize+commandSize, h)
	if err != nil {
		return err
	}
	if d.srcExt != c.Src.Len || d.dstExt != c.Dst.Len {
		return decodeErr(headerSize+commandSize, "plan extents", ErrCorrupt)
	}
	dst.OpID, dst.Dir, dst.Src, dst.Dst = c.OpID, c.Dir, c.Src, c.Dst
	dst.Chunk, dst.Pipeline, dst.Flags = c.Chunk, c.Pipeline, c.Flags
	d.commit(&dst.Plan, b)
	return nil
}

// Package proto is the control protocol of Structured Objects: the
// messages an owner (structobj.Owner) and a client (structobj.Client)
// exchange with verbs.Conn.Call on the owner's segment, their method ids,
// and the limits both sides apply. Package structobj describes what each
// call does ("Control protocol" in its documentation) and re-exports the
// public names (the Method constants, RegionName, Align, the Max limits,
// ErrProtocol, MessageError); this package holds their encoding.
//
// Every message type encodes with Append (appending to a caller's buffer)
// and decodes strictly with Decode, which allocates nothing but the Info
// reply's names and a GetInline request's ranges beyond the capacity it
// reuses: the other slices of a decoded message alias the bytes it was
// decoded from.
//
// # Format
//
// Every message, request or reply, is little-endian and unaligned and
// starts with the same 8-byte header:
//
//	+--------+------+------------------------------------------------+
//	| offset | size | field                                          |
//	+--------+------+------------------------------------------------+
//	|      0 |    4 | magic "SKSO"                                   |
//	|      4 |    1 | version: 1                                     |
//	|      5 |    1 | kind: method id - 0x5300 (1..9) for a request, |
//	|        |      | that | 0x80 for its reply                      |
//	|      6 |    2 | reserved, 0                                    |
//	+--------+------+------------------------------------------------+
//
// The bodies, by offset from the start of the message (K: key length,
// M: manifest length, P: payload length, N: ranges, D: data length):
//
//	Info request       8: nothing more.
//	Info reply         8: arena bytes (u64)          16: max inline bytes (u64, 0: none)
//	                  24: reserve TTL ns (u64)      32: hold TTL ns (u64)
//	                  40: flags (u32; bit 0: gather service on the segment)
//	                  44: region name length R (u8) 45: namespace length S (u8)
//	                  46: reserved (u16, 0)
//	                  48: manifest limits (u64 each): MaxMembers, MaxDims, MaxMeta,
//	                      MaxMetaBytes, MaxBytes
//	                  88: region name (R), namespace (S)
//	Reserve request    8: size (u64)
//	Reserve reply      8: reservation id (u64)      16: offset in the region (u64)
//	                  24: length reserved (u64, size rounded up to 64)
//	                  32: TTL ns (u64)
//	Commit request     8: reservation id (u64)      16: K (u16)  18: reserved (u16, 0)
//	                  20: M (u32)                   24: key, manifest
//	Commit reply       8: version (u64)
//	Abort request      8: reservation id (u64)
//	Abort reply        8: nothing more.
//	Open request       8: K (u16)  10: reserved (6 bytes, 0)  16: key
//	Open reply         8: hold id (u64)             16: version (u64)
//	                  24: payload offset in the region (u64)
//	                  32: hold TTL ns (u64)         40: M (u32)  44: reserved (u32, 0)
//	                  48: manifest
//	Close request      8: hold id (u64)
//	Close reply        8: nothing more.
//	Delete request     as Open request.
//	Delete reply       8: version deleted (u64)
//	PutInline request  8: K (u16)  10: reserved (u16, 0)  12: M (u32)  16: P (u64)
//	                  24: key, manifest, payload
//	PutInline reply    8: version (u64)
//	GetInline request  8: K (u16)  10: reserved (u16, 0)  12: N (u32)
//	                  16: key, then N ranges of offset (u64), length (u64)
//	GetInline reply    8: version (u64)  16: M (u32)  20: reserved (u32, 0)  24: D (u64)
//	                  32: manifest, then the ranges' bytes in request order (D)
//
// A decoder rejects, with a *MessageError (ErrProtocol): another magic
// or version, a kind that is not the message's, reserved bytes that are
// not zero, a length that disagrees with the counts (trailing bytes
// included), a key of 0 or more than MaxKeyLen bytes, a manifest longer
// than the limit, inline payload or data beyond the inline limit, more
// than MaxInlineRanges ranges, an empty range or one whose end overflows,
// zero ids and versions, region offsets and lengths that are not
// multiples of Align or overflow, TTLs that are zero or beyond MaxTTL,
// and in Info an inline size above MaxInlineLimit, unknown flags, limits
// of 0 or above 2^32-1, a manifest limit above MaxManifestBytes and an
// empty region name. Keys are checked against the naming rules by the
// owner, not the decoder; manifests by structobj.DecodeManifest.
//
// Versioning: a new version of any message changes the header's version,
// and both sides refuse what they do not speak; there are no optional
// fields.
package proto

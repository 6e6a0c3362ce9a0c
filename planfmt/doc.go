// Package planfmt is the scatter plan: the two lowerings a caller hands to the
// transfer engine, their one-pass normalization, and the compact versioned
// wire encoding of plans and of the gather commands that carry them to a data
// owner.
//
// It imports nothing outside the standard library and nothing from the
// workspace.
//
// # Lowerings
//
// A Plan holds one of two forms within a source extent and a destination
// extent (offsets are relative to them; in a Command they are the source and
// destination windows):
//
//   - FormRanges: general fragments, Range{Src, Dst, Len}.
//   - FormRows: fixed-size rows of a table, selected by int32 or int64 ids
//     that are held, never copied or expanded into ranges. Id -1 skips a row.
//     Rows land contiguously or in a strided [T, K] layout (token-major,
//     head-major, padded), checked for overlap from the strides alone.
//
// Fragments may be grouped into completion spans (Plan.CompletionEnds), each
// of which reports its byte count when done; the default is one span.
//
// # Normalization
//
// Normalize checks bounds and destination overlap, coalesces fragments that
// are adjacent in both source and destination into spans, finds contiguous
// destination runs and fills a Summary for the cost model, in O(N) time (a
// few tight loops over the fragments) with no allocation once its result is
// warm. For the reference workload, 98,304 random ids of a 384,000,000-row
// table, normalizing, encoding and decoding the command together cost a few
// nanoseconds per row, against hundreds for the random row gather itself. The packed stream of a plan is
// its payload bytes in plan order; Run.Stream and Completion.Stream are
// offsets into it, which is how an owner's staging chunks map onto the
// requester's destination.
//
// # Shards
//
// A plan whose source lies in several owners' memory (a table split by row
// ranges, an object space by byte ranges) is cut into one plan per owner by
// [Splitter]: Split cuts the source extent at given offsets, SplitDst the
// destination extent (a WRITE's destination is the owners' side; ranges
// form only). Every shard keeps the plan's fragment count, order,
// destination layout and completion spans: a fixed-row shard holds the
// plan's ids rebased to the shard's first whole row and -1 for the others,
// a ranges shard the piece of each range inside the shard (zero-length
// where it has none). So the shards' span byte counts add up, span by span,
// to the plan's, and a caller (the engine's groups) reports completion in
// the plan's terms. The cost: every shard carries all N fragment slots, so
// S shards of a fixed-row plan encode S*N ids, most of them -1. A row
// across a cut is refused only when an id names it.
//
// # Roles
//
// A requester builds a Plan, calls Normalize, asks the cost model, and either
// posts the spans itself (ForEachSpan) or sends a Command (AppendCommand). The
// owner treats the command as untrusted input: DecodeCommand validates every
// field against the message and the limits, ids against the table and ranges
// against the windows; the owner then calls Normalize (overlap of ranges,
// runs, completions) and checks the windows against its own registered
// regions before it packs a single row. Decoded ids arrive in the Plan's own
// storage, as []int32 when the table has at most math.MaxInt32 rows (the
// owner's gather loop then streams 4 bytes per row) and as []int64 otherwise.
//
// # Format
//
// Two messages share one layout: a plan message (magic "SKPL") and a command
// message (magic "SKCM"), which is a plan message with the command fields
// between header and plan body. All integers are little-endian and unsigned.
// No field needs alignment: decoders read unaligned. Offsets below are in
// bytes; the fixed parts are multiples of 8 long, so the completion ends
// start 8-aligned and the fragment data 4-aligned relative to the message
// start.
//
//	Header (24 bytes, both messages)
//	+--------+------+------------------------------------------------------+
//	| offset | size | field                                                |
//	+--------+------+------------------------------------------------------+
//	|      0 |    4 | magic: "SKPL" (plan) or "SKCM" (command)             |
//	|      4 |    1 | version: 1                                           |
//	|      5 |    1 | form: 1 = ranges, 2 = rows                           |
//	|      6 |    2 | flags: reserved, 0                                   |
//	|      8 |    4 | length: bytes of the whole message                   |
//	|     12 |    4 | crc32c (Castagnoli) of the whole message, computed   |
//	|        |      | with these 4 bytes as zero                           |
//	|     16 |    4 | N: fragments (ids or ranges, skipped ones included)  |
//	|     20 |    4 | G: completion ends (0 = one span for the whole plan) |
//	+--------+------+------------------------------------------------------+
//
//	Command fields (80 bytes, command message only, at offset 24)
//	+--------+------+------------------------------------------------------+
//	|     24 |    8 | operation id                                         |
//	|     32 |    8 | source region key                                    |
//	|     40 |    8 | source window offset in the region                   |
//	|     48 |    8 | source window length (= plan source extent)          |
//	|     56 |    8 | destination region key                               |
//	|     64 |    8 | destination window offset in the region              |
//	|     72 |    8 | destination window length (= plan dest. extent)      |
//	|     80 |    8 | chunk size C in bytes (>= 1)                         |
//	|     88 |    4 | pipeline width P (>= 1)                              |
//	|     92 |    4 | command flags: bit 0 = per-span completion events,   |
//	|        |      | bit 1 = inline reply allowed                         |
//	|     96 |    1 | direction: 1 = READ, 2 = WRITE                       |
//	|     97 |    7 | reserved, 0                                          |
//	+--------+------+------------------------------------------------------+
//
// Then the plan body, at offset B = 24 (plan) or 104 (command). Its
// descriptor depends on the form:
//
//	Rows descriptor (80 bytes)          Ranges descriptor (40 bytes)
//	B+ 0  8  source extent              B+ 0  8  source extent
//	B+ 8  8  destination extent         B+ 8  8  destination extent
//	B+16  8  row size R (>= 1)          B+16  8  srcLo: source base of offsets
//	B+24  8  source base of row 0       B+24  8  dstLo: dest. base of offsets
//	B+32  8  table rows (<= 2^63-1)     B+32  1  source offset width ws (0..8)
//	B+40  8  destination base           B+33  1  dest. offset width wd (0..8)
//	B+48  8  layout cols K              B+34  1  length width wl (1..8)
//	B+56  8  layout row stride          B+35  5  reserved, 0
//	B+64  8  layout column stride
//	B+72  1  id width w (1..8)
//	B+73  1  layout: 0 contiguous, 1 strided
//	B+74  6  reserved, 0
//
// then G completion ends (4 bytes each: the exclusive end fragment index of
// each span, strictly increasing, the last equal to N), then the fragment
// data, which ends the message:
//
//   - Rows: N ids of w bytes each, w = the fewest bytes that hold the table
//     row count, so the all-ones w-byte value never names a row and encodes
//     id -1. A 384,000,000-row table takes 4 bytes per id.
//   - Ranges: three columns, each N values long: source offsets (ws bytes
//     each), destination offsets (wd bytes each), lengths (wl bytes each).
//     An offset column of width w > 0 stores offset - lo, lo being the
//     smallest offset of the column, in the fewest bytes holding the
//     largest difference. Width 0 means the column is sequential: range 0
//     starts at lo and range i at the end of range i-1; it takes no bytes.
//
// The encoding is canonical: AppendPlan and AppendCommand choose every width
// and base, and a decoder accepts only what they would have written, so
// decoding then re-encoding reproduces the message byte for byte.
//
// # Versioning
//
// The version byte changes whenever any layout or meaning changes; there are
// no optional fields. A peer that receives another version fails with
// ErrVersion and the requester falls back (to the direct path, or to the
// version both speak). Reserved bytes and undefined flag bits must be zero
// so a later version can give them meaning.
//
// # What a decoder rejects
//
// Every rejection is a *DecodeError carrying the byte offset and field:
//
//   - fewer bytes than the header or the length field says (ErrTruncated);
//     more bytes than the length field says (ErrCorrupt);
//   - a message, fragment count, completion count, chunk size or pipeline
//     width over Limits (ErrTooLarge);
//   - another version (ErrVersion); a checksum mismatch (ErrChecksum);
//   - bad magic, unknown form, layout or direction, nonzero reserved bytes or
//     flag bits, counts that disagree with the length, a zero chunk or
//     pipeline, window ends that overflow, plan extents that differ from the
//     command windows, widths other than the canonical ones (ErrCorrupt);
//   - completion ends that are zero, not increasing, or do not end at N, a
//     zero row size, a table over 2^63-1 rows, a row count that is not a
//     multiple of K (an *InvalidError);
//   - an id that is neither -1 nor below the table row count; a range, table
//     or layout outside its extent (a *BoundsError);
//   - a strided layout under which two rows overlap (an *OverlapError).
//
// Overlap between ranges is not a decoding matter: Normalize finds it.
//
// The decoder sizes nothing from a count before it has checked that the
// message holds the bytes that count implies, so its allocations are bounded
// by a small multiple of the message length (at most 24 bytes of Range per
// byte of range data, 4 bytes of id per byte of id data).
package planfmt

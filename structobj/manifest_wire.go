package structobj

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"slices"
	"strings"
)

// ManifestVersion is the manifest wire format version this package writes
// and reads.
const ManifestVersion = 1

// Sizes and header field offsets of the wire format.
const (
	manifestHeaderSize     = 32
	minManifestMeta        = 1 + 1 + 4      // key length, 1-byte key, value length
	minManifestMember      = 1 + 1 + 4 + 16 // name length, 1-byte name, 4 bytes, data part
	manifestOffVersion     = 4
	manifestOffReserved    = 5
	manifestOffLength      = 8
	manifestOffCRC         = 12
	manifestOffPayload     = 16
	manifestOffMetaCount   = 24
	manifestOffMemberCount = 28
)

var (
	manifestMagic    = [4]byte{'S', 'K', 'O', 'M'}
	manifestCRCTable = crc32.MakeTable(crc32.Castagnoli)
	// manifestCRCZero stands in for the CRC field while checking a message (a
	// package variable: a local one would escape through crc32 and
	// allocate).
	manifestCRCZero [4]byte
)

// manifestChecksum returns the CRC32C of msg computed as if its CRC field
// were zero.
func manifestChecksum(msg []byte) uint32 {
	c := crc32.Update(0, manifestCRCTable, msg[:manifestOffCRC])
	c = crc32.Update(c, manifestCRCTable, manifestCRCZero[:])
	return crc32.Update(c, manifestCRCTable, msg[manifestOffCRC+4:])
}

// metaEntryWireSize is the encoded size of a metadata entry.
func metaEntryWireSize(keyLen, valueLen int) int { return 1 + keyLen + 4 + valueLen }

// memberWireSize is the encoded size of a member record.
func memberWireSize(nameLen int, kind Kind, ndim int) int {
	n := 1 + nameLen + 4 + 8*ndim + 16
	switch kind {
	case KindTensor:
		n += 8 * ndim
	case KindRagged:
		n += 16
	case KindSparseCOO:
		n += 8 + 16
	}
	return n
}

// AppendManifest validates m under DefaultLimits and appends its encoding
// (see the format in manifest_wire.go) to dst. A manifest a decoder under
// DefaultLimits would reject is refused here, with Validate's
// *ManifestError, and dst is returned unchanged. Once warm, and given room
// in dst, it does not allocate.
func AppendManifest(dst []byte, m *Manifest) ([]byte, error) {
	return DefaultLimits.AppendManifest(dst, m)
}

// AppendManifest is like the function AppendManifest but validates m under
// l, for readers that decode with the same raised limits.
func (l Limits) AppendManifest(dst []byte, m *Manifest) ([]byte, error) {
	lim := l.withDefaults()
	s := getManifestScratch()
	_, err := m.validate(&lim, s)
	putManifestScratch(s)
	if err != nil {
		return dst, err
	}
	return appendManifestUnchecked(dst, m), nil
}

// appendManifestUnchecked appends m's encoding without validating it. m must be
// encodable: names and keys of at most 255 bytes, at most 255 dimensions,
// len(Strides) == len(Shape) for tensors, counts and size within 2^32-1.
func appendManifestUnchecked(dst []byte, m *Manifest) []byte {
	le := binary.LittleEndian
	size := manifestHeaderSize
	for _, kv := range m.Meta {
		size += metaEntryWireSize(len(kv.Key), len(kv.Value))
	}
	for i := range m.Members {
		mem := &m.Members[i]
		size += memberWireSize(len(mem.Name), mem.Kind, len(mem.Shape))
	}
	start := len(dst)
	dst = slices.Grow(dst, size)
	dst = append(dst, manifestMagic[:]...)
	dst = append(dst, ManifestVersion, 0, 0, 0)
	dst = le.AppendUint32(dst, uint32(size))
	dst = le.AppendUint32(dst, 0) // crc32c, below
	dst = le.AppendUint64(dst, m.PayloadBytes)
	dst = le.AppendUint32(dst, uint32(len(m.Meta)))
	dst = le.AppendUint32(dst, uint32(len(m.Members)))
	for _, kv := range m.Meta {
		dst = append(dst, byte(len(kv.Key)))
		dst = append(dst, kv.Key...)
		dst = le.AppendUint32(dst, uint32(len(kv.Value)))
		dst = append(dst, kv.Value...)
	}
	for i := range m.Members {
		mem := &m.Members[i]
		dst = append(dst, byte(len(mem.Name)))
		dst = append(dst, mem.Name...)
		dst = append(dst, byte(mem.Kind), byte(mem.DType), mem.Order, byte(len(mem.Shape)))
		for _, d := range mem.Shape {
			dst = le.AppendUint64(dst, uint64(d))
		}
		if mem.Kind == KindTensor {
			for _, s := range mem.Strides[:len(mem.Shape)] {
				dst = le.AppendUint64(dst, uint64(s))
			}
		}
		if mem.Kind == KindSparseCOO {
			dst = le.AppendUint64(dst, uint64(mem.NNZ))
		}
		dst = le.AppendUint64(dst, mem.Data.Offset)
		dst = le.AppendUint64(dst, mem.Data.Length)
		switch mem.Kind {
		case KindRagged:
			dst = le.AppendUint64(dst, mem.Offsets.Offset)
			dst = le.AppendUint64(dst, mem.Offsets.Length)
		case KindSparseCOO:
			dst = le.AppendUint64(dst, mem.Indices.Offset)
			dst = le.AppendUint64(dst, mem.Indices.Length)
		}
	}
	msg := dst[start:]
	le.PutUint32(msg[manifestOffCRC:], crc32.Checksum(msg, manifestCRCTable))
	return dst
}

// DecodeManifest decodes an encoded manifest (see the format in
// manifest_wire.go) into dst, under lim (zero fields take DefaultLimits).
// b is untrusted: any message that is malformed, over the limits, or
// describes a manifest that Validate would reject fails with a *WireError
// (wrapping ErrManifestWire, and the *ManifestError when a rule of Validate
// is broken). The whole message is checked before dst is touched, so on
// error dst is unchanged. b is not retained.
//
// On success dst holds the manifest, in storage it owns and reuses: the
// Meta and Members slices and the Shape and Strides of a previous decode into
// dst are overwritten, so nothing may still use them. Empty Shape and
// Strides are nil; empty Meta and Members may be empty non-nil slices. The
// decoded strings do not alias b.
func DecodeManifest(dst *Manifest, b []byte, lim Limits) error {
	s := getManifestScratch()
	defer putManifestScratch(s)
	d := manifestDecoder{b: b, lim: lim.withDefaults(), s: s}
	if err := d.header(); err != nil {
		return err
	}
	if err := d.scan(dst.strs); err != nil {
		return err
	}
	d.commit(dst)
	return nil
}

// manifestPiece is a string of the message: where its bytes start and how many.
type manifestPiece struct {
	off, n uint32
}

// manifestDecoder holds what one decode learns about its message.
type manifestDecoder struct {
	b   []byte
	lim Limits
	s   *manifestScratch

	payload         uint64
	nMeta, nMembers int
	metaBytes       int  // bytes of metadata keys and values so far
	ints            int  // int64s in all shapes and strides
	strBytes        int  // bytes of all strings
	sameStrs        bool // the strings equal the destination's, byte for byte
}

// manifestWireErr returns a *WireError for a malformed message.
func manifestWireErr(off int, format string, args ...any) error {
	return &WireError{Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// manifestRuleErr returns a *WireError for a well-formed message whose manifest
// breaks a rule of Validate, reported by err (a *ManifestError).
func manifestRuleErr(off int, err error) error {
	reason := "invalid manifest"
	if me, ok := err.(*ManifestError); ok && me.Err == ErrManifestLimit {
		reason = "manifest over the limits"
	}
	return &WireError{Offset: off, Reason: reason, Err: err}
}

func manifestTruncErr(off int, what string, i int) error {
	return manifestWireErr(off, "%s %d runs past the end of the message", what, i)
}

// header checks the fixed header and the counts against the limits and the
// message size.
func (d *manifestDecoder) header() error {
	b, lim := d.b, &d.lim
	if len(b) > lim.MaxBytes {
		return &WireError{Offset: 0,
			Reason: fmt.Sprintf("%d bytes, over the limit of %d", len(b), lim.MaxBytes), Err: ErrManifestLimit}
	}
	if n := min(len(b), len(manifestMagic)); !bytes.Equal(b[:n], manifestMagic[:n]) {
		return manifestWireErr(0, "bad magic %q, want %q", string(b[:n]), string(manifestMagic[:]))
	}
	if len(b) <= manifestOffVersion {
		return manifestWireErr(len(b), "truncated header: %d bytes of %d", len(b), manifestHeaderSize)
	}
	if v := b[manifestOffVersion]; v != ManifestVersion {
		return &WireError{Offset: manifestOffVersion,
			Reason: fmt.Sprintf("version %d, this package reads %d", v, ManifestVersion), Err: ErrManifestVersion}
	}
	if len(b) < manifestHeaderSize {
		return manifestWireErr(len(b), "truncated header: %d bytes of %d", len(b), manifestHeaderSize)
	}
	le := binary.LittleEndian
	for k, c := range b[manifestOffReserved:manifestOffLength] {
		if c != 0 {
			return manifestWireErr(manifestOffReserved+k, "reserved byte is %#04x, not 0", c)
		}
	}
	switch length := le.Uint32(b[manifestOffLength:]); {
	case uint64(length) > uint64(len(b)):
		return manifestWireErr(len(b), "truncated: %d bytes, the header says %d", len(b), length)
	case uint64(length) < uint64(len(b)):
		return manifestWireErr(int(length), "%d trailing bytes after the %d the header says", len(b)-int(length), length)
	}
	if got, want := le.Uint32(b[manifestOffCRC:]), manifestChecksum(b); got != want {
		return manifestWireErr(manifestOffCRC, "crc32c %#010x, the message has %#010x", got, want)
	}
	d.payload = le.Uint64(b[manifestOffPayload:])
	m, n := le.Uint32(b[manifestOffMetaCount:]), le.Uint32(b[manifestOffMemberCount:])
	if err := checkManifestCounts(int(m), int(n), lim); err != nil {
		off := manifestOffMetaCount
		if int(m) <= lim.MaxMeta {
			off = manifestOffMemberCount
		}
		return manifestRuleErr(off, err)
	}
	if need := uint64(m)*minManifestMeta + uint64(n)*minManifestMember; need > uint64(len(b)-manifestHeaderSize) {
		return manifestWireErr(manifestOffMetaCount, "%d metadata entries and %d members need at least %d bytes after the header, the message has %d",
			m, n, need, len(b)-manifestHeaderSize)
	}
	d.nMeta, d.nMembers = int(m), int(n)
	return nil
}

// addPiece records a string of the message and tracks whether the strings
// so far equal the start of old.
func (d *manifestDecoder) addPiece(off, n int, old string) {
	d.s.pieces = append(d.s.pieces, manifestPiece{off: uint32(off), n: uint32(n)})
	if d.sameStrs {
		end := d.strBytes + n
		d.sameStrs = end <= len(old) && old[d.strBytes:end] == string(d.b[off:off+n])
	}
	d.strBytes += n
}

// pieceBytes returns the bytes of piece k.
func (d *manifestDecoder) pieceBytes(k int32) []byte {
	p := d.s.pieces[k]
	return d.b[p.off : p.off+p.n]
}

// scan walks the metadata entries and member records, checking their
// structure and every rule of Validate, and records the strings and parts
// it finds. old is the destination's string block.
func (d *manifestDecoder) scan(old string) error {
	b, s := d.b, d.s
	s.pieces = slices.Grow(s.pieces[:0], 2*d.nMeta+d.nMembers)
	s.parts = s.parts[:0]
	d.sameStrs = true
	pos := manifestHeaderSize
	for i := range d.nMeta {
		rec := pos
		off, n, err := readManifestString(b, pos, "metadata entry", i)
		if err != nil {
			return err
		}
		pos = off + n
		if len(b)-pos < 4 {
			return manifestTruncErr(pos, "metadata entry", i)
		}
		v := binary.LittleEndian.Uint32(b[pos:])
		pos += 4
		if uint64(len(b)-pos) < uint64(v) {
			return manifestTruncErr(pos, "metadata entry", i)
		}
		if err := checkMetaEntry(i, b[off:off+n], int(v), &d.metaBytes, &d.lim); err != nil {
			return manifestRuleErr(rec, err)
		}
		d.addPiece(off, n, old)
		d.addPiece(pos, int(v), old)
		pos += int(v)
	}
	var ints [2 * maxManifestDims]int64
	for j := range d.nMembers {
		rec := pos
		off, n, err := readManifestString(b, pos, "member", j)
		if err != nil {
			return err
		}
		if r := nameReason(b[off : off+n]); r != "" {
			return manifestRuleErr(rec, memberRuleErr(j, "Name", "%s", r))
		}
		mem, next, err := readMemberRecord(b, j, rec, off+n, ints[:])
		if err != nil {
			return err
		}
		pos = next
		if err := mem.check(j, d.payload, &d.lim); err != nil {
			return manifestRuleErr(rec, err)
		}
		d.addPiece(off, n, old)
		s.addParts(j, &mem)
		d.ints += len(mem.Shape) + len(mem.Strides)
	}
	if pos != len(b) {
		return manifestWireErr(pos, "%d bytes after the last member", len(b)-pos)
	}
	d.sameStrs = d.sameStrs && d.strBytes == len(old)

	if i, j, ok := s.firstDuplicate(d.nMeta, func(k int32) uint64 {
		return maphash.Bytes(manifestHashSeed, d.pieceBytes(2*k))
	}, func(x, y int32) bool {
		return bytes.Equal(d.pieceBytes(2*x), d.pieceBytes(2*y))
	}); ok {
		return manifestRuleErr(int(s.pieces[2*j].off)-1, dupMetaKeyErr(i, j))
	}
	names := int32(2 * d.nMeta)
	if i, j, ok := s.firstDuplicate(d.nMembers, func(k int32) uint64 {
		return maphash.Bytes(manifestHashSeed, d.pieceBytes(names+k))
	}, func(x, y int32) bool {
		return bytes.Equal(d.pieceBytes(names+x), d.pieceBytes(names+y))
	}); ok {
		return manifestRuleErr(int(s.pieces[int(names)+j].off)-1, dupMemberNameErr(i, j))
	}
	if x, y, ok := firstPartOverlap(s.parts); ok {
		return manifestRuleErr(int(s.pieces[names+y.member].off)-1, partOverlapErr(x, y))
	}
	return nil
}

// readManifestString reads the one-byte length and the bytes of a name or key at
// b[pos:], returning where the bytes start and how many there are.
func readManifestString(b []byte, pos int, what string, i int) (off, n int, err error) {
	if pos >= len(b) {
		return 0, 0, manifestTruncErr(pos, what, i)
	}
	n, off = int(b[pos]), pos+1
	if len(b)-off < n {
		return 0, 0, manifestTruncErr(off, what, i)
	}
	return off, n, nil
}

// readMemberRecord reads the rest of member record j (which starts at rec),
// from its kind byte at b[pos:]; shape and strides go into ints, which must
// hold them. It returns the member, with an empty Name, and where the record
// ends. It checks the structure only, not the rules of Validate.
func readMemberRecord(b []byte, j, rec, pos int, ints []int64) (mem Member, next int, err error) {
	le := binary.LittleEndian
	if len(b)-pos < 4 {
		return mem, 0, manifestTruncErr(pos, "member", j)
	}
	kind, nd := Kind(b[pos]), int(b[pos+3])
	mem = Member{Kind: kind, DType: DType(b[pos+1]), Order: b[pos+2]}
	pos += 4
	nints, tail := nd, 16
	switch kind {
	case KindNDArray, KindBytes:
	case KindTensor:
		nints = 2 * nd
	case KindRagged:
		tail += 16
	case KindSparseCOO:
		tail += 8 + 16
	default:
		return mem, 0, manifestRuleErr(rec, memberRuleErr(j, "Kind", "unknown kind %d", uint8(kind)))
	}
	if len(b)-pos < 8*nints+tail {
		return mem, 0, manifestTruncErr(pos, "member", j)
	}
	for k := range ints[:nints] {
		ints[k] = int64(le.Uint64(b[pos+8*k:]))
	}
	pos += 8 * nints
	if nd > 0 {
		mem.Shape = ints[:nd:nd]
		if kind == KindTensor {
			mem.Strides = ints[nd : 2*nd : 2*nd]
		}
	}
	if kind == KindSparseCOO {
		mem.NNZ = int64(le.Uint64(b[pos:]))
		pos += 8
	}
	mem.Data = Part{Offset: le.Uint64(b[pos:]), Length: le.Uint64(b[pos+8:])}
	pos += 16
	switch kind {
	case KindRagged:
		mem.Offsets = Part{Offset: le.Uint64(b[pos:]), Length: le.Uint64(b[pos+8:])}
		pos += 16
	case KindSparseCOO:
		mem.Indices = Part{Offset: le.Uint64(b[pos:]), Length: le.Uint64(b[pos+8:])}
		pos += 16
	}
	return mem, pos, nil
}

// commit writes the checked message into dst. It cannot fail: a record that
// no longer parses is a broken invariant.
func (d *manifestDecoder) commit(dst *Manifest) {
	b, pieces := d.b, d.s.pieces
	block := dst.strs
	if !d.sameStrs {
		var sb strings.Builder
		sb.Grow(d.strBytes)
		for _, p := range pieces {
			sb.Write(b[p.off : p.off+p.n])
		}
		block = sb.String()
	}
	at := 0
	take := func(p manifestPiece) string {
		s := block[at : at+int(p.n)]
		at += int(p.n)
		return s
	}
	dst.strs = block
	dst.PayloadBytes = d.payload
	dst.Meta = growTo(dst.Meta, d.nMeta)
	for i := range dst.Meta {
		dst.Meta[i] = KV{Key: take(pieces[2*i]), Value: take(pieces[2*i+1])}
	}
	dst.ints = growTo(dst.ints, d.ints)
	dst.Members = growTo(dst.Members, d.nMembers)
	used := 0
	for j := range dst.Members {
		p := pieces[2*d.nMeta+j]
		mem, _, err := readMemberRecord(b, j, int(p.off)-1, int(p.off+p.n), dst.ints[used:])
		if err != nil {
			panic("structobj: checked manifest no longer decodes: " + err.Error())
		}
		mem.Name = take(p)
		dst.Members[j] = mem
		used += len(mem.Shape) + len(mem.Strides)
	}
}

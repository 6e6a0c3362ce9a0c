package structobj

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"sync"
	"unicode"
	"unicode/utf8"
)

// DType is the element type of a typed member. Its values are part of the
// manifest wire format and never change meaning.
type DType uint8

// Element types. DTypeNone is the zero value: KindBytes members have it and
// every other kind needs one of the others.
const (
	DTypeNone     DType = 0  // no element type (bytes members)
	DTypeBool     DType = 1  // 1 byte, 0 or 1
	DTypeInt8     DType = 2  // 1 byte
	DTypeInt16    DType = 3  // 2 bytes
	DTypeInt32    DType = 4  // 4 bytes
	DTypeInt64    DType = 5  // 8 bytes
	DTypeUint8    DType = 6  // 1 byte
	DTypeUint16   DType = 7  // 2 bytes
	DTypeUint32   DType = 8  // 4 bytes
	DTypeUint64   DType = 9  // 8 bytes
	DTypeFloat16  DType = 10 // 2 bytes, IEEE 754 binary16
	DTypeBFloat16 DType = 11 // 2 bytes, bfloat16 (the top half of a float32)
	DTypeFloat32  DType = 12 // 4 bytes, IEEE 754 binary32
	DTypeFloat64  DType = 13 // 8 bytes, IEEE 754 binary64
)

// dtypeInfo holds each DType's name and size, indexed by the DType.
var dtypeInfo = [...]struct {
	name string
	size int
}{
	DTypeNone:     {"none", 0},
	DTypeBool:     {"bool", 1},
	DTypeInt8:     {"int8", 1},
	DTypeInt16:    {"int16", 2},
	DTypeInt32:    {"int32", 4},
	DTypeInt64:    {"int64", 8},
	DTypeUint8:    {"uint8", 1},
	DTypeUint16:   {"uint16", 2},
	DTypeUint32:   {"uint32", 4},
	DTypeUint64:   {"uint64", 8},
	DTypeFloat16:  {"float16", 2},
	DTypeBFloat16: {"bfloat16", 2},
	DTypeFloat32:  {"float32", 4},
	DTypeFloat64:  {"float64", 8},
}

// Size returns the size of one element in bytes, or 0 for DTypeNone and for
// values that name no element type.
func (d DType) Size() int {
	if int(d) < len(dtypeInfo) {
		return dtypeInfo[d].size
	}
	return 0
}

// String returns the type's name as ParseDType accepts it ("float32",
// "bfloat16", "none"), or "DType(n)" for a value that names no type.
func (d DType) String() string {
	if int(d) < len(dtypeInfo) {
		return dtypeInfo[d].name
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// ParseDType returns the DType whose String is name: "bool", "int8",
// "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
// "float16", "bfloat16", "float32", "float64" or "none". Names are exact
// (lowercase, no aliases such as "half" or "f4"); any other name is a
// *ManifestError with Field "DType".
func ParseDType(name string) (DType, error) {
	for d, t := range dtypeInfo {
		if t.name == name {
			return DType(d), nil
		}
	}
	return DTypeNone, &ManifestError{Field: "DType", Reason: fmt.Sprintf("unknown dtype name %q", name)}
}

// Kind says how a member's bytes are laid out and which of Member's fields
// describe them. Its values are part of the manifest wire format.
type Kind uint8

// Member kinds. The zero Kind is not a kind: a member must set one.
const (
	// KindTensor is a strided view, like a framework tensor: DType, Shape,
	// and Strides in bytes (one per dimension, non-negative), with element
	// [i0, i1, ...] at Data.Offset + i0*Strides[0] + i1*Strides[1] + ....
	// No two elements may overlap and the last byte reached must lie inside
	// Data, which may be longer than the view (padding, a view into a larger
	// buffer). Uses Data.
	KindTensor Kind = 1
	// KindNDArray is a dense array: DType, Shape and Order ('C' row-major
	// or 'F' column-major). Data holds exactly product(Shape) elements.
	KindNDArray Kind = 2
	// KindBytes is opaque bytes: Data only, no DType and no Shape.
	KindBytes Kind = 3
	// KindRagged is a list of Shape[0] variable-length rows of DType
	// elements. Data holds the values back to back (a whole number of
	// elements); Offsets holds Shape[0]+1 little-endian int64 element
	// offsets into them: row r is values [off[r], off[r+1]). Offsets start
	// at 0, never decrease and end at the number of values (CheckRagged).
	KindRagged Kind = 4
	// KindSparseCOO is a sparse update in coordinate form: Shape is the
	// dense shape (at least one dimension), NNZ the number of entries,
	// Indices an [NNZ, len(Shape)] row-major array of little-endian int64
	// coordinates, each inside the dense shape (CheckSparse), and Data the
	// NNZ values of DType in the same order. Coordinates may repeat; what a
	// repeat means (sum, last wins) is the reader's business.
	KindSparseCOO Kind = 5
)

// String returns "tensor", "ndarray", "bytes", "ragged", "sparse_coo", or
// "Kind(n)" for a value that names no kind.
func (k Kind) String() string {
	switch k {
	case KindTensor:
		return "tensor"
	case KindNDArray:
		return "ndarray"
	case KindBytes:
		return "bytes"
	case KindRagged:
		return "ragged"
	case KindSparseCOO:
		return "sparse_coo"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Orders of a KindNDArray member.
const (
	OrderC byte = 'C' // row-major: the last index varies fastest
	OrderF byte = 'F' // column-major: the first index varies fastest
)

// MaxNameBytes is the longest member name or metadata key, in bytes.
const MaxNameBytes = 255

// Part is a byte range of an object's payload; Offset is relative to the
// payload's first byte.
type Part struct {
	Offset, Length uint64
}

// end returns Offset+Length, and false if that overflows.
func (p Part) end() (uint64, bool) {
	e, carry := bits.Add64(p.Offset, p.Length, 0)
	return e, carry == 0
}

// Member is one named member of a Structured Object: one flat struct for all
// kinds, so that it is easy to build by hand. Each kind uses some of the
// fields (see the Kind constants); Validate requires the others to be zero:
//
//	kind         DType  Shape        Strides  Order   NNZ  parts
//	tensor       yes    any          yes      0       0    Data
//	ndarray      yes    any          -        C or F  0    Data
//	bytes        none   -            -        0       0    Data
//	ragged       yes    [rows]       -        0       0    Data (values), Offsets
//	sparse_coo   yes    dense, >= 1  -        0       yes  Data (values), Indices
type Member struct {
	// Name identifies the member: 1 to MaxNameBytes bytes of valid UTF-8,
	// every rune printable (unicode.IsPrint: letters, marks, numbers,
	// punctuation, symbols and the ASCII space), unique in its manifest.
	Name string
	// Kind is the member's layout.
	Kind Kind
	// DType is the element type; DTypeNone for bytes members.
	DType DType
	// Shape is the dimensions, each >= 0; for ragged members [rows], for
	// sparse members the dense shape. Empty for bytes members; empty for a
	// tensor or ndarray is a scalar (one element).
	Shape []int64
	// Strides is, for tensors only, the byte step of each dimension
	// (len(Strides) == len(Shape), each >= 0).
	Strides []int64
	// Order is OrderC or OrderF for ndarray members, 0 otherwise.
	Order byte
	// NNZ is the number of entries of a sparse member, 0 otherwise.
	NNZ int64
	// Data holds the elements (tensor, ndarray), the bytes (bytes) or the
	// values (ragged, sparse).
	Data Part
	// Offsets holds a ragged member's row offsets; zero for other kinds.
	Offsets Part
	// Indices holds a sparse member's coordinates; zero for other kinds.
	Indices Part
}

// Parts returns the parts the member's kind uses, in a fixed order: Data,
// then Offsets (ragged) or Indices (sparse). For a member of no valid kind it
// returns Data alone. The slice is new (a small allocation); Bytes sums the
// lengths without one.
func (mem *Member) Parts() []Part {
	switch mem.Kind {
	case KindRagged:
		return []Part{mem.Data, mem.Offsets}
	case KindSparseCOO:
		return []Part{mem.Data, mem.Indices}
	}
	return []Part{mem.Data}
}

// Bytes returns how many payload bytes the member's parts cover together
// (the sum of the lengths of Parts).
func (mem *Member) Bytes() uint64 {
	switch mem.Kind {
	case KindRagged:
		return mem.Data.Length + mem.Offsets.Length
	case KindSparseCOO:
		return mem.Data.Length + mem.Indices.Length
	}
	return mem.Data.Length
}

// KV is one metadata entry. Key follows the rules of member names (1 to
// MaxNameBytes bytes of printable UTF-8, unique in its manifest); Value is
// opaque bytes that this package does not interpret.
type KV struct {
	Key, Value string
}

// Manifest describes a Structured Object: ordered user metadata and named
// members whose parts lie in one payload of PayloadBytes bytes. Parts of
// different members (and of one member) never overlap; the payload may have
// bytes no part covers (alignment padding).
//
// The zero Manifest is valid and empty. A Manifest built by hand should be
// checked with Validate; DecodeManifest checks what it decodes.
type Manifest struct {
	// Meta is user metadata, in the order given; keys are unique.
	Meta []KV
	// Members are the members, in the order given; names are unique.
	Members []Member
	// PayloadBytes is the size of the payload the members' parts lie in.
	PayloadBytes uint64

	// strs holds the bytes of every decoded name, key and value back to
	// back; the decoded strings are substrings of it. A decode whose strings
	// are the same bytes reuses it.
	strs string
	// ints is the storage of decoded shapes and strides.
	ints []int64
}

// Member returns the member called name, or false if there is none. It
// scans the members in order (O(len(Members)), no allocation); a caller that
// looks up many names in a large manifest should build its own index.
func (m *Manifest) Member(name string) (*Member, bool) {
	for i := range m.Members {
		if m.Members[i].Name == name {
			return &m.Members[i], true
		}
	}
	return nil, false
}

// Limits bounds a manifest, for Validate and for a decoder that reads an
// untrusted manifest. A zero or negative field takes its default (see
// DefaultLimits); fields above what the wire format can hold are lowered to
// that.
type Limits struct {
	// MaxMembers is the most members; default 65536.
	MaxMembers int
	// MaxDims is the most dimensions of one member's shape; default 32, at
	// most 255.
	MaxDims int
	// MaxMeta is the most metadata entries; default 1024.
	MaxMeta int
	// MaxMetaBytes is the most bytes of all metadata keys and values
	// together; default 1 MiB.
	MaxMetaBytes int
	// MaxBytes is the largest encoded manifest; default 64 MiB, at most
	// 2^32-1.
	MaxBytes int
}

// DefaultLimits are the limits a zero Limits field stands for, and those
// AppendManifest encodes under.
var DefaultLimits = Limits{
	MaxMembers:   1 << 16,
	MaxDims:      32,
	MaxMeta:      1024,
	MaxMetaBytes: 1 << 20,
	MaxBytes:     64 << 20,
}

// Hard limits of the wire format (see manifest_wire.go).
const (
	maxManifestDims  = math.MaxUint8
	maxManifestBytes = math.MaxUint32
)

// withDefaults returns l with defaults in its zero and negative fields and
// every field lowered to what the wire format holds.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxMembers <= 0 {
		l.MaxMembers = d.MaxMembers
	}
	if l.MaxDims <= 0 {
		l.MaxDims = d.MaxDims
	}
	if l.MaxMeta <= 0 {
		l.MaxMeta = d.MaxMeta
	}
	if l.MaxMetaBytes <= 0 {
		l.MaxMetaBytes = d.MaxMetaBytes
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	l.MaxDims = min(l.MaxDims, maxManifestDims)
	if uint64(l.MaxBytes) > maxManifestBytes {
		l.MaxBytes = maxManifestBytes
	}
	// Every count is bounded by the encoded size, so the counts fit the
	// wire's 32-bit fields too.
	l.MaxMembers = min(l.MaxMembers, l.MaxBytes)
	l.MaxMeta = min(l.MaxMeta, l.MaxBytes)
	l.MaxMetaBytes = min(l.MaxMetaBytes, l.MaxBytes)
	return l
}

// Validate checks m against the rules below and against lim (zero fields
// take DefaultLimits). The first violation is returned as a *ManifestError
// naming the field, e.g. "Members[3].Strides[1]"; one that only exceeds lim
// also wraps ErrManifestLimit. Validate does not modify m and, once warm,
// does not allocate. It takes O(n log n) time in the number of members and
// metadata entries.
//
// The rules, in the order they are checked:
//
//   - at most lim.MaxMeta metadata entries and lim.MaxMembers members;
//   - each metadata key follows the name rules below; keys and values
//     together take at most lim.MaxMetaBytes bytes;
//   - each member name is 1 to MaxNameBytes bytes of valid, printable UTF-8
//     (see Member.Name);
//   - each member has a valid Kind, and a DType for every kind but bytes,
//     which has DTypeNone;
//   - shapes have at most lim.MaxDims dimensions, none negative, and a
//     product that fits an int64; bytes members have no shape, ragged
//     members exactly one dimension (the rows), sparse members at least one;
//   - fields a kind does not use are zero (see Member);
//   - tensor strides are non-negative, one per dimension, and nest: sorted
//     by stride, the axes of extent > 1 each step at least as far as the
//     inner ones reach (stride >= (sum over inner axes of (dim-1)*stride) +
//     element size), which guarantees that no two elements overlap;
//   - ndarray orders are OrderC or OrderF; sparse NNZ is non-negative, and 0
//     when the dense shape has no elements;
//   - every part lies inside [0, PayloadBytes) (an empty part may sit at
//     PayloadBytes);
//   - parts have exactly the size their kind needs: tensor Data at least the
//     last byte the strides reach plus one element (any size when the
//     tensor has no elements); ndarray Data product(Shape) elements; ragged
//     Offsets 8*(rows+1) bytes and Data a whole number of elements (at most
//     2^63-1); sparse Indices 8*NNZ*len(Shape) bytes and Data NNZ elements;
//   - the manifest encodes to at most lim.MaxBytes bytes;
//   - metadata keys are unique, member names are unique;
//   - no two non-empty parts overlap, whether of one member or of two.
//
// Ragged offsets and sparse coordinates live in the payload, so Validate
// cannot check them: see CheckRagged and CheckSparse.
func (m *Manifest) Validate(lim Limits) error {
	l := lim.withDefaults()
	s := getManifestScratch()
	_, err := m.validate(&l, s)
	putManifestScratch(s)
	return err
}

// validate checks m and returns its encoded size.
func (m *Manifest) validate(l *Limits, s *manifestScratch) (int, error) {
	if err := checkManifestCounts(len(m.Meta), len(m.Members), l); err != nil {
		return 0, err
	}
	size := uint64(manifestHeaderSize)
	metaBytes := 0
	for i := range m.Meta {
		kv := &m.Meta[i]
		if err := checkMetaEntry(i, kv.Key, len(kv.Value), &metaBytes, l); err != nil {
			return 0, err
		}
		size += uint64(metaEntryWireSize(len(kv.Key), len(kv.Value)))
	}
	s.parts = s.parts[:0]
	for i := range m.Members {
		mem := &m.Members[i]
		if r := nameReason(mem.Name); r != "" {
			return 0, memberRuleErr(i, "Name", "%s", r)
		}
		if err := mem.check(i, m.PayloadBytes, l); err != nil {
			return 0, err
		}
		size += uint64(memberWireSize(len(mem.Name), mem.Kind, len(mem.Shape)))
		s.addParts(i, mem)
	}
	if size > uint64(l.MaxBytes) {
		return 0, &ManifestError{Field: "Manifest",
			Reason: fmt.Sprintf("encodes to %d bytes, over the limit of %d", size, l.MaxBytes), Err: ErrManifestLimit}
	}
	if i, j, ok := s.firstDuplicate(len(m.Meta), func(k int32) uint64 {
		return maphash.String(manifestHashSeed, m.Meta[k].Key)
	}, func(a, b int32) bool {
		return m.Meta[a].Key == m.Meta[b].Key
	}); ok {
		return 0, dupMetaKeyErr(i, j)
	}
	if i, j, ok := s.firstDuplicate(len(m.Members), func(k int32) uint64 {
		return maphash.String(manifestHashSeed, m.Members[k].Name)
	}, func(a, b int32) bool {
		return m.Members[a].Name == m.Members[b].Name
	}); ok {
		return 0, dupMemberNameErr(i, j)
	}
	if a, b, ok := firstPartOverlap(s.parts); ok {
		return 0, partOverlapErr(a, b)
	}
	return int(size), nil
}

// checkManifestCounts checks the number of metadata entries and members.
func checkManifestCounts(meta, members int, l *Limits) error {
	if meta > l.MaxMeta {
		return &ManifestError{Field: "Meta",
			Reason: fmt.Sprintf("%d entries, over the limit of %d", meta, l.MaxMeta), Err: ErrManifestLimit}
	}
	if members > l.MaxMembers {
		return &ManifestError{Field: "Members",
			Reason: fmt.Sprintf("%d members, over the limit of %d", members, l.MaxMembers), Err: ErrManifestLimit}
	}
	return nil
}

// checkMetaEntry checks metadata entry i's key and adds its size to
// *metaBytes, checking the total against the limit.
func checkMetaEntry[S string | []byte](i int, key S, valueLen int, metaBytes *int, l *Limits) error {
	if r := nameReason(key); r != "" {
		return &ManifestError{Field: fmt.Sprintf("Meta[%d].Key", i), Reason: r}
	}
	*metaBytes += len(key)
	if valueLen > l.MaxMetaBytes-*metaBytes {
		return &ManifestError{Field: "Meta",
			Reason: fmt.Sprintf("keys and values through entry %d exceed the limit of %d bytes", i, l.MaxMetaBytes),
			Err:    ErrManifestLimit}
	}
	*metaBytes += valueLen
	return nil
}

// nameReason says what is wrong with a member name or metadata key, or
// returns "" if nothing is: it must be 1 to MaxNameBytes bytes of valid
// UTF-8 whose runes are all printable.
func nameReason[S string | []byte](s S) string {
	if len(s) == 0 {
		return "empty"
	}
	if len(s) > MaxNameBytes {
		return fmt.Sprintf("%d bytes, over the limit of %d", len(s), MaxNameBytes)
	}
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return fmt.Sprintf("control character %#04x at byte %d", c, i)
			}
			i++
			continue
		}
		// At most utf8.UTFMax bytes: the conversion does not allocate.
		r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && n <= 1 {
			return fmt.Sprintf("invalid UTF-8 at byte %d", i)
		}
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("unprintable rune %U at byte %d", r, i)
		}
		i += n
	}
	return ""
}

// memberRuleErr returns a *ManifestError for field of member i.
func memberRuleErr(i int, field, format string, args ...any) error {
	return &ManifestError{Field: fmt.Sprintf("Members[%d].%s", i, field), Reason: fmt.Sprintf(format, args...)}
}

func dupMetaKeyErr(i, j int) error {
	return &ManifestError{Field: fmt.Sprintf("Meta[%d].Key", j), Reason: fmt.Sprintf("duplicates Meta[%d].Key", i)}
}

func dupMemberNameErr(i, j int) error {
	return memberRuleErr(j, "Name", "duplicates Members[%d].Name", i)
}

func partOverlapErr(a, b memberPartRef) error {
	return memberRuleErr(int(b.member), memberPartNames[b.which], "[%d, +%d) overlaps Members[%d].%s [%d, +%d)",
		b.Offset, b.Length, a.member, memberPartNames[a.which], a.Offset, a.Length)
}

// shapeElements returns the product of a shape whose dimensions are all
// non-negative, and false if it does not fit an int64.
func shapeElements(shape []int64) (uint64, bool) {
	if slices.Contains(shape, 0) {
		return 0, true
	}
	n := uint64(1)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		n = lo
	}
	return n, true
}

// mul64 returns a*b, and false if that overflows a uint64.
func mul64(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	return lo, hi == 0
}

// check applies Validate's per-member rules (all but the name's) to member
// i of a manifest whose payload has payload bytes.
func (mem *Member) check(i int, payload uint64, l *Limits) error {
	if err := mem.checkKind(i); err != nil {
		return err
	}
	count, err := mem.checkShape(i, l)
	if err != nil {
		return err
	}
	if err := mem.checkUnused(i, count); err != nil {
		return err
	}
	if err := checkMemberPart(i, "Data", mem.Data, payload); err != nil {
		return err
	}
	switch mem.Kind {
	case KindRagged:
		if err := checkMemberPart(i, "Offsets", mem.Offsets, payload); err != nil {
			return err
		}
	case KindSparseCOO:
		if err := checkMemberPart(i, "Indices", mem.Indices, payload); err != nil {
			return err
		}
	}
	return mem.checkSizes(i, count)
}

// checkKind checks Kind and DType.
func (mem *Member) checkKind(i int) error {
	switch mem.Kind {
	case KindTensor, KindNDArray, KindRagged, KindSparseCOO:
		if mem.DType == DTypeNone || mem.DType.Size() == 0 {
			return memberRuleErr(i, "DType", "%s member needs an element type, has %s", mem.Kind, mem.DType)
		}
	case KindBytes:
		if mem.DType != DTypeNone {
			return memberRuleErr(i, "DType", "bytes member has no element type, has %s", mem.DType)
		}
	default:
		return memberRuleErr(i, "Kind", "unknown kind %d", uint8(mem.Kind))
	}
	return nil
}

// checkShape checks Shape and returns its element count.
func (mem *Member) checkShape(i int, l *Limits) (uint64, error) {
	nd := len(mem.Shape)
	if nd > l.MaxDims {
		return 0, &ManifestError{Field: fmt.Sprintf("Members[%d].Shape", i),
			Reason: fmt.Sprintf("%d dimensions, over the limit of %d", nd, l.MaxDims), Err: ErrManifestLimit}
	}
	switch {
	case mem.Kind == KindBytes && nd != 0:
		return 0, memberRuleErr(i, "Shape", "bytes member has no shape, has %d dimensions", nd)
	case mem.Kind == KindRagged && nd != 1:
		return 0, memberRuleErr(i, "Shape", "ragged member has shape [rows], has %d dimensions", nd)
	case mem.Kind == KindSparseCOO && nd == 0:
		return 0, memberRuleErr(i, "Shape", "sparse member needs a dense shape of at least one dimension")
	}
	for k, d := range mem.Shape {
		if d < 0 {
			return 0, memberRuleErr(i, fmt.Sprintf("Shape[%d]", k), "negative dimension %d", d)
		}
	}
	count, ok := shapeElements(mem.Shape)
	if !ok {
		return 0, memberRuleErr(i, "Shape", "element count overflows int64")
	}
	return count, nil
}

// checkUnused checks Strides, Order, NNZ and the unused parts.
func (mem *Member) checkUnused(i int, count uint64) error {
	if mem.Kind == KindTensor {
		if len(mem.Strides) != len(mem.Shape) {
			return memberRuleErr(i, "Strides", "%d strides for %d dimensions", len(mem.Strides), len(mem.Shape))
		}
		for k, s := range mem.Strides {
			if s < 0 {
				return memberRuleErr(i, fmt.Sprintf("Strides[%d]", k), "negative stride %d", s)
			}
		}
	} else if len(mem.Strides) != 0 {
		return memberRuleErr(i, "Strides", "only tensor members have strides")
	}
	if mem.Kind == KindNDArray {
		if mem.Order != OrderC && mem.Order != OrderF {
			return memberRuleErr(i, "Order", "ndarray order must be 'C' or 'F', has %#04x", mem.Order)
		}
	} else if mem.Order != 0 {
		return memberRuleErr(i, "Order", "only ndarray members have an order")
	}
	if mem.Kind == KindSparseCOO {
		if mem.NNZ < 0 {
			return memberRuleErr(i, "NNZ", "negative entry count %d", mem.NNZ)
		}
		if count == 0 && mem.NNZ > 0 {
			return memberRuleErr(i, "NNZ", "%d entries in a dense shape with no elements", mem.NNZ)
		}
	} else if mem.NNZ != 0 {
		return memberRuleErr(i, "NNZ", "only sparse members have entries")
	}
	if mem.Kind != KindRagged && mem.Offsets != (Part{}) {
		return memberRuleErr(i, "Offsets", "only ragged members have an offsets part")
	}
	if mem.Kind != KindSparseCOO && mem.Indices != (Part{}) {
		return memberRuleErr(i, "Indices", "only sparse members have an indices part")
	}
	return nil
}

// checkMemberPart checks that p lies inside the payload.
func checkMemberPart(i int, field string, p Part, payload uint64) error {
	if e, ok := p.end(); !ok || e > payload {
		return memberRuleErr(i, field, "[%d, +%d) outside the payload of %d bytes", p.Offset, p.Length, payload)
	}
	return nil
}

// checkSizes checks that the parts have the sizes the kind needs; count is
// the element count of the shape.
func (mem *Member) checkSizes(i int, count uint64) error {
	size := uint64(mem.DType.Size())
	switch mem.Kind {
	case KindTensor:
		if count == 0 {
			return nil
		}
		reach, err := tensorReach(i, mem.Shape, mem.Strides, size)
		if err != nil {
			return err
		}
		if reach > mem.Data.Length {
			return memberRuleErr(i, "Data", "%d bytes, the strides reach %d", mem.Data.Length, reach)
		}
	case KindNDArray:
		want, ok := mul64(count, size)
		if !ok || mem.Data.Length != want {
			return memberRuleErr(i, "Data", "%d bytes, %d elements of %s need %d", mem.Data.Length, count, mem.DType, want)
		}
	case KindRagged:
		rows := uint64(mem.Shape[0])
		want, ok := mul64(rows+1, 8)
		if !ok || mem.Offsets.Length != want {
			return memberRuleErr(i, "Offsets", "%d bytes, %d rows need %d", mem.Offsets.Length, rows, want)
		}
		if mem.Data.Length%size != 0 {
			return memberRuleErr(i, "Data", "%d bytes is not a whole number of %s elements", mem.Data.Length, mem.DType)
		}
		if mem.Data.Length/size > math.MaxInt64 {
			return memberRuleErr(i, "Data", "%d values do not fit int64 offsets", mem.Data.Length/size)
		}
	case KindSparseCOO:
		nnz := uint64(mem.NNZ)
		want, ok := mul64(nnz, 8*uint64(len(mem.Shape)))
		if !ok || mem.Indices.Length != want {
			return memberRuleErr(i, "Indices", "%d bytes, %d entries of %d coordinates need %d",
				mem.Indices.Length, nnz, len(mem.Shape), want)
		}
		want, ok = mul64(nnz, size)
		if !ok || mem.Data.Length != want {
			return memberRuleErr(i, "Data", "%d bytes, %d values of %s need %d", mem.Data.Length, nnz, mem.DType, want)
		}
	}
	return nil
}

// tensorReach checks that a tensor with at least one element has nesting
// strides (see Validate) and returns how many bytes from the first element
// the view reaches: the offset of its last byte plus one.
func tensorReach(i int, shape, strides []int64, size uint64) (uint64, error) {
	// Axes of extent > 1, insertion-sorted by stride. Each such axis at
	// least doubles the element count, so there are at most 62 of them.
	var axes [maxManifestDims]uint8
	n := 0
	for a, d := range shape {
		if d <= 1 {
			continue
		}
		k := n
		for k > 0 && strides[axes[k-1]] > strides[a] {
			axes[k] = axes[k-1]
			k--
		}
		axes[k] = uint8(a)
		n++
	}
	extent := size
	for _, a := range axes[:n] {
		s := uint64(strides[a])
		if s < extent {
			return 0, memberRuleErr(i, fmt.Sprintf("Strides[%d]", a),
				"stride %d is below %d, the reach of the axes with smaller strides: elements would overlap", s, extent)
		}
		step, ok := mul64(uint64(shape[a]-1), s)
		var carry uint64
		extent, carry = bits.Add64(extent, step, 0)
		if !ok || carry != 0 {
			return 0, memberRuleErr(i, "Strides", "the strides reach past 2^64 bytes")
		}
	}
	return extent, nil
}

// Part indices of a memberPartRef, and the field names they stand for.
const (
	memberPartData uint8 = iota
	memberPartOffsets
	memberPartIndices
)

var memberPartNames = [...]string{memberPartData: "Data", memberPartOffsets: "Offsets", memberPartIndices: "Indices"}

// memberPartRef is a non-empty part of a member, for the overlap check.
type memberPartRef struct {
	Part
	member int32
	which  uint8
}

// manifestScratch is the working memory of validation and decoding, pooled
// so that neither allocates once warm.
type manifestScratch struct {
	table  []uint64        // hash table of the duplicate check
	parts  []memberPartRef // non-empty parts
	pieces []manifestPiece // decoder: the strings of the message, in order
}

var manifestScratchPool = sync.Pool{New: func() any { return new(manifestScratch) }}

func getManifestScratch() *manifestScratch { return manifestScratchPool.Get().(*manifestScratch) }

// putManifestScratch returns s to the pool unless it has grown past what a
// manifest under DefaultLimits needs, so that one huge manifest is not kept
// alive.
func putManifestScratch(s *manifestScratch) {
	const keep = 4 << 16
	if cap(s.table) > 2*keep || cap(s.parts) > keep || cap(s.pieces) > keep {
		return
	}
	manifestScratchPool.Put(s)
}

// addParts records the non-empty parts of member i.
func (s *manifestScratch) addParts(i int, mem *Member) {
	add := func(p Part, which uint8) {
		if p.Length > 0 {
			s.parts = append(s.parts, memberPartRef{Part: p, member: int32(i), which: which})
		}
	}
	add(mem.Data, memberPartData)
	switch mem.Kind {
	case KindRagged:
		add(mem.Offsets, memberPartOffsets)
	case KindSparseCOO:
		add(mem.Indices, memberPartIndices)
	}
}

// manifestHashSeed keys the name hashes of the duplicate check. It is
// random per process, so that no input can be built to make names collide.
var manifestHashSeed = maphash.MakeSeed()

// firstDuplicate finds, among n names, the smallest j whose name equals that
// of an earlier i, and returns it with the first such i. hash(k) is name k's
// hash under manifestHashSeed and equal(a, b) compares names a and b. It
// takes O(n) expected time: an open-addressing table in s.
func (s *manifestScratch) firstDuplicate(n int, hash func(k int32) uint64, equal func(a, b int32) bool) (i, j int, ok bool) {
	size := 1
	for size < 2*n {
		size <<= 1
	}
	// A slot holds the top 32 bits of the hash and index+1; 0 is empty.
	s.table = growTo(s.table, size)
	clear(s.table)
	mask := uint64(size - 1)
	for k := range int32(n) {
		h := hash(k)
		tag := h &^ math.MaxUint32
		for slot := h & mask; ; slot = (slot + 1) & mask {
			e := s.table[slot]
			if e == 0 {
				s.table[slot] = tag | uint64(k+1)
				break
			}
			if e&^math.MaxUint32 == tag && equal(int32(e&math.MaxUint32)-1, k) {
				return int(e&math.MaxUint32) - 1, int(k), true
			}
		}
	}
	return 0, 0, false
}

// firstPartOverlap sorts parts by offset (then member, then part) and
// returns the first pair, in that order, that overlaps: b starts inside a.
// Every part must be non-empty and end inside the payload. Parts laid out in
// member order, as writers usually place them, are already sorted and take
// O(n) time; others O(n log n).
func firstPartOverlap(parts []memberPartRef) (a, b memberPartRef, ok bool) {
	byOffset := func(x, y memberPartRef) int {
		if c := cmp.Compare(x.Offset, y.Offset); c != 0 {
			return c
		}
		if c := cmp.Compare(x.member, y.member); c != 0 {
			return c
		}
		return cmp.Compare(x.which, y.which)
	}
	if !slices.IsSortedFunc(parts, byOffset) {
		slices.SortFunc(parts, byOffset)
	}
	var cover memberPartRef // the part reaching furthest so far
	var coverEnd uint64
	for k, p := range parts {
		if k > 0 && p.Offset < coverEnd {
			return cover, p, true
		}
		if e := p.Offset + p.Length; k == 0 || e > coverEnd {
			cover, coverEnd = p, e
		}
	}
	return a, b, false
}

// growTo returns s resized to n, reallocating only when its capacity is short.
func growTo[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// CheckRagged checks a ragged member's offsets, as fetched from its Offsets
// part, against the manifest: len(offsets) == Offsets.Length, values equal
// to the number of elements in Data (Data.Length / DType.Size()), and
// offsets that are little-endian int64s starting at 0, never decreasing and
// ending at values. A reader that trusts the offsets to slice the values
// part needs this check; Validate cannot make it. It returns a *DataError,
// and does not allocate when the offsets are good.
func (mem *Member) CheckRagged(offsets []byte, values int64) error {
	size := uint64(mem.DType.Size())
	if mem.Kind != KindRagged || len(mem.Shape) != 1 || size == 0 {
		return &DataError{Member: mem.Name, Part: "Offsets", Index: -1,
			Reason: fmt.Sprintf("not a valid ragged member (kind %s, %d dimensions, dtype %s)", mem.Kind, len(mem.Shape), mem.DType)}
	}
	n := uint64(len(offsets))
	if n != mem.Offsets.Length || n%8 != 0 || n/8 != uint64(mem.Shape[0])+1 {
		return &DataError{Member: mem.Name, Part: "Offsets", Index: -1,
			Reason: fmt.Sprintf("%d bytes of offsets, the manifest says %d for %d rows", n, mem.Offsets.Length, mem.Shape[0])}
	}
	if values < 0 || uint64(values) != mem.Data.Length/size {
		return &DataError{Member: mem.Name, Part: "Data", Index: -1,
			Reason: fmt.Sprintf("%d values, the manifest's values part holds %d", values, mem.Data.Length/size)}
	}
	prev := int64(0)
	for k := range int64(n / 8) {
		v := int64(binary.LittleEndian.Uint64(offsets[8*k:]))
		switch {
		case k == 0 && v != 0:
			return &DataError{Member: mem.Name, Part: "Offsets", Index: 0, Reason: fmt.Sprintf("first offset is %d, not 0", v)}
		case v < prev:
			return &DataError{Member: mem.Name, Part: "Offsets", Index: k,
				Reason: fmt.Sprintf("offset %d is below the previous one, %d", v, prev)}
		case v > values:
			return &DataError{Member: mem.Name, Part: "Offsets", Index: k,
				Reason: fmt.Sprintf("offset %d is past the %d values", v, values)}
		}
		prev = v
	}
	if prev != values {
		return &DataError{Member: mem.Name, Part: "Offsets", Index: int64(n/8) - 1,
			Reason: fmt.Sprintf("last offset is %d, not the number of values, %d", prev, values)}
	}
	return nil
}

// CheckSparse checks a sparse member's coordinates, as fetched from its
// Indices part: len(indices) == Indices.Length == 8*NNZ*len(Shape), and
// every coordinate, a little-endian int64, inside its dimension:
// 0 <= indices[k][d] < Shape[d]. Repeated coordinates are allowed. It
// returns a *DataError whose Index is the offending entry k, and does not
// allocate when the coordinates are good.
func (mem *Member) CheckSparse(indices []byte) error {
	nd := uint64(len(mem.Shape))
	if mem.Kind != KindSparseCOO || nd == 0 || mem.NNZ < 0 {
		return &DataError{Member: mem.Name, Part: "Indices", Index: -1,
			Reason: fmt.Sprintf("not a valid sparse member (kind %s, %d dimensions, nnz %d)", mem.Kind, nd, mem.NNZ)}
	}
	n := uint64(len(indices))
	if n != mem.Indices.Length || n%(8*nd) != 0 || n/(8*nd) != uint64(mem.NNZ) {
		return &DataError{Member: mem.Name, Part: "Indices", Index: -1,
			Reason: fmt.Sprintf("%d bytes of indices, the manifest says %d for %d entries of %d coordinates",
				n, mem.Indices.Length, mem.NNZ, nd)}
	}
	for k := range mem.NNZ {
		entry := indices[uint64(k)*8*nd:]
		for d, dim := range mem.Shape {
			if v := int64(binary.LittleEndian.Uint64(entry[8*d:])); v < 0 || v >= dim {
				return &DataError{Member: mem.Name, Part: "Indices", Index: k,
					Reason: fmt.Sprintf("coordinate %d of dimension %d is outside [0, %d)", v, d, dim)}
			}
		}
	}
	return nil
}

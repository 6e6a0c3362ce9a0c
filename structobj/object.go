package structobj

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Object is a Structured Object in the caller's memory: its manifest and
// the bytes of its parts, each part in its own slice.
//
// Data[i] holds the bytes of the i-th non-empty part in manifest order:
// the members in order, and for each member its Parts() in order (Data,
// then Offsets for ragged or Indices for sparse members), skipping parts
// of length 0; len(Data[i]) is that part's Length. The slices may be any
// memory, including Buffers of a Client (which a PUT writes without a
// copy); they are only read, and must not change while a PUT runs.
//
// The payload a PUT stores is the parts placed at their offsets; bytes no
// part covers (alignment padding) are stored as zeros.
type Object struct {
	// Manifest describes the object; its parts lie in the payload.
	Manifest Manifest
	// Data holds the bytes of the non-empty parts, as described above.
	Data [][]byte
}

// Validate checks o before it is sent: the manifest under lim (Validate),
// Data against it (one slice per non-empty part, of the part's length),
// and the contents a reader trusts: every ragged member's offsets
// (CheckRagged) and every sparse member's coordinates (CheckSparse). The
// error is an *ObjectError. It does not modify o.
func (o *Object) Validate(lim Limits) error {
	if err := o.Manifest.Validate(lim); err != nil {
		return &ObjectError{Field: "Manifest", Reason: "invalid manifest", Err: err}
	}
	return o.checkData()
}

// nonEmptyParts returns the number of non-empty parts of m.
func nonEmptyParts(m *Manifest) int {
	n := 0
	for i := range m.Members {
		for _, p := range m.Members[i].Parts() {
			if p.Length > 0 {
				n++
			}
		}
	}
	return n
}

// checkData checks Data against a manifest known to be valid.
func (o *Object) checkData() error {
	m := &o.Manifest
	if want := nonEmptyParts(m); len(o.Data) != want {
		return &ObjectError{Field: "Data", Reason: fmt.Sprintf("%d slices for %d non-empty parts", len(o.Data), want)}
	}
	k := 0
	for i := range m.Members {
		mem := &m.Members[i]
		var second []byte // Offsets or Indices
		for j, p := range mem.Parts() {
			if p.Length == 0 {
				continue
			}
			if uint64(len(o.Data[k])) != p.Length {
				return &ObjectError{Field: fmt.Sprintf("Data[%d]", k),
					Reason: fmt.Sprintf("%d bytes, member %q part %d has %d", len(o.Data[k]), mem.Name, j, p.Length)}
			}
			if j == 1 {
				second = o.Data[k]
			}
			k++
		}
		var err error
		switch mem.Kind {
		case KindRagged:
			err = mem.CheckRagged(second, int64(mem.Data.Length/uint64(mem.DType.Size())))
		case KindSparseCOO:
			err = mem.CheckSparse(second)
		}
		if err != nil {
			return &ObjectError{Field: fmt.Sprintf("Members[%d]", i), Reason: "member data", Err: err}
		}
	}
	return nil
}

// Builder lays out an Object member by member. Each part starts at the
// next multiple of Align in the payload, in the order the members are
// added; the Object's Data refers to the caller's slices (nothing is
// copied, except the int64 offsets and coordinates of Ragged and Sparse,
// which are encoded). The zero Builder is ready to use.
//
// Methods return the Builder so calls chain; the first error sticks, is
// returned by Build, and makes the calls after it do nothing.
type Builder struct {
	// Limits bound the manifest Build validates (zero fields take
	// DefaultLimits). A PUT validates under the Client's Limits again.
	Limits Limits

	obj Object
	off uint64
	err error
}

// fail records the first error.
func (b *Builder) fail(field, format string, args ...any) *Builder {
	if b.err == nil {
		b.err = &ObjectError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	return b
}

// place lays out one part of data and returns it.
func (b *Builder) place(data []byte) Part {
	if len(data) == 0 {
		return Part{}
	}
	off, ok := alignUp(b.off)
	end := off + uint64(len(data))
	if !ok || end < off {
		b.fail(fmt.Sprintf("Members[%d]", len(b.obj.Manifest.Members)), "payload offset overflows")
		return Part{}
	}
	b.off = end
	b.obj.Data = append(b.obj.Data, data)
	return Part{Offset: off, Length: uint64(len(data))}
}

// add appends mem with its parts laid out from data (and second, the
// Offsets or Indices part of ragged and sparse members).
func (b *Builder) add(mem Member, data, second []byte) *Builder {
	if b.err != nil {
		return b
	}
	mem.Shape = slices.Clone(mem.Shape)
	mem.Strides = slices.Clone(mem.Strides)
	mem.Data = b.place(data)
	switch mem.Kind {
	case KindRagged:
		mem.Offsets = b.place(second)
	case KindSparseCOO:
		mem.Indices = b.place(second)
	}
	b.obj.Manifest.Members = append(b.obj.Manifest.Members, mem)
	return b
}

// Meta adds the metadata entry key = value.
func (b *Builder) Meta(key, value string) *Builder {
	if b.err == nil {
		b.obj.Manifest.Meta = append(b.obj.Manifest.Meta, KV{Key: key, Value: value})
	}
	return b
}

// Tensor adds a strided view (KindTensor): element [i0, i1, ...] of dtype
// at byte i0*strides[0] + i1*strides[1] + ... of data, which holds at least
// the last element the strides reach.
func (b *Builder) Tensor(name string, dtype DType, shape, strides []int64, data []byte) *Builder {
	return b.add(Member{Name: name, Kind: KindTensor, DType: dtype, Shape: shape, Strides: strides}, data, nil)
}

// NDArray adds a dense array (KindNDArray) in order OrderC or OrderF; data
// holds exactly product(shape) elements of dtype.
func (b *Builder) NDArray(name string, dtype DType, shape []int64, order byte, data []byte) *Builder {
	return b.add(Member{Name: name, Kind: KindNDArray, DType: dtype, Shape: shape, Order: order}, data, nil)
}

// Bytes adds opaque bytes (KindBytes).
func (b *Builder) Bytes(name string, data []byte) *Builder {
	return b.add(Member{Name: name, Kind: KindBytes}, data, nil)
}

// Ragged adds a list of len(offsets)-1 variable-length rows of dtype
// (KindRagged): row r is elements [offsets[r], offsets[r+1]) of values.
// The offsets are encoded into a new slice (8 bytes each); Build checks
// them (CheckRagged).
func (b *Builder) Ragged(name string, dtype DType, values []byte, offsets []int64) *Builder {
	if b.err != nil {
		return b
	}
	if len(offsets) == 0 {
		return b.fail(fmt.Sprintf("Members[%d]", len(b.obj.Manifest.Members)), "ragged member %q needs at least one offset", name)
	}
	return b.RaggedEncoded(name, dtype, values, appendInt64s(nil, offsets))
}

// RaggedEncoded is Ragged with the offsets already encoded as little-endian
// int64s (8*(rows+1) bytes), used without a copy.
func (b *Builder) RaggedEncoded(name string, dtype DType, values, offsets []byte) *Builder {
	if b.err != nil {
		return b
	}
	if len(offsets) < 8 || len(offsets)%8 != 0 {
		return b.fail(fmt.Sprintf("Members[%d]", len(b.obj.Manifest.Members)),
			"ragged member %q: %d offset bytes, want a positive multiple of 8", name, len(offsets))
	}
	rows := int64(len(offsets)/8 - 1)
	return b.add(Member{Name: name, Kind: KindRagged, DType: dtype, Shape: []int64{rows}}, values, offsets)
}

// Sparse adds a sparse update in coordinate form (KindSparseCOO) of dense
// shape denseShape: indices holds NNZ coordinate tuples of len(denseShape)
// values each, entry k's value is element k of values. The indices are
// encoded into a new slice (8 bytes each); Build checks them
// (CheckSparse).
func (b *Builder) Sparse(name string, dtype DType, denseShape, indices []int64, values []byte) *Builder {
	if b.err != nil {
		return b
	}
	return b.SparseEncoded(name, dtype, denseShape, appendInt64s(nil, indices), values)
}

// SparseEncoded is Sparse with the coordinates already encoded as an
// [NNZ, len(denseShape)] row-major array of little-endian int64s, used
// without a copy.
func (b *Builder) SparseEncoded(name string, dtype DType, denseShape []int64, indices, values []byte) *Builder {
	if b.err != nil {
		return b
	}
	field := fmt.Sprintf("Members[%d]", len(b.obj.Manifest.Members))
	if len(denseShape) == 0 {
		return b.fail(field, "sparse member %q needs a dense shape of at least one dimension", name)
	}
	tuple := 8 * len(denseShape)
	if len(indices)%tuple != 0 {
		return b.fail(field, "sparse member %q: %d index bytes, not a multiple of %d (one coordinate tuple)", name, len(indices), tuple)
	}
	nnz := int64(len(indices) / tuple)
	return b.add(Member{Name: name, Kind: KindSparseCOO, DType: dtype, Shape: denseShape, NNZ: nnz}, values, indices)
}

// Build validates the object (Object.Validate under b.Limits) and returns
// it, or the first error (an *ObjectError). The Builder is reset either
// way and may build another object.
func (b *Builder) Build() (*Object, error) {
	o, err := b.obj, b.err
	o.Manifest.PayloadBytes = b.off
	lim := b.Limits
	*b = Builder{Limits: lim}
	if err != nil {
		return nil, err
	}
	if err := o.Validate(lim); err != nil {
		return nil, err
	}
	return &o, nil
}

// appendInt64s appends vs as little-endian int64s.
func appendInt64s(dst []byte, vs []int64) []byte {
	dst = slices.Grow(dst, 8*len(vs))
	for _, v := range vs {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
	}
	return dst
}

// Select names the bytes one GET destination receives.
//
// Member is a member's name, or "" for the payload itself. A member's
// bytes are its parts in order, concatenated: Data, then Offsets (ragged)
// or Indices (sparse); Offset and Length are a byte range of that
// concatenation (of the payload for ""), and Length 0 means up to its end.
// A selection that names no member or reaches past the end is an
// ErrSelect.
type Select struct {
	// Member names the member ("" for the payload).
	Member string
	// Offset and Length are the byte range of the member's bytes (Length
	// 0: to the end).
	Offset, Length uint64
}

// wholePayload is what an empty selection list stands for.
var wholePayload = []Select{{}}

// Sizes returns the length each destination of a GET with sel needs under
// manifest m: len(dst[i]) must equal Sizes(m, sel)[i]. An empty sel
// stands for the whole payload (one destination of m.PayloadBytes bytes).
func Sizes(m *Manifest, sel []Select) ([]int, error) {
	if len(sel) == 0 {
		sel = wholePayload
	}
	out := make([]int, len(sel))
	for i, s := range sel {
		n, err := selectionSize(m, i, s)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// selectionSize returns the bytes selection i takes.
func selectionSize(m *Manifest, i int, s Select) (int, error) {
	total := m.PayloadBytes
	if s.Member != "" {
		mem, ok := m.Member(s.Member)
		if !ok {
			return 0, &SelectError{Index: i, Member: s.Member, Reason: "no such member"}
		}
		total = mem.Bytes()
	}
	if s.Offset > total {
		return 0, &SelectError{Index: i, Member: s.Member, Reason: fmt.Sprintf("offset %d past the end (%d bytes)", s.Offset, total)}
	}
	n := s.Length
	if n == 0 {
		n = total - s.Offset
	}
	if n > total-s.Offset {
		return 0, &SelectError{Index: i, Member: s.Member,
			Reason: fmt.Sprintf("range [%d,+%d) past the end (%d bytes)", s.Offset, s.Length, total)}
	}
	if n > math.MaxInt {
		return 0, &SelectError{Index: i, Member: s.Member, Reason: fmt.Sprintf("%d bytes do not fit an int", n)}
	}
	return int(n), nil
}

// segment is one contiguous piece of a transfer: len(mem) bytes at
// remote (an offset in the owner's region for a READ, in the payload for
// a WRITE) to or from mem.
type segment struct {
	remote uint64
	mem    []byte
}

// appendSelection appends the segments of selection i, landing in dst,
// with payload offsets moved by base. dst must have the selection's
// length (checked here).
func appendSelection(segs []segment, m *Manifest, i int, s Select, dst []byte, base uint64) ([]segment, error) {
	n, err := selectionSize(m, i, s)
	if err != nil {
		return segs, err
	}
	if len(dst) != n {
		return segs, &SelectError{Index: i, Member: s.Member, Reason: fmt.Sprintf("destination of %d bytes, selection of %d", len(dst), n)}
	}
	if n == 0 {
		return segs, nil
	}
	if s.Member == "" {
		return append(segs, segment{remote: base + s.Offset, mem: dst}), nil
	}
	mem, _ := m.Member(s.Member)
	parts := [2]Part{mem.Data}
	np := 1
	switch mem.Kind {
	case KindRagged:
		parts[1], np = mem.Offsets, 2
	case KindSparseCOO:
		parts[1], np = mem.Indices, 2
	}
	lo, hi := s.Offset, s.Offset+uint64(n) // in the concatenation
	var at, pos uint64                     // start of the part in it, bytes of dst filled
	for _, p := range parts[:np] {
		a, b := max(lo, at), min(hi, at+p.Length)
		if a < b {
			segs = append(segs, segment{remote: base + p.Offset + (a - at), mem: dst[pos : pos+(b-a)]})
			pos += b - a
		}
		at += p.Length
	}
	return segs, nil
}

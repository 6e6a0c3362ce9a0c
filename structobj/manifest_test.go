package structobj

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	update       = flag.Bool("update", false, "rewrite the golden files in testdata")
	manifestSeed = flag.Uint64("manifest.seed", 0, "seed for the randomized manifest tests (0: from the clock)")
)

// manifestRand returns a generator from a logged seed.
func manifestRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *manifestSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -manifest.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
}

// baseManifest is a small valid manifest with one member of each kind.
func baseManifest() *Manifest {
	return &Manifest{
		Meta: []KV{{"format", "scatterkit"}, {"step", "1200"}},
		Members: []Member{
			// reach: 1*16 + 2*4 + 4 = 28 bytes of 32
			{Name: "weights", Kind: KindTensor, DType: DTypeFloat32, Shape: []int64{2, 3}, Strides: []int64{16, 4},
				Data: Part{0, 32}},
			{Name: "grid", Kind: KindNDArray, DType: DTypeInt16, Shape: []int64{2, 2}, Order: OrderF, Data: Part{32, 8}},
			{Name: "blob", Kind: KindBytes, Data: Part{40, 5}},
			{Name: "tokens", Kind: KindRagged, DType: DTypeInt32, Shape: []int64{2}, Data: Part{48, 12},
				Offsets: Part{64, 24}},
			{Name: "update", Kind: KindSparseCOO, DType: DTypeBFloat16, Shape: []int64{4, 5}, NNZ: 2,
				Data: Part{88, 4}, Indices: Part{96, 32}},
		},
		PayloadBytes: 128,
	}
}

// cloneManifest deep-copies the exported fields of m.
func cloneManifest(m *Manifest) *Manifest {
	c := &Manifest{Meta: slices.Clone(m.Meta), PayloadBytes: m.PayloadBytes}
	for _, mem := range m.Members {
		mem.Shape = slices.Clone(mem.Shape)
		mem.Strides = slices.Clone(mem.Strides)
		c.Members = append(c.Members, mem)
	}
	return c
}

// diffManifests returns the first difference between the exported fields
// of a and b, treating nil and empty slices alike, or "".
func diffManifests(a, b *Manifest) string {
	if a.PayloadBytes != b.PayloadBytes {
		return fmt.Sprintf("PayloadBytes %d != %d", a.PayloadBytes, b.PayloadBytes)
	}
	if !slices.Equal(a.Meta, b.Meta) {
		return fmt.Sprintf("Meta %q != %q", a.Meta, b.Meta)
	}
	if len(a.Members) != len(b.Members) {
		return fmt.Sprintf("%d members != %d", len(a.Members), len(b.Members))
	}
	for i := range a.Members {
		x, y := a.Members[i], b.Members[i]
		if !slices.Equal(x.Shape, y.Shape) || !slices.Equal(x.Strides, y.Strides) {
			return fmt.Sprintf("Members[%d] shape %v strides %v != shape %v strides %v", i, x.Shape, x.Strides, y.Shape, y.Strides)
		}
		x.Shape, x.Strides, y.Shape, y.Strides = nil, nil, nil, nil
		if !reflect.DeepEqual(x, y) {
			return fmt.Sprintf("Members[%d] %+v != %+v", i, x, y)
		}
	}
	return ""
}

var nameWords = []string{"weights", "größe", "张量", "emb/layer 3", "a", "k_proj.bias", "Ω", "rows-of-tokens", "😀"}

// genManifest returns a random valid manifest of n members (every kind) and
// meta metadata entries, its parts placed in shuffled order with gaps.
func genManifest(r *rand.Rand, n, meta int) *Manifest {
	m := &Manifest{}
	for i := range meta {
		v := make([]byte, r.IntN(24))
		for k := range v {
			v[k] = byte(r.Uint32())
		}
		m.Meta = append(m.Meta, KV{Key: fmt.Sprintf("%s#%d", nameWords[r.IntN(len(nameWords))], i), Value: string(v)})
	}
	type slot struct {
		part *Part
		n    uint64
	}
	var slots []slot
	m.Members = make([]Member, n)
	for i := range m.Members {
		mem := &m.Members[i]
		mem.Name = fmt.Sprintf("%s.%d", nameWords[r.IntN(len(nameWords))], i)
		mem.Kind = Kind(1 + r.IntN(5))
		if mem.Kind != KindBytes {
			mem.DType = DType(1 + r.IntN(13))
		}
		size := uint64(mem.DType.Size())
		shape := func(nd, maxDim int) []int64 {
			var s []int64
			for range nd {
				s = append(s, int64(r.IntN(maxDim+1)))
			}
			return s
		}
		switch mem.Kind {
		case KindTensor:
			mem.Shape = shape(r.IntN(5), 5)
			mem.Strides = make([]int64, len(mem.Shape))
			extent := size // the reach of the axes nested so far
			for _, a := range r.Perm(len(mem.Shape)) {
				if mem.Shape[a] <= 1 {
					mem.Strides[a] = int64(r.IntN(100)) // any stride on an axis of extent <= 1
					continue
				}
				s := extent + uint64(r.IntN(3))*size // with padding
				mem.Strides[a] = int64(s)
				extent += uint64(mem.Shape[a]-1) * s
			}
			slots = append(slots, slot{&mem.Data, tensorReachOK(mem.Shape, mem.Strides, size) + uint64(r.IntN(8))})
		case KindNDArray:
			mem.Shape = shape(r.IntN(4), 4)
			mem.Order = []byte{OrderC, OrderF}[r.IntN(2)]
			count, _ := shapeElements(mem.Shape)
			slots = append(slots, slot{&mem.Data, count * size})
		case KindBytes:
			slots = append(slots, slot{&mem.Data, uint64(r.IntN(40))})
		case KindRagged:
			rows := r.IntN(5)
			mem.Shape = []int64{int64(rows)}
			slots = append(slots, slot{&mem.Data, uint64(r.IntN(20)) * size}, slot{&mem.Offsets, 8 * uint64(rows+1)})
		case KindSparseCOO:
			mem.Shape = shape(1+r.IntN(3), 9)
			for k := range mem.Shape {
				mem.Shape[k]++
			}
			mem.NNZ = int64(r.IntN(6))
			slots = append(slots, slot{&mem.Data, uint64(mem.NNZ) * size},
				slot{&mem.Indices, uint64(mem.NNZ) * 8 * uint64(len(mem.Shape))})
		}
	}
	var at uint64
	for _, k := range r.Perm(len(slots)) {
		at += uint64(r.IntN(8))
		*slots[k].part = Part{Offset: at, Length: slots[k].n}
		at += slots[k].n
	}
	m.PayloadBytes = at + uint64(r.IntN(16))
	return m
}

// tensorReachOK is the reach of a tensor view that is known to be valid, or
// 0 when it has no elements.
func tensorReachOK(shape, strides []int64, size uint64) uint64 {
	reach := size
	for a, d := range shape {
		if d == 0 {
			return 0
		}
		reach += uint64(d-1) * uint64(strides[a])
	}
	return reach
}

// mustEncode encodes m or fails the test.
func mustEncode(t testing.TB, m *Manifest) []byte {
	t.Helper()
	b, err := AppendManifest(nil, m)
	if err != nil {
		t.Fatalf("AppendManifest: %v", err)
	}
	return b
}

// requireRoundTrip checks that m validates, encodes, decodes (fresh and into
// dst) to an equal manifest that re-encodes to the same bytes.
func requireRoundTrip(t *testing.T, m *Manifest, dst *Manifest) {
	t.Helper()
	if err := m.Validate(Limits{}); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	b := mustEncode(t, m)
	for _, into := range []*Manifest{{}, dst} {
		if err := DecodeManifest(into, b, Limits{}); err != nil {
			t.Fatalf("DecodeManifest: %v", err)
		}
		if d := diffManifests(m, into); d != "" {
			t.Fatalf("decoded manifest differs: %s", d)
		}
		if err := into.Validate(Limits{}); err != nil {
			t.Fatalf("decoded manifest fails Validate: %v", err)
		}
		again := mustEncode(t, into)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, b)
		}
	}
}

func TestManifestRoundTrip(t *testing.T) {
	r := manifestRand(t)
	var dst Manifest // reused across cases: bigger and smaller manifests
	for _, c := range []struct{ members, meta, reps int }{
		{0, 0, 1}, {1, 0, 50}, {5, 3, 200}, {40, 10, 50}, {2000, 200, 2}, {3, 0, 50},
	} {
		t.Run(fmt.Sprintf("members=%d,meta=%d", c.members, c.meta), func(t *testing.T) {
			for range c.reps {
				requireRoundTrip(t, genManifest(r, c.members, c.meta), &dst)
			}
		})
	}
}

func TestManifestValidateAccepts(t *testing.T) {
	cases := []struct {
		name string
		m    *Manifest
	}{
		{"empty", &Manifest{}},
		{"empty payload with parts", &Manifest{Members: []Member{{Name: "e", Kind: KindBytes}}}},
		{"empty part at the payload's end", &Manifest{PayloadBytes: 10, Members: []Member{
			{Name: "a", Kind: KindBytes, Data: Part{0, 10}}, {Name: "b", Kind: KindBytes, Data: Part{10, 0}}}}},
		{"empty parts at one offset", &Manifest{PayloadBytes: 10, Members: []Member{
			{Name: "a", Kind: KindBytes, Data: Part{3, 0}}, {Name: "b", Kind: KindBytes, Data: Part{3, 0}},
			{Name: "c", Kind: KindBytes, Data: Part{0, 10}}}}},
		{"tensor without elements", &Manifest{Members: []Member{
			{Name: "t", Kind: KindTensor, DType: DTypeFloat64, Shape: []int64{0, 5}, Strides: []int64{0, 0}}}}},
		{"tensor broadcast axis of extent 1", &Manifest{PayloadBytes: 12, Members: []Member{
			{Name: "t", Kind: KindTensor, DType: DTypeFloat32, Shape: []int64{1, 3}, Strides: []int64{0, 4}, Data: Part{0, 12}}}}},
		{"tensor transposed", &Manifest{PayloadBytes: 24, Members: []Member{
			{Name: "t", Kind: KindTensor, DType: DTypeFloat32, Shape: []int64{3, 2}, Strides: []int64{4, 12}, Data: Part{0, 24}}}}},
		{"tensor padded rows in a larger part", &Manifest{PayloadBytes: 100, Members: []Member{
			{Name: "t", Kind: KindTensor, DType: DTypeInt32, Shape: []int64{2, 2}, Strides: []int64{64, 4}, Data: Part{4, 96}}}}},
		{"tensor scalar", &Manifest{PayloadBytes: 8, Members: []Member{
			{Name: "t", Kind: KindTensor, DType: DTypeFloat64, Data: Part{0, 8}}}}},
		{"tensor of 32 axes", &Manifest{PayloadBytes: 1 << 32, Members: []Member{func() Member {
			mem := Member{Name: "t", Kind: KindTensor, DType: DTypeUint8, Data: Part{0, 1 << 32}}
			for k := range 32 {
				mem.Shape = append(mem.Shape, 2)
				mem.Strides = append(mem.Strides, 1<<k)
			}
			return mem
		}()}}},
		{"ndarray scalar", &Manifest{PayloadBytes: 2, Members: []Member{
			{Name: "n", Kind: KindNDArray, DType: DTypeFloat16, Order: OrderC, Data: Part{0, 2}}}}},
		{"ragged without rows", &Manifest{PayloadBytes: 8, Members: []Member{
			{Name: "r", Kind: KindRagged, DType: DTypeInt64, Shape: []int64{0}, Offsets: Part{0, 8}}}}},
		{"sparse without entries", &Manifest{Members: []Member{
			{Name: "s", Kind: KindSparseCOO, DType: DTypeBool, Shape: []int64{1 << 40, 1 << 20}}}}},
		{"sparse over an empty shape without entries", &Manifest{Members: []Member{
			{Name: "s", Kind: KindSparseCOO, DType: DTypeBool, Shape: []int64{3, 0}}}}},
		{"names and metadata", &Manifest{
			Meta: []KV{{"größe", ""}, {"bin", "\x00\xff\n"}, {strings.Repeat("k", MaxNameBytes), "v"}},
			Members: []Member{{Name: "größe 张量 😀", Kind: KindBytes}, {Name: strings.Repeat("n", MaxNameBytes), Kind: KindBytes},
				{Name: "Größe 张量 😀", Kind: KindBytes}}}},
		{"base", baseManifest()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requireRoundTrip(t, c.m, &Manifest{})
		})
	}
}

// refusal is a manifest that breaks one rule of Validate.
type refusal struct {
	name   string
	mutate func(m *Manifest)
	lim    Limits
	field  string
	limit  bool // also wraps ErrManifestLimit
	noWire bool // the wire format cannot carry the defect (or carries it differently)
}

func manifestRefusals() []refusal {
	long := strings.Repeat("x", MaxNameBytes+1)
	return []refusal{
		{name: "meta count", lim: Limits{MaxMeta: 1}, field: "Meta", limit: true},
		{name: "member count", lim: Limits{MaxMembers: 4}, field: "Members", limit: true},
		{name: "meta key empty", mutate: func(m *Manifest) { m.Meta[1].Key = "" }, field: "Meta[1].Key"},
		{name: "meta key control", mutate: func(m *Manifest) { m.Meta[0].Key = "a\tb" }, field: "Meta[0].Key"},
		{name: "meta key bad UTF-8", mutate: func(m *Manifest) { m.Meta[0].Key = "a\xff" }, field: "Meta[0].Key"},
		{name: "meta key too long", mutate: func(m *Manifest) { m.Meta[0].Key = long }, field: "Meta[0].Key", noWire: true},
		{name: "meta bytes", lim: Limits{MaxMetaBytes: 20}, field: "Meta", limit: true},
		{name: "name empty", mutate: func(m *Manifest) { m.Members[0].Name = "" }, field: "Members[0].Name"},
		{name: "name unprintable", mutate: func(m *Manifest) { m.Members[2].Name = "zero\u200bwidth" }, field: "Members[2].Name"},
		{name: "name newline", mutate: func(m *Manifest) { m.Members[2].Name = "a\n" }, field: "Members[2].Name"},
		{name: "name DEL", mutate: func(m *Manifest) { m.Members[2].Name = "a\x7f" }, field: "Members[2].Name"},
		{name: "name truncated UTF-8", mutate: func(m *Manifest) { m.Members[2].Name = "张"[:2] }, field: "Members[2].Name"},
		{name: "name too long", mutate: func(m *Manifest) { m.Members[1].Name = long }, field: "Members[1].Name", noWire: true},
		{name: "kind zero", mutate: func(m *Manifest) { m.Members[0].Kind = 0 }, field: "Members[0].Kind"},
		{name: "kind unknown", mutate: func(m *Manifest) { m.Members[3].Kind = 6 }, field: "Members[3].Kind"},
		{name: "dtype none", mutate: func(m *Manifest) { m.Members[0].DType = DTypeNone }, field: "Members[0].DType"},
		{name: "dtype unknown", mutate: func(m *Manifest) { m.Members[1].DType = 14 }, field: "Members[1].DType"},
		{name: "bytes with dtype", mutate: func(m *Manifest) { m.Members[2].DType = DTypeUint8 }, field: "Members[2].DType"},
		{name: "dims limit", lim: Limits{MaxDims: 1}, field: "Members[0].Shape", limit: true},
		{name: "bytes with shape", mutate: func(m *Manifest) { m.Members[2].Shape = []int64{5} }, field: "Members[2].Shape"},
		{name: "ragged 2-d", mutate: func(m *Manifest) { m.Members[3].Shape = []int64{2, 1} }, field: "Members[3].Shape"},
		{name: "ragged 0-d", mutate: func(m *Manifest) { m.Members[3].Shape = nil }, field: "Members[3].Shape"},
		{name: "sparse 0-d", mutate: func(m *Manifest) { m.Members[4].Shape = nil }, field: "Members[4].Shape"},
		{name: "negative dim", mutate: func(m *Manifest) { m.Members[1].Shape[1] = -2 }, field: "Members[1].Shape[1]"},
		{name: "negative rows", mutate: func(m *Manifest) { m.Members[3].Shape[0] = -1 }, field: "Members[3].Shape[0]"},
		{name: "element count overflow", mutate: func(m *Manifest) { m.Members[1].Shape = []int64{1 << 32, 1 << 31} },
			field: "Members[1].Shape"},
		{name: "sparse dense shape overflow", mutate: func(m *Manifest) { m.Members[4].Shape = []int64{math.MaxInt64, 2} },
			field: "Members[4].Shape"},
		{name: "strides count", mutate: func(m *Manifest) { m.Members[0].Strides = []int64{4} }, field: "Members[0].Strides",
			noWire: true},
		{name: "negative stride", mutate: func(m *Manifest) { m.Members[0].Strides[1] = -4 }, field: "Members[0].Strides[1]"},
		{name: "ndarray strides", mutate: func(m *Manifest) { m.Members[1].Strides = []int64{2, 4} }, field: "Members[1].Strides",
			noWire: true},
		{name: "ndarray order zero", mutate: func(m *Manifest) { m.Members[1].Order = 0 }, field: "Members[1].Order"},
		{name: "ndarray order lowercase", mutate: func(m *Manifest) { m.Members[1].Order = 'c' }, field: "Members[1].Order"},
		{name: "tensor order", mutate: func(m *Manifest) { m.Members[0].Order = OrderC }, field: "Members[0].Order"},
		{name: "bytes order", mutate: func(m *Manifest) { m.Members[2].Order = OrderF }, field: "Members[2].Order"},
		{name: "ndarray nnz", mutate: func(m *Manifest) { m.Members[1].NNZ = 1 }, field: "Members[1].NNZ", noWire: true},
		{name: "sparse nnz negative", mutate: func(m *Manifest) { m.Members[4].NNZ = -1 }, field: "Members[4].NNZ"},
		{name: "sparse nnz in empty shape", mutate: func(m *Manifest) { m.Members[4].Shape[1] = 0 }, field: "Members[4].NNZ"},
		{name: "tensor offsets", mutate: func(m *Manifest) { m.Members[0].Offsets = Part{120, 8} }, field: "Members[0].Offsets",
			noWire: true},
		{name: "ragged indices", mutate: func(m *Manifest) { m.Members[3].Indices = Part{0, 0 + 1} }, field: "Members[3].Indices",
			noWire: true},
		{name: "sparse offsets", mutate: func(m *Manifest) { m.Members[4].Offsets = Part{7, 0} }, field: "Members[4].Offsets",
			noWire: true},
		{name: "data past payload", mutate: func(m *Manifest) { m.Members[2].Data = Part{126, 5} }, field: "Members[2].Data"},
		{name: "empty data past payload", mutate: func(m *Manifest) { m.Members[2].Data = Part{129, 0} }, field: "Members[2].Data"},
		{name: "data end overflows", mutate: func(m *Manifest) { m.Members[2].Data = Part{math.MaxUint64, 2} },
			field: "Members[2].Data"},
		{name: "offsets past payload", mutate: func(m *Manifest) { m.Members[3].Offsets.Offset = 120 }, field: "Members[3].Offsets"},
		{name: "indices past payload", mutate: func(m *Manifest) { m.Members[4].Indices.Offset = 100 }, field: "Members[4].Indices"},
		{name: "tensor strides overlap", mutate: func(m *Manifest) { m.Members[0].Strides = []int64{8, 4} },
			field: "Members[0].Strides[0]"},
		{name: "tensor equal strides", mutate: func(m *Manifest) { m.Members[0].Strides = []int64{4, 4} },
			field: "Members[0].Strides[1]"},
		{name: "tensor stride below element", mutate: func(m *Manifest) { m.Members[0].Strides = []int64{16, 2} },
			field: "Members[0].Strides[1]"},
		{name: "tensor broadcast", mutate: func(m *Manifest) { m.Members[0].Strides = []int64{0, 4} },
			field: "Members[0].Strides[0]"},
		{name: "tensor reach overflow", mutate: func(m *Manifest) {
			m.Members[0].Shape, m.Members[0].Strides = []int64{3, 3}, []int64{math.MaxInt64, 4}
		}, field: "Members[0].Strides"},
		{name: "tensor data short", mutate: func(m *Manifest) { m.Members[0].Data.Length = 27 }, field: "Members[0].Data"},
		{name: "ndarray data short", mutate: func(m *Manifest) { m.Members[1].Data.Length = 6 }, field: "Members[1].Data"},
		{name: "ndarray data long", mutate: func(m *Manifest) { m.Members[1].Data.Length = 10 }, field: "Members[1].Data"},
		{name: "ndarray bytes overflow", mutate: func(m *Manifest) { m.Members[1].Shape = []int64{1 << 62, 1} },
			field: "Members[1].Data"},
		{name: "ragged offsets size", mutate: func(m *Manifest) { m.Members[3].Offsets.Length = 16 }, field: "Members[3].Offsets"},
		{name: "ragged rows overflow", mutate: func(m *Manifest) { m.Members[3].Shape[0] = math.MaxInt64 },
			field: "Members[3].Offsets"},
		{name: "ragged partial element", mutate: func(m *Manifest) { m.Members[3].Data.Length = 10 }, field: "Members[3].Data"},
		{name: "sparse indices size", mutate: func(m *Manifest) { m.Members[4].Indices.Length = 24 }, field: "Members[4].Indices"},
		{name: "sparse data size", mutate: func(m *Manifest) { m.Members[4].Data.Length = 6 }, field: "Members[4].Data"},
		{name: "sparse nnz overflow", mutate: func(m *Manifest) { m.Members[4].NNZ = math.MaxInt64 }, field: "Members[4].Indices"},
		{name: "encoded size", lim: Limits{MaxBytes: 100}, field: "Manifest", limit: true, noWire: true},
		{name: "duplicate key", mutate: func(m *Manifest) { m.Meta[1].Key = "format" }, field: "Meta[1].Key"},
		{name: "duplicate name", mutate: func(m *Manifest) { m.Members[3].Name = "weights" }, field: "Members[3].Name"},
		{name: "first duplicate name", mutate: func(m *Manifest) {
			m.Members[0].Name, m.Members[1].Name, m.Members[2].Name, m.Members[3].Name = "a", "b", "b", "a"
		}, field: "Members[2].Name"},
		{name: "overlap across members", mutate: func(m *Manifest) { m.Members[2].Data = Part{30, 5} }, field: "Members[2].Data"},
		{name: "overlap at one offset", mutate: func(m *Manifest) { m.Members[2].Data = Part{0, 1} }, field: "Members[2].Data"},
		{name: "overlap inside a member", mutate: func(m *Manifest) { m.Members[3].Offsets.Offset = 52 },
			field: "Members[3].Offsets"},
		{name: "overlap behind a long part", mutate: func(m *Manifest) {
			m.Members[0].Data.Length = 128 // covers every later part; the first one it meets is grid's
		}, field: "Members[1].Data"},
	}
}

func TestManifestValidateRefusals(t *testing.T) {
	for _, c := range manifestRefusals() {
		t.Run(c.name, func(t *testing.T) {
			m := baseManifest()
			if c.mutate != nil {
				c.mutate(m)
			}
			before := cloneManifest(m)
			err := m.Validate(c.lim)
			requireManifestError(t, err, c.field, c.limit)
			if d := diffManifests(before, m); d != "" {
				t.Fatalf("Validate changed the manifest: %s", d)
			}
			if _, err := c.lim.AppendManifest(nil, m); !errors.Is(err, ErrManifest) {
				t.Fatalf("AppendManifest accepted it: %v", err)
			}
			if c.noWire {
				return
			}
			// The decoder finds the same defect in the encoded manifest.
			b := appendManifestUnchecked(nil, m)
			var dst Manifest
			err = DecodeManifest(&dst, b, c.lim)
			var we *WireError
			if !errors.As(err, &we) || !errors.Is(err, ErrManifestWire) {
				t.Fatalf("DecodeManifest: got %v, want a *WireError", err)
			}
			requireManifestError(t, err, c.field, c.limit)
			if we.Offset < 0 || we.Offset >= len(b) {
				t.Fatalf("offset %d outside the %d-byte message", we.Offset, len(b))
			}
			if d := diffManifests(&Manifest{}, &dst); d != "" {
				t.Fatalf("DecodeManifest changed dst on error: %s", d)
			}
		})
	}
}

// requireManifestError fails unless err is (or wraps) a *ManifestError for
// field, wrapping ErrManifest, and wrapping ErrManifestLimit iff limit.
func requireManifestError(t *testing.T, err error, field string, limit bool) {
	t.Helper()
	var me *ManifestError
	if !errors.Is(err, ErrManifest) || !errors.As(err, &me) {
		t.Fatalf("got %v (%T), want a *ManifestError", err, err)
	}
	if me.Field != field {
		t.Fatalf("field %q, want %q (%v)", me.Field, field, err)
	}
	if errors.Is(err, ErrManifestLimit) != limit {
		t.Fatalf("errors.Is(ErrManifestLimit) = %v, want %v (%v)", !limit, limit, err)
	}
	if me.Reason == "" || !strings.Contains(err.Error(), me.Reason) {
		t.Fatalf("error text %q lacks the reason %q", err.Error(), me.Reason)
	}
}

func TestManifestOverlapReason(t *testing.T) {
	m := baseManifest()
	m.Members[2].Data = Part{30, 5}
	err := m.Validate(Limits{})
	want := "Members[2].Data: [30, +5) overlaps Members[0].Data [0, +32)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want it to contain %q", err, want)
	}
}

func TestTensorStrides(t *testing.T) {
	cases := []struct {
		shape, strides []int64
		dtype          DType
		data           uint64
		field          string // "" when valid
	}{
		{[]int64{4, 8}, []int64{32, 4}, DTypeFloat32, 128, ""},
		{[]int64{4, 8}, []int64{4, 16}, DTypeFloat32, 128, ""},
		{[]int64{4, 8}, []int64{32, 4}, DTypeFloat32, 127, "Data"},
		{[]int64{4, 8}, []int64{28, 4}, DTypeFloat32, 128, "Strides[0]"},
		{[]int64{2, 3, 4}, []int64{4, 8, 24}, DTypeUint8, 93, ""},
		{[]int64{2, 3, 4}, []int64{4, 8, 24}, DTypeUint8, 92, "Data"},
		{[]int64{2, 3, 4}, []int64{1, 2, 6}, DTypeUint8, 24, ""},
		{[]int64{2, 3, 4}, []int64{1, 2, 5}, DTypeUint8, 24, "Strides[2]"},
		{[]int64{3, 2}, []int64{2, 3}, DTypeUint8, 8, "Strides[1]"}, // non-overlapping but not nested
		{[]int64{1, 1, 5}, []int64{0, 0, 2}, DTypeInt16, 10, ""},
		{[]int64{5, 1}, []int64{8, 1}, DTypeFloat64, 40, ""},
		{[]int64{5, 0}, []int64{0, 0}, DTypeFloat64, 0, ""},
		{[]int64{2}, []int64{0}, DTypeBool, 1, "Strides[0]"},
	}
	for i, c := range cases {
		m := &Manifest{PayloadBytes: c.data, Members: []Member{{Name: "t", Kind: KindTensor, DType: c.dtype,
			Shape: c.shape, Strides: c.strides, Data: Part{0, c.data}}}}
		err := m.Validate(Limits{})
		if c.field == "" {
			if err != nil {
				t.Errorf("case %d: %v", i, err)
			}
			continue
		}
		var me *ManifestError
		if !errors.As(err, &me) || me.Field != "Members[0]."+c.field {
			t.Errorf("case %d: got %v, want field %s", i, err, c.field)
		}
	}
}

// TestTensorStridesExhaustive checks the nesting rule against brute force:
// every small view it accepts has distinct, in-bounds element offsets, and
// every view whose nested order it rejects has axes out of nesting order.
func TestTensorStridesExhaustive(t *testing.T) {
	for d0 := int64(1); d0 <= 3; d0++ {
		for d1 := int64(1); d1 <= 3; d1++ {
			for s0 := int64(0); s0 <= 8; s0++ {
				for s1 := int64(0); s1 <= 8; s1++ {
					reach, err := tensorReach(0, []int64{d0, d1}, []int64{s0, s1}, 2)
					seen := map[int64]bool{}
					distinct := true
					var last int64
					for i := range d0 {
						for j := range d1 {
							off := i*s0 + j*s1
							for b := off; b < off+2; b++ {
								if seen[b] {
									distinct = false
								}
								seen[b] = true
							}
							last = max(last, off+2)
						}
					}
					if err == nil && (!distinct || uint64(last) != reach) {
						t.Fatalf("shape [%d %d] strides [%d %d]: accepted with reach %d, brute force: distinct %v, reach %d",
							d0, d1, s0, s1, reach, distinct, last)
					}
					if err != nil && distinct && (d0 == 1 || d1 == 1) {
						t.Fatalf("shape [%d %d] strides [%d %d]: rejected a non-overlapping view with one axis: %v",
							d0, d1, s0, s1, err)
					}
				}
			}
		}
	}
}

func TestManifestLimitsDefaults(t *testing.T) {
	got := Limits{}.withDefaults()
	if got != DefaultLimits {
		t.Fatalf("zero limits: %+v, want %+v", got, DefaultLimits)
	}
	got = Limits{MaxMembers: -1, MaxDims: 1000, MaxMeta: 3, MaxMetaBytes: 1 << 40, MaxBytes: 1 << 40}.withDefaults()
	want := Limits{MaxMembers: DefaultLimits.MaxMembers, MaxDims: 255, MaxMeta: 3, MaxMetaBytes: math.MaxUint32,
		MaxBytes: math.MaxUint32}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestManifestRaisedLimits(t *testing.T) {
	m := &Manifest{}
	for i := range 40 {
		m.Meta = append(m.Meta, KV{Key: fmt.Sprint("k", i)})
	}
	m.Members = []Member{{Name: "t", Kind: KindNDArray, DType: DTypeUint8, Order: OrderC, Shape: make([]int64, 40)}}
	if _, err := AppendManifest(nil, m); !errors.Is(err, ErrManifestLimit) {
		t.Fatalf("default limits: got %v, want ErrManifestLimit", err)
	}
	lim := Limits{MaxDims: 64}
	b, err := lim.AppendManifest(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	var got Manifest
	if err := DecodeManifest(&got, b, Limits{}); !errors.Is(err, ErrManifestLimit) {
		t.Fatalf("decode under default limits: got %v, want ErrManifestLimit", err)
	}
	if err := DecodeManifest(&got, b, lim); err != nil {
		t.Fatal(err)
	}
	if d := diffManifests(m, &got); d != "" {
		t.Fatal(d)
	}
	if err := DecodeManifest(&got, b, Limits{MaxDims: 64, MaxMeta: 39}); !errors.Is(err, ErrManifestLimit) {
		t.Fatalf("decode under MaxMeta 39: got %v, want ErrManifestLimit", err)
	}
	if err := DecodeManifest(&got, b, Limits{MaxDims: 64, MaxBytes: len(b) - 1}); !errors.Is(err, ErrManifestLimit) {
		t.Fatalf("decode under MaxBytes len-1: got %v, want ErrManifestLimit", err)
	}
}

func TestDType(t *testing.T) {
	sizes := map[DType]int{DTypeNone: 0, DTypeBool: 1, DTypeInt8: 1, DTypeInt16: 2, DTypeInt32: 4, DTypeInt64: 8,
		DTypeUint8: 1, DTypeUint16: 2, DTypeUint32: 4, DTypeUint64: 8, DTypeFloat16: 2, DTypeBFloat16: 2,
		DTypeFloat32: 4, DTypeFloat64: 8}
	for d := range 256 {
		dt := DType(d)
		want, known := sizes[dt]
		if dt.Size() != want {
			t.Errorf("%v.Size() = %d, want %d", dt, dt.Size(), want)
		}
		got, err := ParseDType(dt.String())
		if known && (err != nil || got != dt) {
			t.Errorf("ParseDType(%q) = %v, %v", dt.String(), got, err)
		}
		if !known && (err == nil || dt.String() != fmt.Sprintf("DType(%d)", d)) {
			t.Errorf("DType(%d): String %q, ParseDType error %v", d, dt.String(), err)
		}
	}
	for name, want := range map[string]DType{"float32": DTypeFloat32, "bfloat16": DTypeBFloat16, "bool": DTypeBool} {
		if got, err := ParseDType(name); err != nil || got != want {
			t.Errorf("ParseDType(%q) = %v, %v", name, got, err)
		}
	}
	for _, name := range []string{"", "half", "Float32", "f4", "float"} {
		_, err := ParseDType(name)
		var me *ManifestError
		if !errors.As(err, &me) || me.Field != "DType" || !errors.Is(err, ErrManifest) {
			t.Errorf("ParseDType(%q): got %v, want a *ManifestError on DType", name, err)
		}
	}
	for k, want := range map[Kind]string{KindTensor: "tensor", KindNDArray: "ndarray", KindBytes: "bytes",
		KindRagged: "ragged", KindSparseCOO: "sparse_coo", 0: "Kind(0)", 9: "Kind(9)"} {
		if k.String() != want {
			t.Errorf("Kind %d: %q, want %q", k, k.String(), want)
		}
	}
}

func TestMemberLookupPartsBytes(t *testing.T) {
	m := baseManifest()
	want := map[string]struct {
		parts []Part
		bytes uint64
	}{
		"weights": {[]Part{{0, 32}}, 32},
		"grid":    {[]Part{{32, 8}}, 8},
		"blob":    {[]Part{{40, 5}}, 5},
		"tokens":  {[]Part{{48, 12}, {64, 24}}, 36},
		"update":  {[]Part{{88, 4}, {96, 32}}, 36},
	}
	for name, w := range want {
		mem, ok := m.Member(name)
		if !ok || mem.Name != name {
			t.Fatalf("Member(%q) = %v, %v", name, mem, ok)
		}
		if !slices.Equal(mem.Parts(), w.parts) || mem.Bytes() != w.bytes {
			t.Errorf("%s: parts %v bytes %d, want %v %d", name, mem.Parts(), mem.Bytes(), w.parts, w.bytes)
		}
	}
	mem, _ := m.Member("grid")
	mem.Order = OrderC // the pointer is into the manifest
	if m.Members[1].Order != OrderC {
		t.Fatal("Member returned a copy")
	}
	if mem, ok := m.Member("nope"); ok || mem != nil {
		t.Fatalf("Member(nope) = %v, %v", mem, ok)
	}
}

func TestCheckRagged(t *testing.T) {
	mem := &Member{Name: "r", Kind: KindRagged, DType: DTypeInt32, Shape: []int64{3}, Data: Part{0, 40}, Offsets: Part{40, 32}}
	enc := func(vs ...int64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		return b
	}
	cases := []struct {
		name    string
		mem     *Member
		offsets []byte
		values  int64
		part    string
		index   int64 // -2: valid
	}{
		{"valid", mem, enc(0, 4, 4, 10), 10, "", -2},
		{"valid empty rows", mem, enc(0, 0, 0, 10), 10, "", -2},
		{"first not zero", mem, enc(1, 4, 4, 10), 10, "Offsets", 0},
		{"first negative", mem, enc(-1, 4, 4, 10), 10, "Offsets", 0},
		{"decreasing", mem, enc(0, 5, 4, 10), 10, "Offsets", 2},
		{"past the values", mem, enc(0, 11, 11, 10), 10, "Offsets", 1},
		{"last short", mem, enc(0, 4, 4, 9), 10, "Offsets", 3},
		{"too few bytes", mem, enc(0, 4, 10), 10, "Offsets", -1},
		{"ragged bytes", mem, enc(0, 4, 4, 10)[:31], 10, "Offsets", -1},
		{"wrong values", mem, enc(0, 4, 4, 9), 9, "Data", -1},
		{"negative values", mem, enc(0, 0, 0, 0), -1, "Data", -1},
		{"not ragged", &Member{Name: "b", Kind: KindBytes, Data: Part{0, 32}}, enc(0, 0, 0, 0), 0, "Offsets", -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.mem.CheckRagged(c.offsets, c.values)
			requireDataError(t, err, c.mem.Name, c.part, c.index)
		})
	}
	good := enc(0, 4, 4, 10)
	requireNoAllocs(t, "CheckRagged", func() {
		if mem.CheckRagged(good, 10) != nil {
			t.Fatal("CheckRagged failed")
		}
	})
}

func TestCheckSparse(t *testing.T) {
	mem := &Member{Name: "s", Kind: KindSparseCOO, DType: DTypeFloat32, Shape: []int64{4, 5}, NNZ: 3,
		Data: Part{0, 12}, Indices: Part{12, 48}}
	enc := func(vs ...int64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		return b
	}
	cases := []struct {
		name    string
		mem     *Member
		indices []byte
		index   int64 // -2: valid
	}{
		{"valid", mem, enc(0, 0, 3, 4, 1, 2), -2},
		{"valid repeats", mem, enc(1, 2, 1, 2, 1, 2), -2},
		{"row out of range", mem, enc(0, 0, 4, 0, 1, 2), 1},
		{"column out of range", mem, enc(0, 0, 3, 4, 1, 5), 2},
		{"negative", mem, enc(0, -1, 3, 4, 1, 2), 0},
		{"too few bytes", mem, enc(0, 0, 3, 4, 1), -1},
		{"too many bytes", mem, enc(0, 0, 3, 4, 1, 2, 0), -1},
		{"not sparse", &Member{Name: "n", Kind: KindNDArray, DType: DTypeUint8, Order: OrderC, Shape: []int64{48},
			Data: Part{0, 48}}, enc(0, 0, 0, 0, 0, 0), -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requireDataError(t, c.mem.CheckSparse(c.indices), c.mem.Name, "Indices", c.index)
		})
	}
	empty := &Member{Name: "e", Kind: KindSparseCOO, DType: DTypeFloat32, Shape: []int64{4}}
	if err := empty.CheckSparse(nil); err != nil {
		t.Fatalf("no entries: %v", err)
	}
	good := enc(0, 0, 3, 4, 1, 2)
	requireNoAllocs(t, "CheckSparse", func() {
		if mem.CheckSparse(good) != nil {
			t.Fatal("CheckSparse failed")
		}
	})
}

// requireDataError checks err against a *DataError at part[index]; index
// -2 means err must be nil.
func requireDataError(t *testing.T, err error, member, part string, index int64) {
	t.Helper()
	if index == -2 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var de *DataError
	if !errors.Is(err, ErrMemberData) || !errors.As(err, &de) {
		t.Fatalf("got %v, want a *DataError", err)
	}
	if de.Member != member || de.Part != part || de.Index != index || de.Reason == "" {
		t.Fatalf("got %+v, want member %q part %q index %d", de, member, part, index)
	}
}

// poolKeeps reports whether sync.Pool returns what was just put, which it
// does not reliably under the race detector: allocation counts of the pooled
// paths are then meaningless.
func poolKeeps() bool {
	var p sync.Pool
	for range 64 {
		x := new(int)
		p.Put(x)
		if p.Get() != x {
			return false
		}
	}
	return true
}

func requireNoAllocs(t *testing.T, what string, f func()) {
	t.Helper()
	if n := testing.AllocsPerRun(100, f); n != 0 {
		t.Fatalf("%s: %v allocations per run, want 0", what, n)
	}
}

func TestManifestAllocations(t *testing.T) {
	if !poolKeeps() {
		t.Skip("sync.Pool drops items in this build (race detector): allocation counts are not meaningful")
	}
	r := manifestRand(t)
	m := genManifest(r, 300, 20)
	b := mustEncode(t, m)
	var dst Manifest
	if err := DecodeManifest(&dst, b, Limits{}); err != nil {
		t.Fatal(err)
	}
	requireNoAllocs(t, "DecodeManifest of the same bytes", func() {
		if DecodeManifest(&dst, b, Limits{}) != nil {
			t.Fatal("decode failed")
		}
	})
	requireNoAllocs(t, "Validate", func() {
		if dst.Validate(Limits{}) != nil {
			t.Fatal("validate failed")
		}
	})
	buf := make([]byte, 0, len(b))
	requireNoAllocs(t, "AppendManifest", func() {
		if _, err := AppendManifest(buf[:0], &dst); err != nil {
			t.Fatal(err)
		}
	})
	last := dst.Members[len(dst.Members)-1].Name
	requireNoAllocs(t, "Member", func() {
		if _, ok := dst.Member(last); !ok {
			t.Fatal("lookup failed")
		}
	})
	// Same sizes, other strings: one block for the strings.
	m2 := cloneManifest(m)
	for i := range m2.Members {
		m2.Members[i].Name += "!"
	}
	b2 := mustEncode(t, m2)
	flip := false
	if n := testing.AllocsPerRun(100, func() {
		flip = !flip
		msg := b
		if flip {
			msg = b2
		}
		if DecodeManifest(&dst, msg, Limits{}) != nil {
			t.Fatal("decode failed")
		}
	}); n > 1 {
		t.Fatalf("alternating decodes: %v allocations per run, want at most 1", n)
	}
}

// allocatedBytes returns the bytes f allocates.
func allocatedBytes(f func()) uint64 {
	// TotalAlloc counts every goroutine's allocations (the owner tests'
	// transports may still be winding down): the least of a few runs is
	// f's own.
	least := uint64(math.MaxUint64)
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

func TestDecodeManifestHugeCounts(t *testing.T) {
	// Headers claiming many entries and members, with few bytes behind them.
	for _, c := range []struct {
		meta, members uint32
		lim           Limits
	}{
		{math.MaxUint32, math.MaxUint32, Limits{}},
		{0, 1 << 25, Limits{MaxMembers: 1 << 30}},
		{1 << 25, 0, Limits{MaxMeta: 1 << 30}},
		{1 << 24, 1 << 24, Limits{MaxMeta: 1 << 30, MaxMembers: 1 << 30}},
		{0, 1 << 16, Limits{}},
	} {
		b := make([]byte, manifestHeaderSize+64)
		copy(b, "SKOM")
		b[4] = ManifestVersion
		binary.LittleEndian.PutUint32(b[manifestOffMetaCount:], c.meta)
		binary.LittleEndian.PutUint32(b[manifestOffMemberCount:], c.members)
		b = repairManifest(b)
		var dst Manifest
		var err error
		n := allocatedBytes(func() { err = DecodeManifest(&dst, b, c.lim) })
		if !errors.Is(err, ErrManifestWire) {
			t.Fatalf("counts %d/%d: got %v", c.meta, c.members, err)
		}
		if n > 4096 {
			t.Errorf("counts %d/%d: allocated %d bytes to reject a %d-byte message", c.meta, c.members, n, len(b))
		}
		if a := testing.AllocsPerRun(20, func() { _ = DecodeManifest(&dst, b, c.lim) }); a > 8 {
			t.Errorf("counts %d/%d: %v allocations to reject", c.meta, c.members, a)
		}
	}
}

func TestDecodeManifestAllocationBound(t *testing.T) {
	// The most structs per byte: metadata entries of 2-byte keys and empty
	// values, and bytes members of 3-byte names and empty parts.
	m := &Manifest{PayloadBytes: 0}
	for i := range 1024 {
		m.Meta = append(m.Meta, KV{Key: string([]byte{byte('!' + i/90), byte('!' + i%90)})})
	}
	for i := range 30000 {
		m.Members = append(m.Members, Member{Name: string([]byte{byte('!' + i/8100), byte('!' + i/90%90), byte('!' + i%90)}),
			Kind: KindBytes})
	}
	b := mustEncode(t, m)
	var dst Manifest
	var err error
	n := allocatedBytes(func() { dst = Manifest{}; err = DecodeManifest(&dst, b, Limits{}) })
	if err != nil {
		t.Fatal(err)
	}
	if d := diffManifests(m, &dst); d != "" {
		t.Fatal(d)
	}
	ratio := float64(n) / float64(len(b))
	t.Logf("decoding %d bytes (%d entries, %d members) into a fresh Manifest allocated %d bytes: %.1f per byte",
		len(b), len(m.Meta), len(m.Members), n, ratio)
	if n > 10*uint64(len(b))+64<<10 {
		t.Fatalf("allocated %d bytes for a %d-byte message", n, len(b))
	}
}

func TestDecodeManifestReuse(t *testing.T) {
	r := manifestRand(t)
	var dst Manifest
	for _, n := range []int{50, 3, 80, 0, 10} {
		m := genManifest(r, n, n/3)
		if err := DecodeManifest(&dst, mustEncode(t, m), Limits{}); err != nil {
			t.Fatal(err)
		}
		if d := diffManifests(m, &dst); d != "" {
			t.Fatalf("%d members: %s", n, d)
		}
		// Shapes do not share capacity: appending to one leaves the next.
		for i := range dst.Members {
			s := dst.Members[i].Shape
			if cap(s) != len(s) || cap(dst.Members[i].Strides) != len(dst.Members[i].Strides) {
				t.Fatalf("member %d: shape or strides with spare capacity", i)
			}
		}
	}
}

func TestDecodeManifestErrorLeavesDst(t *testing.T) {
	good := mustEncode(t, baseManifest())
	bad := baseManifest()
	bad.Members[2].Data = Part{30, 5} // overlap: found after everything is scanned
	badEnc := appendManifestUnchecked(nil, bad)
	var dst Manifest
	if err := DecodeManifest(&dst, good, Limits{}); err != nil {
		t.Fatal(err)
	}
	snap := cloneManifest(&dst)
	if err := DecodeManifest(&dst, badEnc, Limits{}); !errors.Is(err, ErrManifest) {
		t.Fatalf("got %v, want ErrManifest", err)
	}
	if d := diffManifests(snap, &dst); d != "" {
		t.Fatalf("dst changed: %s", d)
	}
}

// memberRecordOffset returns where member j's record starts in an encoding
// of m.
func memberRecordOffset(m *Manifest, j int) int {
	off := manifestHeaderSize
	for _, kv := range m.Meta {
		off += 1 + len(kv.Key) + 4 + len(kv.Value)
	}
	for _, mem := range m.Members[:j] {
		off += memberWireSize(len(mem.Name), mem.Kind, len(mem.Shape))
	}
	return off
}

func TestDecodeManifestRefusals(t *testing.T) {
	base := baseManifest()
	good := mustEncode(t, base)
	rec2 := memberRecordOffset(base, 2) // "blob", a bytes member
	type edit struct {
		name    string
		edit    func(b []byte) []byte
		repair  bool // fix length and checksum after the edit
		offset  int  // -1: any
		version bool
		limit   bool
		lim     Limits
	}
	set := func(off int, v byte) func([]byte) []byte {
		return func(b []byte) []byte { b[off] = v; return b }
	}
	xor := func(off int) func([]byte) []byte {
		return func(b []byte) []byte { b[off] ^= 0xff; return b }
	}
	u32 := func(off int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], v); return b }
	}
	edits := []edit{
		{name: "magic 0", edit: xor(0), offset: 0},
		{name: "magic 3", edit: xor(3), offset: 0},
		{name: "version 0", edit: set(4, 0), offset: 4, version: true},
		{name: "version 2", edit: set(4, 2), offset: 4, version: true},
		{name: "reserved 5", edit: set(5, 1), offset: 5, repair: true},
		{name: "reserved 7", edit: set(7, 0x80), offset: 7, repair: true},
		{name: "length short", edit: u32(manifestOffLength, uint32(len(good)-1)), offset: len(good) - 1},
		{name: "length long", edit: u32(manifestOffLength, uint32(len(good)+1)), offset: len(good)},
		{name: "checksum", edit: xor(manifestOffCRC + 2), offset: manifestOffCRC},
		{name: "payload flipped", edit: xor(manifestOffPayload + 3), offset: manifestOffCRC},
		{name: "trailing byte", edit: func(b []byte) []byte { return append(b, 0) }, offset: len(good)},
		{name: "trailing byte, repaired", edit: func(b []byte) []byte { return append(b, 0) }, repair: true,
			offset: len(good)},
		{name: "one member fewer", edit: u32(manifestOffMemberCount, 4), repair: true, offset: memberRecordOffset(base, 4)},
		{name: "one member more", edit: u32(manifestOffMemberCount, 6), repair: true, offset: -1},
		{name: "one entry more", edit: u32(manifestOffMetaCount, 3), repair: true, offset: -1},
		{name: "meta count over limit", edit: u32(manifestOffMetaCount, math.MaxUint32), repair: true,
			offset: manifestOffMetaCount, limit: true},
		{name: "member count over limit", edit: u32(manifestOffMemberCount, 1<<17), repair: true,
			offset: manifestOffMemberCount, limit: true},
		{name: "counts over the bytes", edit: u32(manifestOffMemberCount, 1<<16), repair: true,
			offset: manifestOffMetaCount},
		{name: "kind unknown", edit: set(rec2+1+4, 0x17), repair: true, offset: rec2},
		{name: "name length zero", edit: set(rec2, 0), repair: true, offset: -1},
		{name: "name length long", edit: set(rec2, 0xff), repair: true, offset: -1},
		{name: "ndim", edit: set(rec2+1+4+3, 1), repair: true, offset: -1},
		{name: "over MaxBytes", edit: func(b []byte) []byte { return b }, lim: Limits{MaxBytes: len(good) - 1}, offset: 0,
			limit: true},
		{name: "empty", edit: func([]byte) []byte { return nil }, offset: 0},
		{name: "magic only", edit: func(b []byte) []byte { return b[:4] }, offset: 4},
		{name: "header only", edit: func(b []byte) []byte { return b[:manifestHeaderSize] }, repair: true, offset: -1},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			b := e.edit(bytes.Clone(good))
			if e.repair {
				b = repairManifest(b)
			}
			var dst Manifest
			err := DecodeManifest(&dst, b, e.lim)
			var we *WireError
			if !errors.Is(err, ErrManifestWire) || !errors.As(err, &we) {
				t.Fatalf("got %v, want a *WireError", err)
			}
			if e.offset >= 0 && we.Offset != e.offset {
				t.Fatalf("offset %d, want %d (%v)", we.Offset, e.offset, err)
			}
			if errors.Is(err, ErrManifestVersion) != e.version || errors.Is(err, ErrManifestLimit) != e.limit {
				t.Fatalf("%v: version %v limit %v, want %v %v", err, errors.Is(err, ErrManifestVersion),
					errors.Is(err, ErrManifestLimit), e.version, e.limit)
			}
			if !strings.HasPrefix(err.Error(), "structobj: decode manifest at offset ") {
				t.Fatalf("error text %q", err)
			}
		})
	}
}

func TestDecodeManifestTruncations(t *testing.T) {
	for _, g := range manifestGoldenCases() {
		b := mustEncode(t, g.m)
		var dst Manifest
		for n := range len(b) {
			err := DecodeManifest(&dst, b[:n], Limits{})
			if !errors.Is(err, ErrManifestWire) {
				t.Fatalf("%s: %d of %d bytes: got %v", g.name, n, len(b), err)
			}
			// With length and checksum repaired the cut is still found.
			if err := DecodeManifest(&dst, repairManifest(b[:n]), Limits{}); !errors.Is(err, ErrManifestWire) {
				t.Fatalf("%s: %d of %d bytes, repaired: got %v", g.name, n, len(b), err)
			}
		}
	}
}

func TestDecodeManifestEveryByteFlip(t *testing.T) {
	// Flipping any bit of a message is caught: by the checksum, or, with the
	// checksum repaired, either refused or decoded to another valid
	// manifest that re-encodes to the flipped bytes.
	b := mustEncode(t, baseManifest())
	var dst Manifest
	for i := range len(b) {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			if err := DecodeManifest(&dst, c, Limits{}); err == nil {
				t.Fatalf("byte %d bit %d: flip accepted", i, bit)
			}
			if i >= manifestOffLength && i < manifestOffCRC+4 {
				continue
			}
			c = repairManifest(c)
			err := DecodeManifest(&dst, c, Limits{})
			if err != nil {
				if !errors.Is(err, ErrManifestWire) {
					t.Fatalf("byte %d bit %d: %v", i, bit, err)
				}
				continue
			}
			if again := mustEncode(t, &dst); !bytes.Equal(again, c) {
				t.Fatalf("byte %d bit %d: accepted, re-encodes differently", i, bit)
			}
		}
	}
}

// manifestGolden is one manifest kept byte for byte in testdata.
type manifestGolden struct {
	name, desc string
	m          *Manifest
}

func manifestGoldenCases() []manifestGolden {
	return []manifestGolden{
		{"manifest-tensor", "a bfloat16 [4, 8] tensor viewed column-major (strides 2, 8 bytes), one metadata entry",
			&Manifest{Meta: []KV{{"framework", "torch"}}, PayloadBytes: 64, Members: []Member{
				{Name: "attn.weight", Kind: KindTensor, DType: DTypeBFloat16, Shape: []int64{4, 8}, Strides: []int64{2, 8},
					Data: Part{0, 64}}}}},
		{"manifest-ndarray", "a C-order float64 [2, 3] array after 64 bytes of padding",
			&Manifest{PayloadBytes: 112, Members: []Member{
				{Name: "grid", Kind: KindNDArray, DType: DTypeFloat64, Shape: []int64{2, 3}, Order: OrderC, Data: Part{64, 48}}}}},
		{"manifest-bytes", "17 opaque bytes, metadata with an empty value",
			&Manifest{Meta: []KV{{"schema", "v2"}, {"note", ""}}, PayloadBytes: 17, Members: []Member{
				{Name: "config.json", Kind: KindBytes, Data: Part{0, 17}}}}},
		{"manifest-ragged", "3 rows of int32 tokens: 10 values, then 4 offsets",
			&Manifest{PayloadBytes: 72, Members: []Member{
				{Name: "tokens", Kind: KindRagged, DType: DTypeInt32, Shape: []int64{3}, Data: Part{0, 40},
					Offsets: Part{40, 32}}}}},
		{"manifest-sparse-coo", "3 float32 updates of a [1000, 64] matrix: indices, then values",
			&Manifest{PayloadBytes: 60, Members: []Member{
				{Name: "delta", Kind: KindSparseCOO, DType: DTypeFloat32, Shape: []int64{1000, 64}, NNZ: 3,
					Data: Part{48, 12}, Indices: Part{0, 48}}}}},
		{"manifest-mixed", "one member of each kind and two metadata entries", baseManifest()},
		{"manifest-empty", "no metadata, no members, an empty payload", &Manifest{}},
	}
}

func TestManifestGolden(t *testing.T) {
	for _, g := range manifestGoldenCases() {
		t.Run(g.name, func(t *testing.T) {
			b := mustEncode(t, g.m)
			text := annotateManifest(b, g.name, g.desc)
			binPath, txtPath := filepath.Join("testdata", g.name+".bin"), filepath.Join("testdata", g.name+".txt")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(binPath, b, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(txtPath, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantBin, err := os.ReadFile(binPath)
			if err != nil {
				t.Fatalf("%v (run go test -run ManifestGolden -update to create it)", err)
			}
			wantTxt, err := os.ReadFile(txtPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(wantBin, b) {
				t.Fatalf("encoding drifted from %s:\n got %x\nwant %x", binPath, b, wantBin)
			}
			if string(wantTxt) != text {
				t.Fatalf("annotation drifted from %s:\n%s", txtPath, text)
			}
			var got Manifest
			if err := DecodeManifest(&got, wantBin, Limits{}); err != nil {
				t.Fatal(err)
			}
			if d := diffManifests(g.m, &got); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// manifestDumper writes one annotated line per field. It reads the format
// independently of the decoder, so that a golden file documents the layout
// rather than echoing the encoder.
type manifestDumper struct {
	b   []byte
	off int
	sb  strings.Builder
}

func (d *manifestDumper) take(n int) uint64 {
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(d.b[d.off+i])
	}
	return v
}

func (d *manifestDumper) field(n int, format string, args ...any) {
	var hex []string
	for i := range n {
		hex = append(hex, fmt.Sprintf("%02x", d.b[d.off+i]))
	}
	h := strings.Join(hex, " ")
	if n > 8 {
		h = strings.Join(hex[:8], " ") + " ..."
	}
	fmt.Fprintf(&d.sb, "%06x  %-27s  %s\n", d.off, h, fmt.Sprintf(format, args...))
	d.off += n
}

func (d *manifestDumper) u(n int, name string) uint64 {
	v := d.take(n)
	d.field(n, "%s = %d", name, v)
	return v
}

func (d *manifestDumper) i64(name string) {
	d.field(8, "%s = %d", name, int64(d.take(8)))
}

func (d *manifestDumper) str(n int, name string) {
	d.field(n, "%s = %q", name, d.b[d.off:d.off+n])
}

// annotateManifest renders an encoded manifest as an annotated hex dump.
func annotateManifest(b []byte, name, desc string) string {
	d := &manifestDumper{b: b}
	fmt.Fprintf(&d.sb, "# %s: %s\n# %d bytes; offset, bytes (little-endian), field\n# header\n", name, desc, len(b))
	d.str(4, "magic")
	d.u(1, "version")
	d.u(3, "reserved")
	d.u(4, "length")
	d.field(4, "crc32c = 0x%08x", d.take(4))
	d.u(8, "payload bytes")
	nm := int(d.u(4, "metadata entries M"))
	nn := int(d.u(4, "members N"))
	for i := range nm {
		fmt.Fprintf(&d.sb, "# metadata entry %d\n", i)
		k := int(d.u(1, "key length"))
		d.str(k, "key")
		v := int(d.u(4, "value length"))
		if v > 0 {
			d.str(v, "value")
		}
	}
	for j := range nn {
		fmt.Fprintf(&d.sb, "# member %d\n", j)
		n := int(d.u(1, "name length"))
		d.str(n, "name")
		kind := Kind(d.take(1))
		d.field(1, "kind = %d (%s)", kind, kind)
		dt := DType(d.take(1))
		d.field(1, "dtype = %d (%s)", dt, dt)
		if o := d.take(1); o != 0 {
			d.field(1, "order = %q", rune(o))
		} else {
			d.field(1, "order = 0")
		}
		nd := int(d.u(1, "dimensions D"))
		for k := range nd {
			d.i64(fmt.Sprintf("shape[%d]", k))
		}
		if kind == KindTensor {
			for k := range nd {
				d.i64(fmt.Sprintf("strides[%d]", k))
			}
		}
		if kind == KindSparseCOO {
			d.i64("nnz")
		}
		d.u(8, "data offset")
		d.u(8, "data length")
		switch kind {
		case KindRagged:
			d.u(8, "offsets offset")
			d.u(8, "offsets length")
		case KindSparseCOO:
			d.u(8, "indices offset")
			d.u(8, "indices length")
		}
	}
	return d.sb.String()
}

func ExampleDecodeManifest() {
	m := &Manifest{
		Meta:         []KV{{"step", "1200"}},
		PayloadBytes: 96,
		Members: []Member{
			{Name: "w", Kind: KindNDArray, DType: DTypeFloat32, Shape: []int64{4, 4}, Order: OrderC, Data: Part{0, 64}},
			{Name: "tokens", Kind: KindRagged, DType: DTypeInt16, Shape: []int64{1}, Data: Part{64, 8}, Offsets: Part{80, 16}},
		},
	}
	b, err := AppendManifest(nil, m)
	if err != nil {
		panic(err)
	}
	var got Manifest
	if err := DecodeManifest(&got, b, Limits{}); err != nil {
		panic(err)
	}
	tokens, _ := got.Member("tokens")
	fmt.Println(len(b), "bytes;", tokens.Kind, tokens.DType, tokens.Parts())

	got.Members[0].Data.Length = 60 // not 16 float32s
	fmt.Println(got.Validate(Limits{}))
	// Output:
	// 134 bytes; ragged int16 [{64 8} {80 16}]
	// structobj: invalid manifest: Members[0].Data: 60 bytes, 16 elements of float32 need 64
}

// benchManifests returns a 1000-member manifest with its parts in shuffled
// payload order, and the same with its parts laid out in member order (as a
// writer usually places them).
func benchManifests(b *testing.B) map[string]*Manifest {
	r := rand.New(rand.NewPCG(1, 2))
	shuffled := genManifest(r, 1000, 16)
	inOrder := cloneManifest(shuffled)
	var at uint64
	for i := range inOrder.Members {
		mem := &inOrder.Members[i]
		for _, p := range []*Part{&mem.Data, &mem.Offsets, &mem.Indices} {
			if *p != (Part{}) || p == &mem.Data {
				p.Offset = at
				at += p.Length
			}
		}
	}
	inOrder.PayloadBytes = at
	return map[string]*Manifest{"shuffled": shuffled, "in-order": inOrder}
}

func BenchmarkDecodeManifest(b *testing.B) {
	for name, m := range benchManifests(b) {
		b.Run(name, func(b *testing.B) {
			enc := mustEncode(b, m)
			var dst Manifest
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				if err := DecodeManifest(&dst, enc, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(m.Members)), "ns/member")
		})
	}
}

func BenchmarkAppendManifest(b *testing.B) {
	for name, m := range benchManifests(b) {
		b.Run(name, func(b *testing.B) {
			buf := make([]byte, 0, len(mustEncode(b, m)))
			b.SetBytes(int64(cap(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := AppendManifest(buf[:0], m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(m.Members)), "ns/member")
		})
	}
}

package ucx

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/scatterkit/scatterkit/verbs"
)

func sampleAttachment(r *rand.Rand, n int) (*Attachment, []verbs.RegionInfo) {
	blob := func(max int) []byte {
		b := make([]byte, 1+r.IntN(max))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	a := &Attachment{Worker: blob(600)}
	var regions []verbs.RegionInfo
	for i := range n {
		k := verbs.Key(r.Uint64() | 1)
		regions = append(regions, verbs.RegionInfo{Name: string(rune('a' + i%26)), Key: k, Len: 1 + r.Uint64N(1<<30), Access: verbs.AccessRemoteRead})
		a.Regions = append(a.Regions, RegionKey{Key: k, Base: r.Uint64N(1 << 46), Packed: blob(200)})
	}
	// The attachment may list them in any order.
	r.Shuffle(len(a.Regions), func(i, j int) { a.Regions[i], a.Regions[j] = a.Regions[j], a.Regions[i] })
	return a, regions
}

// TestAttachmentRoundTrip: what AppendAttachment writes decodes to the
// same attachment, for any number of regions up to the bound.
func TestAttachmentRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 5, MaxAttachRegions} {
		a, regions := sampleAttachment(r, n)
		b, err := AppendAttachment(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		var got Attachment
		if err := DecodeAttachment(&got, b, regions); err != nil {
			t.Fatalf("%d regions: %v", n, err)
		}
		if !bytes.Equal(got.Worker, a.Worker) || len(got.Regions) != len(a.Regions) {
			t.Fatalf("%d regions: decoded %d regions", n, len(got.Regions))
		}
		for i := range a.Regions {
			w, g := a.Regions[i], got.Regions[i]
			if w.Key != g.Key || w.Base != g.Base || !bytes.Equal(w.Packed, g.Packed) {
				t.Fatalf("%d regions: region %d differs", n, i)
			}
		}
	}
}

// TestAttachmentRefused: every malformed attachment is refused with an
// *AttachError that is a protocol violation, and nothing past the
// bounds is accepted from either side.
func TestAttachmentRefused(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, regions := sampleAttachment(r, 3)
	good, err := AppendAttachment(nil, a)
	if err != nil {
		t.Fatal(err)
	}
	wl := len(a.Worker)
	first := attachFixed + wl // the first region entry
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := map[string][]byte{
		"short":         good[:attachFixed-1],
		"magic":         edit(func(b []byte) []byte { b[0] ^= 1; return b }),
		"version":       edit(func(b []byte) []byte { b[4] = 9; return b }),
		"count":         edit(func(b []byte) []byte { b[6] = 2; return b }),
		"no worker":     edit(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 0); return b }),
		"huge worker":   edit(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], MaxWorkerAddress+1); return b }),
		"worker past":   edit(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], uint32(len(b))); return b }),
		"unlisted key":  edit(func(b []byte) []byte { b[first] ^= 0x80; return b }),
		"empty rkey":    edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[first+16:], 0); return b }),
		"huge rkey":     edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[first+16:], MaxPackedKey+1); return b }),
		"trailing":      append(bytes.Clone(good), 0),
		"truncated":     good[:len(good)-1],
		"wrapping base": edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[first+8:], ^uint64(0)); return b }),
	}
	// A key given twice (the second region's entry rewritten to the first's key).
	dup := *a
	dup.Regions = append([]RegionKey(nil), a.Regions...)
	dup.Regions[1].Key = dup.Regions[0].Key
	if b, err := AppendAttachment(nil, &dup); err == nil {
		cases["duplicate key"] = b
	}
	for name, b := range cases {
		var got Attachment
		err := DecodeAttachment(&got, b, regions)
		var ae *AttachError
		if !errors.As(err, &ae) || !errors.Is(err, verbs.ErrProtocol) {
			t.Errorf("%s: %v, want an *AttachError (ErrProtocol)", name, err)
		}
	}
	// The encoder refuses what the decoder would.
	for name, bad := range map[string]*Attachment{
		"no worker":  {Regions: a.Regions},
		"empty rkey": {Worker: a.Worker, Regions: []RegionKey{{Key: 1}}},
	} {
		if b, err := AppendAttachment([]byte{7}, bad); err == nil || len(b) != 1 {
			t.Errorf("AppendAttachment %s: %v (%d bytes)", name, err, len(b))
		}
	}
}

// FuzzDecodeAttachment: no input makes the decoder panic, and whatever
// it accepts re-encodes to the same bytes.
func FuzzDecodeAttachment(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	a, regions := sampleAttachment(r, 2)
	good, _ := AppendAttachment(nil, a)
	f.Add(good)
	f.Add(good[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		var got Attachment
		if DecodeAttachment(&got, b, regions) != nil {
			return
		}
		again, err := AppendAttachment(nil, &got)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %d bytes that re-encode differently (%v)", len(b), err)
		}
	})
}

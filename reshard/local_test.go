package reshard

import (
	"bytes"
	"errors"
	"testing"
)

// TestApplyRefuses: a plan whose fragments reach past a rank's memory,
// or whose regions are malformed, writes nothing.
func TestApplyRefuses(t *testing.T) {
	ok := Region{SrcOff: 0, DstOff: 8, Inner: 4, Counts: []int64{3}, SrcStrides: []int64{4}, DstStrides: []int64{8}}
	for name, rg := range map[string]Region{
		"past the destination": {SrcOff: 0, DstOff: 30, Inner: 4},
		"past the source":      {SrcOff: 62, DstOff: 0, Inner: 4},
		"negative count":       {Inner: 4, Counts: []int64{-1}, SrcStrides: []int64{4}, DstStrides: []int64{4}},
		"missing strides":      {Inner: 4, Counts: []int64{2}},
		"overflowing stride":   {Inner: 4, Counts: []int64{3}, SrcStrides: []int64{1 << 62}, DstStrides: []int64{4}},
	} {
		p := &Plan{Pairs: []Pair{{Src: 0, Dst: 0, Regions: []Region{ok, rg}}}}
		src, dst := bytes.Repeat([]byte{1}, 64), make([]byte, 32)
		err := p.Apply(func(int) []byte { return src }, func(int) []byte { return dst })
		if !errors.Is(err, ErrLayout) {
			t.Errorf("%s: %v", name, err)
		}
		if !bytes.Equal(dst, make([]byte, 32)) {
			t.Errorf("%s: bytes written", name)
		}
	}
	p := &Plan{Pairs: []Pair{{Src: 0, Dst: 0, Regions: []Region{ok}}}}
	src, dst := bytes.Repeat([]byte{1}, 64), make([]byte, 32)
	if err := p.Apply(func(int) []byte { return src }, func(int) []byte { return dst }); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 32)
	for k := range 3 {
		copy(want[8+8*k:12+8*k], src)
	}
	if !bytes.Equal(dst, want) {
		t.Fatalf("%v", dst)
	}
}

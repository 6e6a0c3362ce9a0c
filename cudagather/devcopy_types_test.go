package cudagather

import (
	"errors"
	"testing"
)

// TestCheckCopies: device copies are refused before anything is
// enqueued for negative shapes, nil addresses, pitches below the width
// and ranges past the address space; empty copies are fine.
func TestCheckCopies(t *testing.T) {
	ok := DeviceCopy{Dst: 4096, Src: 8192, DstPitch: 64, SrcPitch: 32, Width: 32, Rows: 10}
	if err := checkCopies([]DeviceCopy{ok, {Width: 0, Rows: 5}, {Dst: 1, Src: 1, Width: 100, Rows: 1}}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]DeviceCopy{
		"negative width": {Dst: 1, Src: 1, Width: -1, Rows: 1},
		"negative pitch": {Dst: 1, Src: 1, Width: 1, Rows: 2, DstPitch: -1, SrcPitch: 1},
		"nil source":     {Dst: 1, Width: 8, Rows: 1},
		"pitch < width":  {Dst: 1, Src: 1, Width: 8, Rows: 2, DstPitch: 8, SrcPitch: 4},
		"wraps":          {Dst: ^DevPtr(0) - 100, Src: 1, Width: 8, Rows: 20, DstPitch: 8, SrcPitch: 8},
		"huge":           {Dst: 1, Src: 1, Width: 8, Rows: 1 << 40, DstPitch: 1 << 40, SrcPitch: 8},
	} {
		if err := checkCopies([]DeviceCopy{ok, c}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

package prefetch

import (
	"testing"
	"unsafe"
)

// TestLines: any range, aligned or not, empty or past its slice's end,
// is only a hint: nothing faults and nothing changes.
func TestLines(t *testing.T) {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(i)
	}
	for _, off := range []int{0, 1, 63, 64, 100} {
		for _, n := range []uintptr{0, 1, 64, 65, 264, 1000} {
			Lines(unsafe.Pointer(&b[off]), n)
		}
	}
	Lines(nil, 64) // an address nothing maps
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d changed", i)
		}
	}
}

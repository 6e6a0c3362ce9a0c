package stage

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestMarkersAreProbeable checks what the profiler relies on: each marker's
// symbol has the documented name and exactly the documented code, the
// arguments loaded into AX, BX and CX and then the 5-byte NOP.
func TestMarkersAreProbeable(t *testing.T) {
	Begin(1, Pack)
	End(1, Pack, 264)
	Next(1, Pack, Post, 264)
	b, e, n := markerPCs()
	for _, m := range []struct {
		code *byte
		name string
		want []byte
	}{
		{b, "github.com/scatterkit/scatterkit/verbs/stage.begin", []byte{
			0x48, 0x8b, 0x44, 0x24, 0x08, 0x48, 0x8b, 0x5c, 0x24, 0x10, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3}},
		{e, "github.com/scatterkit/scatterkit/verbs/stage.end", []byte{
			0x48, 0x8b, 0x44, 0x24, 0x08, 0x48, 0x8b, 0x5c, 0x24, 0x10, 0x48, 0x8b, 0x4c, 0x24, 0x18,
			0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3}},
		{n, "github.com/scatterkit/scatterkit/verbs/stage.next", []byte{
			0x48, 0x8b, 0x44, 0x24, 0x08, 0x48, 0x8b, 0x5c, 0x24, 0x10, 0x48, 0x8b, 0x4c, 0x24, 0x20,
			0x48, 0x8b, 0x54, 0x24, 0x18, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3}},
	} {
		pc := uintptr(unsafe.Pointer(m.code))
		fn := runtime.FuncForPC(pc)
		require.NotNil(t, fn)
		require.Equal(t, m.name, fn.Name())
		require.Equal(t, pc, fn.Entry())
		code := unsafe.Slice(m.code, len(m.want))
		require.Equal(t, m.want, code, "%s: the probe ABI's code", m.name)
	}
}

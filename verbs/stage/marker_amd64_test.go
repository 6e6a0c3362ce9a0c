package stage

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestMarkersAreProbeable checks what the profiler relies on: each marker's
// symbol has the documented name and its first instruction is the 5-byte NOP.
func TestMarkersAreProbeable(t *testing.T) {
	Begin(1, Pack)
	End(1, Pack, 264)
	b, e := markerPCs()
	for _, m := range []struct {
		code *byte
		name string
	}{
		{b, "github.com/scatterkit/scatterkit/verbs/stage.begin"},
		{e, "github.com/scatterkit/scatterkit/verbs/stage.end"},
	} {
		pc := uintptr(unsafe.Pointer(m.code))
		fn := runtime.FuncForPC(pc)
		require.NotNil(t, fn)
		require.Equal(t, m.name, fn.Name())
		require.Equal(t, pc, fn.Entry())
		head := unsafe.Slice(m.code, 5)
		require.Equal(t, []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}, head, "%s must start with NOP5", m.name)
	}
}

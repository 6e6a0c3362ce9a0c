//go:build !linux

package costmodel

// probeBuffer allocates n bytes on the Go heap; huge-page advice is a
// Linux feature.
func probeBuffer(n int) (buf []byte, hugeAdvice bool, release func()) {
	return make([]byte, n), false, func() {}
}

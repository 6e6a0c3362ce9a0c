package costmodel

import "syscall"

// probeBuffer maps n bytes of anonymous memory and advises huge pages, so
// that first touch costs one fault per 2 MiB instead of per 4 KiB; it
// falls back to the Go heap when the mapping fails.
func probeBuffer(n int) (buf []byte, hugeAdvice bool, release func()) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n), false, func() {}
	}
	hugeAdvice = syscall.Madvise(b, syscall.MADV_HUGEPAGE) == nil
	return b, hugeAdvice, func() { _ = syscall.Munmap(b) }
}

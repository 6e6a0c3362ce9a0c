package lookup

import (
	"syscall"
	"unsafe"
)

// mapTable returns size bytes of anonymous memory, 2 MiB aligned and
// advised to use transparent huge pages (huge reports whether the advice
// was taken), or an error when the mapping fails.
func mapTable(size int) (table []byte, huge bool, err error) {
	const align = 2 << 20
	m, err := syscall.Mmap(-1, 0, size+align, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, false, err
	}
	skip := 0
	if rem := int(uintptr(unsafe.Pointer(unsafe.SliceData(m))) % align); rem != 0 {
		skip = align - rem
	}
	table = m[skip : skip+size : skip+size]
	return table, syscall.Madvise(table, syscall.MADV_HUGEPAGE) == nil, nil
}

package pack

import "unsafe"

// task is one validated run of rows for a generated loop: the non-generic
// form of a request, shared by the serial and the parallel paths. The field
// names are what cmd/packgen generates code against.
type task struct {
	packed   unsafe.Pointer // packed row 0
	table    unsafe.Pointer // table row 0
	ids      unsafe.Pointer // id of packed row 0
	n        int            // rows
	rowBytes uintptr        // bytes per row
	stride   uintptr        // bytes from one packed row to the next
	idStride uintptr        // bytes from one id to the next
	bias     int64          // subtracted from every id but -1
	wide     bool           // ids are int64, not int32
	scatter  bool           // packed -> table, not table -> packed
	anyRow   bool           // run the any-size loop even for a specialized size
}

// block returns rows [lo, lo+n) of t.
func (t *task) block(lo, n int) task {
	b := *t
	b.n = n
	if n > 0 {
		b.packed = unsafe.Add(t.packed, uintptr(lo)*t.stride)
		b.ids = unsafe.Add(t.ids, uintptr(lo)*t.idStride)
	}
	return b
}

// idPointer returns the address and element size of ids, without the bounds
// check of &ids[0].
func idPointer[I ID](ids []I) (unsafe.Pointer, uintptr) {
	var zero I
	return unsafe.Pointer(unsafe.SliceData(ids)), unsafe.Sizeof(zero)
}

func bytesPointer(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

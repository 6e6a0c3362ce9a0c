package pack

import "unsafe"

// CheckGather validates a gather of the table rows named by ids into dst
// under l, without copying anything. It returns nil exactly when [Gather]
// would succeed, and then [GatherUnchecked] may run the same request.
func CheckGather[I ID](dst, table []byte, ids []I, l Layout) error {
	_, err := checkLinear(dst, table, ids, l, false)
	return err
}

// Gather copies the table rows named by ids into dst under l: for each of
// l.Rows rows i, table row ids[i*l.IDStride]-l.Bias goes to
// dst[l.Off+i*l.Stride:], and id -1 leaves its packed row untouched. It
// validates the whole request first and writes nothing when it returns an
// error. It does not allocate.
func Gather[I ID](dst, table []byte, ids []I, l Layout) error {
	l, err := checkLinear(dst, table, ids, l, false)
	if err != nil {
		return err
	}
	t := linearTask(dst, table, ids, l, false)
	t.run()
	return nil
}

// GatherUnchecked is [Gather] without validation, for a request that passed
// [CheckGather] (or an equivalent check by the caller). A request that
// would fail the check reads or writes memory out of bounds.
func GatherUnchecked[I ID](dst, table []byte, ids []I, l Layout) {
	l = l.dense()
	if l.Rows <= 0 {
		return
	}
	t := linearTask(dst, table, ids, l, false)
	t.run()
}

// CheckScatter validates a scatter of the packed rows of src into the table
// rows named by ids under l, without copying anything. It returns nil
// exactly when [Scatter] would succeed, and then [ScatterUnchecked] may run
// the same request.
func CheckScatter[I ID](table, src []byte, ids []I, l Layout) error {
	_, err := checkLinear(src, table, ids, l, true)
	return err
}

// Scatter copies packed rows of src into the table rows named by ids under
// l: for each of l.Rows rows i, src[l.Off+i*l.Stride:] goes to table row
// ids[i*l.IDStride]-l.Bias, and id -1 leaves the table untouched. Two ids
// naming one table row are rejected. It validates the whole request first
// and writes nothing when it returns an error.
func Scatter[I ID](table, src []byte, ids []I, l Layout) error {
	l, err := checkLinear(src, table, ids, l, true)
	if err != nil {
		return err
	}
	t := linearTask(src, table, ids, l, true)
	t.run()
	return nil
}

// ScatterUnchecked is [Scatter] without validation, for a request that
// passed [CheckScatter] (or an equivalent check by the caller). A request
// that would fail the check reads or writes memory out of bounds.
func ScatterUnchecked[I ID](table, src []byte, ids []I, l Layout) {
	l = l.dense()
	if l.Rows <= 0 {
		return
	}
	t := linearTask(src, table, ids, l, true)
	t.run()
}

// CheckGatherGrid validates a grid gather without copying anything. It
// returns nil exactly when [GatherGrid] would succeed, and then
// [GatherGridUnchecked] may run the same request.
func CheckGatherGrid[I ID](dst, table []byte, ids []I, g Grid) error {
	_, err := checkGrid(dst, table, ids, g)
	return err
}

// GatherGrid copies the table rows named by a whole [T,K] id array into dst:
// id (t, k), ids[t*g.IDTStride+k*g.IDKStride], goes to
// dst[g.Off+t*g.TStride+k*g.KStride:], and id -1 leaves its output row
// untouched. It validates the whole request first and writes nothing when it
// returns an error. It does not allocate.
func GatherGrid[I ID](dst, table []byte, ids []I, g Grid) error {
	g, err := checkGrid(dst, table, ids, g)
	if err != nil {
		return err
	}
	gatherGrid(dst, table, ids, g)
	return nil
}

// GatherGridUnchecked is [GatherGrid] without validation, for a request that
// passed [CheckGatherGrid] (or an equivalent check by the caller).
func GatherGridUnchecked[I ID](dst, table []byte, ids []I, g Grid) {
	g = g.dense()
	if g.T <= 0 || g.K <= 0 {
		return
	}
	gatherGrid(dst, table, ids, g)
}

// gatherGrid runs one 1-D loop per row or column of the grid, whichever
// dimension is shorter, so that each loop runs as many rows as it can.
func gatherGrid[I ID](dst, table []byte, ids []I, g Grid) {
	idp, size := idPointer(ids)
	t := task{
		table:    bytesPointer(table),
		rowBytes: uintptr(g.RowBytes),
		bias:     g.Bias,
		wide:     size == 8,
	}
	base := unsafe.Add(bytesPointer(dst), g.Off)
	// Inner runs along the dimension with more ids.
	outer, inner := g.K, g.T
	outerStride, innerStride := g.KStride, g.TStride
	outerIDs, innerIDs := g.IDKStride, g.IDTStride
	if g.K > g.T {
		outer, inner = g.T, g.K
		outerStride, innerStride = g.TStride, g.KStride
		outerIDs, innerIDs = g.IDTStride, g.IDKStride
	}
	t.n = inner
	t.stride = uintptr(innerStride)
	t.idStride = uintptr(innerIDs) * size
	for o := range outer {
		t.packed = unsafe.Add(base, o*outerStride)
		t.ids = unsafe.Add(idp, uintptr(o*outerIDs)*size)
		t.run()
	}
}

// linearTask builds the task of a 1-D request with dense strides and at
// least one row.
func linearTask[I ID](packed, table []byte, ids []I, l Layout, scatter bool) task {
	idp, size := idPointer(ids)
	return task{
		packed:   unsafe.Add(bytesPointer(packed), l.Off),
		table:    bytesPointer(table),
		ids:      idp,
		n:        l.Rows,
		rowBytes: uintptr(l.RowBytes),
		stride:   uintptr(l.Stride),
		idStride: uintptr(l.IDStride) * size,
		bias:     l.Bias,
		wide:     size == 8,
		scatter:  scatter,
	}
}

package cudagather

// Handle-based entry points: the same lookups with only built-in types in
// their signatures, so that packages which must not import cudagather
// (engram defines the small device interface it needs) are satisfied by
// *Context without an adapter.

// MapTable makes rows a table of the context, registered host memory
// (host, zero-copy) or a device copy, and returns a handle for
// LookupTables.
func (c *Context) MapTable(rows []byte, numRows int64, rowBytes int, host bool) (uint64, error) {
	var t *Table
	var err error
	if host {
		t, err = c.RegisterHost(rows, numRows, rowBytes)
	} else {
		t, err = c.Upload(rows, numRows, rowBytes)
	}
	if err != nil {
		return 0, err
	}
	return c.addHandle(t), nil
}

// UnmapTable closes the table behind a MapTable handle.
func (c *Context) UnmapTable(h uint64) error {
	t, err := c.takeHandle(h)
	if err != nil {
		return err
	}
	return t.Close()
}

// LookupTables is Lookup with tables named by MapTable handles, one per
// column, and the request's fields as arguments (the stream, ids and
// output are raw device handles and addresses).
func (c *Context) LookupTables(stream uintptr, tables []uint64, ids uintptr, ids64 bool, t, k int,
	out uintptr, outBytes, off, tStride, kStride int64, offsets []int64, strict bool) error {
	if len(tables) > MaxColumns {
		return &ArgError{Field: "tables", Reason: "more than MaxColumns"}
	}
	var tabs [MaxColumns]*Table
	for i, h := range tables {
		tb, err := c.handle(h)
		if err != nil {
			return err
		}
		tabs[i] = tb
	}
	r := Request{Tables: tabs[:len(tables)], IDs: DevPtr(ids), IDs64: ids64, T: t, K: k, Out: DevPtr(out),
		OutBytes: outBytes, Off: off, TStride: tStride, KStride: kStride, Offsets: offsets, Strict: strict}
	return c.Lookup(Stream(stream), &r)
}

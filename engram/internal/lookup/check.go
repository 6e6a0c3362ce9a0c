package lookup

import "github.com/scatterkit/scatterkit/bufferpool/pack"

// inlineCols is the most columns whose per-call state lives on the caller's
// stack; larger calls use the engine's scratch, one at a time.
const inlineCols = 64

// Check validates a lookup of the [T,K] ids (token-major, id (t, k) is
// ids[t*K+k]) from cols into out, without writing anything: the column
// check that [Request.Check] runs once it has resolved the names, here on
// columns the caller resolved. It returns nil exactly when [Lookup] with
// the same arguments would write the output (unless the engine is
// closed). It reports the first failure of, in this order:
//
//   - [ErrShape]: T or K negative, K above MaxInt32, len(ids) != T*K or
//     len(cols) != K (a [*ShapeError]);
//   - the columns, one at a time: [ErrTable] for RowBytes below 1, a
//     negative NumRows or Rows shorter than NumRows*RowBytes, [ErrRowBytes]
//     for a RowBytes that differs from column 0's (a [*ColumnError]);
//   - [ErrOutput]: a negative offset or stride (of a dimension of two or
//     more rows), rows outside Buf, two rows that overlap, or rows that
//     overlap a table. The overlap rule is exact: any strides under which
//     no two of the T*K rows share a byte are accepted (token-major,
//     head-major, padded, tiled or interleaved) (an [*OutputError]);
//   - [ErrID]: the first id in token-major order that is neither -1 nor in
//     [Offset, Offset+NumRows) of its column, as an [*IDError].
//
// It does not allocate unless it returns an error.
func Check[I pack.ID](cols []Column, ids []I, t, k int, out Output) error {
	c := checkedOf(cols, ids, t, k, out)
	return c.check()
}

// check is the one check of every lookup, on resolved columns: the shape,
// the columns, for a remote owner's tables the arena, the output layout,
// then the ids. It sets c.rowBytes.
func (c *Checked) check() error {
	t, k := c.t, c.k
	if err := checkShape(len(c.cols), len(c.ids32)+len(c.ids64), t, k); err != nil {
		return err
	}
	remote := c.arena != nil
	rowBytes, err := checkColumns(c.cols, remote)
	if err != nil {
		return err
	}
	c.rowBytes = rowBytes
	if t == 0 || k == 0 {
		return nil
	}
	if remote {
		if c.out.DeviceLen == 0 {
			if err := checkArena(c.out.Buf, c.arena); err != nil {
				return err
			}
		}
		if c.out.TStride < 0 || c.out.KStride < 0 {
			// A remote plan's strides are unsigned, even one that is
			// not used.
			return &OutputError{T: t, K: k, RowBytes: rowBytes, Off: c.out.Off, TStride: c.out.TStride,
				KStride: c.out.KStride, Len: c.out.Len(), Reason: "negative stride (a remote lookup takes none)"}
		}
	}
	if err := checkOutput(c.out, t, k, rowBytes, c.cols, !remote); err != nil {
		return err
	}
	if c.ids64 != nil {
		return checkAllIDs(c.cols, c.ids64, t, k)
	}
	return checkAllIDs(c.cols, c.ids32, t, k)
}

// checkAllIDs checks every id; t and k are at least 1.
func checkAllIDs[I pack.ID](cols []Column, ids []I, t, k int) error {
	if k <= inlineCols {
		var bounds [inlineCols]bound
		return checkIDs(cols, ids, t, k, bounds[:k])
	}
	return checkIDs(cols, ids, t, k, nil)
}

// checkIDs checks every id against its column; t and k are at least 1.
// bounds, when it holds k entries, is scratch for the columns' bounds;
// without it the ids are read column by column.
func checkIDs[I pack.ID](cols []Column, ids []I, t, k int, bounds []bound) error {
	uniform := true
	for j := 1; j < k; j++ {
		if cols[j].Offset != cols[0].Offset || cols[j].NumRows != cols[0].NumRows {
			uniform = false
			break
		}
	}
	if uniform {
		b := columnBound(&cols[0])
		for i, id := range ids {
			if !b.has(int64(id)) && id != -1 {
				return idError(cols, i/k, i%k, int64(id))
			}
		}
		return nil
	}
	if len(bounds) == k {
		for j := range bounds {
			bounds[j] = columnBound(&cols[j])
		}
		for row := 0; row < len(ids); row += k {
			for j, id := range ids[row : row+k] {
				if !bounds[j].has(int64(id)) && id != -1 {
					return idError(cols, row/k, j, int64(id))
				}
			}
		}
		return nil
	}
	// Column by column, keeping the first bad id in token-major order.
	first := len(ids)
	for j := range k {
		b := columnBound(&cols[j])
		for i := j; i < first; i += k {
			if id := ids[i]; !b.has(int64(id)) && id != -1 {
				first = i
				break
			}
		}
	}
	if first < len(ids) {
		return idError(cols, first/k, first%k, int64(ids[first]))
	}
	return nil
}

func idError(cols []Column, t, k int, id int64) error {
	return &IDError{T: t, K: k, ID: id, Rows: cols[k].NumRows, Offset: cols[k].Offset, Table: cols[k].Name}
}

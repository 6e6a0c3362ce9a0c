package engram

import (
	"context"
	"fmt"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
)

// Lookup gathers rows into out: output row (t, k) receives row
// ids(t, k) - Offsets[k] of table tables[k]. tables holds one name per
// column (names may repeat); all of them must have out's row size. Id -1
// leaves its output row untouched. Every other id must address a row of
// its table: one that does not fails the whole call before any byte is
// written, as does any other bad argument.
//
// On a local store the lookup is synchronous: the rows are in out when it
// returns. Large lookups are split among the store's workers. Steady-state
// calls allocate nothing.
//
// On a remote store out must lie inside one buffer from NewBuffer; the
// rows go there straight from the owner, as one scatter operation per
// table (never one request per row).
func (s *Store) Lookup(tables []string, ids IDs, out Output, opts *LookupOptions) error {
	return s.LookupContext(context.Background(), tables, ids, out, opts)
}

// LookupContext is Lookup with a context bounding a remote lookup's wait
// (a local lookup does not block and ignores it).
func (s *Store) LookupContext(ctx context.Context, tables []string, ids IDs, out Output, opts *LookupOptions) error {
	var offsets []int64
	if opts != nil {
		offsets = opts.Offsets
	}
	if err := checkArgs(tables, ids, offsets); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if s.remote != nil {
		return s.lookupRemote(ctx, tables, ids, out, offsets)
	}
	sc := s.scratch.Get().(*lookupScratch)
	defer s.scratch.Put(sc)
	cols := sc.cols[:0]
	for k, name := range tables {
		t, ok := s.tables[name]
		if !ok {
			return &TableError{Table: name, Op: "lookup", Err: ErrUnknownTable}
		}
		if t.rows == nil {
			return &TableError{Table: name, Op: "lookup", Err: ErrNotPopulated}
		}
		c := lookup.Column{Rows: t.rows, NumRows: t.spec.NumRows, RowBytes: t.spec.RowBytes}
		if offsets != nil {
			c.Offset = offsets[k]
		}
		cols = append(cols, c)
	}
	sc.cols = cols
	lo := lookup.Output{Buf: out.Buf, Off: out.Off, TStride: out.TStride, KStride: out.KStride}
	if ids.I64 != nil {
		return lookup.Lookup(s.eng, cols, ids.I64, ids.T, ids.K, lo)
	}
	return lookup.Lookup(s.eng, cols, ids.I32, ids.T, ids.K, lo)
}

// checkArgs checks what does not depend on the tables.
func checkArgs(tables []string, ids IDs, offsets []int64) error {
	if ids.I32 != nil && ids.I64 != nil {
		return fmt.Errorf("%w: set one of IDs.I32 and IDs.I64", lookup.ErrShape)
	}
	if ids.T < 0 || ids.K < 0 {
		return fmt.Errorf("%w: ids shape [%d,%d]", lookup.ErrShape, ids.T, ids.K)
	}
	if len(tables) != ids.K {
		return fmt.Errorf("%w: %d table names for K=%d columns", lookup.ErrShape, len(tables), ids.K)
	}
	if offsets != nil && len(offsets) != ids.K {
		return fmt.Errorf("%w: %d offsets for K=%d columns", lookup.ErrShape, len(offsets), ids.K)
	}
	return nil
}

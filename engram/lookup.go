package engram

import (
	"context"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
	"github.com/scatterkit/scatterkit/engram/internal/remote"
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
//
// The request is checked once, in full, before anything moves (the lookup
// core's Request.Check, against the store's tables: local rows or the
// remote owner's), and the checked lookup goes to the local or the remote
// path, which check nothing again: both fail with the same errors.
func (s *Store) LookupContext(ctx context.Context, tables []string, ids IDs, out Output, opts *LookupOptions) error {
	req := lookup.Request{Tables: tables, IDs32: ids.I32, IDs64: ids.I64, T: ids.T, K: ids.K,
		Out: out.Buf, Off: out.Off, TStride: out.TStride, KStride: out.KStride}
	if opts != nil {
		req.Offsets = opts.Offsets
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	sc := s.getScratch(len(tables))
	defer s.scratch.Put(sc)
	if s.remote != nil {
		q, err := req.Check((*remoteTables)(s), sc.cols)
		if err != nil {
			s.remote.CountRejected()
			return err
		}
		return remote.Run(ctx, s.remote, &q)
	}
	q, err := req.Check((*localTables)(s), sc.cols)
	if err != nil {
		return err
	}
	return s.eng.Run(&q)
}

// localTables is a local store's tables as the lookup check resolves
// them (lookup.Tables): populated tables' mapped rows. Its methods run
// under the store's lock.
type localTables Store

func (v *localTables) Column(name string) (lookup.Column, error) {
	t, ok := v.tables[name]
	if !ok {
		return lookup.Column{}, &TableError{Table: name, Op: "lookup", Err: ErrUnknownTable}
	}
	if t.rows == nil {
		return lookup.Column{}, &TableError{Table: name, Op: "lookup", Err: ErrNotPopulated}
	}
	return lookup.Column{Rows: t.rows, NumRows: t.spec.NumRows, RowBytes: t.spec.RowBytes}, nil
}

func (v *localTables) Arena() []byte { return nil }

// getScratch takes a lookup scratch with room for k columns (put it back
// with s.scratch.Put).
func (s *Store) getScratch(k int) *lookupScratch {
	sc := s.scratch.Get().(*lookupScratch)
	if cap(sc.cols) < k {
		sc.cols = make([]lookup.Column, k)
	}
	return sc
}

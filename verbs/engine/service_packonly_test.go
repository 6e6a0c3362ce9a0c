package engine_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/planfmt"
)

func TestPackOnly(t *testing.T) {
	r := verbstest.NewRand(t)
	be := backends[1] // tcp: the service code is the same on both
	const tableBytes = 4 << 20
	f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: 1 << 20})
	key := f.table.Key()
	var norm planfmt.Normalized
	for _, p := range []*planfmt.Plan{
		rowsPlan(r, tableBytes, 3000, 264, 0, 0),
		rowsPlan(r, tableBytes, 3000, 264, 5, 0),
		mixedPlan(r, tableBytes, 500, 64, 3, 96<<10),
	} {
		before := append([]byte(nil), f.table.Bytes()...)
		res, err := f.svc.PackOnly(verbstest.Context(t), key, 0, p, 64<<10, &norm)
		require.NoError(t, err)
		require.Equal(t, norm.Summary().Bytes, res.Bytes)
		// A chunk takes as many ids as it has room for rows (-1 ids
		// take no room but count); ranges fill every chunk to the byte.
		want := (res.Bytes + (64 << 10) - 1) / (64 << 10)
		if p.Form == planfmt.FormRows {
			per := uint64(64<<10) / p.Rows.RowSize
			want = (uint64(p.Rows.Len()) + per - 1) / per
		}
		require.Equal(t, int(want), res.Chunks)
		require.Positive(t, res.Elapsed)
		require.True(t, bytes.Equal(before, f.table.Bytes()), "pack-only changed the table")
	}
	require.Zero(t, f.ownerStaging.Pool().Stats().InUse)

	p := rowsPlan(r, tableBytes, 10, 264, 0, 0)
	var inv *engine.InvalidOpError
	_, err := f.svc.PackOnly(verbstest.Context(t), key+1, 0, p, 64<<10, nil)
	require.True(t, errors.As(err, &inv), "unknown key: %v", err)
	_, err = f.svc.PackOnly(verbstest.Context(t), key, 1, p, 64<<10, nil)
	require.True(t, errors.As(err, &inv), "extent past the export: %v", err)
	_, err = f.svc.PackOnly(verbstest.Context(t), key, 0, p, 100, nil)
	require.True(t, errors.As(err, &inv), "chunk below the minimum: %v", err)
	p.Rows.IDs32[3] = int32(p.Rows.TableRows)
	_, err = f.svc.PackOnly(verbstest.Context(t), key, 0, p, 64<<10, nil)
	require.ErrorIs(t, err, planfmt.ErrBounds)
}

package snapshot

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string // "" when valid
	}{
		{"a", ""},
		{"engram.layer-03_v2", ""},
		{"A.B-c_9", ""},
		{"x.", ""},
		{strings.Repeat("n", MaxNameLen), ""},
		{"", "empty"},
		{strings.Repeat("n", MaxNameLen+1), "longer than"},
		{".hidden", "starts with '.'"},
		{".", "starts with '.'"},
		{"..", "starts with '.'"},
		{"a/b", "byte 1"},
		{"a b", "byte 1"},
		{"tab\t", "byte 3"},
		{"caf\xc3\xa9", "byte 3"},
		{"nul\x00", "byte 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidName(tc.name)
			if tc.reason == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrBadName)
			var ne *NameError
			require.ErrorAs(t, err, &ne)
			require.Equal(t, tc.name, ne.Name)
			require.Contains(t, ne.Reason, tc.reason)
			require.Equal(t, err, validNameBytes([]byte(tc.name)))
		})
	}
}

func TestSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		spec  Spec
		field string // "" when valid
	}{
		{"one byte", Spec{Name: "t", NumRows: 1, RowBytes: 1}, ""},
		{"engram", Spec{Name: "t", NumRows: 1 << 20, RowBytes: 264}, ""},
		{"largest", Spec{Name: "t", NumRows: maxSize() / 264, RowBytes: 264}, ""},
		{"bad name", Spec{Name: "a/b", NumRows: 1, RowBytes: 1}, "Name"},
		{"no name", Spec{NumRows: 1, RowBytes: 1}, "Name"},
		{"zero rows", Spec{Name: "t", NumRows: 0, RowBytes: 1}, "NumRows"},
		{"negative rows", Spec{Name: "t", NumRows: -5, RowBytes: 1}, "NumRows"},
		{"zero row bytes", Spec{Name: "t", NumRows: 1, RowBytes: 0}, "RowBytes"},
		{"negative row bytes", Spec{Name: "t", NumRows: 1, RowBytes: -264}, "RowBytes"},
		{"too large", Spec{Name: "t", NumRows: maxSize()/264 + 1, RowBytes: 264}, "Size"},
		{"overflow", Spec{Name: "t", NumRows: 1 << 40, RowBytes: min(1<<40, math.MaxInt)}, "Size"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := tc.spec.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				require.Equal(t, tc.spec.NumRows*int64(tc.spec.RowBytes), tc.spec.Size())
				return
			}
			require.ErrorIs(t, err, ErrBadSpec)
			var se *SpecError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tc.field, se.Field)
			require.Equal(t, tc.spec, se.Spec)
			require.Equal(t, tc.field == "Name", errors.Is(err, ErrBadName), "a bad name also matches ErrBadName")
			require.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestFileName(t *testing.T) {
	require.Equal(t, "layer-1.engram", FileName("layer-1"))
	require.Equal(t, "", tempTable(FileName("layer-1")))
	for range 3 {
		tmp := tempName(FileName("layer-1"))
		require.Equal(t, "layer-1", tempTable(tmp), tmp)
		require.Error(t, ValidName(tmp), "a temporary name is never a table name")
		require.LessOrEqual(t, len(tempName(FileName(strings.Repeat("n", MaxNameLen)))), 255, "fits a file name")
	}
	for _, s := range []string{".x.engram.tmp-", ".x.engram.tmp-0123456789abcdeg", "x.engram.tmp-0123456789abcdef", "..engram.tmp-0123456789abcdef", ".x.engram.tmp0123456789abcdef"} {
		require.Equal(t, "", tempTable(s), s)
	}
	require.Equal(t, "x", tempTable(".x.engram.tmp-0123456789abcdef"))
}

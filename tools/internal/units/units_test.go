package units

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  error
	}{
		{"264", 264, nil},
		{"264B", 264, nil},
		{"512KiB", 512 << 10, nil},
		{"512kib", 512 << 10, nil},
		{"1GiB", 1 << 30, nil},
		{"1 GiB", 1 << 30, nil},
		{"64M", 64 << 20, nil},
		{"1.5MiB", 3 << 19, nil},
		{"2kB", 2000, nil},
		{"2KB", 2000, nil},
		{"3GB", 3e9, nil},
		{"0", 0, nil},
		{"8EiB", 0, ErrSyntax},
		{"9223372036854775807", math.MaxInt64, nil},
		{"9223372036854775808", 0, ErrRange},
		{"8388608TiB", 0, ErrRange},
		{"0.5", 0, ErrRange},
		{"1.1KiB", 0, ErrRange},
		{"", 0, ErrSyntax},
		{"KiB", 0, ErrSyntax},
		{"-1", 0, ErrSyntax},
		{"+1", 0, ErrSyntax},
		{"12 parsecs", 0, ErrSyntax},
		{"NaN", 0, ErrSyntax},
		{"Inf", 0, ErrSyntax},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseBytes(tc.in)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				var pe *ParseError
				require.True(t, errors.As(err, &pe))
				require.Equal(t, tc.in, pe.Input)
				require.Zero(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"}, {264, "264 B"}, {1024, "1 KiB"}, {270336, "264 KiB"},
		{25952256, "24.75 MiB"}, {1 << 30, "1 GiB"}, {-2048, "-2 KiB"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, FormatBytes(tc.in))
			if tc.in >= 0 {
				back, err := ParseBytes(tc.want)
				require.NoError(t, err)
				require.Equal(t, tc.in, back, "formatted sizes parse back")
			}
		})
	}
}

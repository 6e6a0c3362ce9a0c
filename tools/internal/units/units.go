package units

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Errors of ParseBytes, wrapped by a *ParseError.
var (
	// ErrSyntax reports a size that is not a number with a known suffix.
	ErrSyntax = errors.New("units: invalid size")
	// ErrRange reports a size that is not a whole number of bytes in
	// [0, math.MaxInt64].
	ErrRange = errors.New("units: size out of range")
)

// ParseError reports a size ParseBytes rejected.
type ParseError struct {
	Input  string
	Reason string
	Err    error // ErrSyntax or ErrRange
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("units: size %q: %s", e.Input, e.Reason)
}

// Unwrap returns ErrSyntax or ErrRange.
func (e *ParseError) Unwrap() error { return e.Err }

var suffixes = []struct {
	name string
	mult float64
}{
	// Longest first so "KiB" is not read as "B".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// ParseBytes parses a byte size such as "264", "512KiB" or "1GiB".
// The single letters K, M, G and T are accepted as binary suffixes too.
func ParseBytes(s string) (int64, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return 0, &ParseError{Input: s, Reason: "empty", Err: ErrSyntax}
	}
	num, mult := in, 1.0
	lower := strings.ToLower(in)
	for _, sf := range suffixes {
		if strings.HasSuffix(lower, sf.name) {
			num, mult = strings.TrimSpace(in[:len(in)-len(sf.name)]), sf.mult
			break
		}
	}
	if num == "" || num[0] == '+' || num[0] == '-' {
		return 0, &ParseError{Input: s, Reason: "want an unsigned number and an optional suffix (KiB, MiB, GiB, kB, MB, GB)", Err: ErrSyntax}
	}
	if n, err := strconv.ParseUint(num, 10, 64); err == nil {
		hi, lo := bits.Mul64(n, uint64(mult))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, &ParseError{Input: s, Reason: "larger than 2^63-1 bytes", Err: ErrRange}
		}
		return int64(lo), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, &ParseError{Input: s, Reason: "want an unsigned number and an optional suffix (KiB, MiB, GiB, kB, MB, GB)", Err: ErrSyntax}
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, &ParseError{Input: s, Reason: "larger than 2^63-1 bytes", Err: ErrRange}
	}
	if v != math.Trunc(v) {
		return 0, &ParseError{Input: s, Reason: "not a whole number of bytes", Err: ErrRange}
	}
	return int64(v), nil
}

// FormatBytes formats n with a binary suffix and up to three significant
// decimals: 270336 is "264 KiB", 25952256 is "24.75 MiB".
func FormatBytes(n int64) string {
	if n < 0 {
		return "-" + FormatBytes(-n)
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), 0
	names := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	for v /= unit; v >= unit && i < len(names)-1; i++ {
		v /= unit
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + " " + names[i]
}

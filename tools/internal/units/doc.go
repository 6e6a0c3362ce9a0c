// Package units parses and formats the byte sizes and rates that the tools
// take as flags and print in tables: "264", "512KiB", "1GiB", "1.5MB".
//
// Binary suffixes (KiB, MiB, GiB, TiB) are powers of 1024 and decimal ones
// (kB or KB, MB, GB, TB) powers of 1000; a bare number or a "B" suffix is bytes.
// Suffixes are case-insensitive. ParseBytes rejects, with a *ParseError
// wrapping ErrSyntax or ErrRange, anything else: an empty string, a sign, a
// fraction that does not name a whole number of bytes, a value over
// math.MaxInt64.
package units

package remote

import (
	"fmt"
	"math"
)

// Limits of names, tables and rows (see # Format).
const (
	// MaxTables is the most tables one owner serves: every table is one
	// export, and a verbs handshake lists at most 252 regions.
	MaxTables = 252
	// MaxNamespaceLen and MaxNameLen bound the namespace and table names
	// (bytes), so ExportName stays within verbs.MaxNameLen.
	MaxNamespaceLen = 64
	MaxNameLen      = 128
	// MaxRowBytes is the largest row size.
	MaxRowBytes = 1 << 24
)

// exportPrefix starts every table's export name.
const exportPrefix = "engram:"

// ExportName is the name a table's rows are exported under on the owner's
// segment: "engram:<namespace>/<table>".
func ExportName(namespace, table string) string {
	return exportPrefix + namespace + "/" + table
}

// TableSpec describes a table: NumRows rows of RowBytes bytes.
type TableSpec struct {
	Name     string
	NumRows  int64
	RowBytes int
}

// Bytes returns the table's size, NumRows * RowBytes (valid specs never
// overflow).
func (s TableSpec) Bytes() int64 { return s.NumRows * int64(s.RowBytes) }

// Table is a table an owner serves: its spec and its rows, NumRows *
// RowBytes bytes of memory that stays valid and unchanged until the
// Server is closed (an mmap'd snapshot, for example). The owner never
// writes it.
type Table struct {
	Name     string
	NumRows  int64
	RowBytes int
	Rows     []byte
}

// Spec returns the table's spec.
func (t Table) Spec() TableSpec {
	return TableSpec{Name: t.Name, NumRows: t.NumRows, RowBytes: t.RowBytes}
}

// checkName reports why s is not a valid namespace or table name of at most
// max bytes, or "" when it is.
func checkName(s string, max int) string {
	if len(s) == 0 {
		return "empty"
	}
	if len(s) > max {
		return fmt.Sprintf("%d bytes, more than %d", len(s), max)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return fmt.Sprintf("byte %d is %#02x, not printable ASCII without spaces", i, c)
		}
	}
	return ""
}

// checkSpec reports why s is not a valid table spec, or "" when it is.
func checkSpec(s TableSpec) (field, reason string) {
	if r := checkName(s.Name, MaxNameLen); r != "" {
		return "Name", r
	}
	switch {
	case s.NumRows < 1:
		return "NumRows", fmt.Sprintf("%d: at least one row", s.NumRows)
	case s.RowBytes < 1 || s.RowBytes > MaxRowBytes:
		return "RowBytes", fmt.Sprintf("%d: must lie in [1, %d]", s.RowBytes, MaxRowBytes)
	case s.NumRows > math.MaxInt64/int64(s.RowBytes):
		return "NumRows", fmt.Sprintf("%d rows of %d bytes exceed 2^63-1 bytes", s.NumRows, s.RowBytes)
	}
	return "", ""
}

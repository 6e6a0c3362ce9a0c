package remote

import (
	"encoding/binary"
	"fmt"
	"math"
)

// TablesVersion is the version of the table list this package writes and
// reads (see # Format).
const TablesVersion = 1

const (
	tablesMagic     = "SKET"
	tablesHeader    = 16
	tableRecordHead = 16
)

// TableList is the answer of MethodTables: the owner's namespace and its
// tables, in the owner's order.
type TableList struct {
	Namespace string
	Tables    []TableSpec
}

// AppendTables appends the encoding of l to dst (see # Format). It refuses
// an invalid list (a bad name, zero or too many tables, duplicate names, a
// bad spec) with a *ConfigError and returns dst unchanged.
func AppendTables(dst []byte, l *TableList) ([]byte, error) {
	if r := checkName(l.Namespace, MaxNamespaceLen); r != "" {
		return dst, &ConfigError{Field: "Namespace", Reason: r}
	}
	if len(l.Tables) == 0 || len(l.Tables) > MaxTables {
		return dst, &ConfigError{Field: "Tables", Reason: fmt.Sprintf("%d tables: must lie in [1, %d]", len(l.Tables), MaxTables)}
	}
	size := tablesHeader + len(l.Namespace)
	for i, s := range l.Tables {
		if f, r := checkSpec(s); r != "" {
			return dst, &ConfigError{Field: fmt.Sprintf("Tables[%d].%s", i, f), Reason: r}
		}
		for j := range i {
			if l.Tables[j].Name == s.Name {
				return dst, &ConfigError{Field: fmt.Sprintf("Tables[%d].Name", i), Reason: fmt.Sprintf("%q repeats Tables[%d]", s.Name, j)}
			}
		}
		size += tableRecordHead + len(s.Name)
	}
	start := len(dst)
	dst = append(dst, tablesMagic...)
	dst = append(dst, TablesVersion, byte(len(l.Namespace)))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(l.Tables)))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(size))
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = append(dst, l.Namespace...)
	for _, s := range l.Tables {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(s.NumRows))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(s.RowBytes))
		dst = append(dst, byte(len(s.Name)), 0, 0, 0)
		dst = append(dst, s.Name...)
	}
	if len(dst)-start != size {
		panic(fmt.Sprintf("engram: table list of %d bytes, sized %d", len(dst)-start, size))
	}
	return dst, nil
}

// DecodeTables decodes a table list into dst, reusing dst.Tables' storage.
// It rejects anything AppendTables would not have written with a
// *DecodeError (see # Format); on error dst is unchanged.
func DecodeTables(dst *TableList, b []byte) error {
	bad := func(off int, field, reason string) error {
		return &DecodeError{Offset: off, Field: field, Reason: reason, Err: ErrCorrupt}
	}
	if len(b) < tablesHeader {
		return &DecodeError{Offset: len(b), Field: "header", Reason: fmt.Sprintf("%d bytes, need %d", len(b), tablesHeader), Err: ErrTruncated}
	}
	if string(b[:4]) != tablesMagic {
		return bad(0, "magic", fmt.Sprintf("%q, want %q", b[:4], tablesMagic))
	}
	if b[4] != TablesVersion {
		return &DecodeError{Offset: 4, Field: "version", Reason: fmt.Sprintf("%d, this package speaks %d", b[4], TablesVersion), Err: ErrVersion}
	}
	nsLen := int(b[5])
	n := int(binary.LittleEndian.Uint16(b[6:]))
	length := binary.LittleEndian.Uint32(b[8:])
	switch {
	case nsLen < 1 || nsLen > MaxNamespaceLen:
		return bad(5, "namespace length", fmt.Sprintf("%d: must lie in [1, %d]", nsLen, MaxNamespaceLen))
	case n < 1 || n > MaxTables:
		return bad(6, "tables", fmt.Sprintf("%d: must lie in [1, %d]", n, MaxTables))
	case uint64(length) > uint64(len(b)):
		return &DecodeError{Offset: 8, Field: "length", Reason: fmt.Sprintf("%d, message has %d bytes", length, len(b)), Err: ErrTruncated}
	case uint64(length) < uint64(len(b)):
		return bad(8, "length", fmt.Sprintf("%d, message has %d bytes", length, len(b)))
	case binary.LittleEndian.Uint32(b[12:]) != 0:
		return bad(12, "reserved", "not zero")
	case len(b) < tablesHeader+nsLen:
		return &DecodeError{Offset: len(b), Field: "namespace", Reason: fmt.Sprintf("%d bytes of %d", len(b)-tablesHeader, nsLen), Err: ErrTruncated}
	}
	ns := b[tablesHeader : tablesHeader+nsLen]
	if r := checkName(string(ns), MaxNamespaceLen); r != "" {
		return bad(tablesHeader, "namespace", r)
	}
	// First pass: validate every record without touching dst.
	off := tablesHeader + nsLen
	for i := range n {
		if len(b)-off < tableRecordHead {
			return &DecodeError{Offset: off, Field: fmt.Sprintf("table %d", i), Reason: "record runs past the end", Err: ErrTruncated}
		}
		rows := binary.LittleEndian.Uint64(b[off:])
		rowBytes := binary.LittleEndian.Uint32(b[off+8:])
		nameLen := int(b[off+12])
		switch {
		case b[off+13] != 0 || b[off+14] != 0 || b[off+15] != 0:
			return bad(off+13, fmt.Sprintf("table %d reserved", i), "not zero")
		case rows < 1 || rows > math.MaxInt64:
			return bad(off, fmt.Sprintf("table %d rows", i), fmt.Sprintf("%d: must lie in [1, 2^63-1]", rows))
		case rowBytes < 1 || rowBytes > MaxRowBytes:
			return bad(off+8, fmt.Sprintf("table %d row bytes", i), fmt.Sprintf("%d: must lie in [1, %d]", rowBytes, MaxRowBytes))
		case rows > math.MaxInt64/uint64(rowBytes):
			return bad(off, fmt.Sprintf("table %d rows", i), fmt.Sprintf("%d rows of %d bytes exceed 2^63-1 bytes", rows, rowBytes))
		case nameLen < 1 || nameLen > MaxNameLen:
			return bad(off+12, fmt.Sprintf("table %d name length", i), fmt.Sprintf("%d: must lie in [1, %d]", nameLen, MaxNameLen))
		case len(b)-off-tableRecordHead < nameLen:
			return &DecodeError{Offset: off, Field: fmt.Sprintf("table %d name", i), Reason: "runs past the end", Err: ErrTruncated}
		}
		name := b[off+tableRecordHead : off+tableRecordHead+nameLen]
		if r := checkName(string(name), MaxNameLen); r != "" {
			return bad(off+tableRecordHead, fmt.Sprintf("table %d name", i), r)
		}
		// Duplicates: compare with the earlier records (at most 252).
		prev := tablesHeader + nsLen
		for j := range i {
			pl := int(b[prev+12])
			if string(b[prev+tableRecordHead:prev+tableRecordHead+pl]) == string(name) {
				return bad(off+tableRecordHead, fmt.Sprintf("table %d name", i), fmt.Sprintf("%q repeats table %d", name, j))
			}
			prev += tableRecordHead + pl
		}
		off += tableRecordHead + nameLen
	}
	if off != len(b) {
		return bad(off, "trailer", fmt.Sprintf("%d bytes after the last table", len(b)-off))
	}
	// Second pass: fill dst.
	dst.Namespace = string(ns)
	dst.Tables = dst.Tables[:0]
	off = tablesHeader + nsLen
	for range n {
		nameLen := int(b[off+12])
		dst.Tables = append(dst.Tables, TableSpec{
			Name:     string(b[off+tableRecordHead : off+tableRecordHead+nameLen]),
			NumRows:  int64(binary.LittleEndian.Uint64(b[off:])),
			RowBytes: int(binary.LittleEndian.Uint32(b[off+8:])),
		})
		off += tableRecordHead + nameLen
	}
	return nil
}

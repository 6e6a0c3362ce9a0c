package remote

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenList is the table list of testdata/tables-v1.golden.
var goldenList = TableList{Namespace: "deepseek-v4", Tables: []TableSpec{
	{Name: "engram.l2", NumRows: 384_000_000, RowBytes: 264},
	{Name: "ngram/3", NumRows: 1 << 40, RowBytes: 64},
	{Name: "x", NumRows: 1, RowBytes: MaxRowBytes},
}}

// annotate renders a table list as commented hex, one field per line (the
// golden file's format; '#' starts a comment).
func annotate(b []byte) string {
	var sb strings.Builder
	field := func(n int, what string, args ...any) {
		fmt.Fprintf(&sb, "%-24s # %s\n", hex.EncodeToString(b[:n]), fmt.Sprintf(what, args...))
		b = b[n:]
	}
	sb.WriteString("# MethodTables reply (see doc.go, # Format): little-endian, unaligned.\n")
	nsLen, n := int(b[5]), int(binary.LittleEndian.Uint16(b[6:]))
	field(4, "magic %q", b[:4])
	field(1, "version %d", b[0])
	field(1, "namespace length %d", nsLen)
	field(2, "tables %d", n)
	field(4, "message length %d", binary.LittleEndian.Uint32(b))
	field(4, "reserved")
	field(nsLen, "namespace %q", b[:nsLen])
	for i := range n {
		fmt.Fprintf(&sb, "# table %d\n", i)
		field(8, "rows %d", binary.LittleEndian.Uint64(b))
		field(4, "row bytes %d", binary.LittleEndian.Uint32(b))
		nameLen := int(b[0])
		field(1, "name length %d", nameLen)
		field(3, "reserved")
		field(nameLen, "name %q", b[:nameLen])
	}
	return sb.String()
}

// parseAnnotated reads the hex of an annotated dump.
func parseAnnotated(t testing.TB, s string) []byte {
	t.Helper()
	var out []byte
	for line := range strings.SplitSeq(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		b, err := hex.DecodeString(line)
		require.NoError(t, err, "line %q", line)
		out = append(out, b...)
	}
	return out
}

func TestTablesGolden(t *testing.T) {
	b, err := AppendTables(nil, &goldenList)
	require.NoError(t, err)
	path := filepath.Join("testdata", "tables-v1.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(annotate(b)), 0o644))
	}
	golden, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(golden), annotate(b), "encoding changed (rerun with -update if intended)")
	require.Equal(t, parseAnnotated(t, string(golden)), b)

	var got TableList
	require.NoError(t, DecodeTables(&got, b))
	require.Empty(t, cmp.Diff(goldenList, got))
}

func TestTablesRoundTrip(t *testing.T) {
	r := newRand(t)
	var dst TableList
	for i := range 200 {
		l := TableList{Namespace: randomName(r, MaxNamespaceLen)}
		for j := range 1 + r.IntN(MaxTables) {
			rb := 1 + r.IntN(MaxRowBytes)
			l.Tables = append(l.Tables, TableSpec{Name: fmt.Sprintf("%s.%d", randomName(r, MaxNameLen-8), j),
				NumRows: 1 + r.Int64N(math.MaxInt64/int64(rb)), RowBytes: rb})
		}
		b, err := AppendTables([]byte("prefix"), &l)
		require.NoError(t, err)
		require.Equal(t, "prefix", string(b[:6]))
		require.NoError(t, DecodeTables(&dst, b[6:]), "list %d", i)
		require.Empty(t, cmp.Diff(l, dst))
	}
}

// randomName is 1..max printable ASCII bytes without spaces.
func randomName(r interface{ IntN(int) int }, max int) string {
	b := make([]byte, 1+r.IntN(max))
	for i := range b {
		b[i] = byte(0x21 + r.IntN(0x7e-0x21+1))
	}
	return string(b)
}

func TestAppendTablesRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		list TableList
	}{
		{"no namespace", TableList{Tables: goldenList.Tables}},
		{"no tables", TableList{Namespace: "n"}},
		{"too many tables", TableList{Namespace: "n", Tables: make([]TableSpec, MaxTables+1)}},
		{"zero rows", TableList{Namespace: "n", Tables: []TableSpec{{Name: "a", RowBytes: 1}}}},
		{"duplicate", TableList{Namespace: "n", Tables: []TableSpec{{Name: "a", NumRows: 1, RowBytes: 1}, {Name: "a", NumRows: 2, RowBytes: 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := AppendTables([]byte("keep"), &tc.list)
			require.ErrorIs(t, err, ErrInvalid)
			require.Equal(t, "keep", string(b))
		})
	}
}

func TestDecodeTablesRejects(t *testing.T) {
	good, err := AppendTables(nil, &goldenList)
	require.NoError(t, err)
	nsEnd := tablesHeader + len(goldenList.Namespace)
	rec1 := nsEnd + tableRecordHead + len(goldenList.Tables[0].Name) // second record
	for _, tc := range []struct {
		name  string
		edit  func(b []byte) []byte
		want  error
		field string
	}{
		{"empty", func([]byte) []byte { return nil }, ErrTruncated, "header"},
		{"short header", func(b []byte) []byte { return b[:15] }, ErrTruncated, "header"},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, ErrCorrupt, "magic"},
		{"version", func(b []byte) []byte { b[4] = 2; return b }, ErrVersion, "version"},
		{"zero namespace length", func(b []byte) []byte { b[5] = 0; return b }, ErrCorrupt, "namespace length"},
		{"long namespace", func(b []byte) []byte { b[5] = MaxNamespaceLen + 1; return b }, ErrCorrupt, "namespace length"},
		{"zero tables", func(b []byte) []byte { b[6], b[7] = 0, 0; return b }, ErrCorrupt, "tables"},
		{"too many tables", func(b []byte) []byte { binary.LittleEndian.PutUint16(b[6:], MaxTables+1); return b }, ErrCorrupt, "tables"},
		{"cut", func(b []byte) []byte { return b[:len(b)-1] }, ErrTruncated, "length"},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, ErrCorrupt, "length"},
		{"length too small", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[8:], uint32(len(b)-1))
			return b
		}, ErrCorrupt, "length"},
		{"reserved header", func(b []byte) []byte { b[13] = 1; return b }, ErrCorrupt, "reserved"},
		{"space in namespace", func(b []byte) []byte { b[tablesHeader+2] = ' '; return b }, ErrCorrupt, "namespace"},
		{"fewer tables than records", func(b []byte) []byte { b[6] = 2; return b }, ErrCorrupt, "trailer"},
		{"more tables than records", func(b []byte) []byte { b[6] = 4; return b }, ErrTruncated, "table 3"},
		{"zero rows", func(b []byte) []byte { clear(b[nsEnd : nsEnd+8]); return b }, ErrCorrupt, "table 0 rows"},
		{"rows over 2^63-1", func(b []byte) []byte { b[nsEnd+7] = 0x80; return b }, ErrCorrupt, "table 0 rows"},
		{"bytes over 2^63-1", func(b []byte) []byte { b[nsEnd+7] = 0x10; return b }, ErrCorrupt, "table 0 rows"},
		{"zero row bytes", func(b []byte) []byte { clear(b[nsEnd+8 : nsEnd+12]); return b }, ErrCorrupt, "table 0 row bytes"},
		{"huge row bytes", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[nsEnd+8:], MaxRowBytes+1)
			return b
		}, ErrCorrupt, "table 0 row bytes"},
		{"zero name length", func(b []byte) []byte { b[nsEnd+12] = 0; return b }, ErrCorrupt, "table 0 name length"},
		{"long name", func(b []byte) []byte { b[nsEnd+12] = MaxNameLen + 1; return b }, ErrCorrupt, "table 0 name length"},
		{"record reserved", func(b []byte) []byte { b[nsEnd+15] = 9; return b }, ErrCorrupt, "table 0 reserved"},
		{"name byte", func(b []byte) []byte { b[rec1+tableRecordHead] = 0x7f; return b }, ErrCorrupt, "table 1 name"},
		{"duplicate name", func(b []byte) []byte {
			// Tables "a" and "b", the last byte turning "b" into "a".
			l := TableList{Namespace: "n", Tables: []TableSpec{{Name: "a", NumRows: 1, RowBytes: 1}, {Name: "b", NumRows: 1, RowBytes: 1}}}
			out, err := AppendTables(nil, &l)
			if err != nil {
				panic(err)
			}
			out[len(out)-1] = 'a'
			return out
		}, ErrCorrupt, "table 1 name"},
		{"name past the end", func(b []byte) []byte {
			l := TableList{Namespace: "n", Tables: []TableSpec{{Name: "abc", NumRows: 1, RowBytes: 1}}}
			out, err := AppendTables(nil, &l)
			if err != nil {
				panic(err)
			}
			out[len(out)-7] = 4
			return out
		}, ErrTruncated, "table 0 name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.edit(append([]byte(nil), good...))
			dst := TableList{Namespace: "untouched", Tables: []TableSpec{{Name: "keep"}}}
			err := DecodeTables(&dst, b)
			require.ErrorIs(t, err, tc.want)
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			require.Equal(t, tc.field, de.Field)
			require.Equal(t, TableList{Namespace: "untouched", Tables: []TableSpec{{Name: "keep"}}}, dst, "dst changed")
			t.Log(err)
		})
	}
}

// TestDecodeTablesAllocs checks that decoding into a warm list allocates
// only the name strings.
func TestDecodeTablesAllocs(t *testing.T) {
	b, err := AppendTables(nil, &goldenList)
	require.NoError(t, err)
	var dst TableList
	require.NoError(t, DecodeTables(&dst, b))
	allocs := testing.AllocsPerRun(100, func() {
		if err := DecodeTables(&dst, b); err != nil {
			t.Fatal(err)
		}
	})
	require.LessOrEqual(t, allocs, float64(1+len(goldenList.Tables)))
}

// FuzzDecodeTables checks that the decoder never panics, rejects with a
// *DecodeError and leaves dst alone on error, and that whatever it accepts
// re-encodes to the same bytes (the encoding is canonical).
func FuzzDecodeTables(f *testing.F) {
	good, err := AppendTables(nil, &goldenList)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	golden, err := os.ReadFile(filepath.Join("testdata", "tables-v1.golden"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(parseAnnotated(f, string(golden)))
	f.Fuzz(func(t *testing.T, b []byte) {
		dst := TableList{Namespace: "sentinel"}
		err := DecodeTables(&dst, b)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			if dst.Namespace != "sentinel" || dst.Tables != nil {
				t.Fatalf("dst changed on error: %+v", dst)
			}
			return
		}
		again, err := AppendTables(nil, &dst)
		if err != nil {
			t.Fatalf("decoded list %+v does not encode: %v", dst, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("not canonical:\n in  %x\n out %x", b, again)
		}
	})
}

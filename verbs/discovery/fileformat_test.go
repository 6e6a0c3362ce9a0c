package discovery

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return data
}

// TestFileFormatGolden decodes the annotated example of the package
// documentation's format and checks that encoding it again gives the same
// bytes (the canonical form: tabs, records and attributes sorted).
func TestFileFormatGolden(t *testing.T) {
	const golden = "file-valid.json"
	doc, err := decodeFile(golden, readTestdata(t, golden))
	require.NoError(t, err)
	require.Len(t, doc.Records, 2)
	want := fileRecord{
		Record: Record{
			Name: "engram/t0", Transport: "tcp", Addr: "10.0.0.7:7000", Owner: "node7/1234", Revision: 41,
			Attrs:   map[string]string{"rkey": "9", "depth": "128"},
			Expires: time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC),
		},
		Holder: holder{PID: 1234, Start: 987654, Boot: "6c1f2b7e-0d3a-4c55-9a1e-3b8d2f4e6a90", PIDNS: 4026531836, ID: "9f86d081884c7d65"},
	}
	if diff := cmp.Diff(want, doc.Records[0]); diff != "" {
		t.Fatalf("record 0 (-want +got):\n%s", diff)
	}
	require.Equal(t, int64(42), doc.Revision)

	out, err := encodeFile(doc)
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile(filepath.Join("testdata", golden), out, 0o644))
	}
	require.Equal(t, string(readTestdata(t, golden)), string(out), "run go test -update to refresh %s", golden)
}

func TestDecodeFile(t *testing.T) {
	const h = `"holder":{"pid":5,"start":1,"boot":"b","pidns":1,"id":"00000000000000aa"}`
	rec := func(fields string) string {
		return `{"format":"scatterkit-discovery","version":1,"revision":5,"records":[{` + fields + `}]}`
	}
	tests := []struct {
		name    string
		data    string
		records int
		reason  string // part of the CorruptError reason; "" for success
	}{
		{"empty", "", 0, ""},
		{"white space", " \n\t", 0, ""},
		{"no records", `{"format":"scatterkit-discovery","version":1,"revision":0,"records":[]}`, 0, ""},
		{"null records", `{"format":"scatterkit-discovery","version":1,"revision":0,"records":null}`, 0, ""},
		{"one", rec(`"name":"a","transport":"tcp","addr":"x:1","revision":5,` + h), 1, ""},
		{"not json", "hello", 0, "bad JSON"},
		{"array", "[]", 0, "bad JSON"},
		{"unknown field", `{"format":"scatterkit-discovery","version":1,"revision":0,"records":[],"extra":1}`, 0, "bad JSON"},
		{"unknown record field", rec(`"name":"a","transport":"tcp","addr":"x:1","revision":1,"color":"red",` + h), 0, "bad JSON"},
		{"trailing data", `{"format":"scatterkit-discovery","version":1,"revision":0,"records":[]} {}`, 0, "data after"},
		{"other format", `{"format":"other","version":1,"revision":0,"records":[]}`, 0, "format"},
		{"version 2", `{"format":"scatterkit-discovery","version":2,"revision":0,"records":[]}`, 0, "version 2"},
		{"negative revision", `{"format":"scatterkit-discovery","version":1,"revision":-1,"records":[]}`, 0, "negative"},
		{"bad name", rec(`"name":"/a","transport":"tcp","addr":"x:1","revision":1,` + h), 0, "record 0"},
		{"bad transport", rec(`"name":"a","transport":"TCP","addr":"x:1","revision":1,` + h), 0, "record 0"},
		{"no addr", rec(`"name":"a","transport":"tcp","revision":1,` + h), 0, "record 0"},
		{"revision zero", rec(`"name":"a","transport":"tcp","addr":"x:1",` + h), 0, "revision 0 outside"},
		{"revision ahead", rec(`"name":"a","transport":"tcp","addr":"x:1","revision":6,` + h), 0, "revision 6 outside"},
		{"no holder", rec(`"name":"a","transport":"tcp","addr":"x:1","revision":1`), 0, "pid not positive"},
		{"holder no boot", rec(`"name":"a","transport":"tcp","addr":"x:1","revision":1,"holder":{"pid":5,"start":1,"boot":"","pidns":1,"id":"00000000000000aa"}`), 0, "boot"},
		{"holder short id", rec(`"name":"a","transport":"tcp","addr":"x:1","revision":1,"holder":{"pid":5,"start":1,"boot":"b","pidns":1,"id":"aa"}`), 0, "id"},
		{"holder upper id", rec(`"name":"a","transport":"tcp","addr":"x:1","revision":1,"holder":{"pid":5,"start":1,"boot":"b","pidns":1,"id":"00000000000000AA"}`), 0, "id"},
		{"bad expires", rec(`"name":"a","transport":"tcp","addr":"x:1","revision":1,"expires":"tomorrow",` + h), 0, "bad JSON"},
		{"duplicate", string(readTestdata(t, "file-duplicate.json")), 0, "twice"},
		{"truncated", string(readTestdata(t, "file-truncated.json")), 0, "bad JSON"},
		{"too big", strings.Repeat(" ", maxFileSize) + "{}", 0, "more than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := decodeFile("src.json", []byte(tc.data))
			if tc.reason == "" {
				require.NoError(t, err)
				require.Len(t, doc.Records, tc.records)
				return
			}
			require.ErrorIs(t, err, ErrCorrupt)
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, "src.json", ce.Source)
			require.Contains(t, ce.Reason, tc.reason)
			require.Contains(t, err.Error(), "src.json")
		})
	}
}

// FuzzDecodeFile checks that decoding never panics and that whatever decodes
// encodes to a file that decodes to the same directory.
func FuzzDecodeFile(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	require.NoError(f, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			f.Add(readTestdata(f, e.Name()))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := decodeFile("fuzz", data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		out, err := encodeFile(doc)
		require.NoError(t, err)
		again, err := decodeFile("fuzz", out)
		require.NoError(t, err, "re-decoding %q", out)
		if diff := cmp.Diff(doc, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
		out2, err := encodeFile(again)
		require.NoError(t, err)
		require.True(t, bytes.Equal(out, out2), "encoding is not canonical")
	})
}

package etcd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/discovery"
)

const testKey = "/p/engram/t0"

func TestDecodeValue(t *testing.T) {
	tests := []struct {
		file   string
		want   *discovery.Record
		reason string
	}{
		{"value-full.json", &discovery.Record{
			Name: "engram/t0", Transport: "tcp", Addr: "10.0.0.7:7000", Owner: "node7/1234", Revision: 5,
			Attrs:   map[string]string{"rkey": "9", "depth": "128"},
			Expires: time.Date(2026, 11, 30, 10, 0, 0, 500_000_000, time.UTC),
		}, ""},
		{"value-minimal.json", &discovery.Record{Name: "engram/t0", Transport: "shm", Addr: "/dev/shm/scatter-t0", Revision: 5}, ""},
		{"value-wrong-name.json", nil, "under the key"},
		{"value-unknown-field.json", nil, "bad JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			require.NoError(t, err)
			got, err := decodeValue(testKey, "engram/t0", data, 5)
			if tc.want == nil {
				require.ErrorIs(t, err, discovery.ErrCorrupt)
				var ce *discovery.CorruptError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, testKey, ce.Source)
				require.Contains(t, ce.Reason, tc.reason)
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(*tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			again, err := encodeValue(got)
			require.NoError(t, err)
			require.JSONEq(t, string(data), string(again))
		})
	}
	_, err := decodeValue(testKey, "engram/t0", []byte(`{"name":"engram/t0","transport":"tcp","addr":"x:1"}`), 0)
	require.ErrorIs(t, err, discovery.ErrCorrupt, "revision 0")
	_, err = decodeValue(testKey, "engram/t0", []byte(`{"name":"engram/t0","transport":"tcp","addr":"x:1"} x`), 1)
	require.ErrorIs(t, err, discovery.ErrCorrupt, "trailing data")
	_, err = decodeValue(testKey, "engram/t0", []byte(`{"name":"engram/t0","transport":"tcp","addr":"`+strings.Repeat("a", maxValueSize)+`"}`), 1)
	require.ErrorIs(t, err, discovery.ErrCorrupt, "too big")
}

// FuzzDecodeValue checks that decoding never panics, and that a decoded
// record encodes to a value that decodes to the same record.
func FuzzDecodeValue(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	require.NoError(f, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			data, err := os.ReadFile(filepath.Join("testdata", e.Name()))
			require.NoError(f, err)
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeValue(testKey, "engram/t0", data, 7)
		if err != nil {
			require.ErrorIs(t, err, discovery.ErrCorrupt)
			return
		}
		out, err := encodeValue(r)
		require.NoError(t, err)
		again, err := decodeValue(testKey, "engram/t0", out, 7)
		require.NoError(t, err, "re-decoding %q", out)
		if diff := cmp.Diff(r, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

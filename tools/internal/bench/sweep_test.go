package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSweepFlag(t *testing.T) {
	c, err := Parse([]string{"-sweep", "staging-slots=1,2,4,8"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, Sweep{Axis: AxisStagingSlots, Values: []int64{1, 2, 4, 8}}, c.Sweep)
	c, err = Parse([]string{"-sweep", "staging-bytes=16MiB,64MiB"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []int64{16 << 20, 64 << 20}, c.Sweep.Values)
	c, err = Parse(nil, io.Discard)
	require.NoError(t, err)
	require.Empty(t, c.Sweep.Axis, "no sweep by default")
	for _, bad := range [][]string{
		{"-sweep", "slots=1,2"},                      // unknown axis
		{"-sweep", "callers"},                        // no values
		{"-sweep", "callers=1,x"},                    // not a number
		{"-sweep", "callers=1,1"},                    // a value twice
		{"-sweep", "callers=0,2"},                    // out of range
		{"-sweep", "staging-bytes=1KiB"},             // below the pool's least
		{"-sweep", "callers=1", "-sweep", "lanes=1"}, // two sweeps
	} {
		_, err := Parse(bad, io.Discard)
		require.Error(t, err, "%v", bad)
		require.True(t, errors.Is(err, ErrUsage), "%v: %v", bad, err)
	}
}

// TestSweepRun: a sweep repeats the run per value; every JSON line says
// its axis and value, the configuration is as it was afterwards, and the
// plots hold one sweep figure and a set of per-pass figures per value.
func TestSweepRun(t *testing.T) {
	dir := t.TempDir()
	jsonPath, plots := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "plots")
	code := Main(testContext(t), []string{"-frags", "512", "-frag-size", "264", "-transport", "tcp", "-owner", "inproc",
		"-reps", "1", "-warmup", "0", "-quiet", "-table-bytes", "8MiB", "-sweep", "callers=1,2", "-json", jsonPath, "-plot", plots}, io.Discard, io.Discard)
	require.Zero(t, code)
	f, err := os.Open(jsonPath)
	require.NoError(t, err)
	defer f.Close()
	seen := map[float64]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		if m["workload"] == "summary" {
			continue
		}
		require.Equal(t, AxisCallers, m["axis"], "%s", sc.Text())
		seen[m["axis_value"].(float64)]++
	}
	require.Positive(t, seen[1])
	require.Equal(t, seen[1], seen[2], "the same lines for every value")
	for _, name := range []string{"sweep-tcp-callers.png", "goodput-tcp-callers-1.png", "goodput-tcp-callers-2.png"} {
		_, err := os.Stat(filepath.Join(plots, name))
		require.NoError(t, err, name)
	}
}

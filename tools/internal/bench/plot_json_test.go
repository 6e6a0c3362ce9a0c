package bench

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPicturesFromJSON draws the pictures of captured JSON lines: with
// SCATTERBENCH_PICTURES_JSON=file (and SCATTERBENCH_PICTURES_DIR, default
// the test's temporary directory) it is how scripts/bench-pictures.sh
// redraws a run it did not make; without, it skips.
func TestPicturesFromJSON(t *testing.T) {
	path := os.Getenv("SCATTERBENCH_PICTURES_JSON")
	if path == "" {
		t.Skip("SCATTERBENCH_PICTURES_JSON not set: nothing to redraw")
	}
	dir := os.Getenv("SCATTERBENCH_PICTURES_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	passes, err := ReadPasses(f)
	require.NoError(t, err)
	require.NotEmpty(t, passes)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, WritePlots(dir, passes))
	t.Logf("pictures of %s in %s", path, dir)
}

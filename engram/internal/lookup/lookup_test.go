package lookup

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/stretchr/testify/require"
)

var testRowBytes = []int{64, 128, 264, 300, 512, 1024, 4096}

// testEngines returns the engines every correctness case runs on: none
// (serial), one goroutine, and two goroutines splitting from 8 rows, so
// that the split runs on small requests. The caller closes them.
func testEngines() []struct {
	name string
	e    *Engine
} {
	split := NewEngine(2)
	split.minRows = 8
	return []struct {
		name string
		e    *Engine
	}{{"nil", nil}, {"serial", NewEngine(1)}, {"split", split}}
}

func closeEngines(engines []struct {
	name string
	e    *Engine
}) {
	for _, x := range engines {
		x.e.Close()
	}
}

// runCase runs one lookup on every engine, each time on a fresh copy of
// the poisoned output, and requires the oracle's bytes.
func runCase[I pack.ID](t *testing.T, engines []struct {
	name string
	e    *Engine
}, cols []Column, ids []I, tt, k int, out Output) {
	t.Helper()
	require.NoError(t, Check(cols, ids, tt, k, out))
	want := append([]byte(nil), out.Buf...)
	refLookup(cols, ids, tt, k, Output{Buf: want, Off: out.Off, TStride: out.TStride, KStride: out.KStride})
	for _, x := range engines {
		got := out
		got.Buf = append([]byte(nil), out.Buf...)
		require.NoError(t, Lookup(x.e, cols, ids, tt, k, got), x.name)
		requireSameBytes(t, want, got.Buf, x.name)
	}
}

func TestLookupMatchesReference(t *testing.T) {
	r := newRand(t)
	engines := testEngines()
	defer closeEngines(engines)
	shapes := [][2]int{{1, 24}, {3, 5}, {17, 24}, {40, 7}, {9, 1}, {1, 1}, {2, 70}}
	for _, rowBytes := range testRowBytes {
		for _, layout := range layouts {
			for _, mode := range shareModes {
				name := fmt.Sprintf("R=%d/%s/%s", rowBytes, layout, mode)
				t.Run(name+"/int32", func(t *testing.T) {
					testCase[int32](t, r, engines, shapes[r.IntN(len(shapes))], rowBytes, layout, mode)
				})
				t.Run(name+"/int64", func(t *testing.T) {
					testCase[int64](t, r, engines, shapes[r.IntN(len(shapes))], rowBytes, layout, mode)
				})
			}
		}
	}
}

func testCase[I pack.ID](t *testing.T, r *rand.Rand, engines []struct {
	name string
	e    *Engine
}, shape [2]int, rowBytes int, layout, mode string) {
	tt, k := shape[0], shape[1]
	var zero I
	wide := any(zero) == any(int64(0))
	cols := randomColumns(r, mode, k, rowBytes, wide)
	ids := randomIDs[I](r, cols, tt, 4)
	out := newOutput(r, layout, tt, k, rowBytes)
	t.Logf("T=%d K=%d", tt, k)
	runCase(t, engines, cols, ids, tt, k, out)
}

// TestLookupShapes runs every sharing mode and layout over shapes around
// the planner's decisions: T = 1, T below and above K, K above the inline
// limit, and large enough to split on the engine's own cost model.
func TestLookupShapes(t *testing.T) {
	r := newRand(t)
	engines := testEngines()
	defer closeEngines(engines)
	def := NewEngine(2)
	defer def.Close()
	engines = append(engines, struct {
		name string
		e    *Engine
	}{"default-model", def})
	shapes := [][2]int{{0, 0}, {0, 3}, {1, 64}, {1, 65}, {4, 24}, {23, 24}, {24, 24}, {25, 24}, {300, 24}, {5, 130}, {600, 3}}
	for _, shape := range shapes {
		for _, layout := range layouts {
			for _, mode := range shareModes {
				t.Run(fmt.Sprintf("T=%d/K=%d/%s/%s", shape[0], shape[1], layout, mode), func(t *testing.T) {
					if shape[1] == 0 {
						out := newOutput(r, layout, shape[0], 0, 264)
						runCase(t, engines, nil, []int32{}, shape[0], 0, out)
						return
					}
					testCase[int64](t, r, engines, shape, 264, layout, mode)
				})
			}
		}
	}
}

// TestSkipLeavesRows covers ids that are all -1, and -1 that is also a
// valid row under a negative offset: it still skips.
func TestSkipLeavesRows(t *testing.T) {
	r := newRand(t)
	engines := testEngines()
	defer closeEngines(engines)
	table := randomBytes(r, 20*128)
	for _, off := range []int64{0, -1, -5} {
		t.Run(fmt.Sprintf("offset=%d", off), func(t *testing.T) {
			c := Column{Rows: table, NumRows: 20, RowBytes: 128, Offset: off}
			cols := []Column{c, c, c}
			ids := []int32{-1, -1, -1, int32(off) + 1, -1, int32(off) + 2}
			out := newOutput(r, layoutToken, 2, 3, 128)
			runCase(t, engines, cols, ids, 2, 3, out)
			// Rows 0-2 and 4 of the output kept their poison.
			got := append([]byte(nil), out.Buf...)
			require.NoError(t, Lookup(engines[0].e, cols, ids, 2, 3, Output{Buf: got, TStride: 3 * 128, KStride: 128}))
			requireSameBytes(t, out.Buf[:3*128], got[:3*128], "skipped rows")
			requireSameBytes(t, out.Buf[4*128:5*128], got[4*128:5*128], "skipped row 4")
			requireSameBytes(t, table[128:256], got[3*128:4*128], "row 3")
		})
	}
}

// TestInterleavedOutput uses strides that are neither tiled nor dense but
// whose rows do not overlap (the exact rule accepts them).
func TestInterleavedOutput(t *testing.T) {
	r := newRand(t)
	engines := testEngines()
	defer closeEngines(engines)
	const rowBytes = 64
	// Rows at t*128 + k*192 for t < 3, k < 2: 0, 128, 256 and 192, 320, 448.
	out := Output{Buf: randomBytes(r, 512+7), TStride: 128, KStride: 192}
	require.Equal(t, "", overlapReason(3, 128, 2, 192, rowBytes))
	for _, mode := range shareModes {
		t.Run(mode, func(t *testing.T) {
			cols := randomColumns(r, mode, 2, rowBytes, true)
			runCase(t, engines, cols, randomIDs[int64](r, cols, 3, 5), 3, 2, out)
		})
	}
}

// TestDefinedIDTypes runs ids of a type defined on int32.
func TestDefinedIDTypes(t *testing.T) {
	type rowID int32
	r := newRand(t)
	engines := testEngines()
	defer closeEngines(engines)
	cols := randomColumns(r, shareRepeated, 6, 300, false)
	ids := randomIDs[rowID](r, cols, 50, 6)
	runCase(t, engines, cols, ids, 50, 6, newOutput(r, layoutHead, 50, 6, 300))
}

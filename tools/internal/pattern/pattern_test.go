package pattern

import (
	"bytes"
	"flag"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Uint64("seed", 0, "seed for random inputs (0 picks one from the clock)")

func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// reference fills byte by byte with At.
func reference(n int, seed, off uint64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = At(seed, off+uint64(i))
	}
	return b
}

func TestFillMatchesAt(t *testing.T) {
	r := newRand(t)
	for _, tc := range []struct {
		name string
		n    int
		off  uint64
	}{
		{"empty", 0, 5}, {"one", 1, 0}, {"unaligned-short", 5, 3}, {"aligned", 64, 8},
		{"unaligned-long", 1001, 13}, {"row", 264, 264 * 77}, {"high-offset", 333, 1<<40 + 7},
		{"random", r.IntN(5000), r.Uint64N(1 << 50)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := r.Uint64()
			got := make([]byte, tc.n)
			Fill(got, seed, tc.off)
			require.Equal(t, reference(tc.n, seed, tc.off), got)
			require.Equal(t, -1, Check(got, seed, tc.off))
		})
	}
}

func TestCheckFindsFirstDifference(t *testing.T) {
	r := newRand(t)
	seed, off := r.Uint64(), r.Uint64N(1<<30)
	b := make([]byte, 4096+r.IntN(64))
	Fill(b, seed, off)
	for _, at := range []int{0, 1, 7, 8, 100, len(b) - 1, r.IntN(len(b))} {
		t.Run(strconv.Itoa(at), func(t *testing.T) {
			c := bytes.Clone(b)
			c[at] ^= 1 << r.IntN(8)
			require.Equal(t, at, Check(c, seed, off))
			if at+1 < len(c) {
				c[len(c)-1] ^= 0x80 // a later difference does not hide the first
				require.Equal(t, at, Check(c, seed, off))
			}
		})
	}
	require.NotEqual(t, -1, Check(b, seed+1, off), "another seed is another stream")
	require.NotEqual(t, -1, Check(b, seed, off+1), "another offset is another window")
}

func TestNotZero(t *testing.T) {
	b := make([]byte, 1<<16)
	Fill(b, 0, 0)
	require.NotEqual(t, -1, bytes.IndexFunc(b, func(r rune) bool { return r != 0 }))
	zeros := bytes.Count(b, []byte{0})
	require.Less(t, zeros, len(b)/64, "about 1 byte in 256 is zero, not more")
}

func TestParallelFill(t *testing.T) {
	r := newRand(t)
	seed := r.Uint64()
	n := parallelMin*2 + 12345
	off := uint64(r.IntN(4096))
	got := make([]byte, n)
	ParallelFill(got, seed, off, 3)
	require.Equal(t, -1, Check(got, seed, off))
	small := make([]byte, 777)
	ParallelFill(small, seed, off, 0)
	require.Equal(t, reference(777, seed, off), small)
}

func TestFillAllocatesNothing(t *testing.T) {
	b := make([]byte, 4099)
	allocs := testing.AllocsPerRun(100, func() {
		Fill(b, 42, 3)
		if Check(b, 42, 3) != -1 {
			t.Fatal("mismatch")
		}
	})
	require.Zero(t, allocs)
}

// FuzzCheck checks that a window filled at any offset checks clean and
// that flipping any byte is found at its index. Seeds: testdata/check-seeds.txt
// holds "length offset flip" lines.
func FuzzCheck(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "check-seeds.txt"))
	require.NoError(f, err)
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var v [4]uint64
		for i, fld := range strings.Fields(line) {
			v[i], err = strconv.ParseUint(fld, 10, 64)
			require.NoError(f, err)
		}
		f.Add(uint16(v[0]), v[1], v[2], uint16(v[3]))
	}
	f.Fuzz(func(t *testing.T, n uint16, seed, off uint64, flip uint16) {
		b := make([]byte, int(n)%4096)
		Fill(b, seed, off)
		if got := Check(b, seed, off); got != -1 {
			t.Fatalf("clean window reports a difference at %d", got)
		}
		if len(b) == 0 {
			return
		}
		at := int(flip) % len(b)
		b[at] ^= 0x5a
		if got := Check(b, seed, off); got != at {
			t.Fatalf("flipped byte %d, Check says %d", at, got)
		}
	})
}

func BenchmarkFill(b *testing.B) {
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		Fill(buf, 7, 3)
	}
}

func BenchmarkCheck(b *testing.B) {
	buf := make([]byte, 1<<20)
	Fill(buf, 7, 3)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if Check(buf, 7, 3) != -1 {
			b.Fatal("mismatch")
		}
	}
}

func TestReader(t *testing.T) {
	const seed, n = 77, 10_007
	got, err := io.ReadAll(io.LimitReader(Reader(seed, n), n+100))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, n)
	Fill(want, seed, 0)
	if !bytes.Equal(got, want) {
		t.Fatalf("Reader gave %d bytes differing from Fill's %d", len(got), len(want))
	}
}

// TestReaderFrom: a reader from an offset streams the same bytes Fill
// puts there, across reads of any size.
func TestReaderFrom(t *testing.T) {
	r := newRand(t)
	for range 50 {
		seed, off, n := r.Uint64(), r.Uint64N(1<<20), r.Uint64N(5000)
		want := make([]byte, n)
		Fill(want, seed, off)
		got, err := io.ReadAll(ReaderFrom(seed, off, n))
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

package lookup

import (
	"flag"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"go.uber.org/goleak"
)

var seedFlag = flag.Uint64("lookup.seed", 0, "seed of the random test inputs (0: from the clock)")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newRand returns a generator seeded from -lookup.seed or the clock,
// logging the seed so that a failure can be replayed.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -lookup.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x10c4))
}

// randomBytes returns n random bytes, never all zero.
func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	fillRandom(r, b)
	return b
}

func fillRandom(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if len(b) > 0 {
		b[r.IntN(len(b))] |= 1
	}
}

// refLookup is the oracle: Lookup written plainly with bounds-checked
// slices, for a request that passes Check.
func refLookup[I pack.ID](cols []Column, ids []I, t, k int, out Output) {
	for tt := range t {
		for kk := range k {
			id := int64(ids[tt*k+kk])
			if id == -1 {
				continue
			}
			c := cols[kk]
			row := int(id - c.Offset)
			at := out.Off + tt*out.TStride + kk*out.KStride
			copy(out.Buf[at:at+c.RowBytes], c.Rows[row*c.RowBytes:(row+1)*c.RowBytes])
		}
	}
}

// requireSameBytes fails with the first differing offset, which is more use
// than a dump of two large buffers.
func requireSameBytes(t testing.TB, want, got []byte, what string) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: length %d, want %d", what, len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: first difference at byte %d: got %#x, want %#x", what, i, got[i], want[i])
		}
	}
}

// tableSet is a few random tables that the columns of a request read.
type tableSet struct {
	rowBytes int
	tables   [][]byte
	rows     []int64
}

// newTables returns n tables of rowBytes-byte rows, each with a random row
// count in [1, maxRows] and a few trailing bytes that are not rows.
func newTables(r *rand.Rand, n, rowBytes, maxRows int) tableSet {
	s := tableSet{rowBytes: rowBytes}
	for range n {
		rows := 1 + r.IntN(maxRows)
		s.tables = append(s.tables, randomBytes(r, rows*rowBytes+r.IntN(rowBytes)))
		s.rows = append(s.rows, int64(rows))
	}
	return s
}

func (s tableSet) column(i int, offset int64) Column {
	return Column{Rows: s.tables[i], NumRows: s.rows[i], RowBytes: s.rowBytes, Offset: offset}
}

// Sharing modes: how the K columns of a test request pick tables.
const (
	shareSame        = "same"        // one table, one offset
	shareDistinct    = "distinct"    // one table per column
	shareRepeated    = "repeated"    // random picks among 3 tables and 2 offsets each
	shareAlternating = "alternating" // column k reads table k%2
	shareSlices      = "slices"      // column k is a slice of one table, with global ids
)

var shareModes = []string{shareSame, shareDistinct, shareRepeated, shareAlternating, shareSlices}

// randomColumns returns k columns of rowBytes-byte rows shared as mode
// says. Offsets are random; wide allows offsets beyond the int32 range.
func randomColumns(r *rand.Rand, mode string, k, rowBytes int, wide bool) []Column {
	offset := func() int64 {
		if wide && r.IntN(2) == 0 {
			return int64(r.Uint64N(1<<50)) - 1<<49
		}
		return int64(r.IntN(2001)) - 1000
	}
	cols := make([]Column, k)
	switch mode {
	case shareSame:
		s := newTables(r, 1, rowBytes, 40)
		off := offset()
		for j := range cols {
			cols[j] = s.column(0, off)
		}
	case shareDistinct:
		s := newTables(r, k, rowBytes, 40)
		for j := range cols {
			cols[j] = s.column(j, offset())
		}
	case shareRepeated:
		s := newTables(r, 3, rowBytes, 40)
		offs := [3][2]int64{}
		for i := range offs {
			offs[i] = [2]int64{offset(), offset()}
		}
		for j := range cols {
			tb := r.IntN(3)
			cols[j] = s.column(tb, offs[tb][r.IntN(2)])
		}
	case shareAlternating:
		s := newTables(r, 2, rowBytes, 40)
		offs := [2]int64{offset(), offset()}
		for j := range cols {
			cols[j] = s.column(j%2, offs[j%2])
		}
	case shareSlices:
		span := 1 + r.IntN(20)
		big := randomBytes(r, k*span*rowBytes)
		base := offset()
		for j := range cols {
			cols[j] = Column{Rows: big[j*span*rowBytes : (j+1)*span*rowBytes], NumRows: int64(span),
				RowBytes: rowBytes, Offset: base + int64(j*span)}
		}
	default:
		panic("unknown sharing mode " + mode)
	}
	return cols
}

// randomIDs returns valid ids for cols, about one in skipEvery -1 (none
// when skipEvery is 0).
func randomIDs[I pack.ID](r *rand.Rand, cols []Column, t int, skipEvery int) []I {
	k := len(cols)
	ids := make([]I, t*k)
	for tt := range t {
		for kk, c := range cols {
			id := I(c.Offset + r.Int64N(c.NumRows))
			if skipEvery > 0 && r.IntN(skipEvery) == 0 {
				id = -1
			}
			ids[tt*k+kk] = id
		}
	}
	return ids
}

// Output layouts of the tests.
const (
	layoutToken       = "token-major"
	layoutHead        = "head-major"
	layoutPaddedToken = "padded-token"
	layoutPaddedHead  = "padded-head"
)

var layouts = []string{layoutToken, layoutHead, layoutPaddedToken, layoutPaddedHead}

// newOutput returns an output of the layout over a fresh random buffer
// (the poison that untouched rows must keep), with a random tail.
func newOutput(r *rand.Rand, layout string, t, k, rowBytes int) Output {
	var out Output
	switch layout {
	case layoutToken:
		out = TokenMajor(nil, t, k, rowBytes)
	case layoutHead:
		out = HeadMajor(nil, t, k, rowBytes)
	case layoutPaddedToken:
		out.Off = r.IntN(17)
		out.KStride = rowBytes + r.IntN(9)
		out.TStride = k*out.KStride + r.IntN(13)
	case layoutPaddedHead:
		out.Off = r.IntN(17)
		out.TStride = rowBytes + r.IntN(9)
		out.KStride = t*out.TStride + r.IntN(13)
	default:
		panic("unknown layout " + layout)
	}
	size := out.Off + rowBytes
	if t > 0 && k > 0 {
		size += (t-1)*out.TStride + (k-1)*out.KStride
	}
	out.Buf = randomBytes(r, size+r.IntN(8))
	return out
}

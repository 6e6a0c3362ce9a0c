package pack

import (
	"flag"
	"math/rand/v2"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var seedFlag = flag.Uint64("pack.seed", 0, "seed of the random test inputs (0: from the clock)")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newRand returns a generator seeded from -pack.seed or the clock, logging
// the seed so that a failure can be replayed.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -pack.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
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

// refGather is the oracle: Gather written plainly with bounds-checked
// slices, on a layout with dense strides resolved.
func refGather[I ID](dst, table []byte, ids []I, l Layout) {
	l = l.dense()
	for i := range l.Rows {
		id := int64(ids[i*l.IDStride])
		if id == -1 {
			continue
		}
		row := int(id - l.Bias)
		at := l.Off + i*l.Stride
		copy(dst[at:at+l.RowBytes], table[row*l.RowBytes:(row+1)*l.RowBytes])
	}
}

// refScatter is the oracle of Scatter.
func refScatter[I ID](table, src []byte, ids []I, l Layout) {
	l = l.dense()
	for i := range l.Rows {
		id := int64(ids[i*l.IDStride])
		if id == -1 {
			continue
		}
		row := int(id - l.Bias)
		at := l.Off + i*l.Stride
		copy(table[row*l.RowBytes:(row+1)*l.RowBytes], src[at:at+l.RowBytes])
	}
}

// refGrid is the oracle of GatherGrid.
func refGrid[I ID](dst, table []byte, ids []I, g Grid) {
	g = g.dense()
	for t := range g.T {
		for k := range g.K {
			id := int64(ids[t*g.IDTStride+k*g.IDKStride])
			if id == -1 {
				continue
			}
			row := int(id - g.Bias)
			at := g.Off + t*g.TStride + k*g.KStride
			copy(dst[at:at+g.RowBytes], table[row*g.RowBytes:(row+1)*g.RowBytes])
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

// randomIDs returns ids for rows rows spaced idStride apart naming rows of
// a table of tableRows rows plus bias, with about one in skipEvery -1 (none
// when skipEvery is 0). With distinct set, no two ids name the same row
// (tableRows must be at least rows). Ids between the used positions hold
// values that would fail the check, so a loop reading the wrong position
// shows. |bias| must stay far from the limits of I.
func randomIDs[I ID](r *rand.Rand, rows, idStride, tableRows int, bias int64, skipEvery int, distinct bool) []I {
	n := 0
	if rows > 0 {
		n = (rows-1)*idStride + 1
	}
	ids := make([]I, n)
	for i := range ids {
		ids[i] = I(int64(tableRows) + bias + 12345)
	}
	var perm []int
	if distinct {
		perm = r.Perm(tableRows)
	}
	for i := range rows {
		var row int
		if distinct {
			row = perm[i]
		} else {
			row = r.IntN(tableRows)
		}
		id := I(int64(row) + bias)
		if skipEvery > 0 && r.IntN(skipEvery) == 0 {
			id = -1
		}
		ids[i*idStride] = id
	}
	return ids
}

package structobj

import (
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Uint64("structobj.seed", 0, "seed for the randomized tests (0: from the clock)")

// newRand returns a generator from a logged seed.
func newRand(tb testing.TB) *rand.Rand {
	tb.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	tb.Logf("seed %d (rerun with -structobj.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// occupancy is the brute-force model of an arena: one flag per Align
// unit.
type occupancy []bool

// runs returns the free runs of the model, in offset order.
func (o occupancy) runs() []extent {
	var out []extent
	for i := 0; i < len(o); {
		if o[i] {
			i++
			continue
		}
		j := i
		for j < len(o) && !o[j] {
			j++
		}
		out = append(out, extent{uint64(i) * Align, uint64(j-i) * Align})
		i = j
	}
	return out
}

// bestFit returns the extent the allocator must choose for want bytes:
// the smallest free run that holds it, the lowest among equals.
func (o occupancy) bestFit(want uint64) (extent, bool) {
	best, ok := extent{}, false
	for _, r := range o.runs() {
		if r.len >= want && (!ok || r.len < best.len) {
			best, ok = r, true
		}
	}
	return extent{best.off, want}, ok
}

func (o occupancy) set(e extent, v bool) {
	for u := e.off / Align; u < e.end()/Align; u++ {
		o[u] = v
	}
}

// checkAllocator compares the allocator's free list with the model.
func checkAllocator(t *testing.T, a *allocator, o occupancy) {
	t.Helper()
	want := o.runs()
	if len(want) == 0 {
		want = nil
	}
	got := a.free
	if len(got) == 0 {
		got = nil
	}
	require.Equal(t, want, got, "free list differs from the occupancy model")
	var sum uint64
	for _, f := range a.free {
		sum += f.len
	}
	require.Equal(t, sum, a.freeBytes)
}

func TestAllocatorRandomized(t *testing.T) {
	r := newRand(t)
	for round := range 25 {
		units := 1 + r.IntN(600)
		a := newAllocator(uint64(units)*Align + uint64(r.IntN(Align))) // a ragged tail is cut
		require.Equal(t, uint64(units)*Align, a.size)
		o := make(occupancy, units)
		var live []extent
		for step := range 800 {
			switch op := r.IntN(10); {
			case op < 5: // alloc
				var n uint64
				switch r.IntN(4) {
				case 0:
					n = uint64(r.IntN(Align)) + 1
				case 1:
					n = uint64(r.IntN(8*Align)) + 1
				case 2:
					n = uint64(r.IntN(units*Align)) + 1
				default:
					n = uint64(1+r.IntN(16)) * Align
				}
				want, _ := alignUp(n)
				exp, fits := o.bestFit(want)
				e, err := a.alloc(n)
				if !fits {
					var ns *NoSpaceError
					require.ErrorAs(t, err, &ns, "round %d step %d: alloc(%d)", round, step, n)
					require.ErrorIs(t, err, ErrNoSpace)
					require.Equal(t, want, ns.Want)
					require.Equal(t, a.freeBytes, ns.Free)
					require.Less(t, ns.Largest, want)
					break
				}
				require.NoError(t, err, "round %d step %d: alloc(%d)", round, step, n)
				require.Equal(t, exp, e, "round %d step %d: alloc(%d) is not the best fit", round, step, n)
				for u := e.off / Align; u < e.end()/Align; u++ {
					require.False(t, o[u], "overlapping extent handed out")
				}
				o.set(e, true)
				live = append(live, e)
			case op < 9 && len(live) > 0: // release
				i := r.IntN(len(live))
				a.release(live[i])
				o.set(live[i], false)
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
			case len(live) > 0: // shrink
				i := r.IntN(len(live))
				e := live[i]
				n := uint64(r.IntN(int(e.len) + 1))
				s := a.shrink(e, n)
				keep, _ := alignUp(n)
				require.Equal(t, min(keep, e.len), s.len)
				if s.len > 0 {
					require.Equal(t, e.off, s.off)
				}
				o.set(e, false)
				o.set(s, true)
				if s.len == 0 {
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
				} else {
					live[i] = s
				}
			}
			checkAllocator(t, a, o)
		}
		for _, e := range live {
			a.release(e)
		}
		require.Equal(t, []extent{{0, a.size}}, a.free, "everything released: one free extent")
	}
}

func TestAllocatorEdges(t *testing.T) {
	a := newAllocator(4096)
	e, err := a.alloc(0)
	require.NoError(t, err)
	require.Equal(t, extent{}, e)
	a.release(e) // no-op
	require.Equal(t, uint64(4096), a.freeBytes)

	_, err = a.alloc(math.MaxUint64)
	var ns *NoSpaceError
	require.ErrorAs(t, err, &ns)
	require.Equal(t, uint64(math.MaxUint64), ns.Want)
	_, err = a.alloc(4097)
	require.ErrorIs(t, err, ErrNoSpace)

	whole, err := a.alloc(4096)
	require.NoError(t, err)
	require.Equal(t, extent{0, 4096}, whole)
	_, err = a.alloc(1)
	require.ErrorAs(t, err, &ns)
	require.Equal(t, &NoSpaceError{Want: Align}, ns)
	require.Contains(t, ns.Error(), "no space for 64 bytes")

	require.Panics(t, func() { a.release(extent{1, 64}) }, "misaligned")
	require.Panics(t, func() { a.release(extent{4096, 64}) }, "outside")
	require.Panics(t, func() { a.release(extent{64, math.MaxUint64 &^ 63}) }, "overflowing")
	a.release(whole)
	require.Panics(t, func() { a.release(extent{128, 64}) }, "double free")

	empty := newAllocator(63)
	require.Zero(t, empty.size)
	_, err = empty.alloc(1)
	require.ErrorIs(t, err, ErrNoSpace)
}

func TestAllocatorAllocsNothing(t *testing.T) {
	a := newAllocator(1 << 20)
	// Fragment it, so release inserts and deletes in the middle.
	var es []extent
	for range 64 {
		e, err := a.alloc(1000)
		require.NoError(t, err)
		es = append(es, e)
	}
	for i := 0; i < len(es); i += 2 {
		a.release(es[i])
	}
	allocs := testing.AllocsPerRun(100, func() {
		e, err := a.alloc(500)
		if err != nil {
			panic(err)
		}
		a.release(e)
		a.release(es[1])
		if es[1], err = a.alloc(1000); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs)
}

func TestNoSpaceErrorIs(t *testing.T) {
	err := error(&NoSpaceError{Want: 128, Free: 64, Largest: 64})
	require.True(t, errors.Is(err, ErrNoSpace))
}

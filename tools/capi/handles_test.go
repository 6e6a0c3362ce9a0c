package main

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHandles(t *testing.T) {
	hs := newHandles[int](kindBuffer)
	other := newHandles[int](kindServer)
	a, b := new(int), new(int)
	ha, err := hs.add(a)
	require.NoError(t, err)
	hb, err := hs.add(b)
	require.NoError(t, err)
	require.NotZero(t, ha)
	require.NotEqual(t, ha, hb)
	require.Same(t, a, hs.get(ha))
	require.Same(t, b, hs.get(hb))
	require.Equal(t, 2, hs.len())

	t.Run("wrong kind", func(t *testing.T) {
		require.Nil(t, other.get(ha))
		require.Nil(t, other.take(ha))
		require.Same(t, a, hs.get(ha))
	})
	t.Run("never handed out", func(t *testing.T) {
		for _, h := range []uint64{0, 1, uint64(kindBuffer) << kindShift, ha + 1<<20, ha ^ 1<<genShift, ^uint64(0)} {
			require.Nil(t, hs.get(h), "%#x", h)
			require.Nil(t, hs.take(h), "%#x", h)
		}
	})
	t.Run("stale", func(t *testing.T) {
		require.Same(t, a, hs.take(ha))
		require.Nil(t, hs.get(ha))
		require.Nil(t, hs.take(ha))
		// The slot is reused under a new generation: the old handle
		// still finds nothing.
		c := new(int)
		var hc uint64
		for range 3 { // FIFO reuse: the freed slot comes back soon
			hc, err = hs.add(c)
			require.NoError(t, err)
			if hc&(1<<indexBits-1) == ha&(1<<indexBits-1) {
				break
			}
		}
		require.Equal(t, ha&(1<<indexBits-1), hc&(1<<indexBits-1), "slot reused")
		require.NotEqual(t, ha, hc)
		require.Nil(t, hs.get(ha))
		require.Same(t, c, hs.get(hc))
	})
}

// Concurrent adds, gets and takes: every take wins once, gets see only
// live objects (run with -race).
func TestHandlesConcurrent(t *testing.T) {
	hs := newHandles[int](kindColumns)
	const workers, rounds = 4, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				v := new(int)
				*v = w*rounds + i
				h, err := hs.add(v)
				if err != nil {
					t.Error(err)
					return
				}
				if got := hs.get(h); got != v {
					t.Errorf("get %#x: %p, want %p", h, got, v)
				}
				// Two racing takes: one wins.
				var won [2]*int
				var tw sync.WaitGroup
				for j := range won {
					tw.Add(1)
					go func() { defer tw.Done(); won[j] = hs.take(h) }()
				}
				tw.Wait()
				if (won[0] == nil) == (won[1] == nil) {
					t.Errorf("take %#x: %v", h, won)
				}
				if hs.get(h) != nil {
					t.Errorf("get after take %#x", h)
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(t, hs.len())
}

func TestHandlesGetAllocs(t *testing.T) {
	hs := newHandles[int](kindStore)
	h, err := hs.add(new(int))
	require.NoError(t, err)
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = hs.get(h) }))
}

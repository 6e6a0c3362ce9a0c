package bufferpool

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// propertyConfigs are the pools the property test and the fuzz target run
// against: several roots, capped classes, a single class.
var propertyConfigs = []Config{
	{Budget: 13 * page, MinSlot: page, NoHugePages: true},
	{Budget: 64 * page, MinSlot: page, MaxSlot: 8 * page, NoHugePages: true},
	{Budget: 5 * page, MinSlot: page, MaxSlot: page, NoHugePages: true},
	{Budget: 40 * page, MinSlot: 2 * page, NoHugePages: true},
}

type modelLease struct {
	l   Lease
	key uint64
}

// model replays a byte script against a pool and checks after every step
// that live leases never overlap, keep their contents, and are accounted
// for exactly; a released handle must stay dead.
type model struct {
	t        testing.TB
	p        *Pool
	live     []modelLease
	released []Lease
	keys     uint64
}

// run interprets script: each op byte picks acquire, release or a stale
// release, and the following bytes give its arguments.
func (m *model) run(script []byte) {
	st := m.p.Stats()
	maxOrder := m.p.geo.maxOrder
	for i := 0; i < len(script); i++ {
		arg := func() int {
			if i+1 >= len(script) {
				return 0
			}
			i++
			return int(script[i])
		}
		switch script[i] % 4 {
		case 0, 1:
			class := st.MinSlot << (arg() % (maxOrder + 1))
			size := 1 + (arg()<<8|arg())%class
			m.acquire(size)
		case 2:
			if len(m.live) > 0 {
				m.release(arg() % len(m.live))
			}
		case 3:
			if len(m.released) > 0 {
				m.stale(m.released[arg()%len(m.released)])
			}
		}
		m.check()
	}
	for len(m.live) > 0 {
		m.release(len(m.live) - 1)
	}
	m.check()
	end := m.p.Stats()
	require.Equal(m.t, end.MaxSlot, end.LargestFree, "free memory must coalesce back")
	fresh := newBuddy(m.p.geo.units, m.p.geo.maxOrder)
	if diff := cmp.Diff(freeBlocks(m.t, &fresh), freeBlocks(m.t, &m.p.alloc)); diff != "" {
		m.t.Fatalf("free blocks after releasing everything (-roots +got):\n%s", diff)
	}
}

func (m *model) acquire(size int) {
	t := m.t
	before := m.p.Stats()
	l, err := m.p.TryAcquire(size)
	order, oerr := m.p.orderFor(size)
	require.NoError(t, oerr)
	class := m.p.classBytes(order)
	if errors.Is(err, ErrExhausted) {
		require.Less(t, before.LargestFree, class, "TryAcquire(%d) refused with a %d-byte block free", size, before.LargestFree)
		return
	}
	require.NoError(t, err)
	require.Equal(t, class, l.Class())
	require.Zero(t, l.Offset()%class, "misaligned lease")
	require.LessOrEqual(t, l.Offset()+class, before.Budget, "lease past the arena")
	for _, o := range m.live {
		lo, hi := o.l.Offset(), o.l.Offset()+o.l.Class()
		require.False(t, l.Offset() < hi && lo < l.Offset()+class,
			"lease [%d,%d) overlaps live lease [%d,%d)", l.Offset(), l.Offset()+class, lo, hi)
	}
	m.keys++
	fill(l.Bytes(), m.keys)
	m.live = append(m.live, modelLease{l, m.keys})
}

func (m *model) release(i int) {
	h := m.live[i]
	require.True(m.t, filled(h.l.Bytes(), h.key), "lease at %d changed while held", h.l.Offset())
	require.NoError(m.t, h.l.Release())
	require.Nil(m.t, h.l.Bytes())
	m.live = slices.Delete(m.live, i, i+1)
	if len(m.released) == 8 {
		m.released = slices.Delete(m.released, 0, 1)
	}
	m.released = append(m.released, h.l)
}

func (m *model) stale(l Lease) {
	before := m.p.Stats()
	require.ErrorIs(m.t, l.Release(), ErrDoubleRelease)
	require.Nil(m.t, l.Bytes())
	if diff := cmp.Diff(before, m.p.Stats()); diff != "" {
		m.t.Fatalf("stale release changed the pool (-before +after):\n%s", diff)
	}
}

func (m *model) check() {
	st := m.p.Stats()
	inUse, requested := 0, 0
	for _, o := range m.live {
		inUse += o.l.Class()
		requested += o.l.Size()
	}
	require.Equal(m.t, inUse, st.InUse, "InUse")
	require.Equal(m.t, requested, st.Requested, "Requested")
	require.Equal(m.t, len(m.live), st.Leases, "Leases")
	require.LessOrEqual(m.t, st.InUse, st.Budget, "InUse above the budget")
	require.GreaterOrEqual(m.t, st.Peak, st.InUse, "Peak")
	require.Equal(m.t, st.Acquires-st.Releases, uint64(st.Leases))
}

func TestRandomSequences(t *testing.T) {
	rng := newRand(t)
	for i, cfg := range propertyConfigs {
		t.Run(cfgName(i), func(t *testing.T) {
			p := newTestPool(t, cfg)
			script := make([]byte, 4000)
			for j := range script {
				script[j] = byte(rng.Uint32())
			}
			(&model{t: t, p: p}).run(script)
		})
	}
}

func cfgName(i int) string { return "config" + string(rune('0'+i)) }

// FuzzAllocator replays arbitrary scripts: byte 0 picks a config from
// propertyConfigs, the rest is the op script model.run interprets. Seeds
// are in testdata/fuzz/FuzzAllocator.
func FuzzAllocator(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		cfg := propertyConfigs[int(data[0])%len(propertyConfigs)]
		script := data[1:]
		if len(script) > 4096 {
			script = script[:4096]
		}
		p := newTestPool(t, cfg)
		(&model{t: t, p: p}).run(script)
	})
}

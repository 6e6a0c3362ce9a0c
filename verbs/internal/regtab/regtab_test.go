package regtab

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

func region(t *testing.T, size int, a verbs.Access) *verbs.Region {
	t.Helper()
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i) | 1
	}
	r, err := verbs.NewRegion(buf, a)
	require.NoError(t, err)
	return r
}

func TestRegistry(t *testing.T) {
	g := NewRegistry()
	a := region(t, 100, verbs.AccessLocal|verbs.AccessRemoteRead)
	b := region(t, 50, verbs.AccessRemoteRead)
	require.NoError(t, g.Add(a, "data-a"))
	require.NoError(t, g.Add(b, nil))

	pins, err := g.Pin([]verbs.Export{{Name: "a", Region: a}})
	require.NoError(t, err)
	require.Equal(t, "data-a", pins[0].Data)
	_, err = g.Remove(a)
	require.ErrorIs(t, err, verbs.ErrInUse)

	stranger := region(t, 10, verbs.AccessLocal)
	_, err = g.Pin([]verbs.Export{{Name: "b", Region: b}, {Name: "s", Region: stranger}})
	require.ErrorIs(t, err, verbs.ErrBadKey)
	_, err = g.Remove(b) // the failed Pin pinned nothing
	require.NoError(t, err)
	_, err = g.Remove(b)
	require.ErrorIs(t, err, verbs.ErrBadKey)
	_, err = g.Remove(nil)
	require.ErrorIs(t, err, verbs.ErrInvalid)

	g.Unpin(pins)
	e, err := g.Remove(a)
	require.NoError(t, err)
	require.Same(t, a, e.Region)

	require.NoError(t, g.Add(a, nil))
	all := g.CloseAll()
	require.Len(t, all, 1)
	require.ErrorIs(t, g.Add(b, nil), verbs.ErrClosed)
	_, err = g.Pin(nil)
	require.ErrorIs(t, err, verbs.ErrClosed)
}

func TestLocal(t *testing.T) {
	g := NewRegistry()
	a := region(t, 100, verbs.AccessLocal)
	b := region(t, 200, verbs.AccessLocal)
	ro := region(t, 10, verbs.AccessRemoteRead)
	for _, r := range []*verbs.Region{a, b, ro} {
		require.NoError(t, g.Add(r, nil))
	}
	g.RLock()
	defer g.RUnlock()
	var c Cursor
	for _, tc := range []struct {
		key  verbs.Key
		off  uint64
		n    uint32
		want []byte
		err  error
	}{
		{a.Key(), 0, 100, a.Bytes(), nil},
		{a.Key(), 100, 0, a.Bytes()[100:], nil},
		{a.Key(), 90, 11, nil, verbs.ErrBounds},
		{b.Key(), 150, 50, b.Bytes()[150:], nil}, // the cursor moves to b
		{b.Key(), 201, 0, nil, verbs.ErrBounds},
		{a.Key(), math.MaxUint64, 2, nil, verbs.ErrBounds},
		{ro.Key(), 0, 1, nil, verbs.ErrAccess},
		{0, 0, 0, nil, verbs.ErrBadKey},
		{12345, 0, 0, nil, verbs.ErrBadKey},
		{a.Key(), 1, 2, a.Bytes()[1:3], nil},
	} {
		got, err := g.Local(&c, tc.key, tc.off, tc.n)
		if tc.err != nil {
			require.ErrorIs(t, err, tc.err, "key %s off %d n %d", tc.key, tc.off, tc.n)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
		if len(tc.want) > 0 {
			require.Same(t, &tc.want[0], &got[0], "not a view of the region")
		}
	}
}

func TestTable(t *testing.T) {
	for _, n := range []int{1, 8, 9, 40} { // linear scan and map lookups
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var entries []TableEntry
			for i := range n {
				r := region(t, 64+i, verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
				entries = append(entries, TableEntry{Info: r.Info(fmt.Sprint("r", i)), Mem: r.Bytes()})
			}
			wo := region(t, 16, verbs.AccessRemoteWrite)
			hidden := region(t, 32, verbs.AccessRemoteRead)
			entries = append(entries, TableEntry{Info: wo.Info("wo"), Mem: wo.Bytes()},
				TableEntry{Info: hidden.Info("hidden"), Mem: hidden.Bytes(), Hidden: true})
			tab := NewTable(entries)
			require.Len(t, tab.Infos(), n+1, "hidden entries are not listed")
			var c Cursor
			last := entries[n-1]
			for _, tc := range []struct {
				name string
				key  verbs.Key
				off  uint64
				ln   uint32
				need verbs.Access
				st   verbs.Status
			}{
				{"ok", last.Info.Key, 1, 10, verbs.AccessRemoteRead, verbs.StatusOK},
				{"end", last.Info.Key, last.Info.Len, 0, verbs.AccessRemoteWrite, verbs.StatusOK},
				{"bounds", last.Info.Key, last.Info.Len - 1, 2, verbs.AccessRemoteRead, verbs.StatusBounds},
				{"overflow", last.Info.Key, math.MaxUint64 - 1, 4, verbs.AccessRemoteRead, verbs.StatusBounds},
				{"write-only", wo.Key(), 0, 1, verbs.AccessRemoteRead, verbs.StatusAccess},
				{"write-only-write", wo.Key(), 0, 16, verbs.AccessRemoteWrite, verbs.StatusOK},
				{"hidden", hidden.Key(), 0, 32, verbs.AccessRemoteRead, verbs.StatusOK},
				{"unknown", 777, 0, 1, verbs.AccessRemoteRead, verbs.StatusBadKey},
				{"zero", 0, 0, 0, verbs.AccessRemoteRead, verbs.StatusBadKey},
				{"first", entries[0].Info.Key, 0, 64, verbs.AccessRemoteWrite, verbs.StatusOK},
			} {
				mem, st := tab.Resolve(&c, tc.key, tc.off, tc.ln, tc.need)
				require.Equal(t, tc.st, st, tc.name)
				if st == verbs.StatusOK {
					require.Len(t, mem, int(tc.ln), tc.name)
				}
			}
		})
	}
}

func TestResolveAllocs(t *testing.T) {
	r := region(t, 4096, verbs.AccessRemoteRead)
	tab := NewTable([]TableEntry{{Info: r.Info("r"), Mem: r.Bytes()}})
	var c Cursor
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if _, st := tab.Resolve(&c, r.Key(), 100, 264, verbs.AccessRemoteRead); st != verbs.StatusOK {
			t.Fatal(st)
		}
	}))
}

func TestRegister(t *testing.T) {
	g := NewRegistry()
	buf := make([]byte, 32)
	for i := range buf {
		buf[i] = byte(i) | 1
	}
	r, err := g.Register(buf, verbs.AccessLocal|verbs.AccessRemoteRead)
	require.NoError(t, err)
	require.Same(t, &buf[0], &r.Bytes()[0], "caller-owned memory")
	pins, err := g.Pin([]verbs.Export{{Name: "r", Region: r}})
	require.NoError(t, err)
	require.Nil(t, pins[0].Data, "no backend data")
	g.Unpin(pins)

	_, err = g.Register(nil, verbs.AccessLocal)
	require.ErrorIs(t, err, verbs.ErrInvalid)
	require.ErrorContains(t, err, "register: ")
	_, err = g.Register(buf, verbs.Access(0xff))
	require.ErrorIs(t, err, verbs.ErrInvalid)

	require.Len(t, g.CloseAll(), 1)
	_, err = g.Register(buf, verbs.AccessLocal)
	require.ErrorIs(t, err, verbs.ErrClosed)
	require.EqualError(t, err, "register: "+verbs.ErrClosed.Error())
}

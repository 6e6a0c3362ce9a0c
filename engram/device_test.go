package engram

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeDevice records what the store asks of a Device.
type fakeDevice struct {
	mapped   map[uint64][]byte
	next     uint64
	host     bool
	lastCall []uint64
	lastArgs [6]int64
	failMap  bool
}

func (f *fakeDevice) MapTable(rows []byte, numRows int64, rowBytes int, host bool) (uint64, error) {
	if f.failMap && f.next == 1 {
		return 0, errors.New("out of device memory")
	}
	if f.mapped == nil {
		f.mapped = map[uint64][]byte{}
	}
	if int64(len(rows)) != numRows*int64(rowBytes) {
		return 0, errors.New("size mismatch")
	}
	f.next++
	f.mapped[f.next] = rows
	f.host = host
	return f.next, nil
}

func (f *fakeDevice) UnmapTable(h uint64) error {
	if _, ok := f.mapped[h]; !ok {
		return errors.New("unknown handle")
	}
	delete(f.mapped, h)
	return nil
}

func (f *fakeDevice) LookupTables(stream uintptr, tables []uint64, ids uintptr, ids64 bool, t, k int,
	out uintptr, outBytes, off, tStride, kStride int64, offsets []int64, strict bool) error {
	f.lastCall = append(f.lastCall[:0], tables...)
	f.lastArgs = [6]int64{int64(stream), int64(t), int64(k), outBytes, tStride, kStride}
	return nil
}

func TestAttachDevice(t *testing.T) {
	r := newRand(t)
	spec := TableSpec{NumRows: 50, RowBytes: 64}
	s := openLocal(t, t.TempDir(), map[string]TableSpec{"a": spec, "b": spec, "empty": spec})
	defer s.Close()
	rowsA, rowsB := randRows(r, spec), randRows(r, spec)
	require.NoError(t, s.Populate("a", rowsA))
	require.NoError(t, s.Populate("b", rowsB))

	dev := &fakeDevice{}
	dt, err := s.AttachDevice(dev, DeviceOptions{Host: true})
	require.NoError(t, err)
	require.True(t, dev.host)
	require.Len(t, dev.mapped, 2, "only populated tables are mapped")
	for _, rows := range dev.mapped {
		// The device gets the snapshot mappings themselves.
		require.True(t, &rows[0] == &s.tables["a"].rows[0] || &rows[0] == &s.tables["b"].rows[0])
	}

	require.NoError(t, dt.Lookup(7, []string{"a", "b", "a"}, 0x1000, true, 4, 3, 0x2000, 4*3*64, 0, 3*64, 64, nil))
	require.Len(t, dev.lastCall, 3)
	require.Equal(t, dev.lastCall[0], dev.lastCall[2])
	require.NotEqual(t, dev.lastCall[0], dev.lastCall[1])
	require.Equal(t, [6]int64{7, 4, 3, 4 * 3 * 64, 3 * 64, 64}, dev.lastArgs)

	require.ErrorIs(t, dt.Lookup(0, []string{"a", "zz"}, 1, true, 1, 2, 1, 128, 0, 128, 64, nil), ErrUnknownTable)
	require.ErrorIs(t, dt.Lookup(0, []string{"a", "empty"}, 1, true, 1, 2, 1, 128, 0, 128, 64, nil), ErrNotPopulated)
	require.ErrorIs(t, dt.Lookup(0, []string{"a"}, 1, true, 1, 2, 1, 128, 0, 128, 64, nil), ErrShape)

	// Mapped tables stay: Remove refuses them until the device lets go.
	require.ErrorIs(t, s.Remove("a"), ErrServed)
	require.NoError(t, dt.Close())
	require.NoError(t, dt.Close())
	require.Empty(t, dev.mapped, "Close unmaps every table")
	require.ErrorIs(t, dt.Lookup(0, []string{"a"}, 1, true, 1, 1, 1, 64, 0, 64, 64, nil), ErrClosed)
	require.NoError(t, s.Remove("a"))

	// A failed mapping unmaps what was mapped and attaches nothing.
	bad := &fakeDevice{failMap: true, next: 1}
	_, err = s.AttachDevice(bad, DeviceOptions{})
	require.Error(t, err)
	require.Empty(t, bad.mapped)

	// Close of the store closes its device tables.
	dev2 := &fakeDevice{}
	_, err = s.AttachDevice(dev2, DeviceOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Empty(t, dev2.mapped)
	_, err = s.AttachDevice(dev2, DeviceOptions{})
	require.ErrorIs(t, err, ErrClosed)
}

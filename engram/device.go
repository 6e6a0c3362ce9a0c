package engram

import (
	"errors"
	"fmt"
	"sync"
)

// Device is what engram needs from a CUDA lookup backend; engram never
// links CUDA itself. cudagather.Context (build tag `cuda`) satisfies it:
//
//	ctx, _ := cudagather.NewContext(0)
//	dt, _ := store.AttachDevice(ctx, engram.DeviceOptions{Host: true})
//	err := dt.Lookup(stream, tables, ids, ...)
//
// The signatures use built-in types only, so the two packages never import
// each other.
type Device interface {
	// MapTable makes rows (numRows x rowBytes bytes that stay valid and
	// unchanged until UnmapTable) readable by the device: registered host
	// memory read over PCIe (host) or a device copy. It returns a handle.
	MapTable(rows []byte, numRows int64, rowBytes int, host bool) (uint64, error)
	// UnmapTable releases a handle; no pending work may read the table.
	UnmapTable(h uint64) error
	// LookupTables enqueues a lookup on stream (a CUstream handle): ids
	// [t,k] (int32, or int64 when ids64) at device address ids; output rows
	// at out + off + t*tStride + k*kStride within outBytes; one table
	// handle per column; optional per-column offsets; strict: nothing is
	// written when an id is out of range.
	LookupTables(stream uintptr, tables []uint64, ids uintptr, ids64 bool, t, k int,
		out uintptr, outBytes, off, tStride, kStride int64, offsets []int64, strict bool) error
}

// DeviceOptions configures Store.AttachDevice.
type DeviceOptions struct {
	// Host registers the snapshots' mappings with the device (zero-copy,
	// pinned in full) instead of copying the tables into device memory.
	Host bool
}

// DeviceTables is a store's populated tables mapped for a Device. While it
// is open the store keeps those tables mapped: Remove refuses them and
// Close closes the DeviceTables first.
type DeviceTables struct {
	s       *Store
	dev     Device
	handles map[string]uint64
	scratch sync.Pool // *[]uint64
	once    sync.Once
	err     error
}

// AttachDevice maps every populated table of a local store for dev.
func (s *Store) AttachDevice(dev Device, opts DeviceOptions) (*DeviceTables, error) {
	if dev == nil {
		return nil, fmt.Errorf("%w: nil device", ErrConfig)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.remote != nil {
		return nil, fmt.Errorf("%w: device lookups read local snapshots; this store is remote", ErrConfig)
	}
	dt := &DeviceTables{s: s, dev: dev, handles: map[string]uint64{}}
	dt.scratch.New = func() any { b := make([]uint64, 0, 64); return &b }
	for _, name := range s.names {
		t := s.tables[name]
		if t.rows == nil {
			continue
		}
		h, err := dev.MapTable(t.rows, t.spec.NumRows, t.spec.RowBytes, opts.Host)
		if err != nil {
			err = &TableError{Table: name, Op: "map for the device", Err: err}
			return nil, errors.Join(err, dt.unmapLocked())
		}
		dt.handles[name] = h
	}
	if len(dt.handles) == 0 {
		return nil, fmt.Errorf("%w: no populated table to map", ErrNotPopulated)
	}
	s.devices = append(s.devices, dt)
	return dt, nil
}

// Lookup enqueues a device lookup on stream: tables names one table per
// column (names may repeat), ids is the device address of the [t,k] ids
// and out of the output buffer of outBytes bytes; row (t, k) goes to
// out + off + t*tStride + k*kStride. It returns once the work is enqueued;
// bad ids are the device's to report (cudagather: Context.Status).
func (dt *DeviceTables) Lookup(stream uintptr, tables []string, ids uintptr, ids64 bool, t, k int,
	out uintptr, outBytes, off, tStride, kStride int64, opts *LookupOptions) error {
	var offsets []int64
	if opts != nil {
		offsets = opts.Offsets
	}
	if len(tables) != k || (offsets != nil && len(offsets) != k) {
		return fmt.Errorf("%w: %d table names and %d offsets for K=%d", ErrShape, len(tables), len(offsets), k)
	}
	dt.s.mu.RLock()
	defer dt.s.mu.RUnlock()
	if dt.handles == nil {
		return ErrClosed
	}
	hp := dt.scratch.Get().(*[]uint64)
	defer dt.scratch.Put(hp)
	hs := (*hp)[:0]
	for _, name := range tables {
		h, ok := dt.handles[name]
		if !ok {
			if _, declared := dt.s.tables[name]; declared {
				return &TableError{Table: name, Op: "device lookup", Err: ErrNotPopulated}
			}
			return &TableError{Table: name, Op: "device lookup", Err: ErrUnknownTable}
		}
		hs = append(hs, h)
	}
	*hp = hs
	return dt.dev.LookupTables(stream, hs, ids, ids64, t, k, out, outBytes, off, tStride, kStride, offsets, false)
}

// Close unmaps the tables from the device (pending device work must have
// finished). It is idempotent.
func (dt *DeviceTables) Close() error {
	dt.s.mu.Lock()
	defer dt.s.mu.Unlock()
	return dt.closeLocked()
}

func (dt *DeviceTables) closeLocked() error {
	dt.once.Do(func() {
		dt.err = dt.unmapLocked()
		for i, x := range dt.s.devices {
			if x == dt {
				dt.s.devices = append(dt.s.devices[:i], dt.s.devices[i+1:]...)
				break
			}
		}
	})
	return dt.err
}

func (dt *DeviceTables) unmapLocked() error {
	var err error
	for name, h := range dt.handles {
		if e := dt.dev.UnmapTable(h); e != nil {
			err = errors.Join(err, &TableError{Table: name, Op: "unmap from the device", Err: e})
		}
	}
	dt.handles = nil
	return err
}

// mapped reports whether an open DeviceTables maps the named table.
func (s *Store) mapped(name string) bool {
	for _, dt := range s.devices {
		if _, ok := dt.handles[name]; ok {
			return true
		}
	}
	return false
}

package snapshot

import (
	"fmt"
	"path/filepath"
	"sync"
)

// PinMode says how Open holds a table's rows in memory.
type PinMode uint8

const (
	// PinNone maps the rows and leaves paging to the kernel: pages are read
	// on first touch (the checksum pass touches them all unless
	// SkipRowChecksums is set) and may be evicted under memory pressure.
	PinNone PinMode = iota
	// PinBestEffort populates every page and locks the rows in memory
	// (mlock) when the system allows it. When it does not (no
	// CAP_IPC_LOCK and RLIMIT_MEMLOCK too small), Open still succeeds
	// with the pages populated but unlocked: they stay resident until
	// memory pressure evicts them, and are then read back from the file on
	// touch. Table.Locked is false and Table.PinErr says why.
	PinBestEffort
	// PinRequired is PinBestEffort where a refused mlock fails Open with a
	// [*PinError] (matching ErrPin); nothing stays mapped.
	PinRequired
)

func (m PinMode) String() string {
	switch m {
	case PinNone:
		return "none"
	case PinBestEffort:
		return "best-effort"
	case PinRequired:
		return "required"
	}
	return fmt.Sprintf("PinMode(%d)", uint8(m))
}

// OpenOptions tunes Open; nil means all defaults (no pinning, rows
// verified).
type OpenOptions struct {
	// Pin says how to hold the rows in memory.
	Pin PinMode
	// SkipRowChecksums skips checking every row block's CRC32C. The
	// header, the layout, the file size, the checksum table's own CRC and
	// the zero padding before row 0 are always checked.
	SkipRowChecksums bool
}

func (o *OpenOptions) resolve() (OpenOptions, error) {
	var r OpenOptions
	if o != nil {
		r = *o
	}
	if r.Pin > PinRequired {
		return r, &OptionError{Field: "Pin", Value: int64(r.Pin), Reason: "must be PinNone, PinBestEffort or PinRequired"}
	}
	return r, nil
}

// Table is an open, read-only table: its rows mapped shared from the file,
// so every process that opens the same table shares one copy of its pages.
// The fields are set by Open and must not be changed. Rows stays valid
// until Close, even if the table is removed meanwhile; Close must not run
// while Rows is still in use.
type Table struct {
	Spec   Spec   // the table's spec
	Header Header // the file's header
	Path   string // the file
	// Rows is exactly Spec.Size() bytes, row i at i*RowBytes. It is a
	// read-only mapping: writing to it faults (the process crashes).
	Rows     []byte
	Pin      PinMode // the pin mode it was opened with
	Verified bool    // every row block's CRC32C was checked at Open
	Locked   bool    // the rows are locked in memory (mlock)
	// PinErr is why a PinBestEffort table is not locked (a *PinError
	// matching ErrPin), else nil.
	PinErr error

	mu      sync.Mutex
	mapping []byte // the whole mapping, from a page-aligned file offset
}

// Row returns row i (a read-only view into Rows), or nil when i is out of
// range or the table is closed.
func (t *Table) Row(i int64) []byte {
	if i < 0 || i >= t.Spec.NumRows || t.Rows == nil {
		return nil
	}
	rb := int64(t.Spec.RowBytes)
	return t.Rows[i*rb : (i+1)*rb : (i+1)*rb]
}

// Close unmaps the rows (which unlocks them). It is idempotent: later calls
// return nil. Rows and Row are nil afterwards.
func (t *Table) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mapping == nil {
		return nil
	}
	err := unmap(t.mapping)
	t.mapping, t.Rows, t.Locked = nil, nil, false
	if err != nil {
		return &OpError{Op: "close", Dir: filepath.Dir(t.Path), Name: t.Spec.Name, Step: "munmap", Err: err}
	}
	return nil
}

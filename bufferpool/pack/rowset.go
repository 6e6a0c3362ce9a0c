package pack

import (
	"math/bits"
	"sync"
)

// rowSet is an open-addressing set of table rows, sized from the number of
// ids rather than the table, used to find a scatter id that names a row an
// earlier id names too. Sets are pooled, so a checked scatter allocates only
// when the pool is empty or too small.
type rowSet struct {
	slots []int64 // -1 marks an empty slot; rows are never negative
	shift uint
}

// maxPooledSlots bounds the sets kept for reuse (8 bytes a slot).
const maxPooledSlots = 1 << 22

var rowSets = sync.Pool{New: func() any { return new(rowSet) }}

// reset empties s and sizes it for n rows at a load of at most one half.
func (s *rowSet) reset(n int) {
	logSize := max(4, bits.Len(uint(2*n-1)))
	size := 1 << logSize
	if cap(s.slots) < size {
		s.slots = make([]int64, size)
	}
	s.slots = s.slots[:size]
	for i := range s.slots {
		s.slots[i] = -1
	}
	s.shift = uint(64 - logSize)
}

// insert adds row, a non-negative row index, and reports whether it was
// absent.
func (s *rowSet) insert(row int64) bool {
	mask := len(s.slots) - 1
	i := int((uint64(row) * 0x9e3779b97f4a7c15) >> s.shift)
	for {
		switch s.slots[i] {
		case row:
			return false
		case -1:
			s.slots[i] = row
			return true
		}
		i = (i + 1) & mask
	}
}

// release returns s to the pool unless it grew too large to keep.
func (s *rowSet) release() {
	if cap(s.slots) <= maxPooledSlots {
		rowSets.Put(s)
	}
}

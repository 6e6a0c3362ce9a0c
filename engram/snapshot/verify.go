package snapshot

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"
	"sync/atomic"
)

// verifyGrab is about how many row bytes a verifying goroutine takes at a
// time; parallelChecksum is the table size from which Open spreads the
// check over several goroutines.
const (
	verifyGrab       = 8 << 20
	parallelChecksum = 32 << 20
)

// checkRows compares the CRC32C of every block of rows with the checksum
// table and returns the index of the first bad block, or -1. It reads every
// byte once, spread over up to workers goroutines (1: the caller's).
func checkRows(rows, sums []byte, h *Header, workers int) int64 {
	if workers <= 1 || h.NumBlocks == 1 {
		return checkBlocks(rows, sums, h, 0, h.NumBlocks, -1)
	}
	// Each grab is at most verifyGrab bytes and small enough that every
	// worker gets several, so a fast worker can take over a slow one's share.
	grab := max(min(verifyGrab, int64(len(rows))/int64(4*workers))/h.BlockBytes(), 1)
	workers = int(min(int64(workers), (h.NumBlocks+grab-1)/grab))
	var next atomic.Int64
	var bad atomic.Int64
	bad.Store(h.NumBlocks) // no bad block yet
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				first := next.Add(grab) - grab
				if first >= h.NumBlocks || first >= bad.Load() {
					return
				}
				if b := checkBlocks(rows, sums, h, first, min(first+grab, h.NumBlocks), bad.Load()); b >= 0 {
					for {
						cur := bad.Load()
						if b >= cur || bad.CompareAndSwap(cur, b) {
							break
						}
					}
				}
			}
		})
	}
	wg.Wait()
	if b := bad.Load(); b < h.NumBlocks {
		return b
	}
	return -1
}

// checkBlocks checks blocks [first, end) in order and returns the first
// bad one, or -1. It stops early at block stop (when stop >= 0), since a
// lower bad block was found elsewhere.
func checkBlocks(rows, sums []byte, h *Header, first, end, stop int64) int64 {
	bb := h.BlockBytes()
	size := int64(len(rows))
	for i := first; i < end; i++ {
		if stop >= 0 && i >= stop {
			return -1
		}
		lo := i * bb
		hi := min(lo+bb, size)
		if crc32.Checksum(rows[lo:hi], castagnoli) != binary.LittleEndian.Uint32(sums[4*i:]) {
			return i
		}
	}
	return -1
}

// rowsError describes a bad block of rows.
func rowsError(path string, rows, sums []byte, h *Header, block int64) *CorruptError {
	first, end := h.BlockRowRange(block)
	lo := first * int64(h.Spec.RowBytes)
	hi := end * int64(h.Spec.RowBytes)
	return &CorruptError{
		Path: path, Field: fieldRows, Offset: h.RowOffset + lo, FirstRow: first, EndRow: end,
		Detail: fmt.Sprintf("block %d CRC %#08x, the checksum table says %#08x",
			block, crc32.Checksum(rows[lo:hi], castagnoli), binary.LittleEndian.Uint32(sums[4*block:])),
		Err: ErrCorrupt,
	}
}

// verifyWorkers is how many goroutines check a table of size bytes.
func verifyWorkers(size int64) int {
	if size < parallelChecksum {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}

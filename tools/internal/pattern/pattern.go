package pattern

import (
	"encoding/binary"
	"io"
	"runtime"
	"sync"
)

// word returns word w of the stream of seed.
func word(seed, w uint64) uint64 {
	z := seed + (w+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// At returns byte off of the stream of seed.
func At(seed, off uint64) byte {
	return byte(word(seed, off/8) >> (8 * (off % 8)))
}

// Fill writes bytes [off, off+len(dst)) of the stream of seed into dst.
func Fill(dst []byte, seed, off uint64) {
	i := 0
	// Head: up to the next word boundary of the stream.
	for ; i < len(dst) && (off+uint64(i))%8 != 0; i++ {
		dst[i] = At(seed, off+uint64(i))
	}
	w := (off + uint64(i)) / 8
	for ; i+8 <= len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], word(seed, w))
		w++
	}
	for ; i < len(dst); i++ {
		dst[i] = At(seed, off+uint64(i))
	}
}

// Check compares b with bytes [off, off+len(b)) of the stream of seed and
// returns the index of the first byte that differs, or -1 when all match.
func Check(b []byte, seed, off uint64) int {
	i := 0
	for ; i < len(b) && (off+uint64(i))%8 != 0; i++ {
		if b[i] != At(seed, off+uint64(i)) {
			return i
		}
	}
	w := (off + uint64(i)) / 8
	for ; i+8 <= len(b); i += 8 {
		if x := binary.LittleEndian.Uint64(b[i:]) ^ word(seed, w); x != 0 {
			for j := range 8 {
				if byte(x>>(8*j)) != 0 {
					return i + j
				}
			}
		}
		w++
	}
	for ; i < len(b); i++ {
		if b[i] != At(seed, off+uint64(i)) {
			return i
		}
	}
	return -1
}

// parallelMin is the smallest fill split among goroutines.
const parallelMin = 4 << 20

// ParallelFill is Fill split among up to workers goroutines (GOMAXPROCS
// when workers < 1) in pieces of whole 4 KiB pages, so each page is first
// touched by the goroutine that fills it.
func ParallelFill(dst []byte, seed, off uint64, workers int) {
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	if workers == 1 || len(dst) < parallelMin {
		Fill(dst, seed, off)
		return
	}
	const page = 4096
	per := (len(dst)/workers + page - 1) / page * page
	var wg sync.WaitGroup
	for lo := 0; lo < len(dst); lo += per {
		hi := min(lo+per, len(dst))
		wg.Go(func() { Fill(dst[lo:hi], seed, off+uint64(lo)) })
	}
	wg.Wait()
}

// Reader streams bytes [0, n) of the stream of seed: generated rows for a
// table, for instance, without holding them in memory.
func Reader(seed, n uint64) io.Reader { return &reader{seed: seed, n: n} }

// ReaderFrom streams bytes [off, off+n) of the stream of seed: a shard of
// a generated table (its rows' slice of the whole table's stream).
func ReaderFrom(seed, off, n uint64) io.Reader { return &reader{seed: seed, off: off, n: off + n} }

type reader struct{ seed, off, n uint64 }

func (r *reader) Read(b []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	if uint64(len(b)) > r.n-r.off {
		b = b[:r.n-r.off]
	}
	Fill(b, r.seed, r.off)
	r.off += uint64(len(b))
	return len(b), nil
}

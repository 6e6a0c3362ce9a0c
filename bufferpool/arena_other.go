//go:build !linux

package bufferpool

// arenaSys is empty where the arena is not supported.
type arenaSys struct{}

var hostSys arenaSys

// arena is never created on this platform.
type arena struct {
	mem   []byte
	stats ArenaStats
}

// mapArena reports ErrNotSupported: the arena needs Linux's mmap, madvise
// and mlock.
func mapArena(capacity int, cfg *Config, sys arenaSys) (*arena, error) {
	return nil, ErrNotSupported
}

func (a *arena) unmap() error { return ErrNotSupported }

package engram

import "fmt"

// Buffer is memory for lookup outputs from Store.NewBuffer. On a remote
// store it lies in memory registered with the transport and exposed to
// the owner, so lookups into it receive rows straight from the owner; on a
// local store it is ordinary memory.
type Buffer struct {
	b       []byte
	release func()
}

// Bytes returns the buffer's memory (len is the size asked for).
func (b *Buffer) Bytes() []byte { return b.b }

// Release returns the buffer to its store. The bytes must not be used
// afterwards; releasing twice does nothing.
func (b *Buffer) Release() {
	if b.release != nil {
		b.release()
		b.release = nil
	}
	b.b = nil
}

// NewBuffer returns a buffer of n bytes for lookup outputs. On a remote
// store buffers come from RemoteConfig.BufferBytes of registered memory,
// and NewBuffer fails when not enough of it is free.
func (s *Store) NewBuffer(n int) (*Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: buffer of %d bytes", ErrConfig, n)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.remote != nil {
		return s.newRemoteBuffer(n)
	}
	return &Buffer{b: make([]byte, n)}, nil
}

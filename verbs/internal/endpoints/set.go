package endpoints

import (
	"io"
	"sync"

	"github.com/scatterkit/scatterkit/verbs"
)

// Set is a transport's open segments and connections. The zero value is
// empty and open.
type Set struct {
	mu     sync.Mutex
	closed bool
	segs   map[io.Closer]struct{}
	conns  map[io.Closer]struct{}
}

// AddSegment records an open segment; verbs.ErrClosed once Close has run.
func (s *Set) AddSegment(sg io.Closer) error { return s.add(&s.segs, sg) }

// AddConn records an open connection; verbs.ErrClosed once Close has run.
func (s *Set) AddConn(c io.Closer) error { return s.add(&s.conns, c) }

func (s *Set) add(m *map[io.Closer]struct{}, x io.Closer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return verbs.ErrClosed
	}
	if *m == nil {
		*m = make(map[io.Closer]struct{})
	}
	(*m)[x] = struct{}{}
	return nil
}

// Remove forgets x, a segment or a connection, once it has closed.
func (s *Set) Remove(x io.Closer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.segs, x)
	delete(s.conns, x)
}

// Len returns how many segments and connections are open.
func (s *Set) Len() (segs, conns int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.segs), len(s.conns)
}

// Close closes every connection, then every segment, each group at once
// (their close errors are dropped: the transport is going away). It
// returns false, doing nothing, if Close ran before.
func (s *Set) Close() bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.closed = true
	segs := make([]io.Closer, 0, len(s.segs))
	for x := range s.segs {
		segs = append(segs, x)
	}
	conns := make([]io.Closer, 0, len(s.conns))
	for x := range s.conns {
		conns = append(conns, x)
	}
	s.mu.Unlock()
	// At once: a close may wait on its peer (shm: up to its close grace).
	closeAll := func(cs []io.Closer) {
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() { _ = c.Close() })
		}
		wg.Wait()
	}
	closeAll(conns)
	closeAll(segs)
	return true
}

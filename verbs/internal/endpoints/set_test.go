package endpoints

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

// endpoint records the order of closes (Set.Close closes a group at
// once, so the log is locked); closing removes it from its set as a
// backend's Close does.
type endpoint struct {
	name string
	set  *Set
	log  *closeLog
}

type closeLog struct {
	mu    sync.Mutex
	names []string
}

func (e *endpoint) Close() error {
	e.log.mu.Lock()
	e.log.names = append(e.log.names, e.name)
	e.log.mu.Unlock()
	e.set.Remove(e)
	return nil
}

func TestSet(t *testing.T) {
	var s Set
	var cl closeLog
	log := &cl
	seg1 := &endpoint{"seg1", &s, log}
	seg2 := &endpoint{"seg2", &s, log}
	conn1 := &endpoint{"conn1", &s, log}
	conn2 := &endpoint{"conn2", &s, log}
	gone := &endpoint{"gone", &s, log}
	require.NoError(t, s.AddSegment(seg1))
	require.NoError(t, s.AddConn(conn1))
	require.NoError(t, s.AddSegment(seg2))
	require.NoError(t, s.AddConn(conn2))
	require.NoError(t, s.AddConn(gone))
	s.Remove(gone)
	segs, conns := s.Len()
	require.Equal(t, 2, segs)
	require.Equal(t, 2, conns)

	require.True(t, s.Close())
	require.Len(t, log.names, 4)
	require.ElementsMatch(t, []string{"conn1", "conn2"}, log.names[:2], "connections close first")
	require.ElementsMatch(t, []string{"seg1", "seg2"}, log.names[2:])
	segs, conns = s.Len()
	require.Zero(t, segs+conns, "closing removed them")

	require.False(t, s.Close(), "a second Close does nothing")
	require.Len(t, log.names, 4)
	late := &endpoint{"late", &s, log}
	require.ErrorIs(t, s.AddConn(late), verbs.ErrClosed)
	require.ErrorIs(t, s.AddSegment(late), verbs.ErrClosed)
	segs, conns = s.Len()
	require.Zero(t, segs+conns)
}

//go:build linux

package shm

import (
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/regtab"
)

var _ verbs.Mapper = (*conn)(nil)

// HoldMapped implements verbs.Mapper: the owner's region remote is already
// mapped here (read-only unless the owner granted remote write), so the
// requester may copy to or from it itself. The hold is a read lock on the
// connection's mapping (the session unmaps under the write lock) and on
// the transport's registry (Deregister and Close take its write lock), the
// same locks a Post holds for its batch.
func (c *conn) HoldMapped(local *verbs.Region, remote verbs.Key, need verbs.Access) ([]byte, []byte, error) {
	return c.queue.hold(local, remote, need)
}

// ReleaseMapped implements verbs.Mapper.
func (c *conn) ReleaseMapped() { c.queue.release() }

func (q *queue) hold(local *verbs.Region, remote verbs.Key, need verbs.Access) (_, _ []byte, err error) {
	if local == nil {
		return nil, nil, fmt.Errorf("shm: hold mapping: nil local region: %w", verbs.ErrBadKey)
	}
	if need != verbs.AccessRemoteRead && need != verbs.AccessRemoteWrite {
		return nil, nil, fmt.Errorf("shm: hold mapping: access %v: %w", need, verbs.ErrInvalid)
	}
	m := q.m
	m.mu.RLock()
	if m.gone != nil {
		m.mu.RUnlock()
		return nil, nil, fmt.Errorf("shm: hold mapping: %w", m.gone)
	}
	reg := q.t.reg
	reg.RLock()
	defer func() {
		if err != nil {
			reg.RUnlock()
			m.mu.RUnlock()
		}
	}()
	var lc regtab.Cursor
	if _, err := reg.Local(&lc, local.Key(), 0, 0); err != nil {
		return nil, nil, fmt.Errorf("shm: hold mapping: local region %s: %w", local.Key(), err)
	}
	r, ok := m.visible[remote]
	if !ok {
		return nil, nil, fmt.Errorf("shm: hold mapping: remote region %s: %w", remote, verbs.ErrBadKey)
	}
	if !r.access.Has(need) {
		// A region without remote write is mapped PROT_READ: it is never
		// handed out for writing.
		return nil, nil, fmt.Errorf("shm: hold mapping: remote region %s is %v, need %v: %w", remote, r.access, need, verbs.ErrAccess)
	}
	return local.Bytes(), r.mem, nil
}

func (q *queue) release() {
	q.t.reg.RUnlock()
	q.m.mu.RUnlock()
}

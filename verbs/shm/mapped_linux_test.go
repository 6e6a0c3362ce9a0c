//go:build linux

package shm

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

// TestHoldMapped checks the verbs.Mapper of a shm Conn: the owner's
// regions as mapped here with the access the owner granted (a read-only
// export is never handed out for writing), the requester's registration
// checked, and a hold that keeps the memory
// valid: Deregister waits for its release, and a closed Conn holds
// nothing.
func TestHoldMapped(t *testing.T) {
	f := newFixture(t)
	m, ok := f.good.(verbs.Mapper)
	require.True(t, ok)
	local, err := f.req.Alloc(4096, verbs.AccessLocal)
	require.NoError(t, err)
	rw, _ := verbs.FindRegion(f.good.Remote(), "rw")
	ro, _ := verbs.FindRegion(f.good.Remote(), "ro")

	for _, tc := range []struct {
		name   string
		local  *verbs.Region
		key    verbs.Key
		need   verbs.Access
		want   error
		region *verbs.Region
	}{
		{"rw-read", local, rw.Key, verbs.AccessRemoteRead, nil, f.rw},
		{"rw-write", local, rw.Key, verbs.AccessRemoteWrite, nil, f.rw},
		{"ro-read", local, ro.Key, verbs.AccessRemoteRead, nil, f.ro},
		{"ro-write", local, ro.Key, verbs.AccessRemoteWrite, verbs.ErrAccess, nil},
		{"unknown-key", local, ro.Key ^ 0x55, verbs.AccessRemoteRead, verbs.ErrBadKey, nil},
		{"zero-key", local, 0, verbs.AccessRemoteRead, verbs.ErrBadKey, nil},
		{"nil-local", nil, rw.Key, verbs.AccessRemoteRead, verbs.ErrBadKey, nil},
		{"owner-region-as-local", f.rw, rw.Key, verbs.AccessRemoteRead, verbs.ErrBadKey, nil},
		{"both-bits", local, rw.Key, verbs.AccessRemoteRead | verbs.AccessRemoteWrite, verbs.ErrInvalid, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lm, rm, err := m.HoldMapped(tc.local, tc.key, tc.need)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				require.Nil(t, lm)
				require.Nil(t, rm)
				return
			}
			require.NoError(t, err)
			require.Len(t, lm, local.Len())
			require.Len(t, rm, tc.region.Len())
			require.True(t, bytes.Equal(tc.region.Bytes(), rm), "the mapping shows the owner's bytes")
			if tc.need == verbs.AccessRemoteWrite {
				rm[17] ^= 0xA5 // a write through the mapping lands in the owner's region
				require.Equal(t, rm[17], tc.region.Bytes()[17])
			}
			m.ReleaseMapped()
		})
	}

	// A hold keeps the local region registered: Deregister waits.
	_, _, err = m.HoldMapped(local, rw.Key, verbs.AccessRemoteRead)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- f.req.Deregister(local) }()
	select {
	case err := <-done:
		t.Fatalf("Deregister returned %v during a hold", err)
	case <-time.After(20 * time.Millisecond):
	}
	m.ReleaseMapped()
	require.NoError(t, <-done)

	local, err = f.req.Alloc(4096, verbs.AccessLocal)
	require.NoError(t, err)
	require.NoError(t, f.good.Close())
	_, _, err = m.HoldMapped(local, rw.Key, verbs.AccessRemoteRead)
	require.ErrorIs(t, err, verbs.ErrClosed)
}

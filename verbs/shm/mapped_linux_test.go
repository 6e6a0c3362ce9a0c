//go:build linux

package shm

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
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

// TestEvictWaitsForMappings: an evicted requester's fence stays open
// while it still holds the owner's regions mapped (a copy in progress),
// the mapping stays valid until it lets go, and the fence closes once it
// has. A segment Close does not wait past its grace for a requester that
// never lets go.
func TestEvictWaitsForMappings(t *testing.T) {
	f := newFixture(t)
	f.seg.Handle(0x7e01, verbs.HandlerFunc(func(_ context.Context, p verbs.Peer, _, resp []byte) ([]byte, error) {
		return binary.LittleEndian.AppendUint64(resp, p.ConnID()), nil
	}))
	resp, err := f.good.Call(verbstest.Context(t), 0x7e01, nil, nil)
	require.NoError(t, err)
	id := binary.LittleEndian.Uint64(resp)

	m := f.good.(verbs.Mapper)
	local, err := f.req.Alloc(4096, verbs.AccessLocal)
	require.NoError(t, err)
	rw, _ := verbs.FindRegion(f.good.Remote(), "rw")
	_, rm, err := m.HoldMapped(local, rw.Key, verbs.AccessRemoteWrite)
	require.NoError(t, err)
	fence := f.seg.Evict(id)
	select {
	case <-fence:
		t.Fatal("fence closed while the requester still holds the owner's region mapped")
	case <-time.After(50 * time.Millisecond):
	}
	rm[7] ^= 0xff // a copy in progress still lands where it may
	require.Equal(t, rm[7], f.rw.Bytes()[7])
	m.ReleaseMapped()
	select {
	case <-fence:
	case <-time.After(10 * time.Second):
		t.Fatal("fence still open 10 s after the requester let go")
	}

	// A requester that never lets go: Close ends within its grace.
	owner := New(Config{CloseGrace: 100 * time.Millisecond})
	defer owner.Close()
	reg, err := owner.Alloc(4096, verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	seg, err := owner.Listen(rawAddr("grace"), []verbs.Export{{Name: "rw", Region: reg}}, verbs.ListenOptions{})
	require.NoError(t, err)
	c, err := f.req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{})
	require.NoError(t, err)
	defer c.Close()
	rw, _ = verbs.FindRegion(c.Remote(), "rw")
	_, _, err = c.(verbs.Mapper).HoldMapped(local, rw.Key, verbs.AccessRemoteWrite)
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, seg.Close())
	require.Less(t, time.Since(start), 5*time.Second, "segment Close waited on a requester that never lets go")
	c.(verbs.Mapper).ReleaseMapped()
}

// TestCloseWaitsForOwnerHandlers: a requester's Close returns only once
// the owner's handlers, which copy into the requester's exposures, have
// returned (the owner shuts its half after them), so nothing of the
// owner lands in them afterwards; an owner handler that never returns
// makes Close give up after CloseGrace and say so.
func TestCloseWaitsForOwnerHandlers(t *testing.T) {
	owner := New(Config{CloseGrace: 200 * time.Millisecond})
	defer owner.Close()
	reg, err := owner.Alloc(4096, verbs.AccessRemoteRead)
	require.NoError(t, err)
	seg, err := owner.Listen(rawAddr("close-waits"), []verbs.Export{{Name: "a", Region: reg}}, verbs.ListenOptions{})
	require.NoError(t, err)
	defer seg.Close()
	running := make(chan struct{}, 1)
	var stuck atomic.Int64 // how long the handler ignores its context
	seg.Handle(0x7e04, verbs.HandlerFunc(func(ctx context.Context, _ verbs.Peer, _, resp []byte) ([]byte, error) {
		running <- struct{}{}
		<-ctx.Done()
		time.Sleep(time.Duration(stuck.Load())) // a copy that goes on a while
		return resp, nil
	}))
	req := New(Config{CloseGrace: 500 * time.Millisecond})
	defer req.Close()
	for _, tc := range []struct {
		name   string
		stuck  time.Duration
		fenced bool
	}{{"handler-returns", 100 * time.Millisecond, true}, {"handler-stuck", 1500 * time.Millisecond, false}} {
		t.Run(tc.name, func(t *testing.T) {
			stuck.Store(int64(tc.stuck))
			c, err := req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{})
			require.NoError(t, err)
			go func() { _, _ = c.Call(context.Background(), 0x7e04, nil, nil) }()
			<-running
			start := time.Now()
			err = c.Close()
			took := time.Since(start)
			if tc.fenced {
				require.NoError(t, err)
				require.GreaterOrEqual(t, took, tc.stuck, "Close returned while the owner's handler still ran")
				return
			}
			require.ErrorIs(t, err, verbs.ErrClosed)
			require.ErrorContains(t, err, "did not let go")
			require.Less(t, took, 1400*time.Millisecond)
		})
	}
}

package verbs

import (
	"errors"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewKey(t *testing.T) {
	seen := map[Key]bool{}
	for range 1000 {
		k, err := NewKey()
		require.NoError(t, err)
		require.NotZero(t, k)
		require.False(t, seen[k], "key %s twice", k)
		seen[k] = true
	}
	require.Equal(t, "0x00000000000000ff", Key(255).String())
}

func TestSpan(t *testing.T) {
	buf := []byte("0123456789")
	for _, tc := range []struct {
		off  uint64
		n    uint32
		want string
		ok   bool
	}{
		{0, 10, "0123456789", true},
		{3, 4, "3456", true},
		{10, 0, "", true},
		{0, 0, "", true},
		{9, 2, "", false},
		{11, 0, "", false},
		{math.MaxUint64, 1, "", false},
		{math.MaxUint64 - 5, 10, "", false},
		{5, math.MaxUint32, "", false},
	} {
		t.Run(fmt.Sprintf("off=%d/n=%d", tc.off, tc.n), func(t *testing.T) {
			got, ok := Span(buf, tc.off, tc.n)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, string(got))
		})
	}
}

func TestAccess(t *testing.T) {
	require.False(t, Access(0).Valid())
	require.False(t, Access(0x10).Valid())
	require.True(t, (AccessLocal | AccessRemoteWrite).Valid())
	require.True(t, (AccessLocal | AccessRemoteRead).Has(AccessRemoteRead))
	require.False(t, AccessLocal.Has(AccessLocal|AccessRemoteRead))
	require.Equal(t, "local|remote-read|remote-write", (AccessLocal | AccessRemoteRead | AccessRemoteWrite).String())
	require.Equal(t, "none", Access(0).String())
	require.Equal(t, "remote-read|0x80", (AccessRemoteRead | 0x80).String())
}

func TestStatus(t *testing.T) {
	for s, want := range map[Status]error{
		StatusBadKey: ErrBadKey, StatusAccess: ErrAccess, StatusBounds: ErrBounds, StatusClosed: ErrClosed,
		StatusNotSupported: ErrNotSupported, StatusHandler: ErrHandler,
	} {
		require.ErrorIs(t, s.Err(), want)
		require.True(t, s.Valid())
		require.NotContains(t, s.String(), "Status(")
	}
	require.NoError(t, StatusOK.Err())
	require.False(t, statusCount.Valid())
	require.ErrorIs(t, statusCount.Err(), ErrProtocol)
	require.Equal(t, "Status(200)", Status(200).String())
	require.Equal(t, "READ", OpRead.String())
	require.Equal(t, "WRITE", OpWrite.String())
	require.Equal(t, "Op(9)", Op(9).String())
}

func TestErrors(t *testing.T) {
	re := &RemoteError{ID: 7, Status: StatusBounds}
	require.ErrorIs(t, re, ErrBounds)
	require.Equal(t, "verbs: work request 7: out of bounds", re.Error())
	closed := &RemoteError{ID: 8, Status: StatusClosed, Cause: io.EOF}
	require.ErrorIs(t, closed, ErrClosed)
	require.ErrorIs(t, closed, io.EOF)
	require.Contains(t, closed.Error(), "EOF")

	var wrapped error = fmt.Errorf("batch: %w", &PostError{Index: 2, ID: 9, Err: ErrAccess})
	var pe *PostError
	require.ErrorAs(t, wrapped, &pe)
	require.Equal(t, 2, pe.Index)
	require.ErrorIs(t, wrapped, ErrAccess)
	require.Contains(t, wrapped.Error(), "index 2")

	ce := &CallError{Method: 3, Status: StatusHandler, Message: "busy"}
	require.ErrorIs(t, ce, ErrHandler)
	require.Equal(t, "verbs: call method 3: handler failed: busy", ce.Error())
	require.ErrorIs(t, &CallError{Method: 3, Status: StatusNotSupported}, ErrNotSupported)

	pr := &ProtocolError{Peer: "10.0.0.1:9", Stage: "frame", Reason: "unknown type 200"}
	require.ErrorIs(t, pr, ErrProtocol)
	require.Equal(t, "verbs: protocol violation from 10.0.0.1:9: frame: unknown type 200", pr.Error())
	require.False(t, errors.Is(pr, ErrClosed))
}

func TestRegion(t *testing.T) {
	_, err := NewRegion(nil, AccessLocal)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = NewRegion(make([]byte, 4), 0)
	require.ErrorIs(t, err, ErrInvalid)
	buf := []byte("abcd")
	r, err := NewRegion(buf, AccessLocal|AccessRemoteRead)
	require.NoError(t, err)
	require.NotZero(t, r.Key())
	require.Equal(t, 4, r.Len())
	require.Same(t, &buf[0], &r.Bytes()[0])
	require.Equal(t, RegionInfo{Name: "x", Key: r.Key(), Len: 4, Access: AccessLocal | AccessRemoteRead}, r.Info("x"))
	infos := []RegionInfo{r.Info("x"), {Name: "y", Key: 1}}
	got, ok := FindRegion(infos, "y")
	require.True(t, ok)
	require.Equal(t, Key(1), got.Key)
	_, ok = FindRegion(infos, "z")
	require.False(t, ok)
}

func TestCheckExports(t *testing.T) {
	mk := func(a Access) *Region {
		r, err := NewRegion(make([]byte, 8), a)
		require.NoError(t, err)
		return r
	}
	ro, rw, local := mk(AccessRemoteRead), mk(AccessRemoteRead|AccessRemoteWrite), mk(AccessLocal)
	require.NoError(t, CheckExports(nil))
	require.NoError(t, CheckExports([]Export{{"a", ro}, {"b", rw}}))
	for name, tc := range map[string]struct {
		x   []Export
		err error
	}{
		"nil-region":     {[]Export{{"a", nil}}, ErrInvalid},
		"empty-name":     {[]Export{{"", ro}}, ErrInvalid},
		"long-name":      {[]Export{{string(make([]byte, MaxNameLen+1)), ro}}, ErrInvalid},
		"local-only":     {[]Export{{"a", local}}, ErrAccess},
		"same-name":      {[]Export{{"a", ro}, {"a", rw}}, ErrInvalid},
		"same-region":    {[]Export{{"a", ro}, {"b", ro}}, ErrInvalid},
		"max-name-is-ok": {[]Export{{string(make([]byte, MaxNameLen)), ro}}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckExports(tc.x)
			if tc.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.err)
			}
		})
	}
}

func TestLinkParams(t *testing.T) {
	measured := LinkParams{Bandwidth: 3e9, PostRate: 1e6, QueueDepth: 64, RTT: time.Millisecond}
	require.Equal(t, measured, LinkParams{}.Merge(measured))
	set := LinkParams{Bandwidth: 1e9, RTT: time.Second}
	require.Equal(t, LinkParams{Bandwidth: 1e9, PostRate: 1e6, QueueDepth: 64, RTT: time.Second}, set.Merge(measured))
	require.False(t, set.Complete())
	require.True(t, measured.Complete())
}

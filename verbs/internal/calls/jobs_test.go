package calls

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
)

func TestJobs(t *testing.T) {
	var p Jobs[*int]
	via := new(int)
	j := p.Get(10)
	require.Len(t, j.Req, 10)
	require.GreaterOrEqual(t, cap(j.Resp), respCap)
	j.Via, j.ID, j.Method, j.Handler = via, 5, 6, verbs.HandlerFunc(func(_ context.Context, _ verbs.Peer, _, resp []byte) ([]byte, error) {
		return resp, nil
	})
	p.Put(j)
	k := p.Get(3)
	require.Same(t, j, k, "an idle job is reused")
	require.Len(t, k.Req, 3)
	require.Nil(t, k.Via, "Put drops the return path")
	require.Nil(t, k.Handler, "Put drops the handler")

	k.Req = make([]byte, keepReq+1)
	p.Put(k)
	k = p.Get(1)
	require.LessOrEqual(t, cap(k.Req), keepReq, "oversized request buffers are not kept")

	held := make([]*Job[*int], keepJobs+5)
	for i := range held {
		held[i] = p.Get(1)
	}
	for _, j := range held {
		p.Put(j)
	}
	require.Len(t, p.free, keepJobs, "the pool is bounded")
}

func TestJobsAllocs(t *testing.T) {
	var p Jobs[struct{}]
	p.Put(p.Get(256))
	require.Zero(t, testing.AllocsPerRun(100, func() { p.Put(p.Get(200)) }))
}

func TestReply(t *testing.T) {
	long := strings.Repeat("x", verbs.MaxErrorMessage+1)
	for _, tc := range []struct {
		name   string
		resp   []byte
		err    error
		status verbs.Status
		want   string
	}{
		{"ok", []byte("rows"), nil, verbs.StatusOK, "rows"},
		{"empty", nil, nil, verbs.StatusOK, ""},
		{"error", []byte("ignored"), errors.New("no such table"), verbs.StatusHandler, "no such table"},
		{"long-error", nil, errors.New(long), verbs.StatusHandler, long[:verbs.MaxErrorMessage]},
		{"too-large", make([]byte, frame.MaxMessage+1), nil, verbs.StatusHandler, fmt.Sprintf("response of %d bytes exceeds %d", frame.MaxMessage+1, frame.MaxMessage)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, payload := Reply(9, 0xabc, tc.resp, tc.err)
			require.Equal(t, frame.TypeReply, h.Type)
			require.Equal(t, uint16(9), h.Method)
			require.Equal(t, uint64(0xabc), h.ID)
			require.Equal(t, tc.status, h.Status)
			require.Equal(t, uint32(len(payload)), h.Len)
			require.Equal(t, tc.want, string(payload))
		})
	}
}

// TestJobsKeepBudget: idle jobs keep their buffers only within the shared
// budget (a job past it goes back bare), taking a job gives its buffers'
// share back, and Drain gives back everything its pool kept.
func TestJobsKeepBudget(t *testing.T) {
	keep := &KeepBudget{Limit: 3 << 10}
	var a, b Jobs[int]
	a.Keep, b.Keep = keep, keep
	j1, j2 := a.Get(1<<10), b.Get(1<<10)
	j1.Resp, j2.Resp = make([]byte, 0, 512), make([]byte, 0, 512)
	a.Put(j1) // 1.5 KiB kept
	b.Put(j2) // 1.5 KiB more: 3 KiB, at the limit
	require.Equal(t, int64(3<<10), keep.Used())
	j3 := a.Get(1 << 10) // j1 again: its share goes back
	require.Same(t, j1, j3)
	require.Equal(t, int64(1536), keep.Used())
	j3.Req = make([]byte, 2<<10) // grown past what fits now
	a.Put(j3)
	require.Equal(t, int64(1536), keep.Used(), "a job past the budget goes back bare")
	j4 := a.Get(8)
	require.Same(t, j1, j4)
	require.Len(t, j4.Req, 8, "a bare job gets a fresh request buffer")
	a.Put(j4)
	b.Drain()
	a.Drain()
	require.Zero(t, keep.Used())
}

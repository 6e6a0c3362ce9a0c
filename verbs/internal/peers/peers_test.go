package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/cq"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
)

// fakePoster completes every request at once, as shm does.
type fakePoster struct {
	cq     *cq.Queue
	remote []verbs.RegionInfo
}

func (q *fakePoster) PostAt(wrs []verbs.WorkRequest, epoch uint64) (int, error) {
	n, err := Reserve("fake", q.cq, len(wrs), true, epoch)
	if n == 0 {
		return 0, err
	}
	cs := make([]verbs.Completion, n)
	for i := range cs {
		cs[i] = verbs.Completion{ID: wrs[i].ID}
	}
	q.cq.Push(cs)
	return n, nil
}

func (q *fakePoster) CQ() *cq.Queue              { return q.cq }
func (q *fakePoster) Remote() []verbs.RegionInfo { return q.remote }

// reply is one frame a fake sent.
type reply struct {
	h       frame.Header
	payload []byte
}

// replies records the frames sent through it.
type replies chan reply

func (r replies) Reply(h frame.Header, payload []byte) error {
	r <- reply{h, bytes.Clone(payload)}
	return nil
}

// fakeSession is a backend's session over nothing: its Carrier counts
// what the Session asks of it.
type fakeSession struct {
	Session
	sent              replies
	newPosters, drops atomic.Int32
	shuts, finalizes  atomic.Int32
	remote            []verbs.RegionInfo
}

func newFake(owner bool) *fakeSession {
	s := &fakeSession{sent: make(replies, 64), remote: []verbs.RegionInfo{{Name: "x", Key: 7, Len: 64}}}
	s.Init("fake", owner, "peer-1", s)
	return s
}

func (s *fakeSession) Send(h frame.Header, payload []byte) { _ = s.sent.Reply(h, payload) }

func (s *fakeSession) NewPoster(depth int) Poster {
	s.newPosters.Add(1)
	return &fakePoster{cq: cq.New(depth), remote: s.remote}
}

func (s *fakeSession) DropPoster(Poster) { s.drops.Add(1) }
func (s *fakeSession) Shut()             { s.shuts.Add(1) }

func (s *fakeSession) Finalize() {
	s.finalizes.Add(1)
	s.Mu.Lock()
	cause := s.Cause()
	s.Mu.Unlock()
	s.EndCalls(ClosedErr("fake", cause))
	if s.Owner {
		s.WaitHandlers()
		s.Leave()
	}
	close(s.Fenced)
	close(s.Dead)
}

func testOpts() verbs.ListenOptions {
	return verbs.ListenOptions{QueueDepth: 8, MaxCalls: 32, MaxSessions: 4, MaxHandshakes: 1,
		MaxCallBytes: 1 << 20, MaxConnCallBytes: 1 << 10}
}

// newOwner returns a segment with one added owner session; both end with
// the test.
func newOwner(t *testing.T, opts verbs.ListenOptions) (*Segment[*fakeSession], *fakeSession) {
	t.Helper()
	sg := &Segment[*fakeSession]{}
	sg.Init("fake", opts, "addr-1", []verbs.RegionInfo{{Name: "r", Key: 1, Len: 8}})
	s := newFake(true)
	require.NoError(t, sg.Add(s))
	require.NotZero(t, s.ID)
	t.Cleanup(func() {
		s.Fail(nil)
		<-s.Dead
	})
	return sg, s
}

// call feeds one CALL of method with request req to s and returns its
// answer (sent through now or via).
func call(t *testing.T, s *fakeSession, id uint64, method uint16, req []byte) reply {
	t.Helper()
	now, via := make(replies, 1), make(replies, 1)
	rd := frame.NewReader(bytes.NewReader(req), 4096)
	h := frame.Header{Type: frame.TypeCall, Method: method, ID: id, Len: uint32(len(req))}
	require.NoError(t, s.OnCall(rd, &h, now, via))
	select {
	case r := <-now:
		return r
	case r := <-via:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return reply{}
	}
}

func TestSegment(t *testing.T) {
	sg, s := newOwner(t, testOpts())
	require.Equal(t, "addr-1", sg.Addr())
	require.Equal(t, []verbs.RegionInfo{{Name: "r", Key: 1, Len: 8}}, sg.Regions())
	got, ok := sg.Get(s.ID)
	require.True(t, ok)
	require.Same(t, s, got)
	select {
	case <-sg.Evict(s.ID + 1):
	default:
		t.Fatal("the fence of an unknown connection is not closed")
	}
}

func TestCall(t *testing.T) {
	sg, s := newOwner(t, testOpts())
	s.SetParams(verbs.LinkParams{RTT: time.Millisecond, QueueDepth: 999})
	var kept []verbs.Peer
	sg.Handle(3, verbs.HandlerFunc(func(ctx context.Context, p verbs.Peer, req, resp []byte) ([]byte, error) {
		assert.Equal(t, s.ID, p.ConnID())
		assert.Equal(t, s.remote, p.Remote())
		assert.Equal(t, verbs.LinkParams{RTT: time.Millisecond, QueueDepth: 8}, p.LinkParams())
		n, err := p.Post([]verbs.WorkRequest{{ID: 11}, {ID: 12}})
		assert.NoError(t, err)
		assert.Equal(t, 2, n)
		cs := make([]verbs.Completion, 2)
		n, err = p.Wait(ctx, cs, 2)
		assert.NoError(t, err)
		assert.Equal(t, 2, n)
		assert.ElementsMatch(t, []uint64{11, 12}, []uint64{cs[0].ID, cs[1].ID})
		kept = append(kept, p)
		return append(resp, req...), nil
	}))
	for i := range 3 {
		req := fmt.Appendf(nil, "request %d", i)
		r := call(t, s, uint64(100+i), 3, req)
		require.Equal(t, frame.Header{Type: frame.TypeReply, Method: 3, ID: uint64(100 + i), Len: uint32(len(req))}, r.h)
		require.Equal(t, req, r.payload)
	}
	require.Equal(t, int32(1), s.newPosters.Load(), "the Peer queue is reused")
	require.Len(t, kept, 3)
	require.NotSame(t, kept[0], kept[1], "every call gets a handle of its own")
	for _, p := range kept {
		_, err := p.Post([]verbs.WorkRequest{{ID: 1}})
		require.ErrorIs(t, err, verbs.ErrClosed, "a Peer kept past its call")
		_, err = p.Poll(make([]verbs.Completion, 1))
		require.ErrorIs(t, err, verbs.ErrClosed)
	}
}

func TestCallErrors(t *testing.T) {
	sg, s := newOwner(t, testOpts())
	sg.Handle(4, verbs.HandlerFunc(func(context.Context, verbs.Peer, []byte, []byte) ([]byte, error) {
		return nil, errors.New("no such thing")
	}))
	r := call(t, s, 1, 4, []byte("x"))
	require.Equal(t, verbs.StatusHandler, r.h.Status)
	require.Equal(t, "no such thing", string(r.payload))

	r = call(t, s, 2, 5, []byte("x"))
	require.Equal(t, frame.Header{Type: frame.TypeReply, Status: verbs.StatusNotSupported, Method: 5, ID: 2}, r.h)

	// Over MaxConnCallBytes: answered busy without reaching a handler,
	// and the request is consumed.
	big := bytes.Repeat([]byte{1}, 2<<10)
	rd := frame.NewReader(bytes.NewReader(append(big, "next"...)), 4096)
	now := make(replies, 1)
	h := frame.Header{Type: frame.TypeCall, Method: 4, ID: 3, Len: uint32(len(big))}
	require.NoError(t, s.OnCall(rd, &h, now, nil))
	r = <-now
	require.Equal(t, verbs.StatusHandler, r.h.Status)
	require.Contains(t, string(r.payload), "busy")
	rest := make([]byte, 4)
	require.NoError(t, rd.ReadFull(rest))
	require.Equal(t, "next", string(rest))
}

// TestKeepPeers: of many calls running at once, keepPeers queues are kept
// for later calls and the rest dropped.
func TestKeepPeers(t *testing.T) {
	sg, s := newOwner(t, testOpts())
	const calls = keepPeers + 3
	var started sync.WaitGroup
	started.Add(calls)
	release := make(chan struct{})
	sg.Handle(1, verbs.HandlerFunc(func(_ context.Context, _ verbs.Peer, _, resp []byte) ([]byte, error) {
		started.Done()
		<-release
		return resp, nil
	}))
	via := make(replies, calls)
	for i := range calls {
		rd := frame.NewReader(bytes.NewReader(nil), 4096)
		require.NoError(t, s.OnCall(rd, &frame.Header{Type: frame.TypeCall, Method: 1, ID: uint64(i + 1)}, nil, via))
	}
	started.Wait()
	close(release)
	for range calls {
		<-via
	}
	require.Equal(t, int32(calls), s.newPosters.Load())
	require.Equal(t, int32(calls-keepPeers), s.drops.Load())
}

func TestFail(t *testing.T) {
	opts := testOpts()
	var reported []error
	var mu sync.Mutex
	opts.OnError = func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}
	sg, s := newOwner(t, opts)
	boom := errors.New("boom")
	s.Fail(boom)
	s.Fail(verbs.ErrClosed)
	<-s.Dead
	require.Equal(t, int32(1), s.shuts.Load())
	require.Equal(t, int32(1), s.finalizes.Load())
	require.Error(t, s.Ctx.Err())
	s.Mu.Lock()
	require.True(t, s.Closed())
	require.Equal(t, boom, s.Cause())
	s.Mu.Unlock()
	mu.Lock()
	require.Equal(t, []error{boom}, reported)
	mu.Unlock()
	_, ok := sg.Get(s.ID)
	require.False(t, ok, "a finalized session leaves its segment")

	// An evicted session fails with ErrClosed, reported to nobody.
	s2 := newFake(true)
	require.NoError(t, sg.Add(s2))
	fence := sg.Evict(s2.ID)
	<-fence
	s2.Mu.Lock()
	require.ErrorIs(t, s2.Cause(), verbs.ErrClosed)
	require.EqualError(t, s2.Cause(), "fake: connection evicted by the owner: verbs: closed")
	s2.Mu.Unlock()
	mu.Lock()
	require.Len(t, reported, 1)
	mu.Unlock()
}

func TestAddFull(t *testing.T) {
	opts := testOpts()
	opts.MaxSessions = 1
	sg, _ := newOwner(t, opts)
	s := newFake(true)
	err := sg.Add(s)
	require.ErrorIs(t, err, verbs.ErrNotAdmitted)
	require.ErrorContains(t, err, "fake: peer-1: ")
	require.Error(t, s.Ctx.Err())
}

func TestRequesterCall(t *testing.T) {
	s := newFake(false)
	defer func() {
		s.Fail(nil)
		<-s.Dead
	}()
	type result struct {
		resp []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := s.Call(context.Background(), 9, []byte("ask"), nil)
		done <- result{resp, err}
	}()
	sent := <-s.sent
	require.Equal(t, frame.TypeCall, sent.h.Type)
	require.Equal(t, uint16(9), sent.h.Method)
	require.Equal(t, "ask", string(sent.payload))
	answer := []byte("answer")
	rd := frame.NewReader(bytes.NewReader(answer), 4096)
	require.NoError(t, s.Answer(rd, &frame.Header{Type: frame.TypeReply, Method: 9, ID: sent.h.ID, Len: uint32(len(answer))}))
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, answer, r.resp)

	_, err := s.Call(context.Background(), 1, make([]byte, frame.MaxMessage+1), nil)
	require.ErrorIs(t, err, verbs.ErrInvalid)
	require.ErrorContains(t, err, "fake: call request of ")

	// A call waiting when the session ends fails with ErrClosed.
	go func() {
		_, err := s.Call(context.Background(), 9, nil, nil)
		done <- result{nil, err}
	}()
	<-s.sent
	s.Fail(errors.New("gone"))
	r = <-done
	require.ErrorIs(t, r.err, verbs.ErrClosed)
	require.ErrorContains(t, r.err, "gone")
}

func TestPeerSize(t *testing.T) {
	require.Equal(t, uintptr(16), unsafe.Sizeof(Peer{}), "a slab of peerSlab handles is one 4 KiB allocation")
}

func TestClosedErr(t *testing.T) {
	require.EqualError(t, ClosedErr("x", nil), "x: connection: verbs: closed")
	require.EqualError(t, ClosedErr("x", verbs.ErrClosed), "x: connection: verbs: closed")
	err := ClosedErr("x", errors.New("reset"))
	require.ErrorIs(t, err, verbs.ErrClosed)
	require.EqualError(t, err, "x: connection: verbs: closed: reset")
}

func TestReserve(t *testing.T) {
	c := cq.New(2)
	n, err := Reserve("x", c, 3, false, 0)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = Reserve("x", c, 1, false, 0)
	require.Zero(t, n)
	require.Same(t, verbs.ErrQueueFull, err, "a full queue's error is bare")
	c.Release(2)
	e := c.Epoch()
	c.Close(verbs.ErrClosed)
	n, err = Reserve("x", c, 1, true, e)
	require.Zero(t, n)
	require.ErrorIs(t, err, verbs.ErrClosed)
	require.ErrorContains(t, err, "x: post: ")
}

func TestCheckConnect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  verbs.ConnectOptions
		lanes bool
		want  verbs.ConnectOptions
		err   string
	}{
		{name: "defaults", lanes: true, want: verbs.ConnectOptions{Lanes: verbs.DefaultLanes, QueueDepth: verbs.DefaultQueueDepth}},
		{name: "no-lanes", want: verbs.ConnectOptions{QueueDepth: verbs.DefaultQueueDepth}},
		{name: "given", lanes: true, opts: verbs.ConnectOptions{Lanes: 2, QueueDepth: 8}, want: verbs.ConnectOptions{Lanes: 2, QueueDepth: 8}},
		{name: "too-many-lanes", lanes: true, opts: verbs.ConnectOptions{Lanes: verbs.MaxLanes + 1}, err: "x: connect: 65 lanes, queue depth 4096: "},
		{name: "too-many-lanes-ignored", opts: verbs.ConnectOptions{Lanes: verbs.MaxLanes + 1}, err: "x: connect: 65 lanes"},
		{name: "negative-lanes", lanes: true, opts: verbs.ConnectOptions{Lanes: -1}, err: "x: connect: -1 lanes"},
		{name: "deep", opts: verbs.ConnectOptions{QueueDepth: verbs.MaxQueueDepth + 1}, err: "queue depth 1048577"},
		{name: "shallow", opts: verbs.ConnectOptions{QueueDepth: -1}, err: "queue depth -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckConnect("x", tc.opts, tc.lanes)
			if tc.err != "" {
				require.ErrorIs(t, err, verbs.ErrInvalid)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

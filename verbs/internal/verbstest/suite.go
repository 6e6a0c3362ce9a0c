package verbstest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

const (
	rw = verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	ro = verbs.AccessRemoteRead
	wo = verbs.AccessRemoteWrite
)

// Run runs the conformance suite against b.
func Run(t *testing.T, b Backend) {
	t.Run("ReadWrite", func(t *testing.T) { testReadWrite(t, b) })
	t.Run("QueueDepth", func(t *testing.T) { testQueueDepth(t, b) })
	t.Run("RemoteErrors", func(t *testing.T) { testRemoteErrors(t, b) })
	t.Run("LocalErrors", func(t *testing.T) { testLocalErrors(t, b) })
	t.Run("Call", func(t *testing.T) { testCall(t, b) })
	t.Run("PeerValidation", func(t *testing.T) { testPeerValidation(t, b) })
	t.Run("ConcurrentCalls", func(t *testing.T) { testConcurrentCalls(t, b) })
	t.Run("ConcurrentReplies", func(t *testing.T) { testConcurrentReplies(t, b) })
	t.Run("CallsBeyondMaxCalls", func(t *testing.T) { testCallsBeyondMaxCalls(t, b) })
	t.Run("OwnerGone", func(t *testing.T) { testOwnerGone(t, b) })
	t.Run("Evict", func(t *testing.T) { testEvict(t, b) })
	t.Run("Limits", func(t *testing.T) { testLimits(t, b) })
	t.Run("CloseOutstanding", func(t *testing.T) { testCloseOutstanding(t, b) })
	t.Run("LinkParams", func(t *testing.T) { testLinkParams(t, b) })
	t.Run("Deregister", func(t *testing.T) { testDeregister(t, b) })
	t.Run("BadOptions", func(t *testing.T) { testBadOptions(t, b) })
	t.Run("ManyConns", func(t *testing.T) { testManyConns(t, b) })
	t.Run("TransportClose", func(t *testing.T) { testTransportClose(t, b) })
	t.Run("Allocs", func(t *testing.T) { testAllocs(t, b) })
	t.Run("StalePeer", func(t *testing.T) { testStalePeer(t, b) })
	t.Run("CallAllocs", func(t *testing.T) { testCallAllocs(t, b) })
}

// testReadWrite moves random data both ways in batches larger than the
// queue depth, with several lane counts, and checks every byte.
func testReadWrite(t *testing.T, b Backend) {
	for _, tc := range []struct {
		name  string
		lanes int
		depth int
		n     int
	}{
		{"lanes1-depth64", 1, 64, 1500},
		{"lanes4-depth4096", 4, 4096, 3000},
		{"lanes8-depth256", 8, 256, 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRand(t)
			const half = 1 << 20
			p, _ := b.NewPair(t, r, PairConfig{
				Exports: []RegionSpec{{"rw", 2 * half, rw}, {"ro", 256 << 10, ro}},
				Connect: verbs.ConnectOptions{Lanes: tc.lanes, QueueDepth: tc.depth},
			})
			local, err := p.Req.Alloc(2*half, verbs.AccessLocal)
			require.NoError(t, err)
			Fill(r, local.Bytes())
			wantLocal := bytes.Clone(local.Bytes())
			wantRemote := bytes.Clone(p.Exports["rw"].Bytes())
			rwKey, roKey := RemoteKey(t, p.Conn, "rw"), RemoteKey(t, p.Conn, "ro")

			// READs land in disjoint ranges of local[0, half); WRITEs come
			// from local[half, 2*half) and land in disjoint ranges of the
			// remote rw[half, 2*half); READs only read rw[0, half) and ro.
			wrs := make([]verbs.WorkRequest, 0, tc.n)
			var lnext, rnext uint64
			for i := range tc.n {
				n := uint32(r.IntN(2048))
				switch r.IntN(40) {
				case 0:
					n = 0
				case 1:
					n = uint32(16<<10 + r.IntN(48<<10))
				}
				wr := verbs.WorkRequest{ID: uint64(i) + 1000, Len: n, LocalKey: local.Key()}
				if r.IntN(2) == 0 && lnext+uint64(n) <= half {
					wr.Op, wr.LocalOff = verbs.OpRead, lnext
					lnext += uint64(n)
					src := p.Exports["rw"].Bytes()[:half]
					wr.RemoteKey = rwKey
					if r.IntN(3) == 0 {
						src, wr.RemoteKey = p.Exports["ro"].Bytes(), roKey
					}
					wr.RemoteOff = uint64(r.IntN(len(src) - int(n) + 1))
					copy(wantLocal[wr.LocalOff:], src[wr.RemoteOff:wr.RemoteOff+uint64(n)])
				} else if rnext+uint64(n) <= half {
					wr.Op, wr.RemoteKey = verbs.OpWrite, rwKey
					wr.LocalOff = half + uint64(r.IntN(half-int(n)+1))
					wr.RemoteOff = half + rnext
					rnext += uint64(n)
					copy(wantRemote[wr.RemoteOff:], wantLocal[wr.LocalOff:wr.LocalOff+uint64(n)])
				} else {
					continue
				}
				wrs = append(wrs, wr)
			}
			cs := make([]verbs.Completion, len(wrs))
			n, err := Drive(Context(t), p.Conn, wrs, cs)
			require.NoError(t, err)
			require.Equal(t, len(wrs), n)
			ids := RequireOK(t, cs)
			for _, wr := range wrs {
				require.True(t, ids[wr.ID], "no completion for %d", wr.ID)
			}
			require.True(t, bytes.Equal(wantLocal, local.Bytes()), "local memory differs from the model")
			require.True(t, bytes.Equal(wantRemote, p.Exports["rw"].Bytes()), "remote memory differs from the model")
			got, err := p.Conn.Poll(cs)
			require.NoError(t, err)
			require.Zero(t, got)
		})
	}
}

// testQueueDepth checks that Post stops at the queue depth and that
// polling frees it again.
func testQueueDepth(t *testing.T, b Backend) {
	r := NewRand(t)
	p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"a", 64 << 10, ro}},
		Connect: verbs.ConnectOptions{QueueDepth: 16, Lanes: 2}})
	require.Equal(t, 16, p.Conn.LinkParams().QueueDepth)
	local, err := p.Req.Alloc(64<<10, verbs.AccessLocal)
	require.NoError(t, err)
	key := RemoteKey(t, p.Conn, "a")
	wrs := make([]verbs.WorkRequest, 40)
	for i := range wrs {
		wrs[i] = verbs.WorkRequest{ID: uint64(i), Op: verbs.OpRead, Len: 100, LocalKey: local.Key(), LocalOff: uint64(i) * 100, RemoteKey: key, RemoteOff: uint64(i) * 100}
	}
	n, err := p.Conn.Post(wrs)
	require.NoError(t, err)
	require.Equal(t, 16, n)
	n, err = p.Conn.Post(wrs[16:])
	require.ErrorIs(t, err, verbs.ErrQueueFull)
	require.Zero(t, n)
	cs := make([]verbs.Completion, 40)
	got := 0
	for got < 16 {
		k, err := p.Conn.Wait(Context(t), cs[got:], 16-got)
		require.NoError(t, err)
		got += k
	}
	n, err = p.Conn.Post(wrs[16:])
	require.NoError(t, err)
	require.Equal(t, 16, n)
	for posted := 32; got < 40; {
		if posted < 40 {
			n, err := p.Conn.Post(wrs[posted:])
			if !errors.Is(err, verbs.ErrQueueFull) {
				require.NoError(t, err)
			}
			posted += n
		}
		k, err := p.Conn.Wait(Context(t), cs[got:], 1)
		require.NoError(t, err)
		got += k
	}
	ids := RequireOK(t, cs)
	require.Len(t, ids, 40)
	require.True(t, bytes.Equal(p.Exports["a"].Bytes()[:4000], local.Bytes()[:4000]))
}

// testRemoteErrors checks that each invalid remote side fails alone, with
// the right status and typed error, leaves the owner's memory alone and
// keeps the connection usable.
func testRemoteErrors(t *testing.T, b Backend) {
	r := NewRand(t)
	p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"rw", 64 << 10, rw}, {"ro", 4096, ro}, {"wo", 4096, wo}}})
	local, err := p.Req.Alloc(64<<10, verbs.AccessLocal)
	require.NoError(t, err)
	Fill(r, local.Bytes())
	before := map[string][]byte{}
	for name, reg := range p.Exports {
		before[name] = bytes.Clone(reg.Bytes())
	}
	localBefore := bytes.Clone(local.Bytes())
	rwKey, roKey, woKey := RemoteKey(t, p.Conn, "rw"), RemoteKey(t, p.Conn, "ro"), RemoteKey(t, p.Conn, "wo")
	bogus, err := verbs.NewKey()
	require.NoError(t, err)
	cases := []struct {
		name string
		wr   verbs.WorkRequest
		st   verbs.Status
		err  error
	}{
		{"read-unknown-key", verbs.WorkRequest{Op: verbs.OpRead, Len: 10, RemoteKey: bogus}, verbs.StatusBadKey, verbs.ErrBadKey},
		{"write-unknown-key", verbs.WorkRequest{Op: verbs.OpWrite, Len: 10, RemoteKey: bogus}, verbs.StatusBadKey, verbs.ErrBadKey},
		{"read-zero-key", verbs.WorkRequest{Op: verbs.OpRead, Len: 10}, verbs.StatusBadKey, verbs.ErrBadKey},
		{"read-local-key-as-remote", verbs.WorkRequest{Op: verbs.OpRead, Len: 10, RemoteKey: local.Key()}, verbs.StatusBadKey, verbs.ErrBadKey},
		{"read-past-end", verbs.WorkRequest{Op: verbs.OpRead, Len: 10, RemoteKey: roKey, RemoteOff: 4090}, verbs.StatusBounds, verbs.ErrBounds},
		{"read-offset-past-end", verbs.WorkRequest{Op: verbs.OpRead, Len: 0, RemoteKey: roKey, RemoteOff: 4097}, verbs.StatusBounds, verbs.ErrBounds},
		{"write-past-end", verbs.WorkRequest{Op: verbs.OpWrite, Len: 100, RemoteKey: rwKey, RemoteOff: 64<<10 - 99}, verbs.StatusBounds, verbs.ErrBounds},
		{"write-offset-overflow", verbs.WorkRequest{Op: verbs.OpWrite, Len: 100, RemoteKey: rwKey, RemoteOff: math.MaxUint64 - 50}, verbs.StatusBounds, verbs.ErrBounds},
		{"read-offset-overflow", verbs.WorkRequest{Op: verbs.OpRead, Len: 1 << 31, RemoteKey: rwKey, RemoteOff: math.MaxUint64 - 1<<30}, verbs.StatusBounds, verbs.ErrBounds},
		{"write-read-only", verbs.WorkRequest{Op: verbs.OpWrite, Len: 10, RemoteKey: roKey}, verbs.StatusAccess, verbs.ErrAccess},
		{"read-write-only", verbs.WorkRequest{Op: verbs.OpRead, Len: 10, RemoteKey: woKey}, verbs.StatusAccess, verbs.ErrAccess},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wr := tc.wr
			wr.ID, wr.LocalKey = uint64(i)+77, local.Key()
			if wr.Len > 64<<10 {
				wr.Len = 64 << 10 // the local side must be valid
			}
			// A valid READ on each side of the bad one: all three complete,
			// only the bad one fails.
			good := func(id uint64, off uint64) verbs.WorkRequest {
				return verbs.WorkRequest{ID: id, Op: verbs.OpRead, Len: 8, LocalKey: local.Key(), LocalOff: off, RemoteKey: rwKey, RemoteOff: off}
			}
			cs := make([]verbs.Completion, 3)
			n, err := Drive(Context(t), p.Conn, []verbs.WorkRequest{good(1, 40000), wr, good(2, 40008)}, cs)
			require.NoError(t, err)
			require.Equal(t, 3, n)
			var bad verbs.Completion
			for _, c := range cs {
				if c.ID == wr.ID {
					bad = c
				} else {
					require.Equal(t, verbs.StatusOK, c.Status, "%v", c.Err)
				}
			}
			require.Equal(t, tc.st, bad.Status)
			require.ErrorIs(t, bad.Err, tc.err)
			var re *verbs.RemoteError
			require.ErrorAs(t, bad.Err, &re)
			require.Equal(t, wr.ID, re.ID)
			require.Equal(t, tc.st, re.Status)
			copy(localBefore[40000:40016], p.Exports["rw"].Bytes()[40000:40016])
		})
	}
	for name, reg := range p.Exports {
		require.True(t, bytes.Equal(before[name], reg.Bytes()), "owner region %q changed", name)
	}
	require.True(t, bytes.Equal(localBefore, local.Bytes()), "local memory changed outside the good READs")
}

// testLocalErrors checks that an invalid local side rejects the whole
// batch at Post, before anything moves.
func testLocalErrors(t *testing.T, b Backend) {
	r := NewRand(t)
	p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"rw", 64 << 10, rw}}, Connect: verbs.ConnectOptions{QueueDepth: 8}})
	local, err := p.Req.Alloc(4096, verbs.AccessLocal)
	require.NoError(t, err)
	Fill(r, local.Bytes())
	noLocal, err := p.Req.Alloc(4096, verbs.AccessRemoteRead)
	require.NoError(t, err)
	other := b.Transport(t)
	foreign, err := other.Alloc(4096, verbs.AccessLocal)
	require.NoError(t, err)
	rwKey := RemoteKey(t, p.Conn, "rw")
	remoteBefore := bytes.Clone(p.Exports["rw"].Bytes())
	localBefore := bytes.Clone(local.Bytes())
	cases := []struct {
		name string
		wr   verbs.WorkRequest
		err  error
	}{
		{"unknown-key", verbs.WorkRequest{Op: verbs.OpWrite, Len: 10, LocalKey: 12345}, verbs.ErrBadKey},
		{"zero-key", verbs.WorkRequest{Op: verbs.OpRead, Len: 10}, verbs.ErrBadKey},
		{"other-transport", verbs.WorkRequest{Op: verbs.OpRead, Len: 10, LocalKey: foreign.Key()}, verbs.ErrBadKey},
		{"remote-key-as-local", verbs.WorkRequest{Op: verbs.OpRead, Len: 10, LocalKey: rwKey}, verbs.ErrBadKey},
		{"no-local-access", verbs.WorkRequest{Op: verbs.OpRead, Len: 10, LocalKey: noLocal.Key()}, verbs.ErrAccess},
		{"past-end", verbs.WorkRequest{Op: verbs.OpRead, Len: 10, LocalKey: local.Key(), LocalOff: 4090}, verbs.ErrBounds},
		{"offset-overflow", verbs.WorkRequest{Op: verbs.OpWrite, Len: 10, LocalKey: local.Key(), LocalOff: math.MaxUint64 - 5}, verbs.ErrBounds},
		{"bad-op", verbs.WorkRequest{Op: 9, Len: 10, LocalKey: local.Key()}, verbs.ErrInvalid},
		{"zero-op", verbs.WorkRequest{Len: 10, LocalKey: local.Key()}, verbs.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wr := tc.wr
			wr.ID, wr.RemoteKey = 99, rwKey
			batch := []verbs.WorkRequest{
				{ID: 1, Op: verbs.OpWrite, Len: 100, LocalKey: local.Key(), RemoteKey: rwKey},
				{ID: 2, Op: verbs.OpRead, Len: 100, LocalKey: local.Key(), RemoteKey: rwKey, RemoteOff: 1000},
				wr,
				{ID: 3, Op: verbs.OpRead, Len: 100, LocalKey: local.Key(), RemoteKey: rwKey},
			}
			n, err := p.Conn.Post(batch)
			require.Zero(t, n)
			require.ErrorIs(t, err, tc.err)
			var pe *verbs.PostError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, 2, pe.Index)
			require.Equal(t, uint64(99), pe.ID)
			cs := make([]verbs.Completion, 8)
			got, err := p.Conn.Poll(cs)
			require.NoError(t, err)
			require.Zero(t, got, "a rejected batch produced completions")
			// The queue depth was not consumed: 8 fit.
			fill := make([]verbs.WorkRequest, 8)
			for i := range fill {
				fill[i] = verbs.WorkRequest{ID: uint64(i), Op: verbs.OpRead, Len: 0, LocalKey: local.Key(), RemoteKey: rwKey}
			}
			k, err := Drive(Context(t), p.Conn, fill, cs)
			require.NoError(t, err)
			require.Equal(t, 8, k)
			RequireOK(t, cs)
		})
	}
	require.True(t, bytes.Equal(remoteBefore, p.Exports["rw"].Bytes()), "owner memory changed")
	require.True(t, bytes.Equal(localBefore, local.Bytes()), "local memory changed")
}

// Control methods used by the suite.
const (
	methodFill    = 1 // WRITE staging[off:off+n] into exposure "dst" at off (req: off, n, chunk, wait)
	methodReadDst = 2 // READ exposure "src" into staging, return it
	methodFail    = 3 // return an error
	methodBad     = 4 // post invalid WRITEs, return their statuses
	methodBlock   = 5 // block until released
	methodParams  = 6 // return the Peer's LinkParams bandwidth
	methodPattern = 7 // return n bytes of a pattern (req: seed, n)
)

// fillHandler writes from the owner's staging region into the
// requester's exposure "dst".
func fillHandler(staging *verbs.Region) verbs.HandlerFunc {
	return func(ctx context.Context, p verbs.Peer, req, resp []byte) ([]byte, error) {
		if len(req) != 25 {
			return nil, fmt.Errorf("bad request of %d bytes", len(req))
		}
		off := binary.LittleEndian.Uint64(req)
		n := binary.LittleEndian.Uint64(req[8:])
		chunk := binary.LittleEndian.Uint64(req[16:])
		wait := req[24] == 1
		dst, ok := verbs.FindRegion(p.Remote(), "dst")
		if !ok {
			return nil, errors.New("no dst exposure")
		}
		var wrs []verbs.WorkRequest
		for o := off; o < off+n; o += chunk {
			l := min(chunk, off+n-o)
			wrs = append(wrs, verbs.WorkRequest{ID: o, Op: verbs.OpWrite, Len: uint32(l), LocalKey: staging.Key(), LocalOff: o, RemoteKey: dst.Key, RemoteOff: o})
		}
		cs := make([]verbs.Completion, len(wrs))
		if !wait {
			// Post only: the transport must finish them before replying.
			for posted := 0; posted < len(wrs); {
				k, err := p.Post(wrs[posted:])
				if err != nil {
					return nil, err
				}
				posted += k
			}
			return append(resp, "posted"...), nil
		}
		k, err := Drive(ctx, p, wrs, cs)
		if err != nil {
			return nil, err
		}
		for _, c := range cs[:k] {
			if c.Err != nil {
				return nil, c.Err
			}
		}
		return append(resp, "done"...), nil
	}
}

func fillReq(off, n, chunk uint64, wait bool) []byte {
	b := binary.LittleEndian.AppendUint64(nil, off)
	b = binary.LittleEndian.AppendUint64(b, n)
	b = binary.LittleEndian.AppendUint64(b, chunk)
	if wait {
		return append(b, 1)
	}
	return append(b, 0)
}

// testCall checks control calls: a handler's WRITEs into the requester's
// exposure are in place when Call returns, READs from an exposure work,
// and handler errors and unknown methods come back typed.
func testCall(t *testing.T, b Backend) {
	r := NewRand(t)
	owner := b.Transport(t)
	staging, err := owner.Alloc(1<<20, verbs.AccessLocal)
	require.NoError(t, err)
	Fill(r, staging.Bytes())
	p, exposed := b.NewPair(t, r, PairConfig{
		Exports: []RegionSpec{{"tbl", 4096, ro}},
		Expose:  []RegionSpec{{"dst", 1 << 20, wo | verbs.AccessLocal}, {"src", 64 << 10, ro}},
		Listen:  verbs.ListenOptions{QueueDepth: 16},
	})
	// The staging region belongs to another transport: re-register it with
	// the owner of the segment so its key is valid there.
	st2, err := p.Owner.Register(staging.Bytes(), verbs.AccessLocal)
	require.NoError(t, err)
	p.Seg.Handle(methodFill, fillHandler(st2))
	p.Seg.Handle(methodReadDst, verbs.HandlerFunc(func(ctx context.Context, peer verbs.Peer, req, resp []byte) ([]byte, error) {
		src, ok := verbs.FindRegion(peer.Remote(), "src")
		if !ok {
			return nil, errors.New("no src")
		}
		cs := make([]verbs.Completion, 1)
		_, err := Drive(ctx, peer, []verbs.WorkRequest{{ID: 1, Op: verbs.OpRead, Len: uint32(src.Len), LocalKey: st2.Key(), RemoteKey: src.Key}}, cs)
		if err != nil {
			return nil, err
		}
		if cs[0].Err != nil {
			return nil, cs[0].Err
		}
		return append(resp, st2.Bytes()[:src.Len]...), nil
	}))
	p.Seg.Handle(methodFail, verbs.HandlerFunc(func(context.Context, verbs.Peer, []byte, []byte) ([]byte, error) {
		return nil, errors.New("table is busy")
	}))
	dst := exposed["dst"].Bytes()
	for _, tc := range []struct {
		name          string
		off, n, chunk uint64
		wait          bool
	}{
		{"one-write-wait", 0, 4096, 4096, true},
		{"many-chunks-wait", 8192, 300 << 10, 16 << 10, true},
		{"more-than-peer-depth-wait", 400 << 10, 100 << 10, 1024, true},
		{"post-only", 600 << 10, 256 << 10, 16 << 10, false}, // 16 WRITEs: the Peer's whole depth
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := p.Conn.Call(Context(t), methodFill, fillReq(tc.off, tc.n, tc.chunk, tc.wait), make([]byte, 0, 16))
			require.NoError(t, err)
			if tc.wait {
				require.Equal(t, "done", string(resp))
			} else {
				require.Equal(t, "posted", string(resp))
			}
			require.True(t, bytes.Equal(staging.Bytes()[tc.off:tc.off+tc.n], dst[tc.off:tc.off+tc.n]), "bytes not in place when Call returned")
		})
	}
	t.Run("read-exposure", func(t *testing.T) {
		resp, err := p.Conn.Call(Context(t), methodReadDst, nil, nil)
		require.NoError(t, err)
		require.True(t, bytes.Equal(exposed["src"].Bytes(), resp))
	})
	t.Run("handler-error", func(t *testing.T) {
		_, err := p.Conn.Call(Context(t), methodFail, []byte("x"), nil)
		require.ErrorIs(t, err, verbs.ErrHandler)
		var ce *verbs.CallError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, uint16(methodFail), ce.Method)
		require.Equal(t, "table is busy", ce.Message)
	})
	t.Run("unknown-method", func(t *testing.T) {
		_, err := p.Conn.Call(Context(t), 999, nil, nil)
		require.ErrorIs(t, err, verbs.ErrNotSupported)
	})
	t.Run("removed-handler", func(t *testing.T) {
		p.Seg.Handle(methodFail, nil)
		_, err := p.Conn.Call(Context(t), methodFail, nil, nil)
		require.ErrorIs(t, err, verbs.ErrNotSupported)
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := p.Conn.Call(ctx, methodFail, nil, nil)
		require.ErrorIs(t, err, context.Canceled)
		// The connection is still fine.
		resp, err := p.Conn.Call(Context(t), methodReadDst, nil, nil)
		require.NoError(t, err)
		require.Len(t, resp, 64<<10)
	})
	t.Run("response-buffer-reused", func(t *testing.T) {
		buf := make([]byte, 0, 128<<10)
		resp, err := p.Conn.Call(Context(t), methodReadDst, nil, buf)
		require.NoError(t, err)
		require.Equal(t, &buf[:1][0], &resp[0], "response not appended to the caller's buffer")
	})
	require.NoError(t, p.Owner.Deregister(st2))
}

// testPeerValidation checks that owner-initiated requests are validated
// against the requester's exposures.
func testPeerValidation(t *testing.T, b Backend) {
	r := NewRand(t)
	p, exposed := b.NewPair(t, r, PairConfig{
		Exports: []RegionSpec{{"tbl", 4096, ro}},
		Expose:  []RegionSpec{{"dst", 64 << 10, rw}, {"ro", 4096, ro}},
	})
	staging, err := p.Owner.Alloc(64<<10, verbs.AccessLocal)
	require.NoError(t, err)
	Fill(r, staging.Bytes())
	bogus, err := verbs.NewKey()
	require.NoError(t, err)
	p.Seg.Handle(methodBad, verbs.HandlerFunc(func(ctx context.Context, peer verbs.Peer, req, resp []byte) ([]byte, error) {
		dst, _ := verbs.FindRegion(peer.Remote(), "dst")
		roi, _ := verbs.FindRegion(peer.Remote(), "ro")
		wrs := []verbs.WorkRequest{
			{ID: 0, Op: verbs.OpWrite, Len: 16, RemoteKey: bogus},
			{ID: 1, Op: verbs.OpWrite, Len: 16, RemoteKey: dst.Key, RemoteOff: 64<<10 - 8},
			{ID: 2, Op: verbs.OpWrite, Len: 16, RemoteKey: dst.Key, RemoteOff: math.MaxUint64 - 4},
			{ID: 3, Op: verbs.OpWrite, Len: 16, RemoteKey: roi.Key},
			{ID: 4, Op: verbs.OpRead, Len: 16, RemoteKey: dst.Key, RemoteOff: 64 << 10},
			{ID: 5, Op: verbs.OpWrite, Len: 16, RemoteKey: dst.Key, RemoteOff: 100},
		}
		for i := range wrs {
			wrs[i].LocalKey = staging.Key()
		}
		cs := make([]verbs.Completion, len(wrs))
		if _, err := Drive(ctx, peer, wrs, cs); err != nil {
			return nil, err
		}
		out := make([]byte, len(wrs))
		for _, c := range cs {
			out[c.ID] = byte(c.Status)
			var re *verbs.RemoteError
			if c.Status != verbs.StatusOK && (!errors.As(c.Err, &re) || re.ID != c.ID) {
				return nil, fmt.Errorf("completion %d: error %v is not a *RemoteError", c.ID, c.Err)
			}
		}
		return append(resp, out...), nil
	}))
	before := bytes.Clone(exposed["dst"].Bytes())
	roBefore := bytes.Clone(exposed["ro"].Bytes())
	resp, err := p.Conn.Call(Context(t), methodBad, nil, nil)
	require.NoError(t, err)
	want := []byte{byte(verbs.StatusBadKey), byte(verbs.StatusBounds), byte(verbs.StatusBounds), byte(verbs.StatusAccess), byte(verbs.StatusBounds), byte(verbs.StatusOK)}
	require.Empty(t, cmp.Diff(want, resp))
	copy(before[100:116], staging.Bytes()[:16])
	require.True(t, bytes.Equal(before, exposed["dst"].Bytes()), "exposure changed beyond the one valid WRITE")
	require.True(t, bytes.Equal(roBefore, exposed["ro"].Bytes()), "read-only exposure changed")
}

// testConcurrentCalls checks that a blocked handler stops neither direct
// traffic nor other calls.
func testConcurrentCalls(t *testing.T, b Backend) {
	r := NewRand(t)
	p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"a", 64 << 10, ro}}})
	release := make(chan struct{})
	entered := make(chan struct{})
	p.Seg.Handle(methodBlock, verbs.HandlerFunc(func(ctx context.Context, _ verbs.Peer, req, resp []byte) ([]byte, error) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return append(resp, "released"...), nil
	}))
	p.Seg.Handle(methodFail, verbs.HandlerFunc(func(_ context.Context, _ verbs.Peer, req, resp []byte) ([]byte, error) {
		return append(resp, req...), nil
	}))
	done := make(chan error, 1)
	go func() {
		resp, err := p.Conn.Call(Context(t), methodBlock, nil, nil)
		if err == nil && string(resp) != "released" {
			err = fmt.Errorf("response %q", resp)
		}
		done <- err
	}()
	<-entered
	local, err := p.Req.Alloc(64<<10, verbs.AccessLocal)
	require.NoError(t, err)
	cs := make([]verbs.Completion, 1)
	_, err = Drive(Context(t), p.Conn, []verbs.WorkRequest{{ID: 1, Op: verbs.OpRead, Len: 64 << 10, LocalKey: local.Key(), RemoteKey: RemoteKey(t, p.Conn, "a")}}, cs)
	require.NoError(t, err)
	RequireOK(t, cs)
	require.True(t, bytes.Equal(p.Exports["a"].Bytes(), local.Bytes()))
	resp, err := p.Conn.Call(Context(t), methodFail, []byte("echo"), nil)
	require.NoError(t, err)
	require.Equal(t, "echo", string(resp))
	close(release)
	require.NoError(t, <-done)
}

// pattern fills b with the bytes of seed's pattern.
func pattern(b []byte, seed uint64) {
	for i := range b {
		seed = seed*6364136223846793005 + 1442695040888963407
		b[i] = byte(seed >> 56)
	}
}

// testConcurrentReplies runs many calls at once whose replies are small
// and large (a few bytes to hundreds of KiB, what an inline gather reply
// carries), on several lanes: every caller gets its own reply, byte for
// byte, however the owner's answers interleave on the lanes.
func testConcurrentReplies(t *testing.T, b Backend) {
	r := NewRand(t)
	p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"a", 4096, ro}}, Connect: verbs.ConnectOptions{Lanes: 2}})
	p.Seg.Handle(methodPattern, verbs.HandlerFunc(func(_ context.Context, _ verbs.Peer, req, resp []byte) ([]byte, error) {
		if len(req) != 16 {
			return nil, fmt.Errorf("request of %d bytes", len(req))
		}
		n := int(binary.LittleEndian.Uint64(req[8:]))
		resp = append(resp[:0], make([]byte, n)...)
		pattern(resp, binary.LittleEndian.Uint64(req))
		return resp, nil
	}))
	sizes := []int{0, 9, 1000, 31 << 10, 32 << 10, 100 << 10, 256<<10 + 3}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		seed0 := r.Uint64()
		wg.Go(func() {
			req := make([]byte, 16)
			var resp, want []byte
			for i := range 20 {
				seed, n := seed0+uint64(i), sizes[(g+i)%len(sizes)]
				binary.LittleEndian.PutUint64(req, seed)
				binary.LittleEndian.PutUint64(req[8:], uint64(n))
				var err error
				resp, err = p.Conn.Call(Context(t), methodPattern, req, resp[:0])
				if err != nil {
					errs <- err
					return
				}
				want = append(want[:0], make([]byte, n)...)
				pattern(want, seed)
				if !bytes.Equal(resp, want) {
					errs <- fmt.Errorf("caller %d call %d: reply of %d bytes differs from its pattern of %d", g, i, len(resp), n)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// testCallsBeyondMaxCalls runs more concurrent calls than the owner runs
// at once, on one lane, each writing into the exposure and waiting for its
// acknowledgements: the waiting calls must not block the answers the
// running ones need.
func testCallsBeyondMaxCalls(t *testing.T, b Backend) {
	r := NewRand(t)
	p, exposed := b.NewPair(t, r, PairConfig{
		Exports: []RegionSpec{{"tbl", 4096, ro}},
		Expose:  []RegionSpec{{"dst", 1 << 20, wo | verbs.AccessLocal}},
		Listen:  verbs.ListenOptions{MaxCalls: 2, QueueDepth: 4},
		Connect: verbs.ConnectOptions{Lanes: 1},
	})
	staging, err := p.Owner.Alloc(1<<20, verbs.AccessLocal)
	require.NoError(t, err)
	Fill(r, staging.Bytes())
	p.Seg.Handle(methodFill, fillHandler(staging))
	const calls, each = 8, 128 << 10
	errs := make(chan error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			_, err := p.Conn.Call(Context(t), methodFill, fillReq(uint64(i*each), each, 4096, true), nil)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.True(t, bytes.Equal(staging.Bytes(), exposed["dst"].Bytes()))
}

// drain collects completions until the queue reports ErrClosed.
func drain(t *testing.T, q verbs.Queue) []verbs.Completion {
	t.Helper()
	ctx := Context(t)
	var all []verbs.Completion
	cs := make([]verbs.Completion, 256)
	for {
		n, err := q.Wait(ctx, cs, len(cs))
		all = append(all, cs[:n]...)
		if err != nil {
			require.ErrorIs(t, err, verbs.ErrClosed)
			require.Zero(t, n)
			return all
		}
	}
}

// requireAllDone checks that every posted request completed exactly once,
// successfully or with ErrClosed.
func requireAllDone(t *testing.T, posted int, all []verbs.Completion) (ok, closed int) {
	t.Helper()
	seen := map[uint64]bool{}
	for _, c := range all {
		require.False(t, seen[c.ID], "completion %d twice", c.ID)
		seen[c.ID] = true
		switch c.Status {
		case verbs.StatusOK:
			ok++
		case verbs.StatusClosed:
			require.ErrorIs(t, c.Err, verbs.ErrClosed)
			closed++
		default:
			t.Fatalf("completion %d: %v", c.ID, c.Err)
		}
	}
	require.Equal(t, posted, len(all), "not every posted request completed")
	return ok, closed
}

// postMany posts up to n READs of size bytes.
func postMany(t *testing.T, q verbs.Queue, local *verbs.Region, key verbs.Key, n int, size uint32) int {
	t.Helper()
	// Disjoint destinations: READs into the same bytes from different
	// lanes would race (and the race detector says so).
	require.LessOrEqual(t, n*int(size), local.Len(), "postMany: destinations must not overlap")
	wrs := make([]verbs.WorkRequest, n)
	for i := range wrs {
		wrs[i] = verbs.WorkRequest{ID: uint64(i), Op: verbs.OpRead, Len: size, LocalKey: local.Key(), LocalOff: uint64(i) * uint64(size), RemoteKey: key, RemoteOff: uint64(i%16) * uint64(size)}
	}
	k, err := q.Post(wrs)
	require.NoError(t, err)
	return k
}

// testOwnerGone closes the segment under a batch in flight: every request
// completes (done or ErrClosed), nothing hangs, and then Post and Call
// fail with ErrClosed.
func testOwnerGone(t *testing.T, b Backend) {
	r := NewRand(t)
	p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"a", 1 << 20, ro}}, Connect: verbs.ConnectOptions{QueueDepth: 4096}})
	local, err := p.Req.Alloc(4<<20, verbs.AccessLocal)
	require.NoError(t, err)
	posted := postMany(t, p.Conn, local, RemoteKey(t, p.Conn, "a"), 4096, 1<<10)
	require.NoError(t, p.Seg.Close())
	// Posting keeps working or fails with ErrClosed; eventually it fails.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := p.Conn.Post([]verbs.WorkRequest{{ID: 1 << 40, Op: verbs.OpRead, Len: 1, LocalKey: local.Key(), RemoteKey: RemoteKey(t, p.Conn, "a")}})
		if err != nil {
			if errors.Is(err, verbs.ErrQueueFull) {
				time.Sleep(time.Millisecond)
				if time.Now().Before(deadline) {
					continue
				}
			}
			require.ErrorIs(t, err, verbs.ErrClosed)
			break
		}
		posted += n
		require.True(t, time.Now().Before(deadline), "Post still succeeds long after the owner left")
		time.Sleep(time.Millisecond)
	}
	requireAllDone(t, posted, drain(t, p.Conn))
	_, err = p.Conn.Call(Context(t), 1, nil, nil)
	require.ErrorIs(t, err, verbs.ErrClosed)
}

// methodConnID answers a call with the caller's ConnID; methodEvictSelf
// evicts the caller's own connection from inside the handler and answers
// once its context has ended (an answer that cannot arrive).
const (
	methodConnID    = 0x7e01
	methodEvictSelf = 0x7e02
	methodLateCopy  = 0x7e05
)

// testEvict evicts connections: the fence closes in bounded time, the
// evicted connection's requests and calls end with ErrClosed, a handler
// may evict its own connection, other connections and the segment go on,
// and the fence of a connection that is not open is already closed.
func testEvict(t *testing.T, b Backend) {
	r := NewRand(t)
	var seg verbs.Segment
	selfFence := make(chan (<-chan struct{}), 1)
	handlers := map[uint16]verbs.Handler{
		methodConnID: verbs.HandlerFunc(func(_ context.Context, p verbs.Peer, _, resp []byte) ([]byte, error) {
			return binary.LittleEndian.AppendUint64(resp, p.ConnID()), nil
		}),
		methodEvictSelf: verbs.HandlerFunc(func(ctx context.Context, p verbs.Peer, _, resp []byte) ([]byte, error) {
			selfFence <- seg.Evict(p.ConnID())
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				return nil, errors.New("an evicted connection's handler context goes on")
			}
			return resp, nil
		}),
	}
	p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"a", 1 << 20, rw}}, Handlers: handlers,
		Connect: verbs.ConnectOptions{QueueDepth: 4096}})
	seg = p.Seg
	connID := func(c verbs.Conn) uint64 {
		resp, err := c.Call(Context(t), methodConnID, nil, nil)
		require.NoError(t, err)
		require.Len(t, resp, 8)
		return binary.LittleEndian.Uint64(resp)
	}
	requireClosed := func(fence <-chan struct{}) {
		t.Helper()
		select {
		case <-fence:
		case <-time.After(10 * time.Second):
			t.Fatal("fence still open after 10 s")
		}
	}
	local, err := p.Req.Alloc(4<<20, verbs.AccessLocal)
	require.NoError(t, err)
	other, err := p.Req.Connect(Context(t), p.Seg.Addr(), verbs.ConnectOptions{})
	require.NoError(t, err)
	defer other.Close()

	id := connID(p.Conn)
	require.NotEqual(t, id, connID(other))
	posted := postMany(t, p.Conn, local, RemoteKey(t, p.Conn, "a"), 4096, 1<<10)
	requireClosed(p.Seg.Evict(id))
	requireAllDone(t, posted, drain(t, p.Conn))
	_, err = p.Conn.Call(Context(t), methodConnID, nil, nil)
	require.ErrorIs(t, err, verbs.ErrClosed)
	requireClosed(p.Seg.Evict(id))         // again: already fenced
	requireClosed(p.Seg.Evict(id + 1<<40)) // never open

	// The other connection and the segment go on.
	wrs := []verbs.WorkRequest{{ID: 1, Op: verbs.OpRead, Len: 4096, LocalKey: local.Key(), RemoteKey: RemoteKey(t, other, "a")}}
	n, err := other.Post(wrs)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	c := drainN(t, other, 1)
	require.NoError(t, c[0].Err)
	require.Equal(t, p.Exports["a"].Bytes()[:4096], local.Bytes()[:4096])

	// The fence waits for the connection's handlers: one that goes on
	// copying a while after its context ended is done when it closes.
	var late atomic.Bool
	lateRunning := make(chan struct{})
	p.Seg.Handle(methodLateCopy, verbs.HandlerFunc(func(ctx context.Context, _ verbs.Peer, _, resp []byte) ([]byte, error) {
		close(lateRunning)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // a copy of what the connection sent, still going
		late.Store(true)
		return resp, nil
	}))
	lc, err := p.Req.Connect(Context(t), p.Seg.Addr(), verbs.ConnectOptions{})
	require.NoError(t, err)
	defer lc.Close()
	lcID := connID(lc)
	go func() { _, _ = lc.Call(context.Background(), methodLateCopy, nil, nil) }()
	<-lateRunning
	requireClosed(p.Seg.Evict(lcID))
	require.True(t, late.Load(), "the fence closed while a handler of the connection still ran")

	// A handler evicts its own connection.
	self, err := p.Req.Connect(Context(t), p.Seg.Addr(), verbs.ConnectOptions{})
	require.NoError(t, err)
	defer self.Close()
	_, err = self.Call(Context(t), methodEvictSelf, nil, nil)
	require.ErrorIs(t, err, verbs.ErrClosed)
	requireClosed(<-selfFence)
	c2, err := p.Req.Connect(Context(t), p.Seg.Addr(), verbs.ConnectOptions{})
	require.NoError(t, err)
	require.NotZero(t, connID(c2))
	require.NoError(t, c2.Close())
}

// testLimits: a segment serves at most MaxSessions connections (the next
// is refused with the reason, and admitted again once one ends); a call
// that would pass MaxConnCallBytes of one connection or MaxCallBytes of
// the segment is answered busy at once without running its handler, and
// calls work again once the held ones finish.
func testLimits(t *testing.T, b Backend) {
	r := NewRand(t)
	hold := make(chan struct{})
	running := make(chan struct{}, 8)
	const methodHold = 0x7e03
	handlers := map[uint16]verbs.Handler{methodHold: verbs.HandlerFunc(func(ctx context.Context, _ verbs.Peer, req, resp []byte) ([]byte, error) {
		running <- struct{}{}
		select {
		case <-hold:
		case <-ctx.Done():
		}
		return append(resp, byte(len(req))), nil
	})}
	p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"a", 4096, ro}}, Handlers: handlers,
		Listen: verbs.ListenOptions{MaxSessions: 2, MaxConnCallBytes: 64 << 10, MaxCallBytes: 96 << 10}})
	second, err := p.Req.Connect(Context(t), p.Seg.Addr(), verbs.ConnectOptions{})
	require.NoError(t, err)
	_, err = p.Req.Connect(Context(t), p.Seg.Addr(), verbs.ConnectOptions{})
	require.ErrorIs(t, err, verbs.ErrNotAdmitted)
	require.ErrorContains(t, err, "at most 2")

	// Calls: 40 KiB held on the first connection; another 40 KiB there
	// passes its 64 KiB; 40 KiB on the second passes neither its own 64
	// KiB nor, with 40 held, the segment's 96 KiB; 60 more would.
	req := make([]byte, 40<<10)
	done := make(chan error, 2)
	go func() { _, err := p.Conn.Call(Context(t), methodHold, req, nil); done <- err }()
	<-running
	requireBusy := func(c verbs.Conn, n int, which string) {
		t.Helper()
		_, err := c.Call(Context(t), methodHold, make([]byte, n), nil)
		var ce *verbs.CallError
		require.ErrorAs(t, err, &ce, "a call past the %s limit", which)
		require.Equal(t, verbs.StatusHandler, ce.Status)
		require.Contains(t, ce.Message, "busy")
		require.Contains(t, ce.Message, which)
	}
	requireBusy(p.Conn, 40<<10, "connection")
	requireBusy(second, 60<<10, "segment")
	go func() { _, err := second.Call(Context(t), methodHold, req, nil); done <- err }()
	<-running
	close(hold)
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	resp, err := p.Conn.Call(Context(t), methodHold, make([]byte, 60<<10), nil)
	require.NoError(t, err, "calls work again once the held ones ended")
	require.Equal(t, []byte{0}, resp) // 60 KiB: the length's low byte

	// Sessions: once one ends, a new connection is admitted.
	require.NoError(t, second.Close())
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := p.Req.Connect(Context(t), p.Seg.Addr(), verbs.ConnectOptions{})
		if err == nil {
			require.NoError(t, c.Close())
			break
		}
		require.ErrorIs(t, err, verbs.ErrNotAdmitted)
		require.True(t, time.Now().Before(deadline), "no room 10 s after a connection closed")
		time.Sleep(5 * time.Millisecond)
	}
}

// drainN waits for n completions of q.
func drainN(t *testing.T, q verbs.Queue, n int) []verbs.Completion {
	t.Helper()
	out := make([]verbs.Completion, n)
	got := 0
	for got < n {
		k, err := q.Wait(Context(t), out[got:], n-got)
		require.NoError(t, err)
		got += k
	}
	return out
}

// testCloseOutstanding closes the connection with a batch in flight.
func testCloseOutstanding(t *testing.T, b Backend) {
	r := NewRand(t)
	p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"a", 1 << 20, ro}}, Connect: verbs.ConnectOptions{QueueDepth: 4096}})
	local, err := p.Req.Alloc(4<<20, verbs.AccessLocal)
	require.NoError(t, err)
	posted := postMany(t, p.Conn, local, RemoteKey(t, p.Conn, "a"), 4096, 1<<10)
	require.NoError(t, p.Conn.Close())
	requireAllDone(t, posted, drain(t, p.Conn))
	n, err := p.Conn.Poll(make([]verbs.Completion, 4))
	require.Zero(t, n)
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = p.Conn.Post([]verbs.WorkRequest{{Op: verbs.OpRead, LocalKey: local.Key()}})
	require.ErrorIs(t, err, verbs.ErrClosed)
	require.NoError(t, p.Conn.Close(), "Close is idempotent")
	// The segment serves new connections.
	c2, err := p.Req.Connect(Context(t), p.Seg.Addr(), verbs.ConnectOptions{})
	require.NoError(t, err)
	require.NoError(t, c2.Close())
}

// testTransportClose closes whole transports under open segments and
// connections: everything they made ends, and the other side sees
// ErrClosed.
func testTransportClose(t *testing.T, b Backend) {
	r := NewRand(t)
	owner, req := b.New(), b.New()
	defer req.Close()
	reg, err := owner.Alloc(4096, ro)
	require.NoError(t, err)
	seg, err := owner.Listen(b.Addr(t), []verbs.Export{{Name: "a", Region: reg}}, verbs.ListenOptions{})
	require.NoError(t, err)
	local, err := req.Alloc(4096, verbs.AccessLocal)
	require.NoError(t, err)
	Fill(r, local.Bytes())
	c1, err := req.Connect(Context(t), seg.Addr(), verbs.ConnectOptions{})
	require.NoError(t, err)
	c2, err := req.Connect(Context(t), seg.Addr(), verbs.ConnectOptions{})
	require.NoError(t, err)
	require.NoError(t, owner.Close())
	require.NoError(t, seg.Close(), "closing a segment twice is fine")
	_, err = owner.Alloc(16, verbs.AccessLocal)
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = owner.Listen(b.Addr(t), nil, verbs.ListenOptions{})
	require.ErrorIs(t, err, verbs.ErrClosed)
	for _, c := range []verbs.Conn{c1, c2} {
		require.Eventually(t, func() bool {
			_, err := c.Post([]verbs.WorkRequest{{Op: verbs.OpRead, Len: 1, LocalKey: local.Key(), RemoteKey: reg.Key()}})
			if err == nil {
				_, _ = c.Wait(Context(t), make([]verbs.Completion, 1), 1)
			}
			return errors.Is(err, verbs.ErrClosed)
		}, 10*time.Second, time.Millisecond)
	}
	require.NoError(t, req.Close())
	n, err := c1.Poll(make([]verbs.Completion, 4))
	require.Zero(t, n)
	require.ErrorIs(t, err, verbs.ErrClosed)
	require.NoError(t, c2.Close(), "a connection closed by its transport may be closed again")
}

// testLinkParams checks measured and overridden link parameters, and that
// the owner's Peer sees the requester's measurement.
func testLinkParams(t *testing.T, b Backend) {
	r := NewRand(t)
	t.Run("measured", func(t *testing.T) {
		p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"a", 4096, ro}}, Connect: verbs.ConnectOptions{QueueDepth: 2048}})
		lp := p.Conn.LinkParams()
		t.Logf("%s measured: %.2f GB/s, %.0f posts/s, RTT %v", b.Name, lp.Bandwidth/1e9, lp.PostRate, lp.RTT)
		require.Greater(t, lp.Bandwidth, 1e6)
		require.Greater(t, lp.PostRate, 1e3)
		require.Greater(t, lp.RTT, time.Duration(0))
		require.Less(t, lp.RTT, time.Second)
		require.Equal(t, 2048, lp.QueueDepth)
		p.Seg.Handle(methodParams, verbs.HandlerFunc(func(_ context.Context, peer verbs.Peer, _, resp []byte) ([]byte, error) {
			pl := peer.LinkParams()
			return binary.LittleEndian.AppendUint64(resp, math.Float64bits(pl.Bandwidth)), nil
		}))
		// PARAMS travels after the handshake; a call on the same
		// connection is answered after it on shm and usually on tcp, so
		// allow a few tries.
		require.Eventually(t, func() bool {
			resp, err := p.Conn.Call(Context(t), methodParams, nil, nil)
			return err == nil && math.Float64frombits(binary.LittleEndian.Uint64(resp)) == lp.Bandwidth
		}, 5*time.Second, time.Millisecond)
	})
	t.Run("override", func(t *testing.T) {
		want := verbs.LinkParams{Bandwidth: 12.5e9, PostRate: 3e6, RTT: 7 * time.Microsecond}
		p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"a", 4096, ro}}, Connect: verbs.ConnectOptions{QueueDepth: 100, Link: want}})
		want.QueueDepth = 100
		require.Equal(t, want, p.Conn.LinkParams())
	})
	t.Run("partial-override", func(t *testing.T) {
		p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"a", 4096, ro}}, Connect: verbs.ConnectOptions{Link: verbs.LinkParams{RTT: time.Hour}}})
		lp := p.Conn.LinkParams()
		require.Equal(t, time.Hour, lp.RTT)
		require.Greater(t, lp.Bandwidth, 0.0)
	})
}

// testDeregister checks region lifetimes.
func testDeregister(t *testing.T, b Backend) {
	r := NewRand(t)
	p, exposed := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"a", 4096, ro}}, Expose: []RegionSpec{{"x", 4096, rw}}})
	require.ErrorIs(t, p.Owner.Deregister(p.Exports["a"]), verbs.ErrInUse)
	require.ErrorIs(t, p.Req.Deregister(exposed["x"]), verbs.ErrInUse)
	require.ErrorIs(t, p.Req.Deregister(p.Exports["a"]), verbs.ErrBadKey, "a region of another transport")
	require.ErrorIs(t, p.Req.Deregister(nil), verbs.ErrInvalid)
	require.NoError(t, p.Conn.Close())
	require.NoError(t, p.Req.Deregister(exposed["x"]))
	require.ErrorIs(t, p.Req.Deregister(exposed["x"]), verbs.ErrBadKey, "twice")
	require.NoError(t, p.Seg.Close())
	require.NoError(t, p.Owner.Deregister(p.Exports["a"]))
	// Registered memory works as the local side.
	buf := make([]byte, 100)
	reg, err := p.Req.Register(buf, verbs.AccessLocal)
	require.NoError(t, err)
	require.NotZero(t, reg.Key())
	require.Equal(t, 100, reg.Len())
	require.NoError(t, p.Req.Deregister(reg))
}

// testBadOptions checks argument validation of Listen, Connect and the
// region calls.
func testBadOptions(t *testing.T, b Backend) {
	tr := b.Transport(t)
	reg, err := tr.Alloc(4096, ro)
	require.NoError(t, err)
	reg2, err := tr.Alloc(4096, rw)
	require.NoError(t, err)
	local, err := tr.Alloc(4096, verbs.AccessLocal)
	require.NoError(t, err)
	other := b.Transport(t)
	otherLocal, err := other.Alloc(4096, verbs.AccessLocal)
	require.NoError(t, err)
	foreign, err := other.Alloc(4096, ro)
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		exports []verbs.Export
		opts    verbs.ListenOptions
		err     error
	}{
		{"nil-region", []verbs.Export{{Name: "a"}}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"empty-name", []verbs.Export{{Region: reg}}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"long-name", []verbs.Export{{Name: string(make([]byte, 256)), Region: reg}}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"duplicate-name", []verbs.Export{{Name: "a", Region: reg}, {Name: "a", Region: reg2}}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"duplicate-region", []verbs.Export{{Name: "a", Region: reg}, {Name: "b", Region: reg}}, verbs.ListenOptions{}, verbs.ErrInvalid},
		{"no-remote-access", []verbs.Export{{Name: "a", Region: local}}, verbs.ListenOptions{}, verbs.ErrAccess},
		{"foreign-region", []verbs.Export{{Name: "a", Region: foreign}}, verbs.ListenOptions{}, verbs.ErrBadKey},
		{"negative-depth", []verbs.Export{{Name: "a", Region: reg}}, verbs.ListenOptions{QueueDepth: -1}, verbs.ErrInvalid},
	} {
		t.Run("listen-"+tc.name, func(t *testing.T) {
			_, err := tr.Listen(b.Addr(t), tc.exports, tc.opts)
			require.ErrorIs(t, err, tc.err)
		})
	}
	seg, err := tr.Listen(b.Addr(t), []verbs.Export{{Name: "a", Region: reg}}, verbs.ListenOptions{})
	require.NoError(t, err)
	defer seg.Close()
	for _, tc := range []struct {
		name string
		opts verbs.ConnectOptions
		err  error
	}{
		{"too-many-lanes", verbs.ConnectOptions{Lanes: verbs.MaxLanes + 1}, verbs.ErrInvalid},
		{"negative-depth", verbs.ConnectOptions{QueueDepth: -1}, verbs.ErrInvalid},
		{"depth-too-large", verbs.ConnectOptions{QueueDepth: verbs.MaxQueueDepth + 1}, verbs.ErrInvalid},
		{"expose-foreign", verbs.ConnectOptions{Expose: []verbs.Export{{Name: "x", Region: reg}}}, verbs.ErrBadKey},
		{"expose-no-remote", verbs.ConnectOptions{Expose: []verbs.Export{{Name: "x", Region: otherLocal}}}, verbs.ErrAccess},
	} {
		t.Run("connect-"+tc.name, func(t *testing.T) {
			_, err := other.Connect(Context(t), seg.Addr(), tc.opts)
			require.ErrorIs(t, err, tc.err)
		})
	}
	t.Run("connect-nowhere", func(t *testing.T) {
		_, err := other.Connect(Context(t), b.Addr(t), verbs.ConnectOptions{})
		require.Error(t, err)
	})
	t.Run("expose-registered", func(t *testing.T) {
		plain, err := other.Register(make([]byte, 4096), rw)
		require.NoError(t, err)
		c, err := other.Connect(Context(t), seg.Addr(), verbs.ConnectOptions{Expose: []verbs.Export{{Name: "x", Region: plain}}})
		if b.ExposeRegistered {
			require.NoError(t, err)
			require.NoError(t, c.Close())
		} else {
			require.ErrorIs(t, err, verbs.ErrNotSupported)
		}
		require.NoError(t, other.Deregister(plain), "a failed Connect must unpin")
	})
	t.Run("region-args", func(t *testing.T) {
		_, err := tr.Alloc(0, verbs.AccessLocal)
		require.ErrorIs(t, err, verbs.ErrInvalid)
		_, err = tr.Alloc(16, 0)
		require.ErrorIs(t, err, verbs.ErrInvalid)
		_, err = tr.Register(nil, verbs.AccessLocal)
		require.ErrorIs(t, err, verbs.ErrInvalid)
		_, err = tr.Register(make([]byte, 8), 0x80)
		require.ErrorIs(t, err, verbs.ErrInvalid)
	})
	t.Run("closed-transport", func(t *testing.T) {
		x := b.New()
		require.NoError(t, x.Close())
		_, err := x.Alloc(16, verbs.AccessLocal)
		require.ErrorIs(t, err, verbs.ErrClosed)
		_, err = x.Connect(Context(t), seg.Addr(), verbs.ConnectOptions{})
		require.ErrorIs(t, err, verbs.ErrClosed)
	})
}

// testManyConns runs several connections against one segment at once,
// each with two posting goroutines and one polling goroutine.
func testManyConns(t *testing.T, b Backend) {
	r := NewRand(t)
	p, _ := b.NewPair(t, r, PairConfig{Exports: []RegionSpec{{"a", 1 << 20, ro}}, Connect: verbs.ConnectOptions{Lanes: 2, QueueDepth: 512}})
	src := p.Exports["a"].Bytes()
	conns := []verbs.Conn{p.Conn}
	for range 2 {
		c, err := p.Req.Connect(Context(t), p.Seg.Addr(), verbs.ConnectOptions{Lanes: 3, QueueDepth: 256})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		conns = append(conns, c)
	}
	const perWorker = 2000
	type worker struct {
		c     verbs.Conn
		local *verbs.Region
		wrs   []verbs.WorkRequest
	}
	var workers []worker
	for i := range 2 * len(conns) {
		c := conns[i/2]
		local, err := p.Req.Alloc(perWorker*512, verbs.AccessLocal)
		require.NoError(t, err)
		key := RemoteKey(t, c, "a")
		wrs := make([]verbs.WorkRequest, perWorker)
		for j := range wrs {
			n := uint32(1 + r.IntN(512))
			wrs[j] = verbs.WorkRequest{ID: uint64(i)<<32 | uint64(j), Op: verbs.OpRead, Len: n, LocalKey: local.Key(),
				LocalOff: uint64(j) * 512, RemoteKey: key, RemoteOff: uint64(r.IntN(len(src) - int(n)))}
		}
		workers = append(workers, worker{c, local, wrs})
	}
	ctx := Context(t)
	var wg sync.WaitGroup
	errs := make(chan error, 3*len(conns))
	for ci, c := range conns {
		wg.Go(func() { // the connection's poller
			cs := make([]verbs.Completion, 64)
			for got := 0; got < 2*perWorker; {
				n, err := c.Wait(ctx, cs, 1)
				if err != nil {
					errs <- fmt.Errorf("conn %d: wait: %w", ci, err)
					return
				}
				for _, cp := range cs[:n] {
					if cp.Err != nil || int(cp.ID>>32)/2 != ci {
						errs <- fmt.Errorf("conn %d: completion %#x: %v", ci, cp.ID, cp.Err)
						return
					}
				}
				got += n
			}
		})
	}
	for _, w := range workers {
		wg.Go(func() {
			for posted := 0; posted < len(w.wrs); {
				n, err := w.c.Post(w.wrs[posted:min(posted+100, len(w.wrs))])
				if err != nil && !errors.Is(err, verbs.ErrQueueFull) {
					errs <- err
					return
				}
				posted += n
				if n == 0 {
					time.Sleep(20 * time.Microsecond)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, w := range workers {
		for _, wr := range w.wrs {
			got := w.local.Bytes()[wr.LocalOff : wr.LocalOff+uint64(wr.Len)]
			want := src[wr.RemoteOff : wr.RemoteOff+uint64(wr.Len)]
			require.True(t, bytes.Equal(want, got), "request %#x: wrong bytes", wr.ID)
		}
	}
}

package structobj

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/structobj/internal/proto"
	"github.com/scatterkit/scatterkit/verbs"
)

// Put stores obj under key on the owner at addr (or, with addr empty,
// the owner whose Directory record names key: a new key needs addr) and
// returns the new version. The object is validated first (Object.Validate
// under the client's and the owner's limits, and the key): an invalid one
// is refused with nothing sent.
//
// The payload goes to reserved space as scatter WRITEs of obj's separate
// buffers: those in Buffers straight, others staged through pool leases,
// ChunkBytes at a time with InFlight chunks in flight, then the manifest
// is committed; bytes no part covers are written as zeros. The WRITEs and
// the Commit must be done within the owner's reservation TTL less a
// margin (an eighth of it, at most 2 s), which bounds the context.
// Without the fast path (see Client) the same payload is stored inline or
// from registered caller memory. On failure, the context's end included,
// the WRITEs in flight are waited for, the reservation is aborted and the
// key keeps its previous object: a PUT is visible whole or not at all
// (though an error after the Commit call was sent, such as a lost
// connection, cannot tell which). A PUT whose connection ends under its
// reservation (the owner evicts the connection of an expired
// reservation: a client stalled past the TTL) fails with an error
// matching verbs.ErrClosed that says whether the Commit had been sent,
// and also ErrExpired when the TTL has passed by the client's clock.
func (c *Client) Put(ctx context.Context, addr, key string, obj *Object) (uint64, error) {
	if !c.enter() {
		return 0, ErrClientClosed
	}
	defer c.active.Done()
	v, path, err := c.put(ctx, addr, key, obj)
	c.count(&c.stats.putOK, &c.stats.putFailed, path, err)
	if err != nil {
		return 0, fmt.Errorf("structobj: put %q: %w", key, err)
	}
	return v, nil
}

// item is a byte range of a payload: a part's bytes, or zeros when mem is
// nil.
type item struct {
	off, n uint64
	mem    []byte
}

// layoutPayload returns the items that make up o's payload, in payload
// order, covering it exactly. o has been checked.
func layoutPayload(o *Object) []item {
	m := &o.Manifest
	items := make([]item, 0, 2*len(o.Data)+1)
	k := 0
	for i := range m.Members {
		for _, p := range m.Members[i].Parts() {
			if p.Length > 0 {
				items = append(items, item{off: p.Offset, n: p.Length, mem: o.Data[k]})
				k++
			}
		}
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.off, b.off) })
	var at uint64
	n := len(items)
	for i := range n {
		if it := items[i]; it.off > at {
			items = append(items, item{off: at, n: it.off - at})
		}
		at = items[i].off + items[i].n
	}
	if at < m.PayloadBytes {
		items = append(items, item{off: at, n: m.PayloadBytes - at})
	}
	if len(items) > n {
		slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.off, b.off) })
	}
	return items
}

// admits checks m (encoded in n bytes) against the owner's limits where
// they are smaller than the client's.
func (c *Client) admits(oc *ownerConn, m *Manifest, n int) error {
	ol := Limits(oc.info.Limits)
	if n > ol.MaxBytes {
		return &ObjectError{Field: "Manifest", Reason: "over the owner's limits", Err: &ManifestError{Field: "Manifest",
			Reason: fmt.Sprintf("%d bytes encoded, the owner's limit is %d", n, ol.MaxBytes), Err: ErrManifestLimit}}
	}
	l := c.lim
	if ol.MaxMembers < l.MaxMembers || ol.MaxDims < l.MaxDims || ol.MaxMeta < l.MaxMeta || ol.MaxMetaBytes < l.MaxMetaBytes {
		if err := m.Validate(ol); err != nil {
			return &ObjectError{Field: "Manifest", Reason: "over the owner's limits", Err: err}
		}
	}
	return nil
}

func (c *Client) put(ctx context.Context, addr, key string, obj *Object) (uint64, Path, error) {
	if obj == nil {
		return 0, 0, &ObjectError{Field: "Object", Reason: "nil"}
	}
	if err := c.checkKey(key); err != nil {
		return 0, 0, err
	}
	man, err := c.lim.AppendManifest(nil, &obj.Manifest)
	if err != nil {
		return 0, 0, &ObjectError{Field: "Manifest", Reason: "invalid manifest", Err: err}
	}
	if err := obj.checkData(); err != nil {
		return 0, 0, err
	}
	if addr, err = c.resolve(ctx, addr, key); err != nil {
		return 0, 0, err
	}
	oc, err := c.conn(ctx, addr)
	if err != nil {
		return 0, 0, err
	}
	if err := c.admits(oc, &obj.Manifest, len(man)); err != nil {
		return 0, 0, err
	}
	payload := obj.Manifest.PayloadBytes
	items := layoutPayload(obj)
	var staged uint64
	for _, it := range items {
		if _, in := c.inArena(it.mem); it.mem != nil && !in {
			staged += it.n
		}
	}
	fast, leased := c.stage != nil, false
	if fast && c.small(oc, payload+uint64(len(man))) {
		v, err := c.putInline(ctx, oc, key, man, payload, items)
		return v, PathInline, err
	}
	var first bufferpool.Lease
	if fast && staged > 0 {
		first, err = c.stage.Pool().AcquireTimeout(int(min(c.chunk, staged)), c.cfg.StagingWait)
		switch {
		case errors.Is(err, bufferpool.ErrExhausted):
			fast = false
			c.stats.fallbacks.Add(1)
		case err != nil:
			return 0, 0, fmt.Errorf("staging lease: %w", err)
		default:
			leased = true
		}
	}
	if !fast && oc.info.MaxInline > 0 && payload+uint64(len(man)) <= oc.info.MaxInline {
		v, err := c.putInline(ctx, oc, key, man, payload, items)
		return v, PathInline, err
	}
	x := c.newXfer(ctx, oc, verbs.OpWrite, staged)
	if leased {
		x.adopt(first)
	}
	sent := time.Now()
	var res proto.ReserveReply
	if err := c.do(ctx, oc, MethodReserve, &proto.ReserveRequest{Size: payload}, &res); err != nil {
		return 0, 0, x.finish(err)
	}
	if c.hookReserved != nil {
		c.hookReserved(res.ID, res.Off)
	}
	wctx, cancel := context.WithDeadline(ctx, ttlDeadline(sent, res.TTL))
	defer cancel()
	x.ctx, x.remoteOff, x.remoteExt = wctx, res.Off, payload
	err = x.finish(x.write(items, fast))
	c.noteXfer(x)
	var v uint64
	committing := err == nil
	if committing {
		rep := proto.VersionReply{Method: MethodCommit}
		err = c.do(wctx, oc, MethodCommit, &proto.CommitRequest{ID: res.ID, Key: []byte(key), Manifest: man}, &rep)
		v = rep.Version
	}
	switch {
	case err == nil:
		return v, x.path(), nil
	case errors.Is(err, verbs.ErrClosed):
		// Nothing to abort: the reservation belonged to the connection.
		c.evict(oc)
		return 0, 0, lostPut(err, oc.addr, res.ID, sent, res.TTL, committing)
	}
	actx, acancel := cleanupContext(ctx)
	defer acancel()
	// Best effort: an expired or committed reservation is gone anyway. Every
	// WRITE under it has completed or failed (x.finish waited for them),
	// the promise an Abort makes (see Owner).
	_ = c.do(actx, oc, MethodAbort, &proto.IDRequest{Method: MethodAbort, ID: res.ID}, &proto.EmptyReply{Method: MethodAbort})
	return 0, 0, err
}

// lostPut explains a PUT whose connection to addr ended under
// reservation id (asked for at sent, for ttl), before its Commit was
// answered: the owner evicts the connection of a reservation past its
// TTL (a client stalled that long), and a connection may also just fail.
// Past the TTL by the client's own clock the error also matches
// ErrExpired.
func lostPut(err error, addr string, id uint64, sent time.Time, ttl time.Duration, committing bool) error {
	what := "before its commit: nothing was committed"
	if committing {
		what = "during its commit: whether it was committed is unknown"
	}
	if since := time.Since(sent); since >= ttl {
		return fmt.Errorf("reservation %d expired %v ago (TTL %v; the owner evicts the connection of an expired reservation), connection to %s ended %s: %w: %w",
			id, since-ttl, ttl, addr, what, ErrExpired, err)
	}
	return fmt.Errorf("reservation %d: connection to %s ended %s (the owner evicts the connection of a reservation past its TTL): %w",
		id, addr, what, err)
}

// putInline stores the payload of items inside one PutInline call.
func (c *Client) putInline(ctx context.Context, oc *ownerConn, key string, man []byte, payload uint64, items []item) (uint64, error) {
	req := make([]byte, 0, 24+len(key)+len(man)+int(payload))
	req = proto.AppendPutInlineHead(req, []byte(key), man, payload)
	for _, it := range items {
		if it.mem != nil {
			req = append(req, it.mem...)
			continue
		}
		at := len(req)
		req = req[:at+int(it.n)]
		clear(req[at:])
	}
	resp, err := c.call(ctx, oc, MethodPutInline, req)
	if err != nil {
		return 0, err
	}
	rep := proto.VersionReply{Method: MethodPutInline}
	if err := rep.Decode(resp, &c.wlim); err != nil {
		return 0, err
	}
	c.stats.inl.Add(payload)
	return rep.Version, nil
}

package structobj

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/structobj/internal/proto"
	"github.com/scatterkit/scatterkit/verbs"
)

// GetInfo describes a completed GET.
type GetInfo struct {
	// Version is the object version read.
	Version uint64
	// Path is how the bytes moved.
	Path Path
	// Bytes is the number of bytes delivered into the destinations, of
	// which Staged came through pool leases.
	Bytes, Staged uint64
	// Chunks is the number of staged chunks, and Gathered whether the
	// engine gathered any READ on the owner. For a request of GetMany
	// both describe its owner's whole READ.
	Chunks   int
	Gathered bool
}

// GetRequest is one object of GetMany: the inputs of a Get, and its
// results.
type GetRequest struct {
	// Addr is the owner's address; "" resolves Key with the Directory.
	Addr, Key string
	// Replicas, when set, are the owners holding Key in preference order
	// (a Placement's Owners of it), and Addr is ignored: the GET reads
	// from the first, and when that fails for a reason of the owner (it
	// is unreachable or closed, does not hold the key, or a transfer
	// failed) from the next, and so on. Served says which one answered.
	Replicas []string
	// Served is the owner the bytes came from (Addr, the Directory's
	// answer, or the replica that served).
	Served string
	// Select and Dst are as in Get.
	Select []Select
	Dst    [][]byte

	// Manifest is the manifest of the version read (decoded into the
	// Manifest given, or a new one when nil).
	Manifest *Manifest
	// Info describes the GET.
	Info GetInfo
	// Err is the request's error, nil when its bytes are in Dst.
	Err error
}

// Stat returns the manifest of key's current version (an Open and a
// Close of a hold on the owner), for sizing the destinations of a Get
// (see Sizes). The key may be replaced before the Get.
func (c *Client) Stat(ctx context.Context, addr, key string) (*Manifest, error) {
	if !c.enter() {
		return nil, ErrClientClosed
	}
	defer c.active.Done()
	m, err := c.stat(ctx, addr, key)
	if err != nil {
		return nil, fmt.Errorf("structobj: stat %q: %w", key, err)
	}
	return m, nil
}

func (c *Client) stat(ctx context.Context, addr, key string) (*Manifest, error) {
	if err := c.checkKey(key); err != nil {
		return nil, err
	}
	addr, err := c.resolve(ctx, addr, key)
	if err != nil {
		return nil, err
	}
	oc, err := c.conn(ctx, addr)
	if err != nil {
		return nil, err
	}
	m := new(Manifest)
	h, _, err := c.open(ctx, oc, key, m)
	if err != nil {
		return nil, err
	}
	return m, c.closeHold(ctx, oc, h.Hold)
}

// open takes a hold on key and decodes its manifest into m. It returns
// when the request was sent (the hold's TTL runs from a moment after).
func (c *Client) open(ctx context.Context, oc *ownerConn, key string, m *Manifest) (proto.OpenReply, time.Time, error) {
	sent := time.Now()
	var h proto.OpenReply
	if err := c.do(ctx, oc, MethodOpen, &proto.KeyRequest{Method: MethodOpen, Key: []byte(key)}, &h); err != nil {
		return h, sent, err
	}
	if err := DecodeManifest(m, h.Manifest, c.lim); err != nil {
		return h, sent, errors.Join(fmt.Errorf("manifest of version %d: %w", h.Version, err), c.closeHold(ctx, oc, h.Hold))
	}
	h.Manifest = nil
	return h, sent, nil
}

// closeHold ends a hold, also when ctx has ended.
func (c *Client) closeHold(ctx context.Context, oc *ownerConn, hold uint64) error {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if err := c.do(cctx, oc, MethodClose, &proto.IDRequest{Method: MethodClose, ID: hold}, &proto.EmptyReply{Method: MethodClose}); err != nil {
		return fmt.Errorf("close hold %d: %w", hold, err)
	}
	return nil
}

// Get reads selections of key's current version from its owner (addr, or
// the Directory's record when addr is empty) into dst, and returns that
// version's manifest. dst[i] receives selection i and must have exactly
// its length (Sizes); an empty sel reads the whole payload into dst[0].
// The destinations may be any memory; those in Buffers are read into
// without a copy.
//
// Get opens a hold on the version (so a concurrent replacement or delete
// cannot tear it), READs every selected range with one scatter operation
// (plus one per staged chunk when destinations lie outside the pool),
// and closes the hold, also on failure. The READs must finish within the
// owner's hold TTL less a margin (an eighth of it, at most 2 s), which
// bounds the context: past it the hold could lapse and the space be
// reused, so the GET fails instead (and a hold found expired at Close
// fails it too). Without the
// fast path the bytes come inline or by READs into registered caller
// memory; they are the same. A selection or destination that does not
// fit the manifest is an ErrSelect, with nothing written to dst.
// On other errors the contents of dst are undefined.
func (c *Client) Get(ctx context.Context, addr, key string, sel []Select, dst [][]byte) (*Manifest, GetInfo, error) {
	if !c.enter() {
		return nil, GetInfo{}, ErrClientClosed
	}
	defer c.active.Done()
	m := new(Manifest)
	info, err := c.get(ctx, addr, key, sel, dst, m)
	c.count(&c.stats.getOK, &c.stats.getFailed, info.Path, err)
	if err != nil {
		return nil, info, fmt.Errorf("structobj: get %q: %w", key, err)
	}
	return m, info, nil
}

// checkDst checks the number of destinations against sel.
func checkDst(sel []Select, dst [][]byte) error {
	if want := max(len(sel), 1); len(dst) != want {
		return &SelectError{Index: -1, Reason: fmt.Sprintf("%d destinations for %d selections", len(dst), want)}
	}
	return nil
}

func (c *Client) get(ctx context.Context, addr, key string, sel []Select, dst [][]byte, m *Manifest) (GetInfo, error) {
	var info GetInfo
	if err := checkDst(sel, dst); err != nil {
		return info, err
	}
	if err := c.checkKey(key); err != nil {
		return info, err
	}
	if len(sel) == 0 {
		sel = wholePayload
	}
	addr, err := c.resolve(ctx, addr, key)
	if err != nil {
		return info, err
	}
	oc, err := c.conn(ctx, addr)
	if err != nil {
		return info, err
	}
	if len(sel) == 1 && sel[0] == (Select{}) && oc.info.MaxInline > 0 && uint64(len(dst[0])) <= oc.info.MaxInline &&
		(c.stage == nil || c.small(oc, uint64(len(dst[0])))) {
		return c.getInlineWhole(ctx, oc, key, dst[0], m)
	}
	h, sent, err := c.open(ctx, oc, key, m)
	if err != nil {
		return info, err
	}
	info.Version = h.Version
	var segs []segment
	for i, s := range sel {
		if segs, err = appendSelection(segs, m, i, s, dst[i], h.Off); err != nil {
			return info, errors.Join(err, c.closeHold(ctx, oc, h.Hold))
		}
	}
	rctx, cancel := context.WithDeadline(ctx, ttlDeadline(sent, h.TTL))
	x := c.newXfer(rctx, oc, verbs.OpRead, 0)
	err = c.read(x, segs, &inlineRead{key: key, base: h.Off, version: h.Version})
	cancel()
	c.noteXfer(x)
	info.Path, info.Bytes, info.Staged, info.Chunks, info.Gathered = x.path(), x.bytes(), x.staged, x.chunks, x.gathered
	if cerr := c.closeHold(ctx, oc, h.Hold); err == nil {
		// A hold that expired may have let the space be reused under the
		// READs: the bytes are not trustworthy.
		err = cerr
	}
	return info, err
}

// getInlineWhole reads the whole payload with one GetInline call.
func (c *Client) getInlineWhole(ctx context.Context, oc *ownerConn, key string, dst []byte, m *Manifest) (GetInfo, error) {
	var rep proto.GetInlineReply
	if err := c.do(ctx, oc, MethodGetInline, &proto.GetInlineRequest{Key: []byte(key)}, &rep); err != nil {
		return GetInfo{}, err
	}
	if err := DecodeManifest(m, rep.Manifest, c.lim); err != nil {
		return GetInfo{}, fmt.Errorf("manifest of version %d: %w", rep.Version, err)
	}
	if len(rep.Data) != len(dst) {
		return GetInfo{}, &SelectError{Index: 0, Reason: fmt.Sprintf("destination of %d bytes, selection of %d", len(dst), len(rep.Data))}
	}
	copy(dst, rep.Data)
	c.stats.inl.Add(uint64(len(dst)))
	return GetInfo{Version: rep.Version, Path: PathInline, Bytes: uint64(len(dst))}, nil
}

// inlineRead is what a GET's inline fallback needs: the key and the held
// version, whose payload starts at base in the region.
type inlineRead struct {
	key           string
	base, version uint64
}

// getInlineRanges reads segs (of the held version) with one GetInline
// call. It returns false, with nothing written, when the key no longer
// holds that version.
func (c *Client) getInlineRanges(ctx context.Context, oc *ownerConn, in *inlineRead, segs []segment) (bool, error) {
	req := proto.GetInlineRequest{Key: []byte(in.key), Ranges: make([]proto.ByteRange, 0, len(segs))}
	var total uint64
	for _, s := range segs {
		req.Ranges = append(req.Ranges, proto.ByteRange{Off: s.remote - in.base, Len: uint64(len(s.mem))})
		total += uint64(len(s.mem))
	}
	var rep proto.GetInlineReply
	err := c.do(ctx, oc, MethodGetInline, &req, &rep)
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrRefused):
		return false, nil // deleted, or replaced by a smaller version
	case err != nil:
		return false, err
	case rep.Version != in.version:
		return false, nil
	}
	data := rep.Data
	if uint64(len(data)) != total {
		return false, &MessageError{Message: proto.MessageName(MethodGetInline, true), Field: "data",
			Reason: fmt.Sprintf("%d bytes for ranges of %d", len(data), total)}
	}
	for _, s := range segs {
		data = data[copy(s.mem, data):]
	}
	return true, nil
}

// read moves the READ segments into their memory: from the pool or
// straight into Buffers, else inline (when in is set and the bytes fit),
// else into registered memory. It finishes x.
func (c *Client) read(x *xfer, segs []segment, in *inlineRead) error {
	var staged, total uint64
	for _, s := range segs {
		total += uint64(len(s.mem))
		if _, ok := c.inArena(s.mem); !ok {
			staged += uint64(len(s.mem))
		}
	}
	x.stagedLeft = staged
	fast := c.stage != nil
	if fast && staged > 0 {
		l, err := c.stage.Pool().AcquireTimeout(int(min(c.chunk, staged)), c.cfg.StagingWait)
		switch {
		case errors.Is(err, bufferpool.ErrExhausted):
			fast = false
			c.stats.fallbacks.Add(1)
		case err != nil:
			return x.finish(fmt.Errorf("staging lease: %w", err))
		default:
			x.adopt(l)
		}
	}
	if !fast && in != nil && total > 0 && x.oc.info.MaxInline > 0 && total <= x.oc.info.MaxInline && len(segs) <= MaxInlineRanges {
		ok, err := c.getInlineRanges(x.ctx, x.oc, in, segs)
		if err != nil || ok {
			if ok {
				x.inline = total
				c.stats.inl.Add(total)
			}
			return x.finish(err)
		}
		// Replaced since the Open: READ the held version instead.
	}
	return x.finish(x.readSegments(segs, fast))
}

// GetMany runs several GETs: the requests are grouped by owner, and each
// owner's selections are read with one scatter READ (as Get's, plus one
// per staged chunk) under holds on all its keys, owners in parallel. Each
// request's results and error are set in it; GetMany returns nil when all
// succeeded, otherwise their errors joined. Without the fast path the
// bytes come by READs into registered caller memory (GetMany makes no
// inline calls).
func (c *Client) GetMany(ctx context.Context, reqs []GetRequest) error {
	if !c.enter() {
		return ErrClientClosed
	}
	defer c.active.Done()
	groups := make(map[string][]int)
	at := make([]string, len(reqs))      // per request: the owner it reads from
	try := make([]int, len(reqs))        // per request: its replica in use
	failed := make([][]error, len(reqs)) // per request: its replicas' failures
	for i := range reqs {
		r := &reqs[i]
		r.Info, r.Err, r.Served = GetInfo{}, nil, ""
		if r.Manifest == nil {
			r.Manifest = new(Manifest)
		}
		if r.Err = checkDst(r.Select, r.Dst); r.Err != nil {
			continue
		}
		if r.Err = c.checkKey(r.Key); r.Err != nil {
			continue
		}
		if len(r.Replicas) > 0 {
			if slices.Contains(r.Replicas, "") {
				r.Err = &ClientConfigError{Field: "Replicas", Reason: "an empty address"}
				continue
			}
			groups[r.Replicas[0]] = append(groups[r.Replicas[0]], i)
			continue
		}
		addr, err := c.resolve(ctx, r.Addr, r.Key)
		if err != nil {
			r.Err = err
			continue
		}
		at[i] = addr
		groups[addr] = append(groups[addr], i)
	}
	for len(groups) > 0 {
		var wg sync.WaitGroup
		for addr, idx := range groups {
			wg.Go(func() { c.getGroup(ctx, addr, reqs, idx) })
		}
		wg.Wait()
		next := make(map[string][]int)
		for _, idx := range groups {
			for _, i := range idx {
				r := &reqs[i]
				if r.Err == nil || len(r.Replicas) == 0 {
					continue
				}
				if !replicaFault(ctx, r.Err) || try[i]+1 >= len(r.Replicas) {
					if len(failed[i]) > 0 {
						r.Err = errors.Join(append(failed[i], &ReplicaError{Addr: r.Replicas[try[i]], Err: r.Err})...)
					}
					continue
				}
				failed[i] = append(failed[i], &ReplicaError{Addr: r.Replicas[try[i]], Err: r.Err})
				try[i]++
				r.Err, r.Info = nil, GetInfo{}
				next[r.Replicas[try[i]]] = append(next[r.Replicas[try[i]]], i)
			}
		}
		groups = next
	}
	var errs []error
	for i := range reqs {
		r := &reqs[i]
		c.count(&c.stats.getOK, &c.stats.getFailed, r.Info.Path, r.Err)
		if r.Err != nil {
			r.Err = fmt.Errorf("structobj: get %q: %w", r.Key, r.Err)
			errs = append(errs, r.Err)
		} else if len(r.Replicas) > 0 {
			r.Served = r.Replicas[try[i]]
		} else {
			r.Served = at[i]
		}
	}
	return errors.Join(errs...)
}

// replicaFault reports whether a GET's error is the owner's (another
// replica may serve) rather than the request's or the caller's: a bad
// selection fails on every replica alike, and an ended context or a
// closed client ends the GET.
func replicaFault(ctx context.Context, err error) bool {
	switch {
	case ctx.Err() != nil, errors.Is(err, ErrSelect), errors.Is(err, ErrClientClosed), errors.Is(err, ErrClientConfig),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return true
}

// getGroup runs the requests idx of reqs, all on the owner at addr.
func (c *Client) getGroup(ctx context.Context, addr string, reqs []GetRequest, idx []int) {
	oc, err := c.conn(ctx, addr)
	if err != nil {
		for _, i := range idx {
			reqs[i].Err = err
		}
		return
	}
	type held struct {
		i    int
		hold uint64
	}
	var holds []held
	var segs []segment
	deadline := time.Time{}
	for _, i := range idx {
		r := &reqs[i]
		h, sent, err := c.open(ctx, oc, r.Key, r.Manifest)
		if err != nil {
			r.Err = err
			continue
		}
		sel := r.Select
		if len(sel) == 0 {
			sel = wholePayload
		}
		keep := len(segs)
		for j, s := range sel {
			if segs, err = appendSelection(segs, r.Manifest, j, s, r.Dst[j], h.Off); err != nil {
				break
			}
		}
		if err != nil {
			segs = segs[:keep]
			r.Err = errors.Join(err, c.closeHold(ctx, oc, h.Hold))
			continue
		}
		for _, s := range segs[keep:] {
			r.Info.Bytes += uint64(len(s.mem))
		}
		r.Info.Version = h.Version
		if d := ttlDeadline(sent, h.TTL); deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
		holds = append(holds, held{i, h.Hold})
	}
	if len(holds) == 0 {
		return
	}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	x := c.newXfer(rctx, oc, verbs.OpRead, 0)
	err = c.read(x, segs, nil)
	cancel()
	c.noteXfer(x)
	for _, h := range holds {
		r := &reqs[h.i]
		r.Info.Path, r.Info.Chunks, r.Info.Gathered = x.path(), x.chunks, x.gathered
		r.Err = err
		if cerr := c.closeHold(ctx, oc, h.hold); r.Err == nil {
			r.Err = cerr
		}
	}
}

package structobj

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/scatterkit/scatterkit/structobj/internal/proto"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// The owner's control handlers (see "Control protocol" in the package
// doc). Every method's handler is made by serve, which does once what
// every call needs: decode the request, check its key, take the lock and
// sweep; ownedLocked and objectLocked are the lookups with their checks.

// call is one control call, as serve hands it to a handler.
type call struct {
	ctx  context.Context
	conn uint64    // the caller's connection (verbs.Peer.ConnID)
	now  time.Time // the sweep's time (handlers run locked only)
}

// lockMode says whether serve runs a handler under the owner's lock.
type lockMode bool

const (
	// unlocked: the handler takes the lock itself (o.lock) around what
	// needs it, so that it can copy bytes or publish a record without.
	unlocked lockMode = false
	// locked: serve takes the lock (failing once the owner is closing),
	// sweeps what expired, runs the handler and lets the lock go.
	locked lockMode = true
)

// request is a pointer to a control message: what serve decodes.
type request[M any] interface {
	*M
	proto.Message
}

// serve returns the handler of one method: it decodes the request into a
// copy of blank (a malformed one is refused), checks the key of a keyed
// request against the naming rules, and runs h, under the lock when mode
// is locked. handle registers it, counting its calls.
func serve[M any, P request[M]](o *Owner, blank M, mode lockMode, h func(c call, m P, resp []byte) ([]byte, error)) verbs.HandlerFunc {
	return func(ctx context.Context, p verbs.Peer, req, resp []byte) ([]byte, error) {
		m := blank
		if err := P(&m).Decode(req, &o.wlim); err != nil {
			return nil, refused(err)
		}
		if k, ok := any(P(&m)).(proto.Keyed); ok {
			if err := o.checkKey(k.RequestKey()); err != nil {
				return nil, err
			}
		}
		c := call{ctx: ctx, conn: p.ConnID()}
		if mode == locked {
			now, err := o.lock()
			if err != nil {
				return nil, err
			}
			defer o.mu.Unlock()
			c.now = now
		}
		return h(c, &m, resp)
	}
}

// handlers returns the handler of every method, uncounted (handle
// counts).
func (o *Owner) handlers() map[uint16]verbs.HandlerFunc {
	return map[uint16]verbs.HandlerFunc{
		MethodInfo:      serve(o, proto.EmptyRequest{Method: MethodInfo}, unlocked, o.serveInfo),
		MethodReserve:   serve(o, proto.ReserveRequest{}, locked, o.serveReserveLocked),
		MethodCommit:    serve(o, proto.CommitRequest{}, unlocked, o.serveCommit),
		MethodAbort:     serveEnd(o, MethodAbort, o.res, "reservation", o.dropReservationLocked),
		MethodOpen:      serve(o, proto.KeyRequest{Method: MethodOpen}, locked, o.serveOpenLocked),
		MethodClose:     serveEnd(o, MethodClose, o.holds, "hold", o.releaseHoldLocked),
		MethodDelete:    serve(o, proto.KeyRequest{Method: MethodDelete}, unlocked, o.serveDelete),
		MethodPutInline: serve(o, proto.PutInlineRequest{}, unlocked, o.servePutInline),
		MethodGetInline: serve(o, proto.GetInlineRequest{}, unlocked, o.serveGetInline),
	}
}

// handle registers a handler that counts its calls and failures.
func (o *Owner) handle(method uint16, f verbs.HandlerFunc) {
	c := &o.calls[method-MethodInfo]
	o.seg.Handle(method, verbs.HandlerFunc(func(ctx context.Context, p verbs.Peer, req, resp []byte) ([]byte, error) {
		c.calls.Add(1)
		out, err := f(ctx, p, req, resp)
		if err != nil {
			c.failed.Add(1)
			var oe *OwnerError
			if errors.As(err, &oe) {
				for i, code := range allCodes {
					if code == oe.Code {
						o.failures[i].Add(1)
					}
				}
			}
		}
		return out, err
	}))
}

// ownerErr returns an *OwnerError with a formatted detail.
func ownerErr(c Code, format string, args ...any) *OwnerError {
	return &OwnerError{Code: c, Detail: fmt.Sprintf(format, args...)}
}

// refused wraps a decoding or validation failure.
func refused(err error) *OwnerError {
	return &OwnerError{Code: CodeRefused, Detail: strings.TrimPrefix(err.Error(), "structobj: ")}
}

func errClosed() *OwnerError { return ownerErr(CodeClosed, "owner closing") }

// checkKey validates a key against the naming rules of its record name.
func (o *Owner) checkKey(key []byte) error {
	if err := discovery.ValidateName(o.prefix + string(key)); err != nil {
		return ownerErr(CodeRefused, "key %q: %v", key, err)
	}
	return nil
}

// payloadBytes decodes and validates manifest under the owner's limits
// (into a pooled Manifest) and returns its PayloadBytes.
func (o *Owner) payloadBytes(manifest []byte) (uint64, error) {
	m := o.manifestPool.Get().(*Manifest)
	defer o.manifestPool.Put(m)
	if err := DecodeManifest(m, manifest, o.cfg.Limits); err != nil {
		return 0, refused(err)
	}
	return m.PayloadBytes, nil
}

// ownedLocked returns the reservation or hold (what) id of table, which
// must belong to conn: an id the owner does not know is expired or not
// found (goneErrLocked), another connection's is refused.
func ownedLocked[T interface{ connID() uint64 }](o *Owner, table map[uint64]T, what string, id, conn uint64) (T, error) {
	var none T
	v, ok := table[id]
	switch {
	case !ok:
		return none, o.goneErrLocked(what, id, conn)
	case v.connID() != conn:
		return none, ownerErr(CodeRefused, "%s %d belongs to another connection", what, id)
	}
	return v, nil
}

// objectLocked returns the object installed under key.
func (o *Owner) objectLocked(key []byte) (*object, error) {
	if obj := o.objects[string(key)]; obj != nil {
		return obj, nil
	}
	return nil, ownerErr(CodeNotFound, "no key %q", key)
}

func (o *Owner) serveInfo(_ call, _ *proto.EmptyRequest, resp []byte) ([]byte, error) {
	return append(resp, o.info...), nil
}

func (o *Owner) serveReserveLocked(c call, m *proto.ReserveRequest, resp []byte) ([]byte, error) {
	if len(o.res) >= o.cfg.MaxReservations {
		return nil, ownerErr(CodeBusy, "%d reservations outstanding", len(o.res))
	}
	ext, err := o.alloc.alloc(m.Size)
	if err != nil {
		var ns *NoSpaceError
		errors.As(err, &ns)
		return nil, ownerErr(CodeNoSpace, "%d bytes wanted, largest free extent %d, %d free, %d pending, %d retired",
			ns.Want, ns.Largest, ns.Free, o.pending, o.retired)
	}
	r := &reservation{id: o.newIDLocked(), conn: c.conn, ext: ext, size: m.Size, expires: c.now.Add(o.cfg.ReserveTTL)}
	o.res[r.id] = r
	o.pending += ext.len
	o.noteExpiryLocked(r.expires)
	rep := proto.ReserveReply{ID: r.id, Off: ext.off, Length: ext.len, TTL: o.cfg.ReserveTTL}
	return rep.Append(resp), nil
}

func (o *Owner) serveCommit(c call, m *proto.CommitRequest, resp []byte) ([]byte, error) {
	payload, err := o.payloadBytes(m.Manifest)
	if err != nil {
		return nil, err
	}
	v, err := o.install(c.ctx, string(m.Key), &claim{conn: c.conn, id: m.ID, payload: payload}, m.Manifest)
	if err != nil {
		return nil, err
	}
	rep := proto.VersionReply{Method: MethodCommit, Version: v}
	return rep.Append(resp), nil
}

// serveEnd returns the handler of Abort or Close (method): the caller's
// own reservation or hold (what), named by id in table, ended by end.
func serveEnd[T interface{ connID() uint64 }](o *Owner, method uint16, table map[uint64]T, what string, end func(T)) verbs.HandlerFunc {
	return serve(o, proto.IDRequest{Method: method}, locked, func(c call, m *proto.IDRequest, resp []byte) ([]byte, error) {
		v, err := ownedLocked(o, table, what, m.ID, c.conn)
		if err != nil {
			return nil, err
		}
		end(v)
		rep := proto.EmptyReply{Method: method}
		return rep.Append(resp), nil
	})
}

func (o *Owner) serveOpenLocked(c call, m *proto.KeyRequest, resp []byte) ([]byte, error) {
	obj, err := o.objectLocked(m.Key)
	switch {
	case err != nil:
		return nil, err
	case len(o.holds) >= o.cfg.MaxHolds:
		return nil, ownerErr(CodeBusy, "%d holds outstanding", len(o.holds))
	}
	h := &hold{id: o.newIDLocked(), conn: c.conn, obj: obj, expires: c.now.Add(o.cfg.HoldTTL)}
	o.holds[h.id] = h
	obj.holds++
	o.noteExpiryLocked(h.expires)
	rep := proto.OpenReply{Hold: h.id, Version: obj.version, Off: obj.ext.off, TTL: o.cfg.HoldTTL, Manifest: obj.manifest}
	return rep.Append(resp), nil
}

func (o *Owner) serveDelete(_ call, m *proto.KeyRequest, resp []byte) ([]byte, error) {
	if o.cfg.Directory != nil {
		o.pubMu.Lock()
		defer o.pubMu.Unlock()
	}
	if _, err := o.lock(); err != nil {
		return nil, err
	}
	obj, err := o.objectLocked(m.Key)
	if err != nil {
		o.mu.Unlock()
		return nil, err
	}
	delete(o.objects, obj.key)
	o.retireLocked(obj)
	reg := o.regs[obj.key]
	delete(o.regs, obj.key)
	o.mu.Unlock()
	if reg != nil {
		o.withdraw(reg)
	}
	rep := proto.VersionReply{Method: MethodDelete, Version: obj.version}
	return rep.Append(resp), nil
}

func (o *Owner) servePutInline(c call, m *proto.PutInlineRequest, resp []byte) ([]byte, error) {
	payload, err := o.payloadBytes(m.Manifest)
	if err != nil {
		return nil, err
	}
	if payload != uint64(len(m.Payload)) {
		return nil, ownerErr(CodeRefused, "manifest payload of %d bytes, %d bytes sent", payload, len(m.Payload))
	}
	if _, err := o.lock(); err != nil {
		return nil, err
	}
	ext, err := o.alloc.alloc(payload)
	if err == nil {
		o.pending += ext.len
	}
	o.mu.Unlock()
	if err != nil {
		var ns *NoSpaceError
		errors.As(err, &ns)
		return nil, ownerErr(CodeNoSpace, "%d bytes wanted, largest free extent %d", ns.Want, ns.Largest)
	}
	// The space is pending (invisible): fill it without the lock.
	copy(o.region.Bytes()[ext.off:ext.off+payload], m.Payload)
	v, err := o.install(c.ctx, string(m.Key), &claim{ext: ext, payload: payload}, m.Manifest)
	if err != nil {
		o.mu.Lock()
		if !o.closed { // Close has freed everything already
			o.pending -= ext.len
			o.alloc.release(ext)
		}
		o.mu.Unlock()
		return nil, err
	}
	rep := proto.VersionReply{Method: MethodPutInline, Version: v}
	return rep.Append(resp), nil
}

func (o *Owner) serveGetInline(_ call, m *proto.GetInlineRequest, resp []byte) ([]byte, error) {
	obj, total, err := o.holdInline(m)
	if err != nil {
		return nil, err
	}
	resp = proto.AppendGetInlineHead(resp, obj.version, obj.manifest, total)
	mem := o.region.Bytes()[obj.ext.off:]
	if len(m.Ranges) == 0 {
		resp = append(resp, mem[:obj.payload]...)
	}
	for _, r := range m.Ranges {
		resp = append(resp, mem[r.Off:r.Off+r.Len]...)
	}
	o.mu.Lock()
	if !o.closed {
		o.unholdLocked(obj)
	}
	o.mu.Unlock()
	return resp, nil
}

// holdInline checks a GetInline of m's ranges (none: the whole payload)
// against the key's object and returns it with a hold without an id,
// for this call (its space stays intact while its bytes are copied
// without the lock), and the bytes the reply carries.
func (o *Owner) holdInline(m *proto.GetInlineRequest) (*object, uint64, error) {
	if _, err := o.lock(); err != nil {
		return nil, 0, err
	}
	defer o.mu.Unlock()
	obj, err := o.objectLocked(m.Key)
	if err != nil {
		return nil, 0, err
	}
	var total uint64
	for i, r := range m.Ranges {
		if r.Off > obj.payload || r.Len > obj.payload-r.Off {
			return nil, 0, ownerErr(CodeRefused, "range %d [%d,+%d) outside the payload of %d bytes", i, r.Off, r.Len, obj.payload)
		}
		total += r.Len
	}
	if len(m.Ranges) == 0 {
		if total = obj.payload; total > o.wlim.Inline {
			return nil, 0, ownerErr(CodeRefused, "payload of %d bytes above the inline limit of %d", total, o.wlim.Inline)
		}
	}
	obj.holds++
	return obj, total, nil
}

package structobj

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/structobj/internal/proto"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// Defaults of OwnerConfig fields left zero.
const (
	DefaultReserveTTL      = 30 * time.Second
	DefaultHoldTTL         = 60 * time.Second
	DefaultMaxInline       = 8 << 20
	DefaultNamespace       = "default"
	DefaultMaxReservations = 4096
	DefaultMaxHolds        = 1 << 16
	DefaultMaxObjects      = 1 << 20
	// RecordPrefix starts the name of every discovery record an owner
	// publishes: RecordPrefix + namespace + "/" + key.
	RecordPrefix = "structobj/"
	// RecordAttrRegion is the record attribute that names the region
	// holding the objects.
	RecordAttrRegion = "region"
)

// tombstones is how many ended reservations and holds an owner
// remembers as expired, so a late Commit or Close is told ErrExpired
// rather than ErrNotFound.
const tombstones = 4096

// OwnerConfig configures an Owner.
type OwnerConfig struct {
	// Transport serves the segment and allocates the region (the owner
	// does not close it).
	Transport verbs.Transport
	// TransportName is the Transport field of published records. Empty
	// means Transport.Name(); with a Directory, a transport whose Name is
	// empty must set it.
	TransportName string
	// Addr is where the segment listens (see Transport.Listen).
	Addr string
	// ArenaBytes is the size of the object region (rounded up to Align).
	ArenaBytes int
	// Directory, when set, receives a record per key (see Owner); nil
	// publishes nothing and clients address the owner directly.
	Directory discovery.Directory
	// Namespace is the middle of the record names (default "default"):
	// "structobj/<Namespace>/<key>". It follows the naming rules.
	Namespace string
	// Limits bound the manifests the owner decodes (zero fields take
	// DefaultLimits; MaxBytes is lowered to MaxManifestBytes).
	Limits Limits
	// ReserveTTL is how long a reservation stays pending without Commit
	// (default 30 s): at expiry its connection is evicted and its space
	// comes back once that connection is fenced (see the package doc,
	// Expiry and the fence). HoldTTL is how long a hold lasts without
	// Close (default 60 s). Both at most MaxTTL.
	ReserveTTL, HoldTTL time.Duration
	// MaxInline bounds the payload of PutInline and the data of
	// GetInline (default 8 MiB, at most MaxInlineLimit); negative turns
	// the inline methods off (their calls fail with verbs.ErrNotSupported).
	MaxInline int
	// MaxReservations, MaxHolds and MaxObjects bound the owner's tables
	// (defaults 4096, 65536 and 1 Mi): a Reserve or Open beyond them
	// fails with ErrBusy, a Commit of a new key with ErrNoSpace.
	MaxReservations, MaxHolds, MaxObjects int
	// GatherStagingBytes > 0 runs a gather.Service on the segment
	// with that much staging, so a GET of many small ranges can be
	// gathered by the owner; 0 runs none.
	GatherStagingBytes int
	// PackWorkers and Calibration configure the gather service (see
	// gather.Config; nil Calibration calibrates at start).
	PackWorkers int
	Calibration *costmodel.Calibration
	// OnError receives errors that end a client's connection abnormally
	// and failures to withdraw a record; nil drops them. It must not
	// block.
	OnError func(error)
	// Now is the clock of TTLs (default time.Now); tests set it.
	Now func() time.Time
}

// withDefaults validates c and fills its defaults.
func (c OwnerConfig) withDefaults() (OwnerConfig, error) {
	bad := func(field, format string, args ...any) (OwnerConfig, error) {
		return c, &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Transport == nil:
		return bad("Transport", "nil")
	case c.ArenaBytes <= 0 || c.ArenaBytes > 1<<50:
		return bad("ArenaBytes", "%d, want 1..2^50", c.ArenaBytes)
	case c.ReserveTTL < 0 || c.ReserveTTL > MaxTTL, c.HoldTTL < 0 || c.HoldTTL > MaxTTL:
		return bad("ReserveTTL/HoldTTL", "%v, %v: want 0 (default) up to %v", c.ReserveTTL, c.HoldTTL, MaxTTL)
	case c.MaxInline > MaxInlineLimit:
		return bad("MaxInline", "%d, at most %d", c.MaxInline, MaxInlineLimit)
	case c.MaxReservations < 0 || c.MaxHolds < 0 || c.MaxObjects < 0 || c.GatherStagingBytes < 0 || c.PackWorkers < 0:
		return bad("Max*/GatherStagingBytes/PackWorkers", "negative")
	}
	c.Namespace = cmp.Or(c.Namespace, DefaultNamespace)
	if err := discovery.ValidateName(RecordPrefix + c.Namespace); err != nil {
		return bad("Namespace", "%q: %v", c.Namespace, err)
	}
	c.TransportName = cmp.Or(c.TransportName, c.Transport.Name())
	if c.Directory != nil && c.TransportName == "" {
		return bad("TransportName", "needed to publish records of a %T", c.Transport)
	}
	c.ReserveTTL = cmp.Or(c.ReserveTTL, DefaultReserveTTL)
	c.HoldTTL = cmp.Or(c.HoldTTL, DefaultHoldTTL)
	c.MaxInline = cmp.Or(c.MaxInline, DefaultMaxInline)
	c.MaxReservations = cmp.Or(c.MaxReservations, DefaultMaxReservations)
	c.MaxHolds = cmp.Or(c.MaxHolds, DefaultMaxHolds)
	c.MaxObjects = cmp.Or(c.MaxObjects, DefaultMaxObjects)
	c.PackWorkers = cmp.Or(c.PackWorkers, min(runtime.GOMAXPROCS(0), 8))
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Limits.MaxBytes <= 0 || c.Limits.MaxBytes > MaxManifestBytes {
		c.Limits.MaxBytes = MaxManifestBytes
	}
	c.Limits = c.Limits.withDefaults()
	return c, nil
}

// Owner serves Structured Objects from one region of its transport, the
// export RegionName of a segment, with the control protocol (see the
// package doc; internal/proto encodes its messages).
//
// A PUT reserves space (Reserve: pending, invisible to readers), WRITEs
// the payload there with one-sided transfers and installs it under a key
// with its manifest (Commit), atomically: a reader that opens the key
// sees the old object or the new one, never a mix. The reserved space
// beyond the manifest's PayloadBytes is given back at Commit. A
// reservation that is neither committed nor aborted within ReserveTTL
// (a client killed, frozen or cut off mid-PUT) is dropped, nothing of it
// ever visible: its connection is evicted and its space quarantined
// until the connection is fenced, so no WRITE issued under it can land
// in space reused since (see the package doc, Expiry and the fence).
// Commit and Abort are the client's word that its WRITEs under the
// reservation are done: their space is given back at once.
//
// A GET opens the key (Open: a hold on the current version, its payload
// offset and manifest), READs what it needs and closes the hold (Close).
// A replaced or deleted object keeps its space until its last hold is
// closed or expires: a reader must finish within HoldTTL of its Open,
// after which the space may be reused. PutInline and GetInline carry the
// payload inside the call instead (the fallback path), with the same
// index and holds.
//
// Reservations and holds belong to the connection that took them: Commit,
// Abort and Close from another connection are refused. The owner does
// not learn when a connection ends, so what a vanished client held is
// released by the TTLs, swept on every call and by a timer.
//
// Every control message is untrusted: decoded strictly, keys checked
// against the naming rules, manifests decoded under the Limits, every
// offset and size checked; a refused call changes nothing. One-sided
// transfers, however, are policed by the transport per region only: a
// client with the region's key may READ or WRITE any byte of it, so the
// owner protects its objects from mistakes and from killed, frozen, slow
// or cut-off clients, not from a client that writes outside its
// reservation on purpose.
//
// With a Directory, the first Commit of a key publishes the record
// "structobj/<Namespace>/<key>" (Transport, the segment's Addr and the
// attribute "region" = RegionName), and Delete withdraws it. A key whose
// name another live owner holds cannot be committed (ErrRefused).
// Versions are owner-wide and increasing: every Commit or PutInline gets
// a larger version than any before it, so a key deleted and created again
// never repeats a version.
type Owner struct {
	cfg    OwnerConfig
	wlim   proto.Limits
	prefix string // RecordPrefix + namespace + "/"
	region *verbs.Region
	seg    verbs.Segment
	stage  *staging.Staging
	svc    *gather.Service
	info   []byte // the encoded Info reply

	// pubMu orders the directory publications and withdrawals, so a
	// key's record and its object appear and disappear together.
	pubMu sync.Mutex

	mu       sync.Mutex
	closed   bool
	alloc    *allocator
	objects  map[string]*object
	regs     map[string]discovery.Registration
	res      map[uint64]*reservation
	holds    map[uint64]*hold
	tomb     map[uint64]uint64 // ended-by-expiry id -> connection
	tombRing []uint64
	tombNext int
	nextID   uint64
	version  uint64
	earliest time.Time // no reservation or hold expires before (zero: none)
	used     uint64    // extents of installed objects
	pending  uint64    // extents of reservations and inline PUTs in progress
	retired  uint64    // extents of replaced or deleted objects still held
	nRetired int
	// quar holds, by connection, the space of reservations that ended
	// while that connection may still write into it: out of the
	// allocator until the connection's fence closes (see evictLocked).
	quar      map[uint64]*quarantine
	quarBytes uint64
	quarExts  int

	calls        [numMethods]methodCounters
	failures     [numCodes]atomic.Uint64
	expiredRes   atomic.Uint64
	expiredHolds atomic.Uint64
	evictions    atomic.Uint64
	manifestPool sync.Pool
	stopSweep    chan struct{}
	sweepDone    chan struct{} // nil until the sweeper starts
	stopFences   chan struct{} // closed by Close: fence waiters give up
	fences       sync.WaitGroup
	closeOnce    sync.Once
	closeErr     error
}

const numMethods = int(MethodGetInline-MethodInfo) + 1

var allCodes = [...]Code{CodeNotFound, CodeNoSpace, CodeExpired, CodeRefused, CodeBusy, CodeClosed}

const numCodes = len(allCodes)

type methodCounters struct{ calls, failed atomic.Uint64 }

// object is one installed (or retired) object version.
type object struct {
	key      string
	version  uint64
	manifest []byte // the encoded manifest, owned
	payload  uint64 // PayloadBytes
	ext      extent
	holds    int  // holds of clients and GetInline calls in progress
	live     bool // installed under key
}

// reservation is pending space.
type reservation struct {
	id, conn uint64
	ext      extent
	size     uint64 // as asked
	expires  time.Time
}

// hold keeps an object version's space from reuse.
type hold struct {
	id, conn uint64
	obj      *object
	expires  time.Time
}

// connID is the connection that owns the reservation or hold.
func (r *reservation) connID() uint64 { return r.conn }
func (h *hold) connID() uint64        { return h.conn }

// NewOwner allocates the region, listens, starts the gather service when
// configured, and serves. On error everything it created is released.
func NewOwner(cfg OwnerConfig) (o *Owner, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	arena, _ := alignUp(uint64(cfg.ArenaBytes))
	o = &Owner{
		cfg:        cfg,
		prefix:     RecordPrefix + cfg.Namespace + "/",
		alloc:      newAllocator(arena),
		objects:    make(map[string]*object),
		regs:       make(map[string]discovery.Registration),
		res:        make(map[uint64]*reservation),
		holds:      make(map[uint64]*hold),
		tomb:       make(map[uint64]uint64),
		tombRing:   make([]uint64, 0, tombstones),
		quar:       make(map[uint64]*quarantine),
		stopSweep:  make(chan struct{}),
		stopFences: make(chan struct{}),
	}
	o.wlim = proto.Limits{Manifest: uint64(cfg.Limits.MaxBytes), Inline: uint64(max(cfg.MaxInline, 0))}
	o.manifestPool.New = func() any { return new(Manifest) }
	defer func() {
		if err != nil {
			err = errors.Join(err, o.release())
			o = nil
		}
	}()
	// Each part is kept only once created: a failed constructor may
	// return a typed nil in an interface.
	region, err := cfg.Transport.Alloc(int(arena), verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	if err != nil {
		return o, fmt.Errorf("structobj: owner region: %w", err)
	}
	o.region = region
	exports := []verbs.Export{{Name: RegionName, Region: o.region}}
	seg, err := cfg.Transport.Listen(cfg.Addr, exports, verbs.ListenOptions{OnError: cfg.OnError})
	if err != nil {
		return o, fmt.Errorf("structobj: owner listen: %w", err)
	}
	o.seg = seg
	if cfg.GatherStagingBytes > 0 {
		stage, err := staging.New(cfg.Transport, bufferpool.Config{Budget: cfg.GatherStagingBytes}, verbs.AccessLocal)
		if err != nil {
			return o, fmt.Errorf("structobj: gather staging: %w", err)
		}
		o.stage = stage
		svc, err := gather.NewService(gather.Config{Segment: o.seg, Exports: exports, Staging: o.stage,
			PackWorkers: cfg.PackWorkers, Calibration: cfg.Calibration})
		if err != nil {
			return o, fmt.Errorf("structobj: gather service: %w", err)
		}
		o.svc = svc
	}
	info := proto.InfoReply{Arena: arena, MaxInline: o.wlim.Inline, ReserveTTL: cfg.ReserveTTL, HoldTTL: cfg.HoldTTL,
		Gather: o.svc != nil, Limits: proto.ManifestLimits(cfg.Limits), Region: RegionName, Namespace: cfg.Namespace}
	o.info = info.Append(nil)
	for method, h := range o.handlers() {
		if cfg.MaxInline <= 0 && (method == MethodPutInline || method == MethodGetInline) {
			continue // inline off: their calls fail with verbs.ErrNotSupported
		}
		o.handle(method, h)
	}
	o.sweepDone = make(chan struct{})
	go o.sweeper(sweepInterval(cfg.ReserveTTL, cfg.HoldTTL))
	return o, nil
}

// sweepInterval is how often the timer sweeps: a quarter of the shorter
// TTL, within [1 ms, 1 s].
func sweepInterval(a, b time.Duration) time.Duration {
	return min(max(min(a, b)/4, time.Millisecond), time.Second)
}

// Addr returns the segment's address.
func (o *Owner) Addr() string { return o.seg.Addr() }

// newIDLocked returns a fresh reservation or hold id (one counter for
// both, so an id names one thing).
func (o *Owner) newIDLocked() uint64 {
	o.nextID++
	return o.nextID
}

func (o *Owner) noteExpiryLocked(t time.Time) {
	if o.earliest.IsZero() || t.Before(o.earliest) {
		o.earliest = t
	}
}

// buryLocked remembers that id (of conn) ended by expiry.
func (o *Owner) buryLocked(id, conn uint64) {
	if len(o.tombRing) < tombstones {
		o.tombRing = append(o.tombRing, id)
	} else {
		delete(o.tomb, o.tombRing[o.tombNext])
		o.tombRing[o.tombNext] = id
		o.tombNext = (o.tombNext + 1) % tombstones
	}
	o.tomb[id] = conn
}

// goneErr explains why id (a reservation or hold, what) is unknown to
// conn.
func (o *Owner) goneErrLocked(what string, id, conn uint64) *OwnerError {
	if c, ok := o.tomb[id]; ok && c == conn {
		return ownerErr(CodeExpired, "%s %d expired", what, id)
	}
	return ownerErr(CodeNotFound, "no %s %d", what, id)
}

// sweepLocked drops the reservations and holds that expired by now.
func (o *Owner) sweepLocked(now time.Time) {
	if o.earliest.IsZero() || now.Before(o.earliest) {
		return
	}
	var next time.Time
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, r := range o.res {
		if now.Before(r.expires) {
			later(r.expires)
			continue
		}
		// Ends r and the other reservations of its connection (which
		// this loop then no longer meets).
		o.evictLocked(r.conn)
	}
	for id, h := range o.holds {
		if now.Before(h.expires) {
			later(h.expires)
			continue
		}
		o.releaseHoldLocked(h)
		o.buryLocked(id, h.conn)
		o.expiredHolds.Add(1)
	}
	o.earliest = next
}

// dropReservationLocked frees an aborted reservation's space at once:
// Abort is the client's word that no WRITE under it is still on its way
// (see Owner).
func (o *Owner) dropReservationLocked(r *reservation) {
	delete(o.res, r.id)
	o.pending -= r.ext.len
	o.alloc.release(r.ext)
}

func (o *Owner) releaseHoldLocked(h *hold) {
	delete(o.holds, h.id)
	o.unholdLocked(h.obj)
}

// unholdLocked drops one hold of obj, freeing a retired object's space
// with its last hold.
func (o *Owner) unholdLocked(obj *object) {
	obj.holds--
	if obj.holds == 0 && !obj.live {
		o.retired -= obj.ext.len
		o.nRetired--
		o.alloc.release(obj.ext)
	}
}

// retireLocked takes obj out of the index's accounting: its space is
// freed now, or with its last hold.
func (o *Owner) retireLocked(obj *object) {
	obj.live = false
	o.used -= obj.ext.len
	if obj.holds == 0 {
		o.alloc.release(obj.ext)
		return
	}
	o.retired += obj.ext.len
	o.nRetired++
}

// sweeper sweeps expired reservations and holds every interval until
// Close.
func (o *Owner) sweeper(interval time.Duration) {
	defer close(o.sweepDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-o.stopSweep:
			return
		case <-t.C:
			o.mu.Lock()
			if !o.closed {
				o.sweepLocked(o.cfg.Now())
			}
			o.mu.Unlock()
		}
	}
}

// lock takes the owner's lock and sweeps; it fails once the owner is
// closing. It returns the sweep's time.
func (o *Owner) lock() (time.Time, error) {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return time.Time{}, errClosed()
	}
	now := o.cfg.Now()
	o.sweepLocked(now)
	return now, nil
}

// claim is the space a new object version takes: a reservation (Commit)
// or inline space already filled (PutInline).
type claim struct {
	conn, id uint64 // the reservation (id 0: inline)
	ext      extent // inline: the filled space
	payload  uint64 // the manifest's PayloadBytes
}

// checkLocked reports whether the claim can be installed now.
func (o *Owner) checkLocked(c *claim, now time.Time) (*reservation, error) {
	if c.id == 0 {
		return nil, nil
	}
	r, err := ownedLocked(o, o.res, "reservation", c.id, c.conn)
	switch {
	case err != nil:
		return nil, err
	case !now.Before(r.expires):
		// The sweep runs first, so this is only reached at the instant of
		// expiry; end it here all the same.
		o.evictLocked(r.conn)
		return nil, ownerErr(CodeExpired, "reservation %d expired", c.id)
	case c.payload > r.size:
		return nil, ownerErr(CodeRefused, "manifest payload of %d bytes exceeds reservation %d of %d bytes", c.payload, c.id, r.size)
	}
	return r, nil
}

// installLocked installs key -> the claim's space and manifest (which it
// copies) and returns the new version. The replaced object is retired.
func (o *Owner) installLocked(key string, c *claim, manifest []byte, now time.Time) (uint64, error) {
	r, err := o.checkLocked(c, now)
	if err != nil {
		return 0, err
	}
	old := o.objects[key]
	if old == nil && len(o.objects) >= o.cfg.MaxObjects {
		return 0, ownerErr(CodeNoSpace, "%d objects, the owner's limit", len(o.objects))
	}
	ext := c.ext
	if r != nil {
		delete(o.res, r.id)
		ext = r.ext
	}
	o.pending -= ext.len
	ext = o.alloc.shrink(ext, c.payload)
	o.version++
	obj := &object{key: key, version: o.version, manifest: append([]byte(nil), manifest...), payload: c.payload, ext: ext, live: true}
	o.objects[key] = obj
	o.used += ext.len
	if old != nil {
		o.retireLocked(old)
	}
	return obj.version, nil
}

// install installs a new version of key, publishing its record first
// when the key has none.
func (o *Owner) install(ctx context.Context, key string, c *claim, manifest []byte) (uint64, error) {
	now, err := o.lock()
	if err != nil {
		return 0, err
	}
	if o.cfg.Directory == nil || o.regs[key] != nil {
		v, err := o.installLocked(key, c, manifest, now)
		o.mu.Unlock()
		return v, err
	}
	_, err = o.checkLocked(c, now)
	o.mu.Unlock()
	if err != nil {
		return 0, err
	}
	// Publishing takes the directory's time: not under o.mu. pubMu keeps
	// another install or a Delete of any key from interleaving.
	o.pubMu.Lock()
	defer o.pubMu.Unlock()
	o.mu.Lock()
	has := o.regs[key] != nil
	o.mu.Unlock()
	var reg discovery.Registration
	if !has {
		reg, err = o.cfg.Directory.Publish(ctx, discovery.Record{Name: o.prefix + key, Transport: o.cfg.TransportName,
			Addr: o.seg.Addr(), Attrs: map[string]string{RecordAttrRegion: RegionName}})
		switch {
		case errors.Is(err, discovery.ErrExists):
			return 0, ownerErr(CodeRefused, "key %q: %v", key, err)
		case err != nil:
			return 0, ownerErr(CodeBusy, "publish key %q: %v", key, err)
		}
	}
	now, err = o.lock()
	var v uint64
	if err == nil {
		v, err = o.installLocked(key, c, manifest, now)
		if err == nil && reg != nil {
			o.regs[key] = reg
			reg = nil
		}
		o.mu.Unlock()
	}
	if reg != nil {
		o.withdraw(reg)
	}
	return v, err
}

// withdraw closes a registration, reporting a failure to OnError.
func (o *Owner) withdraw(reg discovery.Registration) {
	if err := reg.Close(); err != nil && o.cfg.OnError != nil {
		o.cfg.OnError(fmt.Errorf("structobj: withdraw %q: %w", reg.Record().Name, err))
	}
}

// MethodStats counts the calls of one method.
type MethodStats struct {
	Calls, Failed uint64
}

// OwnerStats describes an owner's state and counts its calls.
type OwnerStats struct {
	// Objects installed, reservations and holds outstanding, retired
	// objects (replaced or deleted) waiting for their holds.
	Objects, Reservations, Holds, Retired int
	// ArenaBytes is the region's size: UsedBytes (installed objects) +
	// PendingBytes (reservations, inline PUTs being copied) +
	// RetiredBytes + QuarantinedBytes + FreeBytes. LargestFree is the
	// largest reservation that fits now.
	ArenaBytes, UsedBytes, PendingBytes, RetiredBytes, FreeBytes, LargestFree uint64
	// QuarantinedBytes is the space of Quarantined extents: expired
	// reservations whose connection was evicted and is not fenced yet
	// (it may still write there; its handler calls count). A
	// connection that never lets go (an shm client frozen while it holds
	// its mapping) keeps its extents here until it does, or until Close.
	QuarantinedBytes uint64
	Quarantined      int
	// Published counts the keys with a directory record.
	Published int
	// Calls counts each method's calls and failures, indexed by method -
	// MethodInfo (see Method).
	Calls [numMethods]MethodStats
	// Failures counts failed calls by code.
	NotFound, NoSpace, Expired, Refused, Busy, Closed uint64
	// ExpiredReservations and ExpiredHolds count what the TTLs released
	// (ExpiredReservations also the other reservations of the
	// connections evicted). Evictions counts the connections evicted
	// because a reservation of theirs expired.
	ExpiredReservations, ExpiredHolds, Evictions uint64
}

// Method returns the counters of method (zero for an unknown one).
func (s *OwnerStats) Method(method uint16) MethodStats {
	if i := int(method) - int(MethodInfo); i >= 0 && i < numMethods {
		return s.Calls[i]
	}
	return MethodStats{}
}

// Stats sweeps what expired and returns the owner's state and counters.
// After Close everything is released and the counters remain.
func (o *Owner) Stats() OwnerStats {
	o.mu.Lock()
	if !o.closed {
		o.sweepLocked(o.cfg.Now())
	}
	s := OwnerStats{Objects: len(o.objects), Reservations: len(o.res), Holds: len(o.holds), Retired: o.nRetired,
		ArenaBytes: o.alloc.size, UsedBytes: o.used, PendingBytes: o.pending, RetiredBytes: o.retired,
		FreeBytes: o.alloc.freeBytes, LargestFree: o.alloc.largest(), QuarantinedBytes: o.quarBytes, Quarantined: o.quarExts,
		Published: len(o.regs)}
	o.mu.Unlock()
	for i := range o.calls {
		s.Calls[i] = MethodStats{Calls: o.calls[i].calls.Load(), Failed: o.calls[i].failed.Load()}
	}
	fs := [...]*uint64{&s.NotFound, &s.NoSpace, &s.Expired, &s.Refused, &s.Busy, &s.Closed}
	for i := range fs {
		*fs[i] = o.failures[i].Load()
	}
	s.ExpiredReservations = o.expiredRes.Load()
	s.ExpiredHolds = o.expiredHolds.Load()
	s.Evictions = o.evictions.Load()
	return s
}

// Close stops serving: it closes the gather service and the segment
// (ending every connection and waiting for running calls), withdraws
// every record, releases every reservation, hold, object and
// quarantined extent (waiting for no fence that has not closed) and
// deregisters the region. It does not close the transport or the
// directory. It is idempotent; later calls return the first result.
func (o *Owner) Close() error {
	o.closeOnce.Do(func() {
		o.mu.Lock()
		o.closed = true
		o.mu.Unlock()
		o.closeErr = o.release()
	})
	return o.closeErr
}

// release frees what NewOwner created, in reverse order (also for a
// partly built owner).
func (o *Owner) release() error {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case <-o.stopSweep:
	default:
		close(o.stopSweep)
		close(o.stopFences)
	}
	var errs []error
	if o.sweepDone != nil { // the sweeper was started
		<-o.sweepDone
	}
	if o.seg != nil {
		// Every connection ends, fenced (tcp: its lanes stopped; shm:
		// the requester let go, or CloseGrace passed) before the region
		// is given back; first, so no gather command waits on a peer.
		errs = append(errs, o.seg.Close())
	}
	if o.svc != nil {
		errs = append(errs, o.svc.Close())
	}
	o.fences.Wait()
	if o.stage != nil {
		errs = append(errs, o.stage.Close())
	}
	o.pubMu.Lock()
	o.mu.Lock()
	regs := o.regs
	o.regs = make(map[string]discovery.Registration)
	o.mu.Unlock()
	for _, reg := range regs {
		if err := reg.Close(); err != nil {
			errs = append(errs, fmt.Errorf("structobj: withdraw %q: %w", reg.Record().Name, err))
		}
	}
	o.pubMu.Unlock()
	o.mu.Lock()
	clear(o.objects)
	clear(o.res)
	clear(o.holds)
	clear(o.quar)
	o.alloc = newAllocator(o.alloc.size)
	o.used, o.pending, o.retired, o.nRetired = 0, 0, 0, 0
	o.quarBytes, o.quarExts = 0, 0
	o.earliest = time.Time{}
	o.mu.Unlock()
	if o.region != nil {
		if err := o.cfg.Transport.Deregister(o.region); err != nil && !errors.Is(err, verbs.ErrClosed) {
			errs = append(errs, fmt.Errorf("structobj: deregister region: %w", err))
		}
	}
	return errors.Join(errs...)
}

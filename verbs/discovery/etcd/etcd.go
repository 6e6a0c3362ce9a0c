package etcd

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// Defaults of the options.
const (
	DefaultPrefix  = "/scatterkit/discovery/"
	DefaultTTL     = 10 * time.Second
	DefaultTimeout = 5 * time.Second
)

// Errors of this package; the Directory methods return the discovery
// package's errors for everything else.
var (
	// ErrInvalidOption: an option value is out of range. See OptionError.
	ErrInvalidOption = errors.New("discovery/etcd: invalid option")
	// ErrWatchEnded: the client ended a watch without an error of its own
	// (for example because the client was closed).
	ErrWatchEnded = errors.New("discovery/etcd: watch stream ended")
)

// OptionError reports an option value out of range. It matches
// ErrInvalidOption.
type OptionError struct {
	Option string // "WithPrefix", "WithTTL", ...
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("discovery/etcd: invalid option %s: %s", e.Option, e.Reason)
}

// Unwrap returns ErrInvalidOption.
func (e *OptionError) Unwrap() error { return ErrInvalidOption }

// Option configures New.
type Option func(*config)

type config struct {
	prefix  string
	ttl     time.Duration
	timeout time.Duration
	errs    []error
}

// WithPrefix sets the key prefix under which records live (DefaultPrefix).
// It must be non-empty printable text ending with '/', so that two
// directories never see each other's keys.
func WithPrefix(p string) Option {
	return func(c *config) {
		if p == "" || !strings.HasSuffix(p, "/") || strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			c.errs = append(c.errs, &OptionError{Option: "WithPrefix", Reason: fmt.Sprintf("%q is not printable text ending with '/'", p)})
			return
		}
		c.prefix = p
	}
}

// WithTTL sets the lease time to live of each record (DefaultTTL): how long
// a record outlives an owner that stopped without withdrawing it. etcd
// counts whole seconds; d is rounded up and must be at least one second.
func WithTTL(d time.Duration) Option {
	return func(c *config) {
		if d < time.Second {
			c.errs = append(c.errs, &OptionError{Option: "WithTTL", Reason: fmt.Sprintf("%v is less than 1s", d)})
			return
		}
		c.ttl = (d + time.Second - 1).Truncate(time.Second)
	}
}

// WithTimeout bounds the etcd calls made without a caller's context:
// Registration.Close, Directory.Close and revocations at expiry
// (DefaultTimeout).
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, &OptionError{Option: "WithTimeout", Reason: fmt.Sprintf("%v is not positive", d)})
			return
		}
		c.timeout = d
	}
}

// Directory is a discovery.Directory on an etcd v3 cluster. Each record is
// the key Prefix()+name, created only if absent (a transaction comparing its
// create revision with 0) and attached to a lease of its own that the
// registration keeps alive; when the owner stops renewing it, etcd deletes
// the record after the TTL. The record's Revision is the key's mod revision.
type Directory struct {
	cli     *clientv3.Client
	prefix  string
	ttl     time.Duration
	timeout time.Duration
	// ownsClient: made by Dial, whose client Close closes.
	ownsClient bool

	ctx    context.Context // canceled by Close; ends watches
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	regs   map[*registration]struct{}
}

var _ discovery.Directory = (*Directory)(nil)

// New returns a directory that uses cli. The caller keeps ownership of cli
// and closes it after the directory; closing cli without closing the
// directory is what a crash looks like (records expire after the TTL).
func New(cli *clientv3.Client, opts ...Option) (*Directory, error) {
	if cli == nil {
		return nil, &OptionError{Option: "client", Reason: "nil"}
	}
	c := config{prefix: DefaultPrefix, ttl: DefaultTTL, timeout: DefaultTimeout}
	for _, o := range opts {
		o(&c)
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Directory{
		cli:     cli,
		prefix:  c.prefix,
		ttl:     c.ttl,
		timeout: c.timeout,
		ctx:     ctx,
		cancel:  cancel,
		regs:    make(map[*registration]struct{}),
	}, nil
}

// Prefix returns the key prefix of the records.
func (d *Directory) Prefix() string { return d.prefix }

// TTL returns the lease time to live of the records.
func (d *Directory) TTL() time.Duration { return d.ttl }

// Client returns the etcd client the directory uses.
func (d *Directory) Client() *clientv3.Client { return d.cli }

func (d *Directory) checkOpen() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return discovery.ErrClosed
	}
	return nil
}

// Publish implements discovery.Directory. A name held by a record whose
// Expires passed, but whose lease is still alive, is taken over with a
// transaction comparing the old record's mod revision.
func (d *Directory) Publish(ctx context.Context, r discovery.Record) (discovery.Registration, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec, err := discovery.PreparePublish(r, time.Now())
	if err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	value, err := encodeValue(rec)
	if err != nil {
		return nil, err
	}
	key := d.prefix + rec.Name
	lease, err := d.cli.Grant(ctx, int64(d.ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("discovery/etcd: publish %q: grant lease: %w", rec.Name, err)
	}
	revokeLease := func() {
		rctx, cancel := context.WithTimeout(context.Background(), d.timeout)
		defer cancel()
		d.cli.Revoke(rctx, lease.ID)
	}
	rev, err := d.create(ctx, key, rec, value, lease.ID)
	if err != nil {
		revokeLease()
		return nil, err
	}
	rec.Revision = rev

	kctx, kcancel := context.WithCancel(context.Background())
	ka, err := d.cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		kcancel()
		revokeLease()
		return nil, fmt.Errorf("discovery/etcd: publish %q: keep lease alive: %w", rec.Name, err)
	}
	reg := &registration{
		d: d, rec: rec, lease: lease.ID,
		done: make(chan struct{}), kaCancel: kcancel, kaDone: make(chan struct{}),
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		kcancel()
		<-drain(ka)
		revokeLease()
		return nil, discovery.ErrClosed
	}
	d.regs[reg] = struct{}{}
	d.mu.Unlock()
	go reg.keepAlive(ka)
	if !rec.Expires.IsZero() {
		reg.mu.Lock()
		reg.timer = time.AfterFunc(time.Until(rec.Expires), reg.expire)
		reg.mu.Unlock()
	}
	return reg, nil
}

// drain reads ka until it closes, in a goroutine, and returns a channel
// closed then.
func drain(ka <-chan *clientv3.LeaseKeepAliveResponse) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range ka {
		}
	}()
	return done
}

// create puts the record under key if no live record holds it and returns
// the put's revision.
func (d *Directory) create(ctx context.Context, key string, rec discovery.Record, value []byte, lease clientv3.LeaseID) (int64, error) {
	put := clientv3.OpPut(key, string(value), clientv3.WithLease(lease))
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	for {
		resp, err := d.cli.Txn(ctx).If(cmp).Then(put).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return 0, fmt.Errorf("discovery/etcd: publish %q: %w", rec.Name, err)
		}
		if resp.Succeeded {
			return resp.Header.Revision, nil
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue // deleted between the compare and the read: cannot happen in one txn, retry anyway
		}
		old, err := decodeValue(key, rec.Name, kvs[0].Value, kvs[0].ModRevision)
		if err != nil {
			return 0, fmt.Errorf("discovery/etcd: publish %q: the name holds a bad value: %w", rec.Name, err)
		}
		if !old.Expired(time.Now()) {
			return 0, &discovery.ExistsError{Name: rec.Name, Holder: old}
		}
		// The holder's record expired: replace exactly that version.
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)
		if err := ctx.Err(); err != nil {
			return 0, err
		}
	}
}

// Lookup implements discovery.Directory.
func (d *Directory) Lookup(ctx context.Context, name string) (discovery.Record, error) {
	if err := ctx.Err(); err != nil {
		return discovery.Record{}, err
	}
	if err := discovery.ValidateName(name); err != nil {
		return discovery.Record{}, err
	}
	if err := d.checkOpen(); err != nil {
		return discovery.Record{}, err
	}
	key := d.prefix + name
	resp, err := d.cli.Get(ctx, key)
	if err != nil {
		return discovery.Record{}, fmt.Errorf("discovery/etcd: lookup %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return discovery.Record{}, fmt.Errorf("lookup %q: %w", name, discovery.ErrNotFound)
	}
	r, err := decodeValue(key, name, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	if err != nil {
		return discovery.Record{}, err
	}
	if r.Expired(time.Now()) {
		return discovery.Record{}, fmt.Errorf("lookup %q: %w", name, discovery.ErrNotFound)
	}
	return r, nil
}

// List implements discovery.Directory.
func (d *Directory) List(ctx context.Context, prefix string) ([]discovery.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := discovery.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	resp, err := d.cli.Get(ctx, d.prefix+prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("discovery/etcd: list %q: %w", prefix, err)
	}
	now := time.Now()
	var out []discovery.Record
	for _, kv := range resp.Kvs {
		r, err := d.decode(kv)
		if err != nil {
			return nil, err
		}
		if !r.Expired(now) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b discovery.Record) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (d *Directory) decode(kv *mvccpb.KeyValue) (discovery.Record, error) {
	key := string(kv.Key)
	return decodeValue(key, strings.TrimPrefix(key, d.prefix), kv.Value, kv.ModRevision)
}

// Watch implements discovery.Directory. Each range over the sequence reads
// the records under the prefix, then follows an etcd watch from the next
// revision, so no change is missed between the two. A record that expires
// (Expires) disappears with a delete when its owner revokes the lease at that
// time, or when the lease runs out if the owner is gone. The watch requires a
// leader: a partitioned member ends it with an error instead of hanging.
func (d *Directory) Watch(ctx context.Context, prefix string) (iter.Seq2[discovery.Event, error], error) {
	if err := discovery.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return func(yield func(discovery.Event, error) bool) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(d.ctx, cancel)
		defer stop()
		d.watch(wctx, ctx, prefix, yield)
	}, nil
}

func (d *Directory) watch(wctx, ctx context.Context, prefix string, yield func(discovery.Event, error) bool) {
	ended := func(err error) {
		switch {
		case d.ctx.Err() != nil:
			err = discovery.ErrClosed
		case ctx.Err() != nil:
			err = ctx.Err()
		}
		yield(discovery.Event{}, err)
	}
	key := d.prefix + prefix
	resp, err := d.cli.Get(wctx, key, clientv3.WithPrefix())
	if err != nil {
		ended(fmt.Errorf("discovery/etcd: watch %q: %w", prefix, err))
		return
	}
	seen := make(map[string]bool)
	now := time.Now()
	for _, kv := range resp.Kvs {
		r, err := d.decode(kv)
		if err != nil {
			ended(err)
			return
		}
		if r.Expired(now) {
			continue
		}
		seen[r.Name] = true
		if !yield(discovery.Event{Kind: discovery.EventPut, Record: r}, nil) {
			return
		}
	}
	wch := d.cli.Watch(clientv3.WithRequireLeader(wctx), key,
		clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1), clientv3.WithPrevKV())
	for wresp := range wch {
		if wctx.Err() != nil {
			break
		}
		if err := wresp.Err(); err != nil {
			ended(fmt.Errorf("discovery/etcd: watch %q: %w", prefix, err))
			return
		}
		for _, ev := range wresp.Events {
			name := strings.TrimPrefix(string(ev.Kv.Key), d.prefix)
			switch ev.Type {
			case mvccpb.PUT:
				r, err := d.decode(ev.Kv)
				if err != nil {
					ended(err)
					return
				}
				if r.Expired(time.Now()) {
					continue
				}
				seen[name] = true
				if !yield(discovery.Event{Kind: discovery.EventPut, Record: r}, nil) {
					return
				}
				continue
			case mvccpb.DELETE:
				if !seen[name] {
					continue
				}
				delete(seen, name)
				r := discovery.Record{Name: name}
				if ev.PrevKv != nil {
					if prev, err := d.decode(ev.PrevKv); err == nil {
						r = prev
					}
				}
				if !yield(discovery.Event{Kind: discovery.EventDelete, Record: r}, nil) {
					return
				}
			}
		}
	}
	if wctx.Err() != nil {
		ended(wctx.Err())
		return
	}
	ended(ErrWatchEnded)
}

// Close implements discovery.Directory: it revokes the leases of the
// registrations made through it (deleting their records) and ends its
// watches. It closes the client only when Dial made it.
func (d *Directory) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	regs := d.regs
	d.regs = nil
	d.mu.Unlock()
	d.cancel()

	errs := make([]error, 0, len(regs))
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for reg := range regs {
		wg.Go(func() {
			if err := reg.end(discovery.ErrClosed); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if d.ownsClient {
		if err := d.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (d *Directory) forget(reg *registration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.regs, reg)
}

// registration is one published record and its lease.
type registration struct {
	d     *Directory
	rec   discovery.Record
	lease clientv3.LeaseID

	kaCancel context.CancelFunc // stops the keepalive
	kaDone   chan struct{}      // closed when the keepalive channel closed

	mu      sync.Mutex
	timer   *time.Timer // fires at Expires; nil when none
	ending  bool        // Close, expiry, loss or directory close under way
	err     error
	done    chan struct{}
	endOnce sync.Once
	endErr  error
}

// Lease returns the etcd lease the record is attached to.
func (r *registration) Lease() clientv3.LeaseID { return r.lease }

// Record implements discovery.Registration.
func (r *registration) Record() discovery.Record { return r.rec.Clone() }

// Done implements discovery.Registration.
func (r *registration) Done() <-chan struct{} { return r.done }

// Err implements discovery.Registration.
func (r *registration) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *registration) finish(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
		close(r.done)
	}
}

// stopTimerLocked stops the expiry timer; r.mu is held. The timer may be
// set after the registration became reachable, hence under r.mu.
func (r *registration) stopTimerLocked() {
	if r.timer != nil {
		r.timer.Stop()
	}
}

// keepAlive consumes the lease keepalive responses; when the channel closes
// without the registration being ended on purpose, the lease is lost
// (expired, revoked elsewhere, or the client closed).
func (r *registration) keepAlive(ka <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(r.kaDone)
	for range ka {
	}
	r.mu.Lock()
	onPurpose := r.ending
	r.ending = true
	r.stopTimerLocked()
	r.mu.Unlock()
	if onPurpose {
		return
	}
	r.d.forget(r)
	r.finish(fmt.Errorf("discovery/etcd: lease %x of %q: %w", int64(r.lease), r.rec.Name, discovery.ErrLost))
}

// Close implements discovery.Registration. If the revocation fails, the
// keepalive is stopped anyway, so the record disappears within the TTL; the
// error says so, and later calls return it again.
func (r *registration) Close() error { return r.end(discovery.ErrWithdrawn) }

func (r *registration) expire() { r.end(discovery.ErrExpired) }

// end revokes the lease once and finishes the registration with why.
func (r *registration) end(why error) error {
	r.endOnce.Do(func() {
		r.mu.Lock()
		lost := r.ending // the keepalive already ended: the lease is gone
		r.ending = true
		r.stopTimerLocked()
		r.mu.Unlock()
		if !lost {
			ctx, cancel := context.WithTimeout(context.Background(), r.d.timeout)
			_, err := r.d.cli.Revoke(ctx, r.lease)
			cancel()
			if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				r.endErr = fmt.Errorf("discovery/etcd: withdraw %q (it expires within %v): %w", r.rec.Name, r.d.ttl, err)
			}
		}
		r.kaCancel()
		<-r.kaDone
		r.d.forget(r)
		r.finish(why)
	})
	return r.endErr
}

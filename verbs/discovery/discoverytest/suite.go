package discoverytest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// Backend describes a Directory implementation to Run.
type Backend struct {
	// New opens a handle onto a fresh, empty store. It registers its own
	// cleanup (the suite also closes what it opens). Required.
	New func(t *testing.T) discovery.Directory

	// Reopen opens another handle onto the store behind d, as another
	// process or client would. Nil when a store has a single handle; the
	// tests that need two are then skipped.
	Reopen func(t *testing.T, d discovery.Directory) discovery.Directory

	// Settle bounds how long a change takes to reach a watch or a reader
	// (default 5 s).
	Settle time.Duration
}

// Run runs the conformance suite against b, each test as a subtest.
func Run(t *testing.T, b Backend) {
	t.Helper()
	if b.New == nil {
		t.Fatal("discoverytest: Backend.New is nil")
	}
	if b.Settle <= 0 {
		b.Settle = 5 * time.Second
	}
	s := &suite{Backend: b}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"PublishLookup", s.publishLookup},
		{"LookupMissing", s.lookupMissing},
		{"Exists", s.exists},
		{"WithdrawRepublish", s.withdrawRepublish},
		{"InvalidNames", s.invalidNames},
		{"InvalidRecords", s.invalidRecords},
		{"List", s.list},
		{"Copies", s.copies},
		{"CanceledContext", s.canceledContext},
		{"Expires", s.expires},
		{"Watch", s.watch},
		{"WatchPrefix", s.watchPrefix},
		{"WatchEnds", s.watchEnds},
		{"Close", s.close},
		{"ConcurrentPublish", s.concurrentPublish},
		{"CrossHandle", s.crossHandle},
		{"RandomOps", s.randomOps},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

type suite struct {
	Backend
}

func (s *suite) open(t *testing.T) discovery.Directory {
	t.Helper()
	d := s.New(t)
	t.Cleanup(func() { d.Close() })
	return d
}

func (s *suite) reopen(t *testing.T, d discovery.Directory) discovery.Directory {
	t.Helper()
	if s.Reopen == nil {
		t.Skip("backend has one handle per store")
	}
	o := s.Reopen(t, d)
	t.Cleanup(func() { o.Close() })
	return o
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rec returns a valid record with non-trivial fields.
func rec(name, addr string) discovery.Record {
	return discovery.Record{
		Name:      name,
		Transport: "tcp",
		Addr:      addr,
		Owner:     "suite/" + name,
		Attrs:     map[string]string{"rkey": "0x5eed" + strconv.Itoa(len(name)), "depth": "64"},
	}
}

// want is what a directory stores for r published with revision rev.
func want(r discovery.Record, rev int64) discovery.Record {
	r = r.Clone()
	r.Revision = rev
	if r.Owner == "" {
		r.Owner = discovery.DefaultOwner()
	}
	if len(r.Attrs) == 0 {
		r.Attrs = nil
	}
	return r
}

func requireRecord(t *testing.T, want, got discovery.Record) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("record mismatch (-want +got):\n%s", diff)
	}
}

func publish(t *testing.T, d discovery.Directory, r discovery.Record) discovery.Registration {
	t.Helper()
	reg, err := d.Publish(ctxFor(t), r)
	require.NoError(t, err)
	t.Cleanup(func() { reg.Close() })
	return reg
}

func (s *suite) publishLookup(t *testing.T) {
	ctx := ctxFor(t)
	d := s.open(t)
	r := rec("engram/t0", "127.0.0.1:7000")
	r.Revision = 99 // ignored
	reg := publish(t, d, r)
	got := reg.Record()
	require.Greater(t, got.Revision, int64(0))
	requireRecord(t, want(r, got.Revision), got)
	require.NoError(t, reg.Err())
	select {
	case <-reg.Done():
		t.Fatal("Done closed while published")
	default:
	}

	found, err := d.Lookup(ctx, "engram/t0")
	require.NoError(t, err)
	requireRecord(t, got, found)

	// An empty owner is filled with the default one.
	r2 := rec("engram/t1", "/dev/shm/seg1")
	r2.Transport = "shm"
	r2.Owner = ""
	r2.Attrs = map[string]string{}
	reg2 := publish(t, d, r2)
	require.Equal(t, discovery.DefaultOwner(), reg2.Record().Owner)
	require.Nil(t, reg2.Record().Attrs)
	require.Greater(t, reg2.Record().Revision, got.Revision)
	found, err = d.Lookup(ctx, "engram/t1")
	require.NoError(t, err)
	requireRecord(t, want(r2, reg2.Record().Revision), found)

	// Expires survives the store, at nanosecond precision.
	r3 := rec("engram/t2", "127.0.0.1:7002")
	r3.Expires = time.Now().Add(time.Hour + 123456789*time.Nanosecond)
	reg3 := publish(t, d, r3)
	found, err = d.Lookup(ctx, "engram/t2")
	require.NoError(t, err)
	require.True(t, r3.Expires.Equal(found.Expires), "expires %v, want %v", found.Expires, r3.Expires)
	requireRecord(t, reg3.Record(), found)
}

func (s *suite) lookupMissing(t *testing.T) {
	ctx := ctxFor(t)
	d := s.open(t)
	_, err := d.Lookup(ctx, "nothing/here")
	require.ErrorIs(t, err, discovery.ErrNotFound)
	publish(t, d, rec("something", "127.0.0.1:1"))
	_, err = d.Lookup(ctx, "some")
	require.ErrorIs(t, err, discovery.ErrNotFound, "a prefix is not a name")
	_, err = d.Lookup(ctx, "something/else")
	require.ErrorIs(t, err, discovery.ErrNotFound)
}

func (s *suite) exists(t *testing.T) {
	ctx := ctxFor(t)
	d := s.open(t)
	first := publish(t, d, rec("seg", "127.0.0.1:1"))
	_, err := d.Publish(ctx, rec("seg", "127.0.0.1:2"))
	require.ErrorIs(t, err, discovery.ErrExists)
	var ee *discovery.ExistsError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, "seg", ee.Name)
	requireRecord(t, first.Record(), ee.Holder)

	got, err := d.Lookup(ctx, "seg")
	require.NoError(t, err)
	requireRecord(t, first.Record(), got)
	require.NoError(t, first.Err())
}

func (s *suite) withdrawRepublish(t *testing.T) {
	ctx := ctxFor(t)
	d := s.open(t)
	reg := publish(t, d, rec("seg", "127.0.0.1:1"))
	rev1 := reg.Record().Revision
	require.NoError(t, reg.Close())
	select {
	case <-reg.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	require.ErrorIs(t, reg.Err(), discovery.ErrWithdrawn)
	require.NoError(t, reg.Close(), "second Close")
	require.ErrorIs(t, reg.Err(), discovery.ErrWithdrawn)

	_, err := d.Lookup(ctx, "seg")
	require.ErrorIs(t, err, discovery.ErrNotFound)
	list, err := d.List(ctx, "")
	require.NoError(t, err)
	require.Empty(t, list)

	reg2 := publish(t, d, rec("seg", "127.0.0.1:2"))
	require.Greater(t, reg2.Record().Revision, rev1)
	got, err := d.Lookup(ctx, "seg")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:2", got.Addr)

	// Closing the old registration again must not withdraw the new record.
	require.NoError(t, reg.Close())
	_, err = d.Lookup(ctx, "seg")
	require.NoError(t, err)
}

var badNames = []struct {
	name string
	in   string
}{
	{"empty", ""},
	{"too long", strings.Repeat("a", discovery.MaxNameLen+1)},
	{"leading slash", "/a"},
	{"trailing slash", "a/"},
	{"empty segment", "a//b"},
	{"space", "a b"},
	{"non-ascii", "s\u00e9g"},
	{"nul", "a\x00b"},
	{"newline", "a\nb"},
	{"dot segment", "a/../b"},
	{"leading dot", ".hidden"},
	{"leading dash", "-x"},
	{"backslash", `a\b`},
}

func (s *suite) invalidNames(t *testing.T) {
	ctx := ctxFor(t)
	d := s.open(t)
	for _, tc := range badNames {
		t.Run(tc.name, func(t *testing.T) {
			var ne *discovery.NameError
			_, err := d.Publish(ctx, rec(tc.in, "127.0.0.1:1"))
			require.ErrorIs(t, err, discovery.ErrInvalidName)
			require.ErrorAs(t, err, &ne)
			require.Equal(t, tc.in, ne.Name)
			_, err = d.Lookup(ctx, tc.in)
			require.ErrorIs(t, err, discovery.ErrInvalidName)
			if tc.in == "" || strings.HasSuffix(tc.in, "/") {
				return // valid prefixes
			}
			_, err = d.List(ctx, tc.in)
			require.ErrorIs(t, err, discovery.ErrInvalidName)
			_, err = d.Watch(ctx, tc.in)
			require.ErrorIs(t, err, discovery.ErrInvalidName)
		})
	}
	list, err := d.List(ctx, "")
	require.NoError(t, err)
	require.Empty(t, list, "refused publications changed the directory")
}

func (s *suite) invalidRecords(t *testing.T) {
	ctx := ctxFor(t)
	d := s.open(t)
	tooMany := map[string]string{}
	for i := range discovery.MaxAttrs + 1 {
		tooMany["k"+strconv.Itoa(i)] = "v"
	}
	tests := []struct {
		name  string
		edit  func(r *discovery.Record)
		field string
	}{
		{"no transport", func(r *discovery.Record) { r.Transport = "" }, "Transport"},
		{"upper transport", func(r *discovery.Record) { r.Transport = "TCP" }, "Transport"},
		{"transport symbol first", func(r *discovery.Record) { r.Transport = "+tcp" }, "Transport"},
		{"long transport", func(r *discovery.Record) { r.Transport = strings.Repeat("t", discovery.MaxTransportLen+1) }, "Transport"},
		{"no addr", func(r *discovery.Record) { r.Addr = "" }, "Addr"},
		{"addr newline", func(r *discovery.Record) { r.Addr = "127.0.0.1:1\n" }, "Addr"},
		{"addr bad utf8", func(r *discovery.Record) { r.Addr = "\xff\xfe" }, "Addr"},
		{"long addr", func(r *discovery.Record) { r.Addr = strings.Repeat("a", discovery.MaxAddrLen+1) }, "Addr"},
		{"owner control", func(r *discovery.Record) { r.Owner = "me\x07" }, "Owner"},
		{"long owner", func(r *discovery.Record) { r.Owner = strings.Repeat("o", discovery.MaxOwnerLen+1) }, "Owner"},
		{"too many attrs", func(r *discovery.Record) { r.Attrs = tooMany }, "Attrs"},
		{"attr key empty", func(r *discovery.Record) { r.Attrs = map[string]string{"": "v"} }, `Attrs[""]`},
		{"attr key space", func(r *discovery.Record) { r.Attrs = map[string]string{"a b": "v"} }, `Attrs["a b"]`},
		{"attr value control", func(r *discovery.Record) { r.Attrs = map[string]string{"k": "\x1b[0m"} }, `Attrs["k"]`},
		{"attr value long", func(r *discovery.Record) {
			r.Attrs = map[string]string{"k": strings.Repeat("v", discovery.MaxAttrValueLen+1)}
		}, `Attrs["k"]`},
		{"expired", func(r *discovery.Record) { r.Expires = time.Now().Add(-time.Second) }, "Expires"},
		{"year 10000", func(r *discovery.Record) { r.Expires = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "Expires"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rec("seg", "127.0.0.1:1")
			tc.edit(&r)
			_, err := d.Publish(ctx, r)
			require.ErrorIs(t, err, discovery.ErrInvalidRecord)
			var re *discovery.RecordError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.field, re.Field)
			require.Equal(t, "seg", re.Name)
		})
	}
	list, err := d.List(ctx, "")
	require.NoError(t, err)
	require.Empty(t, list, "refused publications changed the directory")
	publish(t, d, rec("seg", "127.0.0.1:1")) // the name is still free
}

func names(recs []discovery.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Name
	}
	return out
}

func (s *suite) list(t *testing.T) {
	ctx := ctxFor(t)
	d := s.open(t)
	all := []string{"engram/t2", "engram/t10", "engram/t1", "engram2", "reshard/a", "engram/t1/shard0", "x"}
	regs := map[string]discovery.Registration{}
	for i, n := range all {
		regs[n] = publish(t, d, rec(n, "127.0.0.1:"+strconv.Itoa(7000+i)))
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"engram/t1", "engram/t1/shard0", "engram/t10", "engram/t2", "engram2", "reshard/a", "x"}},
		{"engram/", []string{"engram/t1", "engram/t1/shard0", "engram/t10", "engram/t2"}},
		{"engram", []string{"engram/t1", "engram/t1/shard0", "engram/t10", "engram/t2", "engram2"}},
		{"engram/t1", []string{"engram/t1", "engram/t1/shard0", "engram/t10"}},
		{"engram/t1/", []string{"engram/t1/shard0"}},
		{"reshard/a", []string{"reshard/a"}},
		{"zzz", nil},
	}
	for _, tc := range tests {
		t.Run("prefix="+tc.prefix, func(t *testing.T) {
			got, err := d.List(ctx, tc.prefix)
			require.NoError(t, err)
			require.Equal(t, tc.want, nilIfEmpty(names(got)))
			for _, r := range got {
				requireRecord(t, regs[r.Name].Record(), r)
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func (s *suite) copies(t *testing.T) {
	ctx := ctxFor(t)
	d := s.open(t)
	r := rec("seg", "127.0.0.1:1")
	reg := publish(t, d, r)
	orig := reg.Record()
	r.Attrs["rkey"] = "changed by publisher"

	got, err := d.Lookup(ctx, "seg")
	require.NoError(t, err)
	requireRecord(t, orig, got)
	got.Attrs["rkey"] = "changed by reader"
	list, err := d.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, list, 1)
	requireRecord(t, orig, list[0])
	list[0].Attrs["depth"] = "changed by lister"
	rr := reg.Record()
	rr.Attrs["rkey"] = "changed through the registration"
	got, err = d.Lookup(ctx, "seg")
	require.NoError(t, err)
	requireRecord(t, orig, got)
	requireRecord(t, orig, reg.Record())
}

func (s *suite) canceledContext(t *testing.T) {
	d := s.open(t)
	publish(t, d, rec("present", "127.0.0.1:1"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := d.Publish(ctx, rec("seg", "127.0.0.1:1"))
	require.ErrorIs(t, err, context.Canceled)
	_, err = d.Lookup(ctx, "present")
	require.ErrorIs(t, err, context.Canceled)
	_, err = d.List(ctx, "")
	require.ErrorIs(t, err, context.Canceled)
	list, err := d.List(ctxFor(t), "")
	require.NoError(t, err)
	require.Equal(t, []string{"present"}, names(list), "a canceled Publish changed the directory")
}

func (s *suite) expires(t *testing.T) {
	ctx := ctxFor(t)
	d := s.open(t)
	w := startWatch(t, d, "")
	r := rec("short", "127.0.0.1:1")
	r.Expires = time.Now().Add(400 * time.Millisecond)
	reg := publish(t, d, r)
	w.expect(t, s.Settle, discovery.EventPut, reg.Record())
	_, err := d.Lookup(ctx, "short")
	require.NoError(t, err)

	select {
	case <-reg.Done():
	case <-time.After(s.Settle):
		t.Fatal("registration did not end at Expires")
	}
	require.ErrorIs(t, reg.Err(), discovery.ErrExpired)
	require.False(t, time.Now().Before(r.Expires), "ended before Expires")
	_, err = d.Lookup(ctx, "short")
	require.ErrorIs(t, err, discovery.ErrNotFound)
	list, err := d.List(ctx, "")
	require.NoError(t, err)
	require.Empty(t, list)
	w.expect(t, s.Settle, discovery.EventDelete, reg.Record())

	// The name is free again; closing the expired registration is harmless.
	reg2 := publish(t, d, rec("short", "127.0.0.1:2"))
	w.expect(t, s.Settle, discovery.EventPut, reg2.Record())
	require.NoError(t, reg.Close())
	got, err := d.Lookup(ctx, "short")
	require.NoError(t, err)
	requireRecord(t, reg2.Record(), got)
	w.quiet(t, 50*time.Millisecond)
}

func (s *suite) watch(t *testing.T) {
	d := s.open(t)
	a := publish(t, d, rec("w/a", "127.0.0.1:1"))
	b := publish(t, d, rec("w/b", "127.0.0.1:2"))
	w := startWatch(t, d, "w/")
	w.expect(t, s.Settle, discovery.EventPut, a.Record())
	w.expect(t, s.Settle, discovery.EventPut, b.Record())

	c := publish(t, d, rec("w/c", "127.0.0.1:3"))
	w.expect(t, s.Settle, discovery.EventPut, c.Record())
	require.NoError(t, a.Close())
	w.expect(t, s.Settle, discovery.EventDelete, a.Record())
	a2 := publish(t, d, rec("w/a", "127.0.0.1:4"))
	w.expect(t, s.Settle, discovery.EventPut, a2.Record())
	w.quiet(t, 50*time.Millisecond)

	// A second watch of the same prefix sees the current state.
	w2 := startWatch(t, d, "w/")
	w2.expect(t, s.Settle, discovery.EventPut, a2.Record())
	w2.expect(t, s.Settle, discovery.EventPut, b.Record())
	w2.expect(t, s.Settle, discovery.EventPut, c.Record())
}

func (s *suite) watchPrefix(t *testing.T) {
	d := s.open(t)
	w := startWatch(t, d, "engram/")
	publish(t, d, rec("engram2", "127.0.0.1:1"))
	publish(t, d, rec("reshard/engram/x", "127.0.0.1:2"))
	in := publish(t, d, rec("engram/t0", "127.0.0.1:3"))
	w.expect(t, s.Settle, discovery.EventPut, in.Record())
	w.quiet(t, 50*time.Millisecond)

	all := startWatch(t, d, "")
	got := map[string]bool{}
	for range 3 {
		ev := all.next(t, s.Settle)
		require.Equal(t, discovery.EventPut, ev.Kind)
		got[ev.Record.Name] = true
	}
	require.Equal(t, map[string]bool{"engram2": true, "reshard/engram/x": true, "engram/t0": true}, got)
}

func (s *suite) watchEnds(t *testing.T) {
	d := s.open(t)
	t.Run("break", func(t *testing.T) {
		publish(t, d, rec("b/one", "127.0.0.1:1"))
		publish(t, d, rec("b/two", "127.0.0.1:2"))
		seq, err := d.Watch(ctxFor(t), "b/")
		require.NoError(t, err)
		n := 0
		for ev, err := range seq {
			require.NoError(t, err)
			require.Equal(t, "b/one", ev.Record.Name)
			n++
			break
		}
		require.Equal(t, 1, n)
		// The sequence can be ranged again: a new watch.
		for ev, err := range seq {
			require.NoError(t, err)
			require.Equal(t, "b/one", ev.Record.Name)
			break
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctxFor(t))
		seq, err := d.Watch(ctx, "c/")
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			var last error
			for _, err := range seq {
				if err != nil {
					last = err
				}
			}
			done <- last
		}()
		time.Sleep(20 * time.Millisecond)
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(s.Settle):
			t.Fatal("watch did not end after its context was canceled")
		}
	})
	t.Run("canceled before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		seq, err := d.Watch(ctx, "")
		if err != nil {
			require.ErrorIs(t, err, context.Canceled)
			return
		}
		var last error
		for _, err := range seq {
			last = err
		}
		require.ErrorIs(t, last, context.Canceled)
	})
}

func (s *suite) close(t *testing.T) {
	ctx := ctxFor(t)
	d := s.open(t)
	var other discovery.Directory
	if s.Reopen != nil {
		other = s.reopen(t, d)
	}
	reg := publish(t, d, rec("seg", "127.0.0.1:1"))
	w := startWatch(t, d, "")
	w.expect(t, s.Settle, discovery.EventPut, reg.Record())

	require.NoError(t, d.Close())
	select {
	case <-reg.Done():
	default:
		t.Fatal("registration still open after the directory closed")
	}
	require.ErrorIs(t, reg.Err(), discovery.ErrClosed)
	require.NoError(t, reg.Close())
	require.ErrorIs(t, w.end(t, s.Settle), discovery.ErrClosed)

	_, err := d.Publish(ctx, rec("seg2", "127.0.0.1:2"))
	require.ErrorIs(t, err, discovery.ErrClosed)
	_, err = d.Lookup(ctx, "seg")
	require.ErrorIs(t, err, discovery.ErrClosed)
	_, err = d.List(ctx, "")
	require.ErrorIs(t, err, discovery.ErrClosed)
	_, err = d.Watch(ctx, "")
	require.ErrorIs(t, err, discovery.ErrClosed)
	require.NoError(t, d.Close(), "second Close")

	if other != nil {
		_, err = other.Lookup(ctx, "seg")
		require.ErrorIs(t, err, discovery.ErrNotFound, "Close did not withdraw")
		publish(t, other, rec("seg", "127.0.0.1:3"))
	}
}

func (s *suite) concurrentPublish(t *testing.T) {
	ctx := ctxFor(t)
	d := s.open(t)
	const n = 8
	dirs := make([]discovery.Directory, n)
	for i := range dirs {
		dirs[i] = d
		if s.Reopen != nil {
			dirs[i] = s.reopen(t, d)
		}
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []discovery.Registration
		lost   int
		others []error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			reg, err := dirs[i].Publish(ctx, rec("contended", "127.0.0.1:"+strconv.Itoa(9000+i)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, reg)
			case errors.Is(err, discovery.ErrExists):
				lost++
			default:
				others = append(others, err)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, reg := range won {
		t.Cleanup(func() { reg.Close() })
	}
	require.Empty(t, others)
	require.Len(t, won, 1, "exactly one publisher must win")
	require.Equal(t, n-1, lost)
	got, err := d.Lookup(ctx, "contended")
	require.NoError(t, err)
	requireRecord(t, won[0].Record(), got)
}

func (s *suite) crossHandle(t *testing.T) {
	ctx := ctxFor(t)
	a := s.open(t)
	b := s.reopen(t, a)
	wb := startWatch(t, b, "")

	reg := publish(t, a, rec("seg", "127.0.0.1:1"))
	wb.expect(t, s.Settle, discovery.EventPut, reg.Record())
	got, err := b.Lookup(ctx, "seg")
	require.NoError(t, err)
	requireRecord(t, reg.Record(), got)
	_, err = b.Publish(ctx, rec("seg", "127.0.0.1:2"))
	require.ErrorIs(t, err, discovery.ErrExists)

	regB := publish(t, b, rec("seg/b", "127.0.0.1:3"))
	wb.expect(t, s.Settle, discovery.EventPut, regB.Record())
	got, err = a.Lookup(ctx, "seg/b")
	require.NoError(t, err)
	requireRecord(t, regB.Record(), got)

	require.NoError(t, reg.Close())
	wb.expect(t, s.Settle, discovery.EventDelete, reg.Record())
	_, err = b.Lookup(ctx, "seg")
	require.ErrorIs(t, err, discovery.ErrNotFound)

	reg2 := publish(t, b, rec("seg", "127.0.0.1:4"))
	wb.expect(t, s.Settle, discovery.EventPut, reg2.Record())
	require.Greater(t, reg2.Record().Revision, reg.Record().Revision)

	// Closing a handle withdraws only its own records.
	require.NoError(t, a.Close())
	got, err = b.Lookup(ctx, "seg")
	require.NoError(t, err)
	requireRecord(t, reg2.Record(), got)
	_, err = b.Lookup(ctx, "seg/b")
	require.NoError(t, err)
	wb.quiet(t, 50*time.Millisecond)
}

// seed returns the random seed of a test, logged so a failure can be
// replayed with DISCOVERYTEST_SEED.
func seed(t *testing.T) uint64 {
	t.Helper()
	v := uint64(time.Now().UnixNano())
	if env := os.Getenv("DISCOVERYTEST_SEED"); env != "" {
		var err error
		v, err = strconv.ParseUint(env, 10, 64)
		require.NoError(t, err, "DISCOVERYTEST_SEED")
	}
	t.Logf("seed %d (DISCOVERYTEST_SEED=%d replays it)", v, v)
	return v
}

func randomRecord(rng *rand.Rand, name string) discovery.Record {
	transports := []string{"tcp", "shm", "rdma", "tcp+tls"}
	r := discovery.Record{
		Name:      name,
		Transport: transports[rng.IntN(len(transports))],
		Addr:      fmt.Sprintf("10.%d.%d.%d:%d", rng.IntN(256), rng.IntN(256), 1+rng.IntN(254), 1024+rng.IntN(60000)),
		Owner:     fmt.Sprintf("node%d/%d", rng.IntN(64), 1+rng.IntN(1<<20)),
	}
	if k := rng.IntN(4); k > 0 {
		r.Attrs = make(map[string]string, k)
		for range k {
			r.Attrs[fmt.Sprintf("k%x", rng.Uint32())] = fmt.Sprintf("%x", rng.Uint64()|1)
		}
	}
	return r
}

func (s *suite) randomOps(t *testing.T) {
	ctx := ctxFor(t)
	rng := rand.New(rand.NewPCG(seed(t), 0x5ca77e2))
	d := s.open(t)
	dirs := []discovery.Directory{d}
	if s.Reopen != nil {
		dirs = append(dirs, s.reopen(t, d))
	}
	pool := []string{"a", "a/b", "a/b/c", "ab", "b", "b/a", "c.d", "c:e"}
	model := map[string]discovery.Registration{}
	var lastRev int64
	for step := range 80 {
		name := pool[rng.IntN(len(pool))]
		dir := dirs[rng.IntN(len(dirs))]
		switch op := rng.IntN(4); op {
		case 0, 1: // publish
			r := randomRecord(rng, name)
			reg, err := dir.Publish(ctx, r)
			if held, ok := model[name]; ok {
				require.ErrorIs(t, err, discovery.ErrExists, "step %d", step)
				var ee *discovery.ExistsError
				require.ErrorAs(t, err, &ee)
				requireRecord(t, held.Record(), ee.Holder)
				continue
			}
			require.NoError(t, err, "step %d", step)
			t.Cleanup(func() { reg.Close() })
			require.Greater(t, reg.Record().Revision, lastRev, "step %d: revisions must grow", step)
			lastRev = reg.Record().Revision
			requireRecord(t, want(r, lastRev), reg.Record())
			model[name] = reg
		case 2: // withdraw
			if reg, ok := model[name]; ok {
				require.NoError(t, reg.Close(), "step %d", step)
				delete(model, name)
			}
		case 3: // lookup and list
			got, err := dir.Lookup(ctx, name)
			if reg, ok := model[name]; ok {
				require.NoError(t, err, "step %d", step)
				requireRecord(t, reg.Record(), got)
			} else {
				require.ErrorIs(t, err, discovery.ErrNotFound, "step %d", step)
			}
			prefix := name[:rng.IntN(len(name)+1)]
			list, err := dir.List(ctx, prefix)
			require.NoError(t, err, "step %d", step)
			var wantList []discovery.Record
			for n, reg := range model {
				if strings.HasPrefix(n, prefix) {
					wantList = append(wantList, reg.Record())
				}
			}
			slices.SortFunc(wantList, func(a, b discovery.Record) int { return strings.Compare(a.Name, b.Name) })
			if diff := cmp.Diff(wantList, list, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("step %d: List(%q) mismatch (-want +got):\n%s", step, prefix, diff)
			}
		}
	}
}

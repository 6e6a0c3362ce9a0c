package etcd_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/discovery/discoverytest"
	"github.com/scatterkit/scatterkit/verbs/discovery/etcd"
)

// newClient connects to the test server and closes the client at cleanup.
// Cleanups run last-in first-out, so a directory opened after its client is
// closed before it.
func newClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{serverEndpoint(t)},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

var prefixes atomic.Int64

// freshPrefix returns a key prefix no other test uses.
func freshPrefix() string {
	return fmt.Sprintf("/discovery-test/%d/", prefixes.Add(1))
}

func newDir(t *testing.T, cli *clientv3.Client, prefix string, opts ...etcd.Option) *etcd.Directory {
	t.Helper()
	d, err := etcd.New(cli, append([]etcd.Option{etcd.WithPrefix(prefix), etcd.WithTTL(5 * time.Second)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	discoverytest.Run(t, discoverytest.Backend{
		New: func(t *testing.T) discovery.Directory {
			return newDir(t, newClient(t), freshPrefix())
		},
		Reopen: func(t *testing.T, d discovery.Directory) discovery.Directory {
			return newDir(t, newClient(t), d.(*etcd.Directory).Prefix())
		},
	})
}

func TestNewOptions(t *testing.T) {
	cli := newClient(t)
	tests := []struct {
		name string
		opts []etcd.Option
		ok   bool
	}{
		{"defaults", nil, true},
		{"prefix", []etcd.Option{etcd.WithPrefix("/x/")}, true},
		{"empty prefix", []etcd.Option{etcd.WithPrefix("")}, false},
		{"prefix without slash", []etcd.Option{etcd.WithPrefix("/x")}, false},
		{"prefix with newline", []etcd.Option{etcd.WithPrefix("/x\n/")}, false},
		{"ttl", []etcd.Option{etcd.WithTTL(1500 * time.Millisecond)}, true},
		{"ttl too short", []etcd.Option{etcd.WithTTL(999 * time.Millisecond)}, false},
		{"timeout", []etcd.Option{etcd.WithTimeout(time.Second)}, true},
		{"zero timeout", []etcd.Option{etcd.WithTimeout(0)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := etcd.New(cli, tc.opts...)
			if !tc.ok {
				require.ErrorIs(t, err, etcd.ErrInvalidOption)
				var oe *etcd.OptionError
				require.ErrorAs(t, err, &oe)
				return
			}
			require.NoError(t, err)
			require.NoError(t, d.Close())
		})
	}
	_, err := etcd.New(nil)
	require.ErrorIs(t, err, etcd.ErrInvalidOption)

	d, err := etcd.New(cli, etcd.WithTTL(1500*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, d.TTL(), "TTL rounds up to whole seconds")
	require.Equal(t, etcd.DefaultPrefix, d.Prefix())
	require.Same(t, cli, d.Client())
	require.NoError(t, d.Close())
}

type leased interface{ Lease() clientv3.LeaseID }

// TestOwnerCrash: an owner whose client disappears without withdrawing
// (a crash) loses its record after the TTL, and another owner can then take
// the name.
func TestOwnerCrash(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix()
	observer := newDir(t, newClient(t), prefix)

	crashCli, err := clientv3.New(clientv3.Config{Endpoints: []string{serverEndpoint(t)}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	owner, err := etcd.New(crashCli, etcd.WithPrefix(prefix), etcd.WithTTL(time.Second))
	require.NoError(t, err)
	reg, err := owner.Publish(ctx, discovery.Record{Name: "seg", Transport: "tcp", Addr: "10.0.0.1:7000"})
	require.NoError(t, err)

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	seq, err := observer.Watch(wctx, "")
	require.NoError(t, err)
	events := make(chan discovery.Event, 8)
	done := make(chan error, 1)
	go func() {
		for ev, err := range seq {
			if err != nil {
				done <- err
				return
			}
			events <- ev
			if ev.Kind == discovery.EventDelete {
				done <- nil
				return
			}
		}
	}()
	ev := <-events
	require.Equal(t, discovery.EventPut, ev.Kind)
	_, err = observer.Publish(ctx, discovery.Record{Name: "seg", Transport: "tcp", Addr: "10.0.0.2:7000"})
	require.ErrorIs(t, err, discovery.ErrExists, "the owner is alive")

	crashed := time.Now()
	require.NoError(t, crashCli.Close()) // the owner dies: no revoke, no more keepalives
	select {
	case <-reg.Done():
		require.ErrorIs(t, reg.Err(), discovery.ErrLost)
	case <-time.After(10 * time.Second):
		t.Fatal("registration did not report the lost lease")
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("no delete event 20 s after the owner crashed")
	}
	t.Logf("record gone %v after the crash (TTL 1s)", time.Since(crashed).Round(10*time.Millisecond))
	ev = <-events
	require.Equal(t, discovery.EventDelete, ev.Kind)
	require.Equal(t, "seg", ev.Record.Name)
	require.Equal(t, reg.Record().Revision, ev.Record.Revision)

	_, err = observer.Lookup(ctx, "seg")
	require.ErrorIs(t, err, discovery.ErrNotFound)
	reg2, err := observer.Publish(ctx, discovery.Record{Name: "seg", Transport: "tcp", Addr: "10.0.0.2:7000"})
	require.NoError(t, err)
	require.Greater(t, reg2.Record().Revision, reg.Record().Revision)
	require.NoError(t, owner.Close(), "closing the crashed owner's directory is harmless")
}

// TestLeaseRevokedElsewhere: when someone else revokes the lease, the record
// goes and the registration reports ErrLost.
func TestLeaseRevokedElsewhere(t *testing.T) {
	ctx := context.Background()
	d := newDir(t, newClient(t), freshPrefix(), etcd.WithTTL(time.Second))
	reg, err := d.Publish(ctx, discovery.Record{Name: "seg", Transport: "tcp", Addr: "10.0.0.1:7000"})
	require.NoError(t, err)
	_, err = newClient(t).Revoke(ctx, reg.(leased).Lease())
	require.NoError(t, err)
	select {
	case <-reg.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("registration did not report the revoked lease")
	}
	require.ErrorIs(t, reg.Err(), discovery.ErrLost)
	_, err = d.Lookup(ctx, "seg")
	require.ErrorIs(t, err, discovery.ErrNotFound)
	require.NoError(t, reg.Close())
	require.ErrorIs(t, reg.Err(), discovery.ErrLost)
}

// TestForeignValues: values under the prefix that this package did not
// write are reported as corrupt, never misread, and never overwritten.
func TestForeignValues(t *testing.T) {
	ctx := context.Background()
	cli := newClient(t)
	prefix := freshPrefix()
	d := newDir(t, cli, prefix)
	tests := []struct {
		name, value string
	}{
		{"garbage", "not json"},
		{"wrong-name", `{"name":"other","transport":"tcp","addr":"x:1"}`},
		{"with-revision", `{"name":"with-revision","transport":"tcp","addr":"x:1","revision":3}`},
		{"bad-transport", `{"name":"bad-transport","transport":"TCP","addr":"x:1"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cli.Put(ctx, prefix+tc.name, tc.value)
			require.NoError(t, err)
			_, err = d.Lookup(ctx, tc.name)
			require.ErrorIs(t, err, discovery.ErrCorrupt)
			var ce *discovery.CorruptError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, prefix+tc.name, ce.Source)
			_, err = d.List(ctx, tc.name)
			require.ErrorIs(t, err, discovery.ErrCorrupt)
			_, err = d.Publish(ctx, discovery.Record{Name: tc.name, Transport: "tcp", Addr: "x:2"})
			require.ErrorIs(t, err, discovery.ErrCorrupt)
			resp, err := cli.Get(ctx, prefix+tc.name)
			require.NoError(t, err)
			require.Equal(t, tc.value, string(resp.Kvs[0].Value), "a refused Publish changed the key")
			_, err = cli.Delete(ctx, prefix+tc.name)
			require.NoError(t, err)
		})
	}
}

// TestExpiredHolderTakenOver: a record whose Expires passed while its lease
// still lives (its owner's revocation at expiry did not happen) no longer
// holds the name.
func TestExpiredHolderTakenOver(t *testing.T) {
	ctx := context.Background()
	cli := newClient(t)
	prefix := freshPrefix()
	d := newDir(t, cli, prefix)
	lease, err := cli.Grant(ctx, 60)
	require.NoError(t, err)
	defer cli.Revoke(ctx, lease.ID)
	stale := `{"name":"seg","transport":"tcp","addr":"x:1","expires":"` + time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano) + `"}`
	_, err = cli.Put(ctx, prefix+"seg", stale, clientv3.WithLease(lease.ID))
	require.NoError(t, err)

	_, err = d.Lookup(ctx, "seg")
	require.ErrorIs(t, err, discovery.ErrNotFound)
	list, err := d.List(ctx, "")
	require.NoError(t, err)
	require.Empty(t, list)
	reg, err := d.Publish(ctx, discovery.Record{Name: "seg", Transport: "tcp", Addr: "x:2"})
	require.NoError(t, err)
	got, err := d.Lookup(ctx, "seg")
	require.NoError(t, err)
	require.Equal(t, "x:2", got.Addr)

	// Revoking the stale holder's lease does not touch the new record.
	_, err = cli.Revoke(ctx, lease.ID)
	require.NoError(t, err)
	got, err = d.Lookup(ctx, "seg")
	require.NoError(t, err)
	require.Equal(t, reg.Record().Revision, got.Revision)
	require.NoError(t, reg.Close())
}

// TestCloseWithServerGone: Close against a client that can no longer reach
// the cluster returns within the timeout and says the record will expire.
func TestCloseWithServerGone(t *testing.T) {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{serverEndpoint(t)}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	d, err := etcd.New(cli, etcd.WithPrefix(freshPrefix()), etcd.WithTTL(time.Second), etcd.WithTimeout(200*time.Millisecond))
	require.NoError(t, err)
	reg, err := d.Publish(ctx, discovery.Record{Name: "seg", Transport: "tcp", Addr: "x:1"})
	require.NoError(t, err)
	require.NoError(t, cli.Close())
	start := time.Now()
	err = reg.Close()
	require.Less(t, time.Since(start), 5*time.Second)
	if err != nil {
		require.Contains(t, err.Error(), "expires within")
	}
	require.Error(t, reg.Err())
	require.NoError(t, d.Close())
}

package faultsuite_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// The engram row: a table of engramRows rows of engramRowBytes, looked up
// as [T, engramK] ids (T random, a few thousand rows in all).
const (
	engramRows     = 8192
	engramRowBytes = 264
	engramK        = 8
	engramNS       = "faults"
	engramTable    = "t"
)

// engramRig is a local store serving its table over tcp, and the
// requester's transport for remote stores.
type engramRig struct {
	local      *engram.Store
	rows       []byte
	owner, req verbs.Transport
	srv        *engram.Server
}

var engramSpec = engram.TableSpec{NumRows: engramRows, RowBytes: engramRowBytes}

func startEngram(t *testing.T, r *rand.Rand) rig {
	t.Helper()
	g := &engramRig{owner: tcp.New(tcp.Config{}), req: tcp.New(tcp.Config{})}
	var err error
	g.local, err = engram.Open(context.Background(), engram.Config{Tables: map[string]engram.TableSpec{engramTable: engramSpec},
		Namespace: engramNS, Dir: t.TempDir(), Pin: engram.PinNone})
	require.NoError(t, err)
	g.rows = make([]byte, engramSpec.Size())
	fill(r, g.rows)
	require.NoError(t, g.local.Populate(engramTable, g.rows))
	g.srv, err = g.local.Serve(engram.ServeConfig{Transport: g.owner, Addr: "127.0.0.1:0", StagingBytes: 8 << 20})
	require.NoError(t, err)
	return g
}

func (g *engramRig) addr() string { return g.srv.Addr() }

func (g *engramRig) run(r *rand.Rand, addr string, h *hooks) (opErr, checkErr error) {
	T := 256 + r.IntN(256)
	ids := make([]int32, T*engramK)
	for i := range ids {
		ids[i] = int32(r.IntN(engramRows))
		if r.IntN(16) == 0 {
			ids[i] = -1
		}
	}
	tables := make([]string, engramK)
	for k := range tables {
		tables[k] = engramTable
	}
	setup, cancel := context.WithTimeout(context.Background(), SetupWait)
	defer cancel()
	rs, err := engram.Open(setup, engram.Config{Tables: map[string]engram.TableSpec{engramTable: engramSpec}, Namespace: engramNS,
		Remote: &engram.RemoteConfig{Transport: g.req, Addr: addr, BufferBytes: 4 << 20,
			Connect: verbs.ConnectOptions{Lanes: lanes, Link: testLink}}})
	if err != nil {
		return nil, fmt.Errorf("faultsuite: open the remote store: %w", err)
	}
	defer func() { checkErr = errors.Join(checkErr, rs.Close()) }()
	n := T * engramK * engramRowBytes
	buf, err := rs.NewBuffer(n)
	if err != nil {
		return nil, fmt.Errorf("faultsuite: output buffer: %w", err)
	}
	defer buf.Release()
	out := buf.Bytes()
	fill(r, out) // poison: ids -1 leave it
	want := append([]byte(nil), out...)
	for i, id := range ids {
		if id >= 0 {
			copy(want[i*engramRowBytes:(i+1)*engramRowBytes], g.rows[int(id)*engramRowBytes:])
		}
	}

	ctx, end := h.begin()
	err = rs.LookupContext(ctx, tables, engram.IDs32(ids, T, engramK), engram.TokenMajor(out, T, engramK, engramRowBytes), nil)
	end()
	if err != nil {
		return err, nil
	}
	return nil, diffBytes(fmt.Sprintf("lookup of %d rows", len(ids)), out, want)
}

// settle has nothing to poll: the server's staging is private to engram;
// close reports its leaked leases.
func (g *engramRig) settle(time.Duration) error { return nil }

func (g *engramRig) close() error {
	err := g.srv.Close()
	if err != nil {
		err = fmt.Errorf("engram server (leaked staging leases show here): %w", err)
	}
	return errors.Join(err, g.local.Close(), g.req.Close(), g.owner.Close())
}

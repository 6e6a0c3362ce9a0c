package faultsuite_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/structobj"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

const (
	structobjArena  = 64 << 20
	structobjPool   = 16 << 20
	structobjGetKey = "faults/get"
)

// structobjRig is an owner with a gather service, a client that reaches
// it straight (for setup and checks), and a clock the rig can move past
// the owner's TTLs.
type structobjRig struct {
	t        *testing.T
	get      bool // the GET row (else PUT)
	owner    *structobj.Owner
	ownerTr  verbs.Transport
	req      verbs.Transport
	direct   *structobj.Client
	skew     atomic.Int64 // added to the owner's clock
	obj      *structobj.Object
	payload  []byte // obj's payload as stored
	members  [][]byte
	names    []string
	next     int
	ttlLimit time.Duration
}

func startStructobj(get bool) func(t *testing.T, r *rand.Rand) rig {
	return func(t *testing.T, r *rand.Rand) rig {
		t.Helper()
		g := &structobjRig{t: t, get: get, ownerTr: tcp.New(tcp.Config{}), req: tcp.New(tcp.Config{})}
		var err error
		g.owner, err = structobj.NewOwner(structobj.OwnerConfig{Transport: g.ownerTr, Addr: "127.0.0.1:0", ArenaBytes: structobjArena,
			GatherStagingBytes: 8 << 20, PackWorkers: 2, Calibration: &testCalibration,
			Now: func() time.Time { return time.Now().Add(time.Duration(g.skew.Load())) }})
		require.NoError(t, err)
		g.ttlLimit = 2 * structobj.MaxTTL
		g.direct, err = structobj.NewClient(structobj.ClientConfig{Transport: g.req, PoolBytes: structobjPool, Link: testLink})
		require.NoError(t, err)
		if get {
			g.newObject(r)
			ctx, cancel := context.WithTimeout(context.Background(), SetupWait)
			defer cancel()
			_, err := g.direct.Put(ctx, g.owner.Addr(), structobjGetKey, g.obj)
			require.NoError(t, err)
		}
		return g
	}
}

func (g *structobjRig) addr() string { return g.owner.Addr() }

// newObject builds an object of a few thousand small bytes members and a
// few large ones, and its payload as the owner must store it.
func (g *structobjRig) newObject(r *rand.Rand) {
	small, large := 2000+r.IntN(2000), 2+r.IntN(2)
	isLarge := make(map[int]bool)
	for len(isLarge) < large {
		isLarge[r.IntN(small+large)] = true
	}
	g.members, g.names = g.members[:0], g.names[:0]
	var b structobj.Builder
	for i := range small + large {
		n := 48 + r.IntN(217)
		if isLarge[i] {
			n = 128<<10 + r.IntN(384<<10)
		}
		data := make([]byte, n)
		fill(r, data)
		name := fmt.Sprintf("m%d", i)
		b.Bytes(name, data)
		g.members, g.names = append(g.members, data), append(g.names, name)
	}
	obj, err := b.Build()
	require.NoError(g.t, err)
	g.obj = obj
	g.payload = make([]byte, obj.Manifest.PayloadBytes)
	for i, m := range obj.Manifest.Members {
		copy(g.payload[m.Data.Offset:m.Data.Offset+m.Data.Length], g.members[i])
	}
}

// client is a fresh client whose connection to addr is open, so the
// fault meets the operation and not the handshake.
func (g *structobjRig) client(ctx context.Context, addr string) (*structobj.Client, error) {
	c, err := structobj.NewClient(structobj.ClientConfig{Transport: g.req, PoolBytes: structobjPool, Link: testLink})
	if err != nil {
		return nil, fmt.Errorf("faultsuite: client: %w", err)
	}
	key := structobjGetKey
	if !g.get {
		key = "faults/absent"
	}
	if _, err := c.Stat(ctx, addr, key); err != nil && !(errors.Is(err, structobj.ErrNotFound) && !g.get) {
		return nil, errors.Join(fmt.Errorf("faultsuite: warm-up stat: %w", err), c.Close())
	}
	return c, nil
}

// poolHeld polls c's pool for at most a second and reports leases still
// held.
func poolHeld(c *structobj.Client) error {
	return settleLeases(time.Second, func() string {
		if n := c.Stats().Pool.Leases; n > 0 {
			return fmt.Sprintf("client pool: %d leases held after the operation returned", n)
		}
		return ""
	})
}

func (g *structobjRig) run(r *rand.Rand, addr string, h *hooks) (opErr, checkErr error) {
	if g.get {
		return g.runGet(r, addr, h)
	}
	return g.runPut(r, addr, h)
}

func (g *structobjRig) runPut(r *rand.Rand, addr string, h *hooks) (opErr, checkErr error) {
	g.newObject(r)
	key := fmt.Sprintf("faults/put-%d", g.next)
	g.next++
	setup, cancel := context.WithTimeout(context.Background(), SetupWait)
	defer cancel()
	c, err := g.client(setup, addr)
	if err != nil {
		return nil, err
	}
	ctx, end := h.begin()
	v, err := c.Put(ctx, addr, key, g.obj)
	end()
	checkErr = errors.Join(poolHeld(c), c.Close())

	// Read it back straight from the owner: a PUT is visible whole or not
	// at all, and a successful one exactly.
	got := make([]byte, len(g.payload))
	_, info, gerr := g.direct.Get(setup, g.owner.Addr(), key, nil, [][]byte{got})
	switch {
	case err == nil && gerr != nil:
		checkErr = errors.Join(checkErr, fmt.Errorf("put reported version %d, reading it back: %w", v, gerr))
	case err == nil:
		if info.Version != v {
			checkErr = errors.Join(checkErr, fmt.Errorf("put reported version %d, read back %d", v, info.Version))
		}
		checkErr = errors.Join(checkErr, diffBytes("stored payload", got, g.payload))
	case errors.Is(gerr, structobj.ErrNotFound):
	case gerr != nil:
		checkErr = errors.Join(checkErr, fmt.Errorf("after the failed put, reading the key back: %w", gerr))
	default: // committed although the client saw an error: it must be whole
		if derr := diffBytes("payload of a failed put that was committed", got, g.payload); derr != nil {
			checkErr = errors.Join(checkErr, derr)
		}
	}
	return err, checkErr
}

func (g *structobjRig) runGet(r *rand.Rand, addr string, h *hooks) (opErr, checkErr error) {
	setup, cancel := context.WithTimeout(context.Background(), SetupWait)
	defer cancel()
	c, err := g.client(setup, addr)
	if err != nil {
		return nil, err
	}
	defer func() { checkErr = errors.Join(checkErr, poolHeld(c), c.Close()) }()
	sel := make([]structobj.Select, len(g.names))
	total := 0
	for i, name := range g.names {
		sel[i] = structobj.Select{Member: name}
		total += len(g.members[i])
	}
	// Half the trials read into a pool Buffer (gather-capable), half into
	// plain memory (staged through pool leases).
	var mem []byte
	if r.IntN(2) == 0 {
		buf, err := c.NewBuffer(total)
		if err != nil {
			return nil, fmt.Errorf("faultsuite: buffer: %w", err)
		}
		defer func() { checkErr = errors.Join(checkErr, buf.Release()) }()
		mem = buf.Bytes()
	} else {
		mem = make([]byte, total)
	}
	fill(r, mem)
	dst := make([][]byte, len(sel))
	want := make([]byte, 0, total)
	off := 0
	for i := range sel {
		dst[i] = mem[off : off+len(g.members[i]) : off+len(g.members[i])]
		off += len(g.members[i])
		want = append(want, g.members[i]...)
	}

	ctx, end := h.begin()
	_, info, err := c.Get(ctx, addr, structobjGetKey, sel, dst)
	end()
	if err != nil {
		return err, nil
	}
	return nil, diffBytes(fmt.Sprintf("get of %d members (path %v, gathered %v)", len(sel), info.Path, info.Gathered), mem, want)
}

// settle moves the owner's clock past every TTL, so reservations and holds
// that broken connections left behind expire, and checks that none is
// left.
func (g *structobjRig) settle(wait time.Duration) error {
	before := g.owner.Stats()
	g.skew.Add(int64(g.ttlLimit))
	return settleLeases(wait, func() string {
		st := g.owner.Stats()
		if st.Reservations > 0 || st.Holds > 0 || st.PendingBytes > 0 {
			return fmt.Sprintf("owner: %d reservations, %d holds, %d pending bytes past every TTL (before: %d, %d)",
				st.Reservations, st.Holds, st.PendingBytes, before.Reservations, before.Holds)
		}
		if before.Reservations > 0 || before.Holds > 0 {
			g.t.Logf("  left to the TTLs by broken connections: %d reservations, %d holds (expired now)", before.Reservations, before.Holds)
			before.Reservations, before.Holds = 0, 0
		}
		return ""
	})
}

func (g *structobjRig) close() error {
	err := g.owner.Close()
	if err != nil {
		err = fmt.Errorf("structobj owner (leaked staging leases show here): %w", err)
	}
	return errors.Join(err, g.direct.Close(), g.req.Close(), g.ownerTr.Close())
}

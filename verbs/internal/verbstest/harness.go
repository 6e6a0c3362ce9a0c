// Package verbstest is the conformance suite every verbs backend runs
// (Run), with the harness it is built from (seeded random data, a
// two-transport pair, a post/poll driver) and the shared benchmarks.
package verbstest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

var seedFlag = flag.Uint64("verbstest.seed", 0, "seed for random inputs (0 picks one from the clock)")

// Backend describes a transport under test.
type Backend struct {
	Name string
	// New returns a fresh transport.
	New func() verbs.Transport
	// Addr returns a fresh listen address.
	Addr func(tb testing.TB) string
	// ExposeRegistered reports whether Register'ed (not Alloc'ed) memory
	// may be exported and exposed.
	ExposeRegistered bool
}

// NewRand returns a generator from a logged seed (rerun with
// -verbstest.seed).
func NewRand(tb testing.TB) *rand.Rand {
	tb.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	tb.Logf("seed %d (rerun with -verbstest.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Fill writes random bytes, none of them zero, into b.
func Fill(r *rand.Rand, b []byte) {
	for i := 0; i < len(b); i += 8 {
		x := r.Uint64() | 0x0101010101010101
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(x >> (8 * j))
		}
	}
}

// Context returns a context that ends with the test (or after 30 s).
func Context(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// Transport returns a new transport closed at cleanup.
func (b Backend) Transport(tb testing.TB) verbs.Transport {
	tb.Helper()
	t := b.New()
	tb.Cleanup(func() { require.NoError(tb, t.Close()) })
	return t
}

// RegionSpec describes a region to Alloc and fill with random bytes.
type RegionSpec struct {
	Name   string
	Size   int
	Access verbs.Access
}

// Pair is an owner transport serving a segment and a requester transport
// connected to it.
type Pair struct {
	Owner, Req verbs.Transport
	Seg        verbs.Segment
	Exports    map[string]*verbs.Region // owner's regions by name
	Conn       verbs.Conn
}

// PairConfig configures NewPair.
type PairConfig struct {
	Exports []RegionSpec
	Listen  verbs.ListenOptions
	Connect verbs.ConnectOptions
	// Expose lists requester regions (Alloc'ed by NewPair, filled with
	// random bytes) to expose; they are added to Connect.Expose.
	Expose   []RegionSpec
	Handlers map[uint16]verbs.Handler
}

// NewPair builds a Pair; everything is closed at cleanup.
func (b Backend) NewPair(tb testing.TB, r *rand.Rand, cfg PairConfig) (*Pair, map[string]*verbs.Region) {
	tb.Helper()
	p := &Pair{Owner: b.Transport(tb), Req: b.Transport(tb), Exports: map[string]*verbs.Region{}}
	var exports []verbs.Export
	for _, s := range cfg.Exports {
		reg, err := p.Owner.Alloc(s.Size, s.Access)
		require.NoError(tb, err)
		Fill(r, reg.Bytes())
		p.Exports[s.Name] = reg
		exports = append(exports, verbs.Export{Name: s.Name, Region: reg})
	}
	seg, err := p.Owner.Listen(b.Addr(tb), exports, cfg.Listen)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, seg.Close()) })
	for m, h := range cfg.Handlers {
		seg.Handle(m, h)
	}
	p.Seg = seg
	exposed := map[string]*verbs.Region{}
	opts := cfg.Connect
	opts.Expose = append([]verbs.Export(nil), opts.Expose...)
	for _, s := range cfg.Expose {
		reg, err := p.Req.Alloc(s.Size, s.Access)
		require.NoError(tb, err)
		Fill(r, reg.Bytes())
		exposed[s.Name] = reg
		opts.Expose = append(opts.Expose, verbs.Export{Name: s.Name, Region: reg})
	}
	c, err := p.Req.Connect(Context(tb), seg.Addr(), opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, c.Close()) })
	p.Conn = c
	return p, exposed
}

// RemoteKey returns the key of the remote region named name.
func RemoteKey(tb testing.TB, q verbs.Queue, name string) verbs.Key {
	tb.Helper()
	ri, ok := verbs.FindRegion(q.Remote(), name)
	require.True(tb, ok, "remote region %q not in %v", name, q.Remote())
	return ri.Key
}

// Drive posts every request (as the queue depth allows) and collects
// their completions into out (which must hold len(wrs)). It returns how
// many completions it collected.
func Drive(ctx context.Context, q verbs.Queue, wrs []verbs.WorkRequest, out []verbs.Completion) (int, error) {
	posted, done := 0, 0
	for done < len(wrs) {
		if posted < len(wrs) {
			n, err := q.Post(wrs[posted:])
			if err != nil && n == 0 && !errors.Is(err, verbs.ErrQueueFull) {
				return done, fmt.Errorf("post at %d: %w", posted, err)
			}
			posted += n
		}
		n, err := q.Wait(ctx, out[done:], 1)
		if err != nil {
			return done, fmt.Errorf("wait after %d of %d: %w", done, len(wrs), err)
		}
		done += n
	}
	return done, nil
}

// RequireOK fails unless every completion succeeded, and returns their
// IDs as a set.
func RequireOK(tb testing.TB, cs []verbs.Completion) map[uint64]bool {
	tb.Helper()
	ids := make(map[uint64]bool, len(cs))
	for _, c := range cs {
		require.Equal(tb, verbs.StatusOK, c.Status, "completion %d: %v", c.ID, c.Err)
		require.NoError(tb, c.Err)
		require.False(tb, ids[c.ID], "completion %d twice", c.ID)
		ids[c.ID] = true
	}
	return ids
}

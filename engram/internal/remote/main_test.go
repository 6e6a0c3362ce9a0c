package remote

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/engram/internal/lookup"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/shm"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var seedFlag = flag.Uint64("remote.seed", 0, "seed for the random inputs (0: from the clock)")

// newRand returns a generator from a logged seed.
func newRand(tb testing.TB) *rand.Rand {
	tb.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	tb.Logf("seed %d (rerun with -remote.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// fill writes random bytes, none of them zero.
func fill(r *rand.Rand, b []byte) {
	for i := 0; i < len(b); i += 8 {
		x := r.Uint64() | 0x0101010101010101
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(x >> (8 * j))
		}
	}
}

func testContext(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// raceBuild reports whether the binary was built with -race (the detector
// allocates on its own).
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

var shmAddrs atomic.Uint64

type backend struct {
	name string
	new  func() verbs.Transport
	addr func() string
}

var (
	tcpBackend = backend{name: "tcp", new: func() verbs.Transport { return tcp.New(tcp.Config{}) },
		addr: func() string { return "127.0.0.1:0" }}
	shmBackend = backend{name: "shm", new: func() verbs.Transport { return shm.New(shm.Config{}) },
		addr: func() string {
			return fmt.Sprintf("@scatterkit-remote-test-%d-%d", time.Now().UnixNano(), shmAddrs.Add(1))
		}}
)

// backends are the transports the tests run over: tcp everywhere, shm where
// it exists (Linux; elsewhere it reports ErrNotSupported).
var backends = func() []backend {
	if runtime.GOOS == "linux" {
		return []backend{tcpBackend, shmBackend}
	}
	return []backend{tcpBackend}
}()

// testCalibration is a fixed packing calibration, so the owner does not
// measure at start and decisions do not depend on the machine.
var testCalibration = costmodel.Calibration{BMem: 5e9, RCopy: 8e6}

// testLink makes small requests expensive, so large lookups gather and
// small ones run direct, whatever the machine measures.
var testLink = verbs.LinkParams{Bandwidth: 3e9, PostRate: 1e6, RTT: 30 * time.Microsecond}

// The tables every fixture serves: three of 264-byte rows and one of
// 40-byte rows.
var testSpecs = []TableSpec{
	{Name: "emb", NumRows: 6000, RowBytes: 264},
	{Name: "ngram.l3", NumRows: 3001, RowBytes: 264},
	{Name: "tiny", NumRows: 7, RowBytes: 264},
	{Name: "narrow", NumRows: 100, RowBytes: 40},
}

const testNamespace = "deepseek-v4/engram"

type envConfig struct {
	backend     backend
	specs       []TableSpec // nil: testSpecs
	outputBytes int64       // 0: 8 MiB
	mode        engine.Mode
	measureLink bool // measure the link instead of testLink
}

// env is an owner serving random tables and a client connected to it,
// both closed at cleanup (client first).
type env struct {
	ownerTr, reqTr verbs.Transport
	tables         map[string]Table
	srv            *Server
	cli            *Client
}

func newEnv(t testing.TB, r *rand.Rand, cfg envConfig) *env {
	t.Helper()
	specs := cfg.specs
	if specs == nil {
		specs = testSpecs
	}
	e := &env{ownerTr: cfg.backend.new(), reqTr: cfg.backend.new(), tables: make(map[string]Table)}
	t.Cleanup(func() {
		require.NoError(t, e.ownerTr.Close())
		require.NoError(t, e.reqTr.Close())
	})
	tables := make([]Table, len(specs))
	for i, s := range specs {
		rows := make([]byte, s.Bytes())
		fill(r, rows)
		tables[i] = Table{Name: s.Name, NumRows: s.NumRows, RowBytes: s.RowBytes, Rows: rows}
		e.tables[s.Name] = tables[i]
	}
	var err error
	e.srv, err = Serve(ServerConfig{Transport: e.ownerTr, Addr: cfg.backend.addr(), Namespace: testNamespace,
		Tables: tables, StagingBytes: 4 << 20,
		// Lookups of many operations hold many commands' staging at once:
		// a long acquire deadline makes them queue rather than fall back
		// (TestLookupForcedModes asserts no fallback).
		Gather: gather.Config{Calibration: &testCalibration, PackWorkers: 2, ParallelMin: 128 << 10,
			AcquireTimeout: 5 * time.Second}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.srv.Close()) })
	ob := cfg.outputBytes
	if ob == 0 {
		ob = 8 << 20
	}
	cc := ClientConfig{Transport: e.reqTr, Addr: e.srv.Addr(), Namespace: testNamespace, OutputBytes: ob, Mode: cfg.mode}
	if !cfg.measureLink {
		cc.Connect.Link = testLink
	}
	e.cli, err = Dial(testContext(t), cc)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.cli.Close()) })
	return e
}

// output leases n bytes and fills them with poison.
func (e *env) output(t testing.TB, r *rand.Rand, n int) []byte {
	t.Helper()
	o, err := e.cli.NewOutput(n)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, o.Release()) })
	fill(r, o.Bytes())
	return o.Bytes()
}

// arenaOffset returns the offset of b, a leased output, in c's arena.
func arenaOffset(t testing.TB, c *Client, b []byte) uint64 {
	t.Helper()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(c.arena)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	require.True(t, p >= base && p-base+uintptr(len(b)) <= uintptr(len(c.arena)), "the buffer lies in the arena")
	return uint64(p - base)
}

// withIDs sets q's ids, of either type.
func withIDs[I int32 | int64](q *lookup.Request, ids []I) *lookup.Request {
	switch ids := any(ids).(type) {
	case []int32:
		q.IDs32 = ids
	case []int64:
		q.IDs64 = ids
	}
	return q
}

// reference applies q to a copy of out, the naive way: one row at a time.
func reference(tables map[string]Table, q *lookup.Request) []byte {
	want := append([]byte(nil), q.Out...)
	for t := range q.T {
		for k := range q.K {
			var id int64
			if q.IDs64 != nil {
				id = q.IDs64[t*q.K+k]
			} else {
				id = int64(q.IDs32[t*q.K+k])
			}
			if id == -1 {
				continue
			}
			if q.Offsets != nil {
				id -= q.Offsets[k]
			}
			tb := tables[q.Tables[k]]
			r := tb.RowBytes
			at := q.Off + t*q.TStride + k*q.KStride
			copy(want[at:at+r], tb.Rows[int(id)*r:int(id+1)*r])
		}
	}
	return want
}

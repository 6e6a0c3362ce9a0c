package engine_test

import (
	"bytes"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
)

// fakeDevice is device memory in a byte slice whose copies run later, on
// a goroutine of their own in the order started (a stream), each after a
// random delay. A copy checksums its source when started and again when
// it runs: a bounce slot the engine reused before the copy read it shows
// as a mismatch.
type fakeDevice struct {
	mu      sync.Mutex
	mem     []byte
	queue   chan *fakeCopy
	rng     *rand.Rand
	failAt  int // the copy (1-based) that fails; 0: none
	started int
	reused  int      // copies whose source changed before they ran
	running int      // copies started and not yet waited for
	most    int      // the most at once
	offs    []uint64 // each copy's destination offset, in the order started
	wg      sync.WaitGroup
}

type fakeCopy struct {
	dev   *fakeDevice
	off   uint64
	src   []byte
	runs  [][2]uint64
	sum   uint32
	fail  bool
	done  chan struct{}
	err   error
	delay time.Duration
}

func newFakeDevice(r *rand.Rand, n int) *fakeDevice {
	d := &fakeDevice{mem: make([]byte, n), queue: make(chan *fakeCopy, 64), rng: rand.New(rand.NewPCG(r.Uint64(), 1))}
	verbstest.Fill(r, d.mem)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for c := range d.queue {
			time.Sleep(c.delay)
			if crc32.ChecksumIEEE(c.src) != c.sum {
				d.mu.Lock()
				d.reused++
				d.mu.Unlock()
			}
			if c.fail {
				c.err = errors.New("fake device: copy failed")
			} else {
				for _, r := range c.runs {
					copy(d.mem[c.off+r[0]:c.off+r[0]+r[1]], c.src[r[0]:r[0]+r[1]])
				}
			}
			close(c.done)
		}
	}()
	return d
}

func (d *fakeDevice) close() { close(d.queue); d.wg.Wait() }

func (d *fakeDevice) DeviceLen() uint64 { return uint64(len(d.mem)) }

func (d *fakeDevice) CopyIn(off uint64, src []byte, runs [][2]uint64) (func() error, error) {
	d.mu.Lock()
	d.started++
	d.offs = append(d.offs, off)
	fail := d.started == d.failAt
	d.running++
	d.most = max(d.most, d.running)
	delay := time.Duration(d.rng.IntN(300)) * time.Microsecond
	d.mu.Unlock()
	c := &fakeCopy{dev: d, off: off, src: src, runs: append([][2]uint64(nil), runs...), sum: crc32.ChecksumIEEE(src),
		fail: fail, done: make(chan struct{}), delay: delay}
	d.queue <- c
	return c.wait, nil
}

func (c *fakeCopy) wait() error {
	<-c.done
	c.dev.mu.Lock()
	c.dev.running--
	c.dev.mu.Unlock()
	return c.err
}

// TestDeviceDestination reads plans of every form into a fake device
// through a bounce region of Depth x Window bytes, in every mode: the
// device bytes equal the same plan applied to host memory (bytes outside
// the plan's destinations untouched), no bounce slot is reused before
// its copy read it, the pieces overlap (more than one copy in flight),
// and no staging lease is left on the owner.
func TestDeviceDestination(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			r := verbstest.NewRand(t)
			const window, depth = 64 << 10, 3
			f := newFixture(t, r, fixtureConfig{backend: be, tableBytes: tableBytes, localBytes: window * depth})
			plans := map[string]*planfmt.Plan{
				"rows-skips":  rowsPlan(r, tableBytes, 3000, 264, 9, 0),
				"token-major": stridedPlan(r, tableBytes, 200, 24, 264, 40),
				// Tokens of 300 rows (79 KB) wider than the 64 KiB window:
				// cut by columns.
				"wide-tokens": stridedPlan(r, tableBytes, 6, 300, 264, 8),
				"head-major":  paddedHeadMajorPlan(r, tableBytes, 300, 8, 200),
				"ranges":      mixedPlan(r, tableBytes, 2000, 300, 3, 100<<10),
				"sharded":     maskedPlan(r, 2048, 3),
			}
			for name, p := range plans {
				for _, mode := range []engine.Mode{engine.ModeDirect, engine.ModeGather, engine.ModeAuto} {
					dev := newFakeDevice(r, int(p.DstExtent)+4096)
					const devOff = 1000
					want := verbstest.Expect(p, f.table.Bytes(), 0, dev.mem, devOff)
					res, err := f.eng.DoDevice(verbstest.Context(t), &engine.DeviceOp{
						Op:     engine.ScatterOp{Conn: f.conn, Dir: verbs.OpRead, Remote: f.tableInfo, Local: f.local, Plan: p, Mode: mode},
						Device: dev, DeviceOff: devOff, Window: window, Depth: depth})
					dev.close()
					require.NoError(t, err, "%s %v", name, mode)
					require.True(t, bytes.Equal(want, dev.mem), "%s %v: device bytes differ from the host path's", name, mode)
					require.Zero(t, dev.reused, "%s %v: a bounce slot was rewritten before its copy read it", name, mode)
					var n uint64
					for _, fr := range verbstest.Fragments(p) {
						n += fr.N
					}
					require.Equal(t, n, res.Bytes, name)
					require.Equal(t, []uint64{n}, res.SpanBytes)
					require.Equal(t, dev.started, res.Pieces)
					if res.Pieces > depth {
						require.Greater(t, dev.most, 1, "%s %v: copies overlapped nothing", name, mode)
					}
					// Every piece copied once; the last (a remainder) first
					// when it is the smallest and the pieces outnumber the slots.
					require.Len(t, dev.offs, res.Pieces)
					if res.Pieces > depth && name == "rows-skips" {
						last := slices.Max(dev.offs)
						require.Equal(t, last, dev.offs[0], "%s %v: the remainder piece was not sent first", name, mode)
						require.True(t, slices.IsSorted(dev.offs[1:]), "%s %v: the other pieces not in destination order", name, mode)
					}
					if mode != engine.ModeAuto {
						require.Equal(t, mode, res.Chosen, name)
					}
				}
			}
			if f.ownerStaging != nil {
				require.Eventually(t, func() bool { return f.ownerStaging.Pool().Stats().Leases == 0 }, 5*time.Second, time.Millisecond)
			}
		})
	}
}

// paddedHeadMajorPlan is headMajorPlan with colPad bytes between columns.
func paddedHeadMajorPlan(r *rand.Rand, tableBytes, tokens, k int, colPad uint64) *planfmt.Plan {
	const size = 264
	p := headMajorPlan(r, tableBytes, tokens, k, size)
	col := uint64(tokens)*size + colPad
	p.Rows.Layout.ColStride = col
	p.DstExtent = uint64(k) * col
	return p
}

// TestDeviceDestinationErrors: bad input is refused before anything
// moves (the device untouched); a failed device copy fails the operation
// naming its piece once every piece in flight ended, with no lease left.
func TestDeviceDestinationErrors(t *testing.T) {
	r := verbstest.NewRand(t)
	const window = 64 << 10
	f := newFixture(t, r, fixtureConfig{backend: backends[1], tableBytes: tableBytes, localBytes: 3 * window})
	p := rowsPlan(r, tableBytes, 3000, 264, 0, 0)
	dev := newFakeDevice(r, int(p.DstExtent))
	defer dev.close()
	before := bytes.Clone(dev.mem)
	op := func() *engine.DeviceOp {
		return &engine.DeviceOp{Op: engine.ScatterOp{Conn: f.conn, Dir: verbs.OpRead, Remote: f.tableInfo, Local: f.local, Plan: p},
			Device: dev, Window: window, Depth: 3}
	}
	ctx := verbstest.Context(t)
	for name, mut := range map[string]func(*engine.DeviceOp){
		"no device":    func(d *engine.DeviceOp) { d.Device = nil },
		"write":        func(d *engine.DeviceOp) { d.Op.Dir = verbs.OpWrite },
		"no plan":      func(d *engine.DeviceOp) { d.Op.Plan = nil },
		"no bounce":    func(d *engine.DeviceOp) { d.Op.Local = nil },
		"past device":  func(d *engine.DeviceOp) { d.DeviceOff = 1 },
		"small bounce": func(d *engine.DeviceOp) { d.Depth = 4 },
		"depth one":    func(d *engine.DeviceOp) { d.Depth = 1 },
		"spans": func(d *engine.DeviceOp) {
			q := *p
			q.CompletionEnds = []uint32{1, uint32(p.Rows.Len())}
			d.Op.Plan = &q
		},
		"row too big": func(d *engine.DeviceOp) { d.Op.Plan = rowsPlan(r, tableBytes, 2, 128<<10, 0, 0) },
	} {
		d := op()
		mut(d)
		_, err := f.eng.DoDevice(ctx, d)
		var ie *engine.InvalidOpError
		require.ErrorAs(t, err, &ie, name)
		require.ErrorIs(t, err, verbs.ErrInvalid, name)
	}
	bad := *p
	bad.Rows.TableRows = 1 << 40
	_, err := f.eng.DoDevice(ctx, &engine.DeviceOp{Op: engine.ScatterOp{Conn: f.conn, Dir: verbs.OpRead, Remote: f.tableInfo, Local: f.local, Plan: &bad},
		Device: dev, Window: window, Depth: 3})
	require.ErrorIs(t, err, planfmt.ErrBounds)
	require.Zero(t, dev.started, "nothing copied for bad input")
	require.True(t, bytes.Equal(before, dev.mem))

	dev.failAt = 2
	_, err = f.eng.DoDevice(ctx, op())
	var de *engine.DeviceError
	require.ErrorAs(t, err, &de)
	require.True(t, de.Copy)
	require.Equal(t, 0, de.Piece, "the second copy started is piece 0's: the remainder (the last piece) goes first")
	require.Zero(t, dev.running, "every started copy was waited for")
	require.Eventually(t, func() bool { return f.ownerStaging.Pool().Stats().Leases == 0 }, 5*time.Second, time.Millisecond)
}

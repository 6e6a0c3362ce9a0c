package faultsuite_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/structobj"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/faultproxy"
)

var (
	seedFlag   = flag.Uint64("faultsuite.seed", 0, "seed of the whole matrix (0 picks one from the clock)")
	trialsFlag = flag.Int("faultsuite.trials", 0, "trials per cell (0: 3, or 2 with -short)")
)

// Bounds of a trial. Every operation runs under OpDeadline; it must
// return within OpDeadline+Grace of the fault being set.
const (
	OpDeadline = time.Second
	Grace      = time.Second
	// SetupWait bounds what a trial does before the fault is set
	// (connecting through the proxy) and after the operation returned
	// (checking, closing).
	SetupWait = 10 * time.Second
	// RescueWait is how long a hung operation gets to return once the
	// watchdog healed the proxy and reset its connections.
	RescueWait = 10 * time.Second
	// SettleWait bounds the wait for staging leases to come back.
	SettleWait = 3 * time.Second
	// HealthDeadline bounds the health check's direct operation.
	HealthDeadline = 10 * time.Second
)

// testLink are fixed link parameters, so connecting measures nothing and
// ModeAuto decides the same way every run.
var testLink = verbs.LinkParams{Bandwidth: 3e9, PostRate: 1e6, RTT: 30 * time.Microsecond}

// testCalibration is a fixed packing calibration (no calibration run).
var testCalibration = costmodel.Calibration{BMem: 5e9, RCopy: 8e6}

// rig is a workload's owner, started once per cell, and what its trials
// need on the requester's side.
type rig interface {
	// addr is the owner's address: the proxy forwards to it, the health
	// check connects to it straight.
	addr() string
	// run performs one operation with fresh inputs from r against the
	// owner reached at addr: it connects, calls h.begin just before the
	// operation (which sets the fault and starts the deadline), runs it,
	// calls the end function begin returned as soon as it returns, checks
	// the outcome and closes what it opened. opErr is the operation's
	// error; checkErr is set when the bytes it reported as done are wrong
	// (or, for a failed PUT, when the key holds neither the old nor the
	// new object), and for setup failures.
	run(r *rand.Rand, addr string, h *hooks) (opErr, checkErr error)
	// settle waits at most wait for the owner's (and the requester's)
	// staging leases to be back, and reports what is still held.
	settle(wait time.Duration) error
	// close stops the owner and reports leaks its Close finds.
	close() error
}

// workload is one row of the matrix.
type workload struct {
	name  string
	start func(t *testing.T, r *rand.Rand) rig
}

// column is one fault of the matrix: fault returns a trial's fault; est
// holds the bytes a pass-through operation of the workload moved up and
// down.
type column struct {
	name  string
	fault func(r *rand.Rand, est [2]int64) faultproxy.Fault
	// together: the column's cells of every workload run at once (they
	// mostly wait), after the other cells. They also check that the
	// owner's staging comes back while the network stays stalled (an
	// owner must not hold staging forever for a requester that gave up).
	together bool
}

func randDir(r *rand.Rand) faultproxy.Dir {
	return []faultproxy.Dir{faultproxy.Up, faultproxy.Down, faultproxy.Both}[r.IntN(3)]
}

func randDuration(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

var columns = []column{
	{"pass", func(*rand.Rand, [2]int64) faultproxy.Fault { return faultproxy.Fault{} }, false},
	{"delay", func(r *rand.Rand, _ [2]int64) faultproxy.Fault {
		return faultproxy.Fault{Kind: faultproxy.Delay, Dir: randDir(r), Delay: randDuration(r, time.Millisecond, 3*time.Millisecond)}
	}, false},
	{"stall-short", func(r *rand.Rand, _ [2]int64) faultproxy.Fault {
		return faultproxy.Fault{Kind: faultproxy.Stall, Dir: randDir(r), For: randDuration(r, OpDeadline/10, OpDeadline*3/10)}
	}, false},
	{"stall-long", func(r *rand.Rand, _ [2]int64) faultproxy.Fault {
		// Until healed: the trial heals once the operation returned (or
		// the watchdog does), so the stall outlasts any deadline.
		return faultproxy.Fault{Kind: faultproxy.Stall, Dir: randDir(r)}
	}, true},
	{"reset", func(r *rand.Rand, est [2]int64) faultproxy.Fault {
		return faultproxy.Fault{Kind: faultproxy.Reset, After: 1 + r.Int64N(max(est[0]+est[1]-1, 1))}
	}, false},
	{"partition", func(r *rand.Rand, _ [2]int64) faultproxy.Fault {
		return faultproxy.Fault{Kind: faultproxy.Partition, For: randDuration(r, OpDeadline/10, OpDeadline*4/10)}
	}, false},
	{"corrupt", func(r *rand.Rand, est [2]int64) faultproxy.Fault {
		d, i := faultproxy.Up, 0
		if r.IntN(2) == 1 {
			d, i = faultproxy.Down, 1
		}
		return faultproxy.Fault{Kind: faultproxy.Corrupt, Dir: d, After: r.Int64N(max(est[i], 1))}
	}, false},
}

// hooks tie a trial's operation to its fault and watchdog.
type hooks struct {
	set      func()        // installs the fault
	heal     func()        // removes it
	deadline time.Duration // of the operation
	armed    chan struct{} // closed by begin
	done     chan struct{} // closed by end
	onceB    sync.Once
	onceE    sync.Once
	began    time.Time
	took     time.Duration
	// stalled, when set, runs after the operation returned and before the
	// proxy heals (stall-long cells); stuck is what it reported.
	stalled func() string
	stuck   string
	note    string // what stalled saw
}

// ownerStaging is implemented by rigs that can see the owner's staging
// pool: held reports the leases it holds now ("" for none).
type ownerStaging interface {
	held() string
}

func newHooks(set, heal func(), deadline time.Duration) *hooks {
	return &hooks{set: set, heal: heal, deadline: deadline, armed: make(chan struct{}), done: make(chan struct{})}
}

// begin sets the fault and returns the operation's context; end, called
// once the operation returned, heals the proxy.
func (h *hooks) begin() (context.Context, func()) {
	h.onceB.Do(func() {
		h.set()
		h.began = time.Now()
		close(h.armed)
	})
	ctx, cancel := context.WithTimeout(context.Background(), h.deadline)
	return ctx, func() {
		cancel()
		h.onceE.Do(func() {
			h.took = time.Since(h.began)
			close(h.done)
			if h.stalled != nil {
				h.stuck = h.stalled()
			}
			h.heal()
		})
	}
}

// outcome is how one trial ended.
type outcome struct {
	kind   string // "ok", "failed", "wrong", "hang", "setup"
	reason string
	took   time.Duration
	err    error
}

// cellResult is one cell's tally.
type cellResult struct {
	workload, fault         string
	trials, ok, failed      int
	wrong, hang, stuck      int
	reasons                 map[string]int
	leak, unhealthy, closeE string
	elapsed                 time.Duration
}

func (c *cellResult) add(o outcome) {
	c.trials++
	switch o.kind {
	case "ok":
		c.ok++
	case "failed":
		c.failed++
	case "wrong":
		c.wrong++
	case "leak":
		c.stuck++
	default:
		c.hang++
	}
	if o.reason != "" {
		c.reasons[o.kind+":"+o.reason]++
	}
}

// line is the cell's log line.
func (c *cellResult) line() string {
	var rs []string
	for _, k := range slices.Sorted(maps.Keys(c.reasons)) {
		rs = append(rs, fmt.Sprintf("%s x%d", k, c.reasons[k]))
	}
	s := fmt.Sprintf("cell %s/%s: trials %d, ok %d, failed %d", c.workload, c.fault, c.trials, c.ok, c.failed)
	if c.wrong > 0 {
		s += fmt.Sprintf(", WRONG %d", c.wrong)
	}
	if c.hang > 0 {
		s += fmt.Sprintf(", HANG %d", c.hang)
	}
	if c.stuck > 0 {
		s += fmt.Sprintf(", STUCK-STAGING %d", c.stuck)
	}
	s += fmt.Sprintf(" (reasons: %s)", strings.Join(rs, ", "))
	if c.leak != "" {
		s += "; LEAK: " + c.leak
	}
	if c.unhealthy != "" {
		s += "; UNHEALTHY: " + c.unhealthy
	}
	if c.closeE != "" {
		s += "; CLOSE: " + c.closeE
	}
	return s + fmt.Sprintf(" [%v]", c.elapsed.Round(time.Millisecond))
}

// short is the cell's summary-table entry.
func (c *cellResult) short() string {
	var parts []string
	for _, x := range []struct {
		n int
		s string
	}{{c.ok, "ok"}, {c.failed, "f"}, {c.wrong, "WRONG"}, {c.hang, "HANG"}, {c.stuck, "STUCK"}} {
		if x.n > 0 {
			parts = append(parts, fmt.Sprintf("%d%s", x.n, x.s))
		}
	}
	if c.leak != "" {
		parts = append(parts, "LEAK")
	}
	if c.unhealthy != "" {
		parts = append(parts, "SICK")
	}
	if c.closeE != "" {
		parts = append(parts, "CLOSE")
	}
	return strings.Join(parts, " ")
}

// reason names the cause of an operation's error for the log.
func reason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, verbs.ErrProtocol):
		return "protocol"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, verbs.ErrBadKey):
		return "bad-key"
	case errors.Is(err, verbs.ErrBounds):
		return "bounds"
	case errors.Is(err, verbs.ErrAccess):
		return "access"
	case errors.Is(err, verbs.ErrGatherAborted):
		return "gather-aborted"
	case errors.Is(err, verbs.ErrClosed), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return "closed"
	case errors.Is(err, structobj.ErrExpired):
		return "expired"
	case errors.Is(err, structobj.ErrRefused):
		return "refused"
	case errors.Is(err, engram.ErrID), errors.Is(err, engram.ErrOutput):
		return "lookup-arg"
	case errors.Is(err, verbs.ErrHandler):
		return "handler"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return fmt.Sprintf("%T", err)
}

// cell runs one workload under one fault.
type cell struct {
	t      *testing.T
	name   string
	rig    rig
	proxy  *faultproxy.Proxy
	dumped bool // the log holds a goroutine excerpt of this cell already
	// stalledCheck: check the owner's staging while the stall lasts.
	stalledCheck bool
}

// trial runs one operation through addr with fault f under the watchdog.
func (c *cell) trial(r *rand.Rand, label, addr string, f faultproxy.Fault, deadline time.Duration) outcome {
	t := c.t
	t.Helper()
	h := newHooks(func() {
		if err := c.proxy.Set(f); err != nil {
			panic(fmt.Sprintf("faultsuite: fault %v refused: %v", f, err)) // the columns table is broken
		}
	}, c.proxy.Heal, deadline)
	if os, ok := c.rig.(ownerStaging); ok && c.stalledCheck && f.Kind == faultproxy.Stall {
		h.stalled = func() string {
			start, first := time.Now(), os.held()
			err := settleLeases(SettleWait, os.held)
			if first != "" && err == nil {
				h.note = fmt.Sprintf("; at return %s, back after %v with the stall still on", first, time.Since(start).Round(time.Millisecond))
			}
			if err == nil {
				return ""
			}
			return err.Error()
		}
	}
	var opErr, checkErr error
	fin := make(chan struct{})
	go func() {
		defer close(fin)
		opErr, checkErr = c.rig.run(r, addr, h)
	}()
	hung := ""
	select {
	case <-h.armed:
	case <-fin:
		return c.classify(label, f, h, opErr, checkErr, "")
	case <-time.After(SetupWait):
		c.rescue(label, "setup (before the fault was set) did not end", fin)
		return outcome{kind: "hang", reason: "setup"}
	}
	select {
	case <-h.done:
	case <-time.After(deadline + Grace):
		hung = fmt.Sprintf("operation did not return within %v of the fault (deadline %v)", deadline+Grace, deadline)
		c.rescue(label, hung, h.done)
	}
	select {
	case <-fin:
	case <-time.After(SetupWait):
		c.rescue(label, "checking and closing after the operation did not end", fin)
		return outcome{kind: "hang", reason: "teardown"}
	}
	c.proxy.ResetAll() // nothing of this trial outlives it
	return c.classify(label, f, h, opErr, checkErr, hung)
}

// rescue fails the test with a goroutine dump, heals the proxy and resets
// its connections, and gives the stuck trial RescueWait to get to done.
// A trial stuck even then ends the test.
func (c *cell) rescue(label, what string, done <-chan struct{}) {
	c.dump(label, what)
	c.proxy.Heal()
	c.proxy.ResetAll()
	select {
	case <-done:
	case <-time.After(RescueWait):
		c.dump(label, "still stuck after the proxy healed and reset its connections")
		c.t.FailNow()
	}
}

// classify turns a trial's results into an outcome and fails the test for
// anything but ok and failed.
func (c *cell) classify(label string, f faultproxy.Fault, h *hooks, opErr, checkErr error, hung string) outcome {
	t := c.t
	t.Helper()
	o := outcome{took: h.took, err: opErr}
	switch {
	case hung != "":
		o.kind, o.reason = "hang", "watchdog"
		if opErr != nil {
			o.reason += "+" + reason(opErr)
		}
		t.Errorf("%s: HANG under %v: %s; it returned after the rescue with %v (check: %v)", label, f, hung, opErr, checkErr)
	case h.began.IsZero():
		o.kind, o.reason = "setup", "setup"
		t.Errorf("%s: setup failed before the fault was set: %v %v", label, opErr, checkErr)
	case h.stuck != "":
		o.kind, o.reason = "leak", "staging held while stalled"
		t.Errorf("%s: under %v the operation returned (%v) but the owner still holds staging after %v: %s", label, f, opErr, SettleWait, h.stuck)
	case opErr == nil && checkErr != nil:
		o.kind, o.reason = "wrong", "bytes"
		t.Errorf("%s: reported success under %v with wrong bytes: %v", label, f, checkErr)
	case opErr == nil:
		o.kind = "ok"
	case checkErr != nil:
		o.kind, o.reason = "wrong", "after-failure"
		t.Errorf("%s: failed under %v (%v), and then: %v", label, f, opErr, checkErr)
	default:
		o.kind, o.reason = "failed", reason(opErr)
	}
	msg := o.kind
	if o.reason != "" {
		msg += " (" + o.reason + ")"
	}
	if opErr != nil {
		msg += ": " + trim(opErr.Error(), 200)
	}
	t.Logf("  %s %v: %s in %v%s", label, f, msg, o.took.Round(time.Millisecond), h.note)
	return o
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// dump fails the test with a goroutine dump: all goroutines go to a file;
// the first dump of a cell also logs the goroutines of the engine, the
// gather service and the stores (the transports' lane loops left out), at
// most 12 KiB.
func (c *cell) dump(label, what string) {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	name := strings.NewReplacer("/", "-", " ", "_", ":", "").Replace(label)
	path := filepath.Join(os.TempDir(), fmt.Sprintf("faultsuite-%s-%d.txt", name, time.Now().UnixNano()))
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		path = "(not written: " + err.Error() + ")"
	}
	if c.dumped {
		c.t.Errorf("%s: %s: goroutine dump in %s", label, what, path)
		return
	}
	c.dumped = true
	var ex []byte
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if !bytes.Contains(g, []byte("scatterkit/verbs.")) && !bytes.Contains(g, []byte("scatterkit/structobj.")) &&
			!bytes.Contains(g, []byte("scatterkit/engram")) {
			continue
		}
		if len(ex)+len(g) > 12<<10 {
			ex = append(ex, "... (more in the file)\n"...)
			break
		}
		ex = append(append(ex, g...), "\n\n"...)
	}
	c.t.Errorf("%s: %s: goroutine dump (all goroutines: %s):\n%s", label, what, path, ex)
}

// trials is the number of trials per cell.
func trials() int {
	switch {
	case *trialsFlag > 0:
		return *trialsFlag
	case testing.Short():
		return 2
	}
	return 3
}

// runCell runs one cell: a fresh owner and proxy, a probe operation
// through the proxy without a fault (which measures the bytes each way),
// the trials, then the lease and health checks.
func runCell(t *testing.T, w workload, col column, seed uint64, res *cellResult) {
	start := time.Now()
	r := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	rg := w.start(t, r)
	p, err := faultproxy.New(rg.addr(), faultproxy.Options{Seed: r.Uint64() | 1})
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	c := &cell{t: t, name: w.name + "/" + col.name, rig: rg, proxy: p, stalledCheck: col.together}
	t.Logf("cell %s: seed %d (rerun with -faultsuite.seed and -run 'TestFaults/%s'), proxy seed %d",
		c.name, seed, c.name, p.Seed())
	defer func() {
		if err := p.Close(); err != nil {
			t.Errorf("%s: proxy close: %v", c.name, err)
		}
		if err := c.closeRig(); err != nil {
			res.closeE = trim(err.Error(), 200)
			t.Errorf("%s: owner close (leaked staging shows here): %v", c.name, err)
		}
	}()

	before := p.Stats()
	if o := c.trial(r, c.name+" probe", p.Addr(), faultproxy.Fault{}, SetupWait); o.kind != "ok" {
		t.Errorf("%s: the probe through the proxy without a fault did not succeed: %s %v", c.name, o.kind, o.err)
		return
	}
	after := p.Stats()
	est := [2]int64{after.Up - before.Up, after.Down - before.Down}
	t.Logf("  probe moved %d B up, %d B down over %d connections", est[0], est[1], after.Conns-before.Conns)

	for i := range trials() {
		f := col.fault(r, est)
		res.add(c.trial(r, fmt.Sprintf("%s trial %d", c.name, i), p.Addr(), f, OpDeadline))
	}
	if err := rg.settle(SettleWait); err != nil {
		res.leak = trim(err.Error(), 200)
		t.Errorf("%s: staging leases not back within %v: %v", c.name, SettleWait, err)
	}
	if o := c.trial(r, c.name+" health", rg.addr(), faultproxy.Fault{}, HealthDeadline); o.kind != "ok" {
		res.unhealthy = fmt.Sprintf("%s %v", o.kind, o.err)
		t.Errorf("%s: the owner is not healthy: a direct connection's operation: %s %v", c.name, o.kind, o.err)
	}
	res.elapsed = time.Since(start)
	t.Log(res.line())
}

// closeRig closes the owner under a watchdog.
func (c *cell) closeRig() error {
	errc := make(chan error, 1)
	go func() { errc <- c.rig.close() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(SetupWait):
		c.dump(c.name+" close", "the owner's Close did not return")
		c.t.FailNow()
		return nil
	}
}

// settleLeases polls held until it reports nothing or wait passes.
func settleLeases(wait time.Duration, held func() string) error {
	deadline := time.Now().Add(wait)
	for {
		s := held()
		if s == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New(s)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// diffBytes describes how got differs from want, or returns nil.
func diffBytes(what string, got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	n, first := 0, -1
	for i := range got {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	return fmt.Errorf("%s: %d of %d bytes differ, the first at offset %d", what, n, len(got), first)
}

// fill writes random non-zero bytes.
func fill(r *rand.Rand, b []byte) {
	for i := 0; i < len(b); i += 8 {
		x := r.Uint64() | 0x0101010101010101
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(x >> (8 * j))
		}
	}
}

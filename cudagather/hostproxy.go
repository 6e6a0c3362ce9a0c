//go:build cuda

package cudagather

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// proxy serves a context's proxied host lookups: it polls their request
// words (set by the stream, in stream order, once a lookup's ids are in
// host memory), runs each request's fetch on a goroutine of its own and
// sets the lookup's done word when its rows are staged, which releases
// the stream's wait. No host function wakes it (the driver's dispatch of
// one is what the proxy takes off the lookup's path), so it polls: busily
// (one core) for the spin window after the last request it served, then
// with sleeps of proxyNap for proxyDrowse, then of proxySleep; with no
// lookup registered it waits for one.
type proxy struct {
	// mu guards lks; the loop holds it for each scan, so that a lookup
	// unregistered (and then freed) is never read after unregister.
	mu   sync.Mutex
	lks  []*HostLookup
	spin atomic.Int64  // ns
	wake chan struct{} // a lookup registered
	stop chan struct{}
	done chan struct{}
}

// The proxy's polling past its spin window: a request waits at most about
// a nap (plus the timer's slack) in the first proxyDrowse of idleness,
// about proxySleep after that.
const (
	proxyNap    = 50 * time.Microsecond
	proxyDrowse = time.Second
	proxySleep  = time.Millisecond
)

// proxyProbe is the context's memory-operation probe: run once, by
// Warmup or else by the first NewHostLookup.
type proxyProbe struct {
	once sync.Once
	ok   bool
}

// SetProxySpin sets how long the host lookups' proxy polls busily for
// requests after the last one it served (default DefaultProxySpin):
// while it does, a request is seen within microseconds, at the cost of
// one CPU core; past the window it polls between sleeps of 50 us (1 ms
// once idle for a second), and a request waits up to about that long.
// 0 never polls busily.
func (c *Context) SetProxySpin(d time.Duration) error {
	if d < 0 {
		return &ArgError{Field: "SetProxySpin", Reason: fmt.Sprintf("%v: negative", d)}
	}
	if err := c.enter(); err != nil {
		return err
	}
	c.proxySpin.Store(int64(d))
	if px := c.px.Load(); px != nil {
		px.spin.Store(int64(d))
	}
	return nil
}

// register adds hl to the context's proxy, starting it first.
func (c *Context) register(hl *HostLookup) {
	px := c.px.Load()
	if px == nil {
		c.pxMu.Lock()
		if px = c.px.Load(); px == nil {
			px = &proxy{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
			px.spin.Store(c.proxySpin.Load())
			go px.loop()
			c.px.Store(px)
		}
		c.pxMu.Unlock()
	}
	px.mu.Lock()
	px.lks = append(px.lks, hl)
	px.mu.Unlock()
	select {
	case px.wake <- struct{}{}:
	default:
	}
}

// unregister removes hl from the proxy.
func (c *Context) unregister(hl *HostLookup) {
	px := c.px.Load()
	if px == nil {
		return
	}
	px.mu.Lock()
	for i, l := range px.lks {
		if l == hl {
			px.lks = append(px.lks[:i], px.lks[i+1:]...)
			break
		}
	}
	px.mu.Unlock()
}

// stopProxy ends the proxy's goroutine (Context.Close).
func (c *Context) stopProxy() {
	if px := c.px.Swap(nil); px != nil {
		close(px.stop)
		<-px.done
	}
}

// loop is the proxy's goroutine.
func (px *proxy) loop() {
	defer close(px.done)
	last := time.Now()
	spins := 0
	for {
		served := false
		px.mu.Lock()
		none := len(px.lks) == 0
		for _, hl := range px.lks {
			if atomic.LoadUint32(hl.req) != 0 {
				atomic.StoreUint32(hl.req, 0)
				served = true
				go hl.serve()
			}
		}
		px.mu.Unlock()
		if none {
			select {
			case <-px.wake:
				last = time.Now()
			case <-px.stop:
				return
			}
			continue
		}
		now := time.Now()
		if served {
			// The fetch's goroutine is next on this P: let it run now.
			last = now
			runtime.Gosched()
			continue
		}
		var nap time.Duration
		switch idle := now.Sub(last); {
		case idle < time.Duration(px.spin.Load()):
			// A yield every few hundred scans (tens of microseconds), not
			// every scan: each one goes through the scheduler's global
			// queue, whose lock every P shares (yielding every scan slowed
			// the process's other goroutines, a remote lookup's too).
			if spins++; spins%256 == 0 {
				runtime.Gosched()
			}
			continue
		case idle < proxyDrowse:
			nap = proxyNap
		default:
			nap = proxySleep
		}
		// nanosleep, not time.Sleep: the runtime's timers wake a sleeper
		// about a millisecond late when the process is otherwise idle (the
		// first H200 run: a 50 us nap cost 1.3 ms a request).
		ts := unix.NsecToTimespec(int64(nap))
		_ = unix.Nanosleep(&ts, nil)
		select {
		case <-px.stop:
			return
		default:
		}
	}
}

// serve runs one request: the fetch (its failures recorded, never lost),
// then the done word, which releases the stream.
func (hl *HostLookup) serve() {
	defer atomic.StoreUint32(hl.ack, 1)
	hl.run()
}

package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Options configures New. The zero value is usable.
type Options struct {
	// Seed seeds the random corruption offsets and masks; zero picks one
	// from the clock (Proxy.Seed returns it, for the log).
	Seed uint64
	// Listen is the address to listen on (default "127.0.0.1:0").
	Listen string
	// DialTimeout bounds the dial of the target for each accepted
	// connection (default 5 s).
	DialTimeout time.Duration
	// ChunkBytes is the most bytes one read forwards as a chunk (default
	// 64 KiB).
	ChunkBytes int
}

// Stats counts what a proxy did since New.
type Stats struct {
	// Conns counts connections accepted; Open those open now; DialFailed
	// those whose target could not be dialed.
	Conns, Open, DialFailed int
	// Up and Down are the bytes forwarded client to target and target to
	// client.
	Up, Down int64
	// Resets counts connections a Reset fault closed; Flipped the bytes a
	// Corrupt fault changed.
	Resets, Flipped int
}

// Proxy is an in-process TCP proxy with a fault that can be changed at run
// time. Its methods are safe for concurrent use.
type Proxy struct {
	target string
	opts   Options
	ln     net.Listener
	seed   uint64
	done   chan struct{}
	ctx    context.Context // ends at Close: dials in progress stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	rng    *rand.Rand
	st     *state
	links  map[*link]struct{}
	stats  Stats
	closed bool
}

// state is the installed fault and what it has done since Set.
type state struct {
	f       Fault
	since   time.Time
	changed chan struct{} // closed by the next Set
	count   [2]int64      // bytes forwarded per direction since Set
	flips   [2][]flip     // Corrupt: pending flips per direction, by offset
	spent   bool          // Reset: struck
	cut     chan struct{} // Reset: the stream reached After; closed once struck
}

// dirIndex maps Up to 0 and Down to 1.
func dirIndex(d Dir) int {
	if d == Down {
		return 1
	}
	return 0
}

// affects reports whether the installed fault applies to direction d.
func (s *state) affects(d Dir) bool { return s.f.dir()&d != 0 }

// stalled reports whether direction d is stopped now, and until when
// (zero: until the next Set).
func (s *state) stalled(d Dir, now time.Time) (bool, time.Time) {
	if (s.f.Kind != Stall && s.f.Kind != Partition) || !s.affects(d) {
		return false, time.Time{}
	}
	if s.f.For == 0 {
		return true, time.Time{}
	}
	until := s.since.Add(s.f.For)
	return now.Before(until), until
}

// link is one proxied connection: the accepted client side and the dialed
// target side.
type link struct {
	client, target *net.TCPConn
	once           sync.Once
	pumps          sync.WaitGroup
}

// abort closes both sides with a RST.
func (l *link) abort() {
	l.once.Do(func() {
		_ = l.client.SetLinger(0)
		_ = l.target.SetLinger(0)
		_ = l.client.Close()
		_ = l.target.Close()
	})
}

// New listens (Options.Listen, default 127.0.0.1:0) and forwards every
// accepted connection to target, passing everything until Set installs a
// fault.
func New(target string, opts Options) (*Proxy, error) {
	if target == "" {
		return nil, fmt.Errorf("%w: empty target", ErrOptions)
	}
	if opts.DialTimeout < 0 || opts.ChunkBytes < 0 {
		return nil, fmt.Errorf("%w: negative DialTimeout or ChunkBytes", ErrOptions)
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.ChunkBytes == 0 {
		opts.ChunkBytes = 64 << 10
	}
	seed := opts.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) | 1
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen %s: %w", opts.Listen, err)
	}
	p := &Proxy{target: target, opts: opts, ln: ln, seed: seed, done: make(chan struct{}),
		rng: rand.New(rand.NewPCG(seed, seed^0x6a09e667f3bcc908)), links: make(map[*link]struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.st = &state{since: time.Now(), changed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address connections are forwarded to.
func (p *Proxy) Target() string { return p.target }

// Seed is the seed of the random corruption.
func (p *Proxy) Seed() uint64 { return p.seed }

// Set installs f in place of the current fault: byte counts and offsets
// start again from zero, stalls of the previous fault end, and a pending
// timed reset is cancelled.
func (p *Proxy) Set(f Fault) error {
	if err := f.check(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	close(p.st.changed)
	s := &state{f: f, since: time.Now(), changed: make(chan struct{})}
	if f.Offsets != nil {
		f.Offsets = append([]int64(nil), f.Offsets...)
		s.f = f
	}
	if f.Kind == Corrupt {
		for _, d := range []Dir{Up, Down} {
			if s.affects(d) {
				s.flips[dirIndex(d)] = f.flips(p.rng)
			}
		}
	}
	p.st = s
	switch {
	case f.Kind == Reset && f.After == 0 && f.At == 0:
		p.strikeLocked(s)
	case f.Kind == Reset && f.At > 0:
		p.wg.Add(1)
		go p.timedReset(s)
	}
	return nil
}

// Heal installs Pass: stalls and partitions end, and held data flows.
func (p *Proxy) Heal() {
	_ = p.Set(Fault{}) // Pass is valid; on a closed proxy there is nothing to heal
}

// Fault returns the installed fault.
func (p *Proxy) Fault() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st.f
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Open = len(p.links)
	return s
}

// ResetAll closes every open connection with a RST now, whatever the
// fault.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetLocked()
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	p.cancel()
	close(p.st.changed)
	p.st = &state{since: time.Now(), changed: make(chan struct{})}
	err := p.ln.Close()
	for l := range p.links {
		l.abort()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("faultproxy: close listener: %w", err)
	}
	return nil
}

// timedReset strikes s's reset at its time unless another fault replaced
// it first.
func (p *Proxy) timedReset(s *state) {
	defer p.wg.Done()
	t := time.NewTimer(s.f.At)
	defer t.Stop()
	select {
	case <-t.C:
		p.mu.Lock()
		if p.st == s {
			p.strikeLocked(s)
		}
		p.mu.Unlock()
	case <-s.changed:
	case <-p.done:
	}
}

// strikeLocked resets every connection once for s.
func (p *Proxy) strikeLocked(s *state) {
	if s.spent {
		return
	}
	s.spent = true
	p.resetLocked()
	if s.cut != nil {
		close(s.cut)
	}
}

func (p *Proxy) resetLocked() {
	for l := range p.links {
		l.abort()
		p.stats.Resets++
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed (Accept on a TCP listener fails only then, in practice)
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		p.stats.Conns++
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c.(*net.TCPConn))
	}
}

// serve dials the target for an accepted connection (after a partition
// heals) and starts its two pumps.
func (p *Proxy) serve(c *net.TCPConn) {
	defer p.wg.Done()
	if !p.waitDial() {
		_ = c.Close()
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.opts.DialTimeout)
	var d net.Dialer
	tc, err := d.DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		p.mu.Lock()
		p.stats.DialFailed++
		p.mu.Unlock()
		_ = c.SetLinger(0)
		_ = c.Close()
		return
	}
	l := &link{client: c, target: tc.(*net.TCPConn)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.abort()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	l.pumps.Add(2)
	go p.pump(l, Up, l.client, l.target)
	go p.pump(l, Down, l.target, l.client)
	l.pumps.Wait()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.abort()
}

// waitDial waits while a partition holds new connections; false means the
// proxy closed.
func (p *Proxy) waitDial() bool {
	for {
		p.mu.Lock()
		s := p.st
		held, until := false, time.Time{}
		if s.f.Kind == Partition {
			held, until = s.stalled(Up, time.Now())
		}
		p.mu.Unlock()
		if !held {
			return true
		}
		if !p.wait(s.changed, until) {
			return false
		}
	}
}

// wait blocks until changed is closed, until passes (when not zero) or
// the proxy closes; false means the proxy closed.
func (p *Proxy) wait(changed chan struct{}, until time.Time) bool {
	var tc <-chan time.Time
	if !until.IsZero() {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-changed:
	case <-tc:
	case <-p.done:
		return false
	}
	return true
}

// pump forwards one direction of l.
func (p *Proxy) pump(l *link, d Dir, src, dst *net.TCPConn) {
	defer l.pumps.Done()
	buf := make([]byte, p.opts.ChunkBytes)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			out, strike, ok := p.gate(d, buf[:n])
			if !ok {
				l.abort()
				return
			}
			if len(out) > 0 {
				if _, err := dst.Write(out); err != nil {
					if strike != nil {
						p.strike(strike)
					}
					l.abort()
					return
				}
			}
			if strike != nil {
				p.strike(strike) // aborts every link, this one included
				return
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				_ = dst.CloseWrite() // half-close: the other direction goes on
			} else {
				l.abort() // a reset or a closed socket: pass the abruptness on
			}
			return
		}
	}
}

// gate passes one chunk of direction d through the installed fault: it
// waits out stalls and delays, flips corrupted bytes and cuts the chunk
// where a reset strikes. It returns the bytes to forward, the state whose
// reset the caller must strike once it wrote them (nil: none), and false
// when the chunk must not be forwarded (the proxy closed, or another
// pump's reset is striking).
func (p *Proxy) gate(d Dir, chunk []byte) (out []byte, strike *state, ok bool) {
	delayed := false
	for {
		p.mu.Lock()
		s := p.st
		if held, until := s.stalled(d, time.Now()); held {
			p.mu.Unlock()
			if !p.wait(s.changed, until) {
				return nil, nil, false
			}
			continue
		}
		if s.f.Kind == Delay && s.affects(d) && !delayed {
			p.mu.Unlock()
			delayed = true
			t := time.NewTimer(s.f.Delay)
			select {
			case <-t.C:
			case <-p.done:
				t.Stop()
				return nil, nil, false
			}
			continue // the fault may have changed while the chunk was held
		}
		if s.cut != nil && !s.spent && s.affects(d) {
			// Another pump is writing the last bytes before the reset.
			cut := s.cut
			p.mu.Unlock()
			select {
			case <-cut:
			case <-p.done:
			}
			return nil, nil, false
		}
		out, strike = p.passLocked(s, d, chunk)
		p.mu.Unlock()
		return out, strike, true
	}
}

// passLocked counts and corrupts a chunk that goes through s in
// direction d, and cuts it where s's reset strikes.
func (p *Proxy) passLocked(s *state, d Dir, chunk []byte) ([]byte, *state) {
	i := dirIndex(d)
	start, n := s.count[i], int64(len(chunk))
	var strike *state
	switch {
	case s.f.Kind == Reset && s.affects(d) && !s.spent && s.f.After > 0:
		sent := s.count[i]
		if s.f.dir() == Both {
			sent = s.count[0] + s.count[1]
		}
		if sent+n >= s.f.After {
			n = s.f.After - sent
			s.cut = make(chan struct{})
			strike = s
		}
	case s.f.Kind == Corrupt && len(s.flips[i]) > 0:
		fl := s.flips[i]
		for len(fl) > 0 && fl[0].off < start+n {
			chunk[fl[0].off-start] ^= fl[0].mask // earlier offsets were consumed already
			p.stats.Flipped++
			fl = fl[1:]
		}
		s.flips[i] = fl
	}
	s.count[i] += n
	if d == Up {
		p.stats.Up += n
	} else {
		p.stats.Down += n
	}
	return chunk[:n], strike
}

// strike resets every connection for s, after the pump that cut the
// stream wrote its last bytes.
func (p *Proxy) strike(s *state) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.strikeLocked(s)
}

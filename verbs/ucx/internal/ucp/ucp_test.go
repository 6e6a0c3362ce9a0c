//go:build ucx

package ucp

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pair is two workers of one context, the first connected to the
// second, and a region of the second's memory registered with its key
// unpacked on the first's endpoint.
type pair struct {
	ctx          *Context
	req, own     *Worker
	ep           *Endpoint
	local, owned []byte // mmap'd: UCX may hold their addresses
	mem          *Mem
	key          *RKey
}

func newPair(t *testing.T, tls string, n int) *pair {
	t.Helper()
	t.Setenv("UCX_TLS", tls)
	if tls == "tcp" {
		t.Setenv("UCX_NET_DEVICES", "lo")
	}
	p := &pair{}
	var err error
	if p.ctx, err = NewContext(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.ctx.Close)
	if p.own, err = p.ctx.NewWorker(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.own.Close)
	if p.req, err = p.ctx.NewWorker(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.req.Close)
	addr, err := p.own.Address()
	if err != nil {
		t.Fatal(err)
	}
	if p.ep, err = p.req.Connect(addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r, err := p.ep.Close(true)
		if err != nil {
			t.Error(err)
			return
		}
		p.wait(t, &r)
	})
	mm := func() []byte {
		b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Munmap(b) })
		return b
	}
	p.local, p.owned = mm(), mm()
	if p.mem, err = p.ctx.Map(unsafe.Pointer(&p.owned[0]), n, true, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.mem.Unmap() })
	packed, err := p.mem.PackKey()
	if err != nil {
		t.Fatal(err)
	}
	if p.key, err = p.ep.UnpackKey(packed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.key.Destroy)
	return p
}

// wait progresses both workers (the owner's too: over tcp UCX emulates
// RMA with messages its worker must handle) until r completes.
func (p *pair) wait(t *testing.T, r *Request) {
	t.Helper()
	for {
		done, err := p.req.Check(r)
		if done {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		p.req.Progress()
		p.own.Progress()
	}
}

// TestGetPut: gets and puts of random sizes and offsets within a
// registered region land exactly, over each transport set the issue names.
func TestGetPut(t *testing.T) {
	for _, tls := range []string{"tcp", "posix,cma", "sm"} {
		t.Run(tls, func(t *testing.T) {
			const n = 1 << 20
			p := newPair(t, tls, n)
			// tcp reports a dead peer; shared memory cannot.
			if want := tls == "tcp"; p.ep.PeerFailure != want {
				t.Fatalf("PeerFailure %v over %s", p.ep.PeerFailure, tls)
			}
			r := rand.New(rand.NewPCG(uint64(len(tls)), 9))
			for i := range p.owned {
				p.owned[i] = byte(r.Uint32())
			}
			base := uint64(uintptr(unsafe.Pointer(&p.owned[0])))
			for range 200 {
				off := r.IntN(n)
				l := 1 + r.IntN(min(n-off, 64<<10))
				clear(p.local[:l])
				if r.IntN(2) == 0 {
					req, err := p.ep.Get(unsafe.Pointer(&p.local[0]), l, base+uint64(off), p.key)
					if err != nil {
						t.Fatal(err)
					}
					p.wait(t, &req)
					if !bytes.Equal(p.local[:l], p.owned[off:off+l]) {
						t.Fatalf("get of %d at %d: wrong bytes", l, off)
					}
				} else {
					for i := range l {
						p.local[i] = byte(r.Uint32())
					}
					req, err := p.ep.Put(unsafe.Pointer(&p.local[0]), l, base+uint64(off), p.key)
					if err != nil {
						t.Fatal(err)
					}
					p.wait(t, &req)
					fl, err := p.ep.Flush()
					if err != nil {
						t.Fatal(err)
					}
					p.wait(t, &fl)
					if !bytes.Equal(p.local[:l], p.owned[off:off+l]) {
						t.Fatalf("put of %d at %d: wrong bytes", l, off)
					}
				}
			}
		})
	}
}

// TestBadInput: empty addresses and keys, garbage keys and empty regions
// are refused with *Error.
func TestBadInput(t *testing.T) {
	p := newPair(t, "posix,cma", 4096)
	var e *Error
	if _, err := p.req.Connect(nil); !errors.As(err, &e) {
		t.Fatalf("Connect(nil): %v", err)
	}
	if _, err := p.ep.UnpackKey(nil); !errors.As(err, &e) {
		t.Fatalf("UnpackKey(nil): %v", err)
	}
	if _, err := p.ctx.Map(nil, 10, true, false); !errors.As(err, &e) {
		t.Fatalf("Map(nil): %v", err)
	}
	if _, err := p.ctx.Map(unsafe.Pointer(&p.local[0]), 0, true, false); !errors.As(err, &e) {
		t.Fatalf("Map of 0 bytes: %v", err)
	}
}

// TestBatch: a batch of gets and puts over disjoint ranges, posted in one
// call and polled in one call a pass (the owner's worker progressed
// beside it), all land; Reset refuses while one is in flight.
func TestBatch(t *testing.T) {
	for _, tls := range []string{"tcp", "posix,cma"} {
		t.Run(tls, func(t *testing.T) {
			const n, each = 1 << 20, 1024
			p := newPair(t, tls, n)
			r := rand.New(rand.NewPCG(7, uint64(len(tls))))
			for i := range p.owned {
				p.owned[i] = byte(r.Uint32())
			}
			for i := range p.local {
				p.local[i] = byte(r.Uint32())
			}
			want := bytes.Clone(p.owned)
			wantLocal := bytes.Clone(p.local)
			base := uint64(uintptr(unsafe.Pointer(&p.owned[0])))
			b := NewBatch(n / each)
			defer b.Free()
			for i := range b.Cap() {
				off := i * each
				l := 1 + r.IntN(each)
				op := Op(r.IntN(2))
				if !b.Add(op, p.ep, unsafe.Pointer(&p.local[off]), l, base+uint64(off), p.key) {
					t.Fatalf("Add %d of %d refused", i, b.Cap())
				}
				if op == OpGet {
					copy(wantLocal[off:off+l], want[off:off+l])
				} else {
					copy(want[off:off+l], wantLocal[off:off+l])
				}
			}
			if b.Add(OpGet, p.ep, unsafe.Pointer(&p.local[0]), 1, base, p.key) {
				t.Fatal("Add past the capacity accepted")
			}
			b.Post()
			done := 0
			for i := range b.Len() {
				if d, err := b.Status(i); d {
					if err != nil {
						t.Fatal(err)
					}
					done++
				}
			}
			for done < b.Len() {
				if done < b.Len() && b.Reset() {
					t.Fatal("Reset with requests in flight")
				}
				done += b.Poll(p.req, 16)
				p.own.Progress()
			}
			fl, err := p.ep.Flush()
			if err != nil {
				t.Fatal(err)
			}
			p.wait(t, &fl)
			for i := range b.Len() {
				if _, err := b.Status(i); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
			}
			if !bytes.Equal(p.owned, want) || !bytes.Equal(p.local, wantLocal) {
				t.Fatal("wrong bytes after the batch")
			}
			if !b.Reset() || b.Len() != 0 {
				t.Fatal("Reset of a finished batch refused")
			}
		})
	}
}

// TestWakeup: an armed worker's event descriptor stays quiet while nothing
// happens and becomes readable when a peer's operation needs it (over tcp,
// the owner's worker serves the get); after progress it can be armed again.
func TestWakeup(t *testing.T) {
	p := newPair(t, "tcp", 4096)
	fd, err := p.own.EventFD()
	if err != nil {
		t.Fatal(err)
	}
	arm := func() {
		t.Helper()
		for {
			busy, err := p.own.Arm()
			if err != nil {
				t.Fatal(err)
			}
			if !busy {
				return
			}
			p.own.Progress()
		}
	}
	readable := func(ms int) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		if err != nil && !errors.Is(err, unix.EINTR) {
			t.Fatal(err)
		}
		return n > 0
	}
	// The connection's setup settles (both workers progressed until
	// neither has anything to do for 20 ms); then an armed descriptor
	// stays quiet for 50 ms. Setup messages may still trickle in, so a
	// few tries are allowed.
	quiet := false
	for try := 0; try < 20 && !quiet; try++ {
		for last := time.Now(); time.Since(last) < 20*time.Millisecond; {
			if p.own.Progress()+p.req.Progress() > 0 {
				last = time.Now()
			}
		}
		arm()
		quiet = !readable(50)
	}
	if !quiet {
		t.Fatal("an armed idle worker's descriptor never stayed quiet")
	}
	base := uint64(uintptr(unsafe.Pointer(&p.owned[0])))
	p.owned[7] = 0x5a
	req, err := p.ep.Get(unsafe.Pointer(&p.local[0]), 64, base, p.key)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; req.Pending() && i < 1000; i++ {
		if done, err := p.req.Check(&req); done {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		p.req.Progress()
		if readable(0) {
			break
		}
	}
	if !readable(2000) {
		t.Fatal("the owner's descriptor stayed quiet while a peer's get waited on it")
	}
	p.wait(t, &req)
	if p.local[7] != 0x5a {
		t.Fatal("the get read the wrong bytes")
	}
	arm()
}

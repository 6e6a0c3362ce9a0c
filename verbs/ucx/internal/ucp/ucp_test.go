//go:build ucx

package ucp

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
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
	t.Cleanup(func() { _ = p.ep.Close(true) })
	mm := func() []byte {
		b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Munmap(b) })
		return b
	}
	p.local, p.owned = mm(), mm()
	if p.mem, err = p.ctx.Map(unsafe.Pointer(&p.owned[0]), n); err != nil {
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
	if _, err := p.ctx.Map(nil, 10); !errors.As(err, &e) {
		t.Fatalf("Map(nil): %v", err)
	}
	if _, err := p.ctx.Map(unsafe.Pointer(&p.local[0]), 0); !errors.As(err, &e) {
		t.Fatalf("Map of 0 bytes: %v", err)
	}
}

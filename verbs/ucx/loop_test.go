//go:build ucx

package ucx

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scatterkit/scatterkit/verbs/ucx/internal/ucp"
)

// mapped is n bytes of anonymous memory (UCX may hold its address, which
// Go heap memory must not give it), unmapped when t ends.
func mapped(t *testing.T, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

// testContext is a UCX context closed when t ends.
func testContext(t *testing.T) *ucp.Context {
	ctx, err := ucp.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctx.Close)
	return ctx
}

// testLoop is a loop on ctx closed when t ends (cleanups run last first:
// before ctx's, when ctx was made first).
func testLoop(t *testing.T, ctx *ucp.Context) *loop {
	l, err := newLoop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.close)
	return l
}

// TestLoop: a requester's loop posts a batch of gets and puts toward an
// owner whose loop sleeps on its worker's descriptor between events (no
// submission of its own): every request lands, over tcp (where the owner's
// worker must serve them) and shared memory; both loops close cleanly,
// and a closed loop refuses work.
func TestLoop(t *testing.T) {
	for _, tls := range []string{"tcp", "posix,cma"} {
		t.Run(tls, func(t *testing.T) {
			t.Setenv("UCX_TLS", tls)
			t.Setenv("UCX_NET_DEVICES", "lo")
			const n, each = 1 << 20, 2048
			local, owned := mapped(t, n), mapped(t, n)
			r := rand.New(rand.NewPCG(3, uint64(len(tls))))
			for i := range owned {
				owned[i], local[i] = byte(r.Uint32()), byte(r.Uint32())
			}
			ownCtx, reqCtx := testContext(t), testContext(t)
			own, req := testLoop(t, ownCtx), testLoop(t, reqCtx)
			var mem *ucp.Mem
			var packed, addr []byte
			var ferr error
			if err := own.do(func() {
				if mem, ferr = ownCtx.Map(unsafe.Pointer(&owned[0]), n, true, true); ferr != nil {
					return
				}
				if packed, ferr = mem.PackKey(); ferr != nil {
					return
				}
				addr, ferr = own.w.Address()
			}); err != nil || ferr != nil {
				t.Fatal(err, ferr)
			}
			// On a failure, what UCX still holds is released on its loop
			// before the loops and contexts end.
			t.Cleanup(func() { _ = own.do(func() { _ = mem.Unmap() }) })
			want, wantLocal := bytes.Clone(owned), bytes.Clone(local)
			base := uint64(uintptr(unsafe.Pointer(&owned[0])))
			b := ucp.NewBatch(n / each)
			t.Cleanup(b.Free)
			var ep *ucp.Endpoint
			var key *ucp.RKey
			landed := make(chan error, 1)
			reported := false // (the loop's thread only)
			report := func(err error) {
				reported = true
				landed <- err
			}
			if err := req.do(func() {
				if ep, ferr = req.w.Connect(addr); ferr != nil {
					return
				}
				t.Cleanup(func() {
					_ = req.do(func() {
						if key != nil {
							key.Destroy()
						}
						if cr, err := ep.Close(true); err == nil {
							_ = req.w.Wait(&cr)
						}
					})
				})
				if key, ferr = ep.UnpackKey(packed); ferr != nil {
					return
				}
				for i := range b.Cap() {
					off, l, op := i*each, 1+r.IntN(each), ucp.Op(r.IntN(2))
					b.Add(op, ep, unsafe.Pointer(&local[off]), l, base+uint64(off), key)
					if op == ucp.OpGet {
						copy(wantLocal[off:off+l], want[off:off+l])
					} else {
						copy(want[off:off+l], wantLocal[off:off+l])
					}
				}
				b.Post()
				done, flushing := 0, false
				var fl ucp.Request
				for i := range b.Len() {
					if d, _ := b.Status(i); d {
						done++
					}
				}
				req.watch(func() bool {
					if reported {
						return false
					}
					done += b.Poll(req.w, 16)
					if done < b.Len() {
						return true
					}
					if !flushing {
						flushing = true
						var err error
						if fl, err = ep.Flush(); err != nil {
							report(err)
							return false
						}
					}
					if d, err := req.w.Check(&fl); !d {
						return true
					} else {
						for i := range b.Len() {
							if _, e := b.Status(i); e != nil && err == nil {
								err = e
							}
						}
						report(err)
						return false
					}
				})
			}); err != nil || ferr != nil {
				t.Fatal(err, ferr)
			}
			select {
			case err := <-landed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the batch did not land: the owner's loop did not serve it")
			}
			if !bytes.Equal(owned, want) || !bytes.Equal(local, wantLocal) {
				t.Fatal("wrong bytes after the batch")
			}
			if err := req.do(func() {
				key.Destroy()
				var cr ucp.Request
				if cr, ferr = ep.Close(true); ferr == nil {
					ferr = req.w.Wait(&cr) // the owner's loop serves its side
				}
			}); err != nil || ferr != nil {
				t.Fatal(err, ferr)
			}
			req.close()
			if err := own.do(func() { ferr = mem.Unmap() }); err != nil || ferr != nil {
				t.Fatal(err, ferr)
			}
			own.close()
			if err := own.do(func() {}); err != errLoopClosed {
				t.Fatalf("do on a closed loop: %v", err)
			}
		})
	}
}

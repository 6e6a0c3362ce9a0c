//go:build ucx

package ucx

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/ucx/internal/ucp"
)

// TestRemoteTable: an owner's two regions travel as an attachment
// (encoded, decoded against its listed regions, unpacked on the
// requester's endpoint); requests resolve to the owner's addresses and
// land, and a wrong key, a missing access or a range past the region are
// refused with the statuses the other backends answer.
func TestRemoteTable(t *testing.T) {
	t.Setenv("UCX_TLS", "posix,cma")
	const n = 64 << 10
	ctx := testContext(t)
	own, req := testLoop(t, ctx), testLoop(t, ctx)
	ro, rw, local := mapped(t, n), mapped(t, n), mapped(t, n)
	for i := range ro {
		ro[i], rw[i] = byte(i), byte(i*3)
	}
	listed := []verbs.RegionInfo{
		{Name: "ro", Key: 0x1111, Len: n, Access: verbs.AccessRemoteRead},
		{Name: "rw", Key: 0x2222, Len: n / 2, Access: verbs.AccessRemoteRead | verbs.AccessRemoteWrite},
	}
	var wire []byte
	var ferr error
	var mems []*ucp.Mem
	if err := own.do(func() {
		var a Attachment
		if a.Worker, ferr = own.w.Address(); ferr != nil {
			return
		}
		for i, b := range [][]byte{ro, rw} {
			m, err := ctx.Map(unsafe.Pointer(&b[0]), n, true, true)
			if ferr = err; err != nil {
				return
			}
			mems = append(mems, m)
			p, err := m.PackKey()
			if ferr = err; err != nil {
				return
			}
			a.Regions = append(a.Regions, RegionKey{Key: listed[i].Key, Base: uint64(uintptr(unsafe.Pointer(&b[0]))), Packed: p})
		}
		wire, ferr = AppendAttachment(nil, &a)
	}); err != nil || ferr != nil {
		t.Fatal(err, ferr)
	}
	t.Cleanup(func() {
		_ = own.do(func() {
			for _, m := range mems {
				_ = m.Unmap()
			}
		})
	})
	var got Attachment
	if err := DecodeAttachment(&got, wire, listed); err != nil {
		t.Fatal(err)
	}
	var ep *ucp.Endpoint
	var tab *remoteTable
	if err := req.do(func() {
		if ep, ferr = req.w.Connect(got.Worker); ferr != nil {
			return
		}
		tab, ferr = unpackRemote(ep, &got, listed, verbs.RegionInfo{})
	}); err != nil || ferr != nil {
		t.Fatal(err, ferr)
	}
	t.Cleanup(func() {
		_ = req.do(func() {
			tab.destroy()
			if cr, err := ep.Close(true); err == nil {
				_ = req.w.Wait(&cr)
			}
		})
	})
	refuse := []struct {
		name string
		key  verbs.Key
		off  uint64
		n    uint32
		need verbs.Access
		want verbs.Status
	}{
		{"unknown key", 0x3333, 0, 8, verbs.AccessRemoteRead, verbs.StatusBadKey},
		{"write to a read-only region", 0x1111, 0, 8, verbs.AccessRemoteWrite, verbs.StatusAccess},
		{"past the end", 0x2222, n/2 - 4, 8, verbs.AccessRemoteRead, verbs.StatusBounds},
		{"offset past the end", 0x2222, n, 1, verbs.AccessRemoteRead, verbs.StatusBounds},
		{"wrapping offset", 0x2222, ^uint64(0) - 2, 8, verbs.AccessRemoteRead, verbs.StatusBounds},
	}
	for _, c := range refuse {
		if _, _, st := tab.resolve(new(int), c.key, c.off, c.n, c.need); st != c.want {
			t.Errorf("%s: %v, want %v", c.name, st, c.want)
		}
	}
	// A get from each region and a put into the writable one land.
	for _, c := range []struct {
		key verbs.Key
		src []byte
		op  ucp.Op
	}{{0x1111, ro, ucp.OpGet}, {0x2222, rw, ucp.OpGet}, {0x2222, rw, ucp.OpPut}} {
		need := verbs.AccessRemoteRead
		if c.op == ucp.OpPut {
			need = verbs.AccessRemoteWrite
			for i := range 1000 {
				local[i] = byte(i * 7)
			}
		}
		raddr, key, st := tab.resolve(new(int), c.key, 100, 1000, need)
		if st != verbs.StatusOK {
			t.Fatalf("resolve %#x: %v", c.key, st)
		}
		if err := req.do(func() {
			var r ucp.Request
			if c.op == ucp.OpGet {
				r, ferr = ep.Get(unsafe.Pointer(&local[0]), 1000, raddr, key)
			} else {
				r, ferr = ep.Put(unsafe.Pointer(&local[0]), 1000, raddr, key)
			}
			if ferr == nil {
				ferr = req.w.Wait(&r)
			}
			if ferr == nil && c.op == ucp.OpPut {
				var fl ucp.Request
				if fl, ferr = ep.Flush(); ferr == nil {
					ferr = req.w.Wait(&fl)
				}
			}
		}); err != nil || ferr != nil {
			t.Fatal(err, ferr)
		}
		if !bytes.Equal(local[:1000], c.src[100:1100]) {
			t.Fatalf("%#x op %d: wrong bytes", c.key, c.op)
		}
	}
}

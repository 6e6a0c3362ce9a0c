package main

import (
	"math"
	"unsafe"

	"github.com/scatterkit/scatterkit/engram"
)

// bufferObj is memory from sk_buffer_new, never Go heap memory: on a
// remote store an engram Buffer, a lease of the registered output arena
// (package bufferpool maps it with mmap, outside the Go heap); on a local
// store an anonymous mapping of its own (engram's local NewBuffer is a Go
// slice, which C may not keep).
type bufferObj struct {
	st     *storeObj
	remote *engram.Buffer
	mem    []byte // the local mapping
}

func (b *bufferObj) bytes() []byte {
	if b.remote != nil {
		return b.remote.Bytes()
	}
	return b.mem
}

func (b *bufferObj) release() error {
	if b.remote != nil {
		b.remote.Release()
		return nil
	}
	return unmapMemory(b.mem)
}

// newBuffer is sk_buffer_new.
func newBuffer(h uint64, n int64) (uint64, unsafe.Pointer, error) {
	st, err := getStore(h)
	if err != nil {
		return 0, nil, err
	}
	if n <= 0 || n > math.MaxInt {
		return 0, nil, badArg("n", "%d bytes: want at least 1", n)
	}
	b := &bufferObj{st: st}
	if st.tr != nil {
		if b.remote, err = st.s.NewBuffer(int(n)); err != nil {
			return 0, nil, err
		}
	} else if b.mem, err = mapMemory(int(n)); err != nil {
		return 0, nil, err
	}
	bh, err := adopt(st, buffers, b, buffersOf)
	if err != nil {
		b.release()
		return 0, nil, err
	}
	return bh, unsafe.Pointer(unsafe.SliceData(b.bytes())), nil
}

// freeBuffer is sk_buffer_free.
func freeBuffer(h uint64) error {
	b := buffers.take(h)
	if b == nil {
		return &HandleError{Handle: h, Want: kindBuffer}
	}
	if !disown(b.st, buffersOf, h) {
		return nil // the store's close has it
	}
	return b.release()
}

package engram

import (
	"context"
	"fmt"
	"math"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
	"github.com/scatterkit/scatterkit/engram/internal/remote"
	"github.com/scatterkit/scatterkit/verbs/engine"
)

// DeviceDst is device memory a remote store's lookup lands in: the
// engine's destination interface (engine.DeviceDst), built-in types
// only. cudagather.DeviceBuffer satisfies it (build tag `cuda`):
//
//	buf, _ := ctx.WrapDevice(ptr, n, stream) // a tensor's memory
//	err := store.LookupDevice(c, tables, ids, engram.DeviceTokenMajor(buf, T, K, R), nil)
type DeviceDst = engine.DeviceDst

// DeviceOutput is a uint8 [T,K,R] destination in device memory given by
// byte strides, as Output is in host memory: row (t, k) starts at byte
// Off + t*TStride + k*KStride of Dst. Any non-negative strides under
// which no two rows overlap are checked as for Output; the layouts a
// device lookup moves in pieces are those of DeviceTokenMajor and
// DeviceHeadMajor, padded ones included (tokens or columns further
// apart).
type DeviceOutput struct {
	Dst              DeviceDst
	Off              int
	TStride, KStride int
}

// DeviceTokenMajor is the dense [T,K,R] layout over dst.
func DeviceTokenMajor(dst DeviceDst, t, k, rowBytes int) DeviceOutput {
	return DeviceOutput{Dst: dst, TStride: k * rowBytes, KStride: rowBytes}
}

// DeviceHeadMajor is the dense [K,T,R] layout over dst.
func DeviceHeadMajor(dst DeviceDst, t, k, rowBytes int) DeviceOutput {
	return DeviceOutput{Dst: dst, TStride: rowBytes, KStride: t * rowBytes}
}

// LookupDevice is LookupContext with an output in device memory, for a
// remote store: the rows come from the owner into registered staging of
// the store's buffer memory (a bounce of a few windows, never the whole
// output) and are copied on to out.Dst piece by piece while later pieces
// transfer (DeviceDst.CopyIn, in the device stream's order). It returns
// once every copy has finished: the rows are in device memory, and work
// queued after them on the destination's stream sees them. The request
// is checked in full first, with the same rules and errors as Lookup's
// (the output against out.Dst's length), and a bad one moves nothing; id
// -1 leaves its device row untouched. A failed transfer or device copy
// is a *TransferError (a *ShardError when a shard has no replica left),
// after which the device rows the request names are undefined.
//
// For registered memory behind the bounce (so the copies run
// asynchronously), pin the store's buffer memory once with PinBuffers.
// A local store's tables are read on the device through AttachDevice
// instead: LookupDevice on a local store is an ErrConfig.
func (s *Store) LookupDevice(ctx context.Context, tables []string, ids IDs, out DeviceOutput, opts *LookupOptions) error {
	if out.Dst == nil {
		return fmt.Errorf("%w: device lookup: nil destination", ErrConfig)
	}
	n := out.Dst.DeviceLen()
	if n == 0 || n > math.MaxInt {
		return &lookup.BufferError{Len: 0, Reason: fmt.Sprintf("device destination of %d bytes", n)}
	}
	req := lookup.Request{Tables: tables, IDs32: ids.I32, IDs64: ids.I64, T: ids.T, K: ids.K,
		Off: out.Off, TStride: out.TStride, KStride: out.KStride, DeviceLen: int(n)}
	if opts != nil {
		req.Offsets = opts.Offsets
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if s.remote == nil {
		return fmt.Errorf("%w: LookupDevice reads a remote store's tables; a local store's are read on the device through AttachDevice", ErrConfig)
	}
	sc := s.getScratch(len(tables))
	defer s.scratch.Put(sc)
	q, err := req.Check((*remoteTables)(s), sc.cols)
	if err != nil {
		s.remote.CountRejected()
		return err
	}
	return remote.RunDevice(ctx, s.remote, &q, out.Dst)
}

// PinBuffers hands a remote store's buffer memory (the registered arena
// NewBuffer and device lookups' bounces draw on) to pin, once: a device
// package registers it for asynchronous copies (cudagather's
// Context.PinHost). The release pin returns runs at Close, before the
// memory goes; a second call is an ErrConfig, as is a local store.
func (s *Store) PinBuffers(pin func(mem []byte) (release func() error, err error)) error {
	if pin == nil {
		return fmt.Errorf("%w: PinBuffers: nil function", ErrConfig)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.remote == nil {
		return fmt.Errorf("%w: PinBuffers: a local store has no buffer memory to pin", ErrConfig)
	}
	if s.unpin != nil {
		return fmt.Errorf("%w: PinBuffers: already pinned", ErrConfig)
	}
	release, err := pin(s.remote.Arena())
	if err != nil {
		return fmt.Errorf("engram: pin buffer memory: %w", err)
	}
	if release == nil {
		release = func() error { return nil }
	}
	s.unpin = release
	return nil
}

// releasePin runs the release PinBuffers kept, if any (under s.mu).
func (s *Store) releasePin() error {
	if s.unpin == nil {
		return nil
	}
	err := s.unpin()
	s.unpin = nil
	if err != nil {
		return fmt.Errorf("engram: release pinned buffer memory: %w", err)
	}
	return nil
}

// UnpinBuffers runs the release PinBuffers kept now, once no lookup is in
// flight (before the device package that pinned the memory closes), so
// that a later PinBuffers may pin it again; without a pin it does
// nothing. Device lookups still work unpinned (their copies from pageable
// memory are synchronous).
func (s *Store) UnpinBuffers() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.releasePin()
}

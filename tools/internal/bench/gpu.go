package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/engine"
)

// Ceilings of -dst gpu runs: the host-to-device copy of the payload from
// pinned memory, and the same READ (adaptive) into registered host memory.
const (
	CeilingH2D     = "h2d-copy"
	CeilingHostDst = "host-dst"
)

// deviceMem is the device memory READ destinations live in under -dst gpu:
// an engine.DeviceDst (Engine.DoDevice copies each landed piece in on its
// stream) that the benchmark can also fill and read back. A build with the
// `cuda` tag provides it (gpu_cuda.go); without it -dst gpu is refused.
type deviceMem interface {
	engine.DeviceDst
	// Upload copies b to the device at off and waits.
	Upload(off uint64, b []byte) error
	// Download copies the device bytes at off into b and waits.
	Download(off uint64, b []byte) error
	// Pin registers host memory for asynchronous copies; the release
	// runs before the memory goes.
	Pin(b []byte) (func() error, error)
	// Describe names the device.
	Describe() string
	Close() error
}

// newDeviceMem makes n bytes of device memory on GPU 0 (nil without the
// `cuda` build tag).
var newDeviceMem func(n int) (deviceMem, error)

// errNoGPU is -dst gpu in a build without CUDA.
var errNoGPU = errors.New("scatterbench: -dst gpu needs a build with -tags cuda (scripts/gpu-build.sh makes .gpu/scatterbench)")

// gpuWorkload reports whether -dst gpu can run w: a scatter READ from one
// owner (the Engram, reshard and Structured Object workloads have their
// own destinations; a remote Engram lookup into device memory is measured
// by tools/internal/cudaengram's BenchmarkRemoteLookupDevice).
func gpuWorkload(w *Workload) bool {
	return w.Dir == verbs.OpRead && w.Engram == "" && w.Reshard == "" && w.StructObj == "" && w.Owners <= 1
}

// gpuSetup gives the session device destinations (Callers slots of
// dstStride bytes), a pinned bounce region of engine.DefaultDeviceDepth
// windows a caller, exposed as "bounce", and pins the host destinations
// (the h2d-copy ceiling copies from them).
func (s *session) gpuSetup(expose []verbs.Export) ([]verbs.Export, error) {
	if newDeviceMem == nil {
		return nil, errNoGPU
	}
	c := s.cfg
	var err error
	if s.dev, err = newDeviceMem(int(s.dstStride) * c.Callers); err != nil {
		return nil, fmt.Errorf("scatterbench: device destination: %w", err)
	}
	s.bounceStride = uint64(engine.DefaultDeviceWindow) * engine.DefaultDeviceDepth
	if s.bounce, err = s.tr.Alloc(int(s.bounceStride)*c.Callers, verbs.AccessLocal|verbs.AccessRemoteWrite); err != nil {
		return nil, fmt.Errorf("scatterbench: bounce region: %w", err)
	}
	for _, b := range [][]byte{s.bounce.Bytes(), s.dst.Bytes()} {
		unpin, err := s.dev.Pin(b)
		if err != nil {
			return nil, fmt.Errorf("scatterbench: pinning host memory: %w", err)
		}
		s.unpins = append(s.unpins, unpin)
	}
	return append(expose, verbs.Export{Name: "bounce", Region: s.bounce}), nil
}

// gpuClose releases the device destination and the pins.
func (s *session) gpuClose() error {
	var err error
	for i := len(s.unpins) - 1; i >= 0; i-- {
		err = errors.Join(err, s.unpins[i]())
	}
	s.unpins = nil
	if s.dev != nil {
		err = errors.Join(err, s.dev.Close())
		s.dev = nil
	}
	return err
}

// doDevice runs caller i's READ op into its device destination.
func (s *session) doDevice(ctx context.Context, i int, op engine.ScatterOp) (engine.Result, error) {
	op.Local, op.LocalOff = s.bounce, uint64(i)*s.bounceStride
	res, err := s.eng.DoDevice(ctx, &engine.DeviceOp{Op: op, Device: s.dev, DeviceOff: uint64(i) * s.dstStride})
	return res.Result, err
}

// h2dOnce times one host-to-device copy of n bytes from the pinned host
// destination.
func (s *session) h2dOnce(n uint64) (time.Duration, error) {
	t := time.Now()
	if err := s.dev.Upload(0, s.dst.Bytes()[:n]); err != nil {
		return 0, fmt.Errorf("scatterbench: h2d-copy: %w", err)
	}
	return time.Since(t), nil
}

// hostDstOnce times the READ of p (adaptive) into caller 0's host
// destination: the same operation without the device.
func (s *session) hostDstOnce(ctx context.Context, p *planfmt.Plan) (time.Duration, error) {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	t := time.Now()
	if _, err := s.eng.Do(octx, &engine.ScatterOp{Conn: s.conn, Dir: verbs.OpRead, Remote: s.table, Local: s.dst, Plan: p}); err != nil {
		return 0, fmt.Errorf("scatterbench: host-dst: %w", err)
	}
	return time.Since(t), nil
}

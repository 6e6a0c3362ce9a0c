// Package linkprobe measures verbs.LinkParams on a fresh connection: the round
// trip of a control ping (median of a few), the bulk bandwidth of READs
// from the owner's probe region, and the rate of a batch of small READs,
// all through the connection's ordinary Post/Wait path. The whole probe
// moves about 3 x Bulk + 2 x Small x SmallLen bytes and takes a few
// milliseconds on a local link.
package linkprobe

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
)

// Sizes of the probe. The owner's probe region holds Bulk bytes.
const (
	Bulk     = 4 << 20 // bytes read per bandwidth pass
	Chunks   = 8       // READs per bandwidth pass
	Small    = 1024    // READs per post-rate pass
	SmallLen = 64      // bytes per small READ
	Pings    = 5       // round trips for RTT
	passes   = 2       // timed passes (the best counts) after one warm-up
)

// Queue is the part of verbs.Queue that Measure uses.
type Queue interface {
	Post(wrs []verbs.WorkRequest) (int, error)
	Wait(ctx context.Context, out []verbs.Completion, min int) (int, error)
}

// Target is what Measure needs from a connection.
type Target struct {
	Queue     Queue                       // the connection's queue (must be empty)
	Ping      func(context.Context) error // one control round trip
	LocalKey  verbs.Key                   // a local scratch region of at least Bulk bytes
	RemoteKey verbs.Key                   // the owner's probe region
	RemoteLen uint64                      // its length (at least Bulk)
}

// Measure fills the zero fields of want (Bandwidth, PostRate, RTT) by
// measuring them on tg and returns the result. QueueDepth is passed
// through.
func Measure(ctx context.Context, tg Target, want verbs.LinkParams) (verbs.LinkParams, error) {
	if want.Complete() {
		return want, nil
	}
	if tg.RemoteLen < Bulk {
		return want, fmt.Errorf("probe: owner probe region of %d bytes: %w", tg.RemoteLen, verbs.ErrProtocol)
	}
	var got verbs.LinkParams
	if want.RTT <= 0 {
		rtts := make([]time.Duration, 0, Pings)
		for range Pings {
			t0 := time.Now()
			if err := tg.Ping(ctx); err != nil {
				return want, fmt.Errorf("probe: ping: %w", err)
			}
			rtts = append(rtts, time.Since(t0))
		}
		slices.Sort(rtts)
		got.RTT = rtts[len(rtts)/2]
	}
	wrs := make([]verbs.WorkRequest, max(Chunks, Small))
	cs := make([]verbs.Completion, len(wrs))
	if want.Bandwidth <= 0 {
		w := wrs[:Chunks]
		for i := range w {
			off := uint64(i) * (Bulk / Chunks)
			w[i] = verbs.WorkRequest{ID: uint64(i), Op: verbs.OpRead, Len: Bulk / Chunks,
				LocalKey: tg.LocalKey, LocalOff: off, RemoteKey: tg.RemoteKey, RemoteOff: off}
		}
		d, err := best(ctx, tg.Queue, w, cs)
		if err != nil {
			return want, err
		}
		got.Bandwidth = Bulk / d.Seconds()
	}
	if want.PostRate <= 0 {
		w := wrs[:Small]
		stride := uint64(Bulk / Small)
		for i := range w {
			off := uint64(i) * stride
			w[i] = verbs.WorkRequest{ID: uint64(i), Op: verbs.OpRead, Len: SmallLen,
				LocalKey: tg.LocalKey, LocalOff: off, RemoteKey: tg.RemoteKey, RemoteOff: off}
		}
		d, err := best(ctx, tg.Queue, w, cs)
		if err != nil {
			return want, err
		}
		got.PostRate = Small / d.Seconds()
	}
	return want.Merge(got), nil
}

// best runs wrs once to warm up, then passes times, and returns the
// shortest pass.
func best(ctx context.Context, q Queue, wrs []verbs.WorkRequest, cs []verbs.Completion) (time.Duration, error) {
	var fastest time.Duration
	for i := range passes + 1 {
		t0 := time.Now()
		if err := run(ctx, q, wrs, cs); err != nil {
			return 0, err
		}
		d := max(time.Since(t0), time.Nanosecond)
		if i > 0 && (fastest == 0 || d < fastest) {
			fastest = d
		}
	}
	return fastest, nil
}

// run posts every request (as the queue depth allows) and waits for all
// of them.
func run(ctx context.Context, q Queue, wrs []verbs.WorkRequest, cs []verbs.Completion) error {
	posted, done := 0, 0
	for done < len(wrs) {
		if posted < len(wrs) {
			n, err := q.Post(wrs[posted:])
			if err != nil && n == 0 && posted == done {
				return fmt.Errorf("probe: post: %w", err)
			}
			posted += n
		}
		n, err := q.Wait(ctx, cs, 1)
		if err != nil {
			return fmt.Errorf("probe: wait: %w", err)
		}
		for _, c := range cs[:n] {
			if c.Err != nil {
				return fmt.Errorf("probe: %w", c.Err)
			}
		}
		done += n
	}
	return nil
}

// Pattern fills an owner's probe region with its fixed, non-zero
// pattern.
func Pattern(mem []byte) {
	for i := range mem {
		mem[i] = byte(i*131 + 7)
	}
}

// Registrar registers the local scratch region a measurement reads into;
// every verbs.Transport is one.
type Registrar interface {
	Register(buf []byte, access verbs.Access) (*verbs.Region, error)
	Deregister(r *verbs.Region) error
}

// Timeout bounds the measurement of a new connection.
const Timeout = 5 * time.Second

// Connect returns the link parameters of a new connection: opts.Link
// with QueueDepth set to opts.QueueDepth and its zero fields measured on
// tg (within Timeout) into a scratch region of Bulk bytes registered on
// reg for the time of the measurement (tg.LocalKey is set to it). Nothing
// is registered when opts.Link is complete.
func Connect(ctx context.Context, opts verbs.ConnectOptions, reg Registrar, tg Target) (verbs.LinkParams, error) {
	want := opts.Link
	want.QueueDepth = opts.QueueDepth
	if want.Complete() {
		return want, nil
	}
	scratch, err := reg.Register(make([]byte, Bulk), verbs.AccessLocal)
	if err != nil {
		return want, err
	}
	defer func() { _ = reg.Deregister(scratch) }()
	pctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	tg.LocalKey = scratch.Key()
	return Measure(pctx, tg, want)
}

package costmodel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Calibration defaults and limits.
const (
	// DefaultCalibrationBudget is the wall time Calibrate spends when
	// CalibrateOptions.Budget is zero.
	DefaultCalibrationBudget = 50 * time.Millisecond
	// DefaultProbeRow is the small-copy size probed when
	// CalibrateOptions.RowBytes is zero.
	DefaultProbeRow = 256

	minProbeBuffer = 1 << 20
	maxProbeBuffer = 4 << 30
	probePiece     = 1 << 20   // memmove unit between clock reads
	probeStaging   = 256 << 10 // per-worker destination of the row probe
	probeBatch     = 256       // rows between clock reads
	fillSeed       = 64 << 10  // bytes written from the generator
	fillStep       = 2 << 20   // largest fill copy between clock reads
)

// CalibrateOptions tune Calibrate. The zero value is the default probe.
type CalibrateOptions struct {
	// Budget is the total wall time, 1ms to 10s; zero means
	// DefaultCalibrationBudget. Up to half goes to filling the probe
	// buffer (first touch of fresh pages is the slowest part); the
	// memmove and small-copy probes share the rest but the last tenth,
	// each getting at least a tenth. A phase ends at its deadline, so on
	// a slow machine the buffer shrinks instead of the call overrunning
	// (by more than one fill step and the probes' minimum windows); a
	// context deadline earlier than the budget wins.
	Budget time.Duration
	// BufferBytes is the probe buffer, 1 MiB to 4 GiB. Zero means twice
	// the last-level cache, clamped to [16 MiB, 1 GiB] (64 MiB when the
	// cache size is unknown), so small copies miss the cache as a gather
	// from a large table does. Mapping it costs nothing; the fill stops at
	// its deadline, so the probed part may be smaller (see
	// Calibration.BufferBytes and CacheResident).
	BufferBytes int64
	// RowBytes is the small-copy size, 1 to 65536; zero means
	// DefaultProbeRow.
	RowBytes int
	// Workers is the number of goroutines that probe at once, 1 to 256;
	// zero means 1. The results are per worker (aggregate / Workers), so
	// probing with the engine's MaxP gives figures that already include
	// the contention P workers cause.
	Workers int
	// Seed drives the random row offsets; zero means a fixed seed.
	Seed uint64
}

// Calibration is what Calibrate measured.
type Calibration struct {
	// BMem is the streaming copy bandwidth of one worker, bytes/s: a
	// memmove piece over the median piece time, with Workers copying at
	// once.
	BMem float64
	// RCopy is the small-copy rate of one worker, spans/s: the per-row
	// cost beyond RowBytes/BMem. When that remainder is below a sixteenth
	// of the row time (too small to measure), a sixteenth is used, so the
	// model's time for a RowBytes row, RowBytes/BMem + 1/RCopy, is never
	// below RowTime.
	RCopy float64
	// RowTime is the time of one random small copy per worker, from the
	// median batch time.
	RowTime time.Duration
	// RowBytes and Workers are the probe's settings.
	RowBytes, Workers int
	// BufferBytes is the part of the buffer that was filled and probed.
	BufferBytes int64
	// LLCBytes is the last-level cache size found (0 if unknown).
	LLCBytes int64
	// CacheResident reports a buffer no larger than the last-level cache:
	// random rows may then hit the cache, and RCopy is optimistic.
	CacheResident bool
	// HugePageAdvice reports that the buffer was advised to use huge
	// pages.
	HugePageAdvice bool
	// Copied and Rows are the work the memmove and row probes did.
	Copied, Rows int64
	// Fill, Memmove and Random are the phases' wall times; Elapsed is the
	// whole call.
	Fill, Memmove, Random, Elapsed time.Duration
	// Fallback is empty for a measured calibration. For one that could
	// not finish (see CalibrateOrFallback) it says why, and BMem and RCopy
	// are the conservative ConservativeBMem and ConservativeRCopy.
	Fallback string
}

// Conservative figures of a calibration that could not finish, per
// worker. They sit well below what a memmove and a random small copy
// reach on any machine measured (9 GB/s and about 3.5 M rows/s per core
// on a small noisy VM), so the cost model prices packing high and leans
// toward direct until moving measurements of real commands refine them.
const (
	ConservativeBMem  = 1e9 // bytes/s
	ConservativeRCopy = 1e6 // spans/s
)

// CalibrateOrFallback runs Calibrate and, when the calibration cannot
// finish (its context ends, the probe buffer cannot be mapped, nothing
// usable was measured), returns the conservative figures instead, with
// Fallback set to the reason: a busy machine must not stop an owner or an
// engine from starting. Invalid options are still returned as errors.
func CalibrateOrFallback(ctx context.Context, opts CalibrateOptions) (Calibration, error) {
	c, err := Calibrate(ctx, opts)
	if err == nil {
		return c, nil
	}
	if errors.Is(err, ErrInvalidOptions) {
		return Calibration{}, err
	}
	_ = opts.fill() // valid: Calibrate got past it
	return Calibration{BMem: ConservativeBMem, RCopy: ConservativeRCopy, RowBytes: opts.RowBytes,
		Workers: opts.Workers, Fallback: err.Error()}, nil
}

// Apply returns p with BMem and RCopy set from the calibration.
func (c Calibration) Apply(p Params) Params {
	p.BMem, p.RCopy = c.BMem, c.RCopy
	return p
}

// Calibrate measures the packing bandwidth (B_mem: a large memmove) and
// the small-copy rate (R_copy: random RowBytes copies from a buffer
// larger than the last-level cache into a small staging area) within
// opts.Budget of wall time. It is a startup probe: it maps its buffer,
// fills as much of it as the budget allows with non-zero data, probes, and
// unmaps it before returning. The figures are measured each time, never
// looked up; on a busy machine they come out lower, which errs toward
// direct.
func Calibrate(ctx context.Context, opts CalibrateOptions) (Calibration, error) {
	start := time.Now()
	if err := opts.fill(); err != nil {
		return Calibration{}, err
	}
	if err := ctx.Err(); err != nil {
		return Calibration{}, fmt.Errorf("costmodel: calibration not started: %w", err)
	}
	end := start.Add(opts.Budget)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	span := end.Sub(start)
	fillEnd := start.Add(span / 2)
	probesEnd := end.Add(-span / 10) // the last tenth is slack
	minWindow := span / 10

	cal := Calibration{RowBytes: opts.RowBytes, Workers: opts.Workers, LLCBytes: lastLevelCache()}
	size := opts.BufferBytes
	if size == 0 {
		size = defaultProbeBuffer(cal.LLCBytes)
	}
	buf, huge, release := probeBuffer(int(size))
	defer release()
	cal.HugePageAdvice = huge

	// Phase 1: touch the buffer with non-zero data, as far as the
	// deadline allows. Untouched pages would all read the shared zero
	// page and hide the memory system.
	t := time.Now()
	filled, err := fillProbe(ctx, buf, opts.Seed, fillEnd, 2*opts.Workers*max(probePiece, opts.RowBytes))
	if err != nil {
		return Calibration{}, err
	}
	buf = buf[:filled]
	cal.BufferBytes = int64(filled)
	cal.CacheResident = cal.LLCBytes > 0 && cal.BufferBytes <= cal.LLCBytes
	cal.Fill = time.Since(t)

	// Phase 2: streaming copy, each worker within its own region. The
	// probes split what the fill left, but each gets at least a tenth of
	// the budget: a fill slowed by page faults must not starve them.
	t = time.Now()
	piece, pieceTime, copied, err := probeMemmove(ctx, buf, opts.Workers, t.Add(max(probesEnd.Sub(t)/2, minWindow)))
	if err != nil {
		return Calibration{}, err
	}
	cal.Memmove = time.Since(t)
	cal.Copied = copied
	cal.BMem = float64(piece) / pieceTime.Seconds()

	// Phase 3: random rows into per-worker staging.
	t = time.Now()
	batchTime, rows, err := probeRows(ctx, buf, opts, t.Add(max(probesEnd.Sub(t), minWindow)))
	if err != nil {
		return Calibration{}, err
	}
	cal.Random = time.Since(t)
	cal.Rows = rows
	rowSec := batchTime.Seconds() / probeBatch
	cal.RowTime = duration(rowSec)
	spanSec := max(rowSec-float64(opts.RowBytes)/cal.BMem, rowSec/16)
	cal.RCopy = 1 / spanSec
	cal.Elapsed = time.Since(start)
	if !positiveFinite(cal.BMem) || !positiveFinite(cal.RCopy) {
		return Calibration{}, fmt.Errorf("costmodel: calibration measured nothing usable (B_mem %g B/s, R_copy %g/s): %w",
			cal.BMem, cal.RCopy, ErrInvalidSample)
	}
	return cal, nil
}

// fill checks the options and fills in defaults.
func (o *CalibrateOptions) fill() error {
	if o.Budget == 0 {
		o.Budget = DefaultCalibrationBudget
	}
	if o.RowBytes == 0 {
		o.RowBytes = DefaultProbeRow
	}
	if o.Workers == 0 {
		o.Workers = 1
	}
	if o.Seed == 0 {
		o.Seed = 0x9e3779b97f4a7c15
	}
	switch {
	case o.Budget < time.Millisecond || o.Budget > 10*time.Second:
		return optErr("Budget", o.Budget.String(), "must be in [1ms, 10s]")
	case o.BufferBytes != 0 && (o.BufferBytes < minProbeBuffer || o.BufferBytes > min(maxProbeBuffer, math.MaxInt/2)):
		return optErr("BufferBytes", strconv.FormatInt(o.BufferBytes, 10), "must be 0 or in [1 MiB, 4 GiB]")
	case o.RowBytes < 1 || o.RowBytes > 1<<16:
		return optErr("RowBytes", strconv.Itoa(o.RowBytes), "must be in [1, 65536]")
	case o.Workers < 1 || o.Workers > 256:
		return optErr("Workers", strconv.Itoa(o.Workers), "must be in [1, 256]")
	}
	return nil
}

func optErr(field, value, reason string) error {
	return &FieldError{Field: "CalibrateOptions." + field, Value: value, Reason: reason, Err: ErrInvalidOptions}
}

func defaultProbeBuffer(llc int64) int64 {
	if llc <= 0 {
		return 64 << 20
	}
	return min(max(2*llc, 16<<20), 1<<30)
}

// xorshift64 steps a non-zero state.
func xorshift64(x uint64) uint64 {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x
}

// fillProbe writes generator output into the first fillSeed bytes and
// copies it over the rest of buf in fillStep steps, with up to GOMAXPROCS
// goroutines (first-touch page faults are the cost, and they proceed in
// parallel). Steps are taken in order and each is finished, so when the
// deadline stops the fill after at least minFill bytes the filled part is
// a prefix. It returns its length.
func fillProbe(ctx context.Context, buf []byte, seed uint64, deadline time.Time, minFill int) (int, error) {
	head := min(fillSeed, len(buf)) &^ 7
	x := seed
	for i := 0; i < head; i += 8 {
		x = xorshift64(x)
		binary.LittleEndian.PutUint64(buf[i:], x|0x0101010101010101)
	}
	rest := buf[head:]
	steps := (len(rest) + fillStep - 1) / fillStep
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), 8, max(steps, 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= steps {
					return
				}
				part := rest[i*fillStep : min((i+1)*fillStep, len(rest))]
				for off := 0; off < len(part); off += copy(part[off:], buf[:head]) {
				}
				if head+(i+1)*fillStep >= minFill && (time.Now().After(deadline) || ctx.Err() != nil) {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("costmodel: calibration interrupted: %w", err)
	}
	return min(head+int(min(next.Load(), int64(steps)))*fillStep, len(buf)), nil
}

// unitTimes records how long each unit of probe work (a memmove piece, a
// batch of rows) took, keeping the latest maxUnitSamples.
type unitTimes struct {
	units   int64
	samples []time.Duration
}

const maxUnitSamples = 1024

func newUnitTimes() unitTimes {
	return unitTimes{samples: make([]time.Duration, maxUnitSamples)}
}

func (u *unitTimes) add(d time.Duration) {
	u.samples[u.units%maxUnitSamples] = d
	u.units++
}

// medianUnit is the median unit time over every worker's samples, and the
// units done in all. The median is the speed of a worker that runs: a
// unit during which the goroutine was preempted (the machine is shared)
// is an outlier, not a slower memory system.
func medianUnit(all []unitTimes) (time.Duration, int64) {
	var units int64
	var samples []time.Duration
	for i := range all {
		units += all[i].units
		samples = append(samples, all[i].samples[:min(all[i].units, maxUnitSamples)]...)
	}
	if len(samples) == 0 {
		return 0, units
	}
	slices.Sort(samples)
	return samples[len(samples)/2], units
}

// probeMemmove copies pieces from the first to the second half of each
// worker's region until the deadline (at least one piece each). It returns
// the piece size, the median time of one piece, and the bytes copied.
func probeMemmove(ctx context.Context, buf []byte, workers int, deadline time.Time) (int, time.Duration, int64, error) {
	region := len(buf) / workers
	half := region / 2
	piece := min(probePiece, half)
	var wg sync.WaitGroup
	times := make([]unitTimes, workers)
	for w := range workers {
		times[w] = newUnitTimes()
		wg.Go(func() {
			src := buf[w*region : w*region+half]
			dst := buf[w*region+half : w*region+2*half]
			u := &times[w]
			t := time.Now()
			for off := 0; ; {
				copy(dst[off:off+piece], src[off:off+piece])
				now := time.Now()
				u.add(now.Sub(t))
				t = now
				if off += piece; off+piece > half {
					off = 0
				}
				if now.After(deadline) || ctx.Err() != nil {
					break
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, 0, 0, fmt.Errorf("costmodel: calibration interrupted: %w", err)
	}
	med, pieces := medianUnit(times)
	return piece, med, pieces * int64(piece), nil
}

// probeRows copies random rows of buf into per-worker staging, probeBatch
// rows at a time, until the deadline (at least one batch each). It
// returns the median time of a batch and the rows copied.
func probeRows(ctx context.Context, buf []byte, o CalibrateOptions, deadline time.Time) (time.Duration, int64, error) {
	row := o.RowBytes
	spanOf := uint64(len(buf) - row + 1)
	var wg sync.WaitGroup
	times := make([]unitTimes, o.Workers)
	staging := make([]byte, o.Workers*max(probeStaging, row))
	stride := len(staging) / o.Workers
	for w := range o.Workers {
		times[w] = newUnitTimes()
		wg.Go(func() {
			dst := staging[w*stride : (w+1)*stride]
			x := xorshift64(o.Seed + uint64(w)*0x9e3779b97f4a7c15 | 1)
			u := &times[w]
			d := 0
			t := time.Now()
			for {
				for range probeBatch {
					x = xorshift64(x)
					s, _ := bits.Mul64(x, spanOf)
					if d+row > len(dst) {
						d = 0
					}
					copy(dst[d:d+row], buf[s:s+uint64(row)])
					d += row
				}
				now := time.Now()
				u.add(now.Sub(t))
				t = now
				if now.After(deadline) || ctx.Err() != nil {
					break
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, 0, fmt.Errorf("costmodel: calibration interrupted: %w", err)
	}
	med, batches := medianUnit(times)
	return med, batches * probeBatch, nil
}

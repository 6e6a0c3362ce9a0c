package costmodel

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMovingByHand(t *testing.T) {
	base := handParams() // BMem 2e9, RCopy 1e7
	m, err := NewMoving(base, 0.5)
	require.NoError(t, err)

	// Nothing observed: Refresh changes nothing.
	require.Equal(t, base, m.Refresh(base))
	s := m.Snapshot()
	require.Equal(t, 1.0, s.PackRatio)
	require.Equal(t, base.BMem, s.BMem)

	// 1 MB in 1000 spans: predicted 1e6/2e9 = 500us + 1000/1e7 = 100us = 600us.
	// Observed 1.2ms: ratio 2 (first sample seeds the average).
	require.NoError(t, m.ObservePack(1_000_000, 1000, 1200*time.Microsecond))
	// Observed 600us: ratio 1; average 2 + 0.5*(1-2) = 1.5.
	require.NoError(t, m.ObservePack(1_000_000, 1000, 600*time.Microsecond))
	s = m.Snapshot()
	require.InDelta(t, 1.5, s.PackRatio, 1e-12)
	require.InDelta(t, 2e9/1.5, s.BMem, 1e-3)
	require.InDelta(t, 1e7/1.5, s.RCopy, 1e-6)
	require.Equal(t, uint64(2), s.PackSamples)

	// Control: 100us then 50us -> 75us. RTT: 20us. Chunk: 4us then 8us -> 6us.
	require.NoError(t, m.ObserveControl(100*time.Microsecond))
	require.NoError(t, m.ObserveControl(50*time.Microsecond))
	require.NoError(t, m.ObserveRTT(20*time.Microsecond))
	require.NoError(t, m.ObserveChunk(4*time.Microsecond))
	require.NoError(t, m.ObserveChunk(8*time.Microsecond))
	// Plan: 100ms over 100000 spans = 1us/span, then 2us/span -> 1.5us. Decode:
	// 500us over 100000 spans = 5ns/span.
	require.NoError(t, m.ObservePlan(100_000, 100*time.Millisecond))
	require.NoError(t, m.ObservePlan(100_000, 200*time.Millisecond))
	require.NoError(t, m.ObserveDecode(100_000, 500*time.Microsecond))

	p := m.Refresh(base)
	require.Equal(t, 1500*time.Nanosecond, p.TPlanPerSpan)
	require.Equal(t, 5*time.Nanosecond, p.TDecodePerSpan)
	s = m.Snapshot()
	require.Equal(t, uint64(2), s.PlanSamples)
	require.Equal(t, uint64(1), s.DecodeSamples)
	require.Equal(t, 5*time.Nanosecond, s.DecodePerSpan)
	require.InDelta(t, 2e9/1.5, p.BMem, 1e-3)
	require.InDelta(t, 1e7/1.5, p.RCopy, 1e-6)
	require.Equal(t, 75*time.Microsecond, p.TControl)
	require.Equal(t, 20*time.Microsecond, p.L)
	require.Equal(t, 6*time.Microsecond, p.TChunkFixed)
	require.NoError(t, p.Validate())
	// Fields Moving does not measure are kept.
	require.Equal(t, base.BNet, p.BNet)
	require.Equal(t, base.TPlan, p.TPlan)
}

func TestMovingRejectsBadSamples(t *testing.T) {
	m, err := NewMoving(handParams(), 0)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"zero bytes", m.ObservePack(0, 1, time.Millisecond)},
		{"zero spans", m.ObservePack(10, 0, time.Millisecond)},
		{"more spans than bytes", m.ObservePack(10, 11, time.Millisecond)},
		{"zero pack time", m.ObservePack(10, 1, 0)},
		{"negative control", m.ObserveControl(-time.Microsecond)},
		{"zero chunk", m.ObserveChunk(0)},
		{"zero rtt", m.ObserveRTT(0)},
		{"zero plan spans", m.ObservePlan(0, time.Millisecond)},
		{"zero plan time", m.ObservePlan(10, 0)},
		{"negative decode spans", m.ObserveDecode(-1, time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.err, ErrInvalidSample)
			var fe *FieldError
			require.True(t, errors.As(tc.err, &fe))
		})
	}
	require.Equal(t, MovingSnapshot{BMem: 2e9, RCopy: 1e7, PackRatio: 1}, m.Snapshot(), "bad samples change nothing")
}

func TestNewMovingInvalid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     func(*Params)
		alpha float64
		err   error
	}{
		{"alpha above 1", func(*Params) {}, 1.5, ErrInvalidOptions},
		{"negative alpha", func(*Params) {}, -0.1, ErrInvalidOptions},
		{"NaN alpha", func(*Params) {}, math.NaN(), ErrInvalidOptions},
		{"no pack bandwidth", func(p *Params) { p.BMem = 0 }, 0.2, ErrInvalidParams},
		{"no copy rate", func(p *Params) { p.RCopy = math.Inf(1) }, 0.2, ErrInvalidParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := handParams()
			tc.p(&p)
			m, err := NewMoving(p, tc.alpha)
			require.ErrorIs(t, err, tc.err)
			require.Nil(t, m)
		})
	}
}

// TestMovingConcurrent feeds one Moving from several goroutines; run with
// -race. Every sample has ratio r in [1, 2], so the average must stay in
// that interval whatever the interleaving.
func TestMovingConcurrent(t *testing.T) {
	m, err := NewMoving(handParams(), 0.1)
	require.NoError(t, err)
	const workers, each = 4, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				ratio := 1 + float64((w*each+i)%100)/99
				d := time.Duration(ratio * 600_000) // 600us predicted
				if err := m.ObservePack(1_000_000, 1000, d); err != nil {
					t.Error(err)
					return
				}
				if err := m.ObserveRTT(time.Duration(10_000 + i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	s := m.Snapshot()
	require.Equal(t, uint64(workers*each), s.PackSamples)
	require.Equal(t, uint64(workers*each), s.RTTSamples)
	require.GreaterOrEqual(t, s.PackRatio, 1.0-1e-9)
	require.LessOrEqual(t, s.PackRatio, 2.0+1e-9)
	require.GreaterOrEqual(t, s.RTT, 10*time.Microsecond)
	require.Less(t, s.RTT, 10*time.Microsecond+each)
}

func TestMovingZeroAlloc(t *testing.T) {
	m, err := NewMoving(handParams(), 0.2)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		_ = m.ObservePack(65536, 256, 30*time.Microsecond)
		_ = m.ObserveChunk(3 * time.Microsecond)
	})
	require.Zero(t, allocs)
}

// TestMovingPackOutlier: one pack sample 100 times slower than the
// calibration moves the ratio as a sample of MaxPackStep would, so the
// model stays within reach of the samples that would correct it.
func TestMovingPackOutlier(t *testing.T) {
	m, err := NewMoving(Params{BMem: 10e9, RCopy: 10e6}, 0.2)
	require.NoError(t, err)
	// 264 KiB in 1000 spans predicts 27 us + 100 us; observe 100x that.
	require.NoError(t, m.ObservePack(264<<10, 1000, 100*(27*time.Microsecond+100*time.Microsecond)))
	s := m.Snapshot()
	require.InDelta(t, MaxPackStep, s.PackRatio, 1e-9, "the first sample is clamped to MaxPackStep x the baseline")
	for range 3 {
		require.NoError(t, m.ObservePack(264<<10, 1000, 100*(27*time.Microsecond+100*time.Microsecond)))
	}
	s = m.Snapshot()
	// Each later sample counts as at most twice the current average.
	require.Less(t, s.PackRatio, 2*2*2*2.0)
	require.Greater(t, s.PackRatio, 2.0)
	// Fast samples bring it back down the same way.
	for range 40 {
		require.NoError(t, m.ObservePack(264<<10, 1000, 27*time.Microsecond+100*time.Microsecond))
	}
	require.InDelta(t, 1.0, m.Snapshot().PackRatio, 0.05)
}

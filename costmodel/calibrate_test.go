package costmodel

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func requireUsable(t *testing.T, c Calibration) {
	t.Helper()
	require.True(t, positiveFinite(c.BMem), "BMem %g", c.BMem)
	require.True(t, positiveFinite(c.RCopy), "RCopy %g", c.RCopy)
	require.Positive(t, c.RowTime)
	require.Positive(t, c.Copied)
	require.Positive(t, c.Rows)
	require.GreaterOrEqual(t, c.BufferBytes, int64(1<<20))
	// The per-span cost is at least a sixteenth of the row time (RowTime is
	// rounded to the nanosecond) and at most all of it.
	require.GreaterOrEqual(t, 1/c.RCopy, (c.RowTime-time.Nanosecond).Seconds()/16)
	require.LessOrEqual(t, 1/c.RCopy, (c.RowTime + time.Nanosecond).Seconds())
	p := c.Apply(handParams())
	require.NoError(t, p.Validate())
	require.Equal(t, c.BMem, p.BMem)
	require.Equal(t, c.RCopy, p.RCopy)
}

func TestCalibrateDefault(t *testing.T) {
	start := time.Now()
	c, err := Calibrate(context.Background(), CalibrateOptions{Seed: newRand(t).Uint64()})
	wall := time.Since(start)
	require.NoError(t, err)
	requireUsable(t, c)
	t.Logf("calibration: B_mem %.2f GB/s, R_copy %.2f M/s, row %v, buffer %d MiB (LLC %d MiB, cache-resident %v, huge-page advice %v), %d MiB copied, %d rows; fill %v memmove %v rows %v, total %v (wall %v)",
		c.BMem/1e9, c.RCopy/1e6, c.RowTime, c.BufferBytes>>20, c.LLCBytes>>20, c.CacheResident, c.HugePageAdvice,
		c.Copied>>20, c.Rows, c.Fill, c.Memmove, c.Random, c.Elapsed, wall)
	// Budget 50ms; the machine is shared and noisy, so only a generous bound.
	require.Less(t, wall, 500*time.Millisecond)
	require.Equal(t, DefaultProbeRow, c.RowBytes)
	require.Equal(t, 1, c.Workers)
}

func TestCalibrateOptions(t *testing.T) {
	c, err := Calibrate(context.Background(), CalibrateOptions{
		Budget: 10 * time.Millisecond, BufferBytes: 4 << 20, RowBytes: 64, Workers: 2, Seed: newRand(t).Uint64(),
	})
	require.NoError(t, err)
	requireUsable(t, c)
	require.Equal(t, 2, c.Workers)
	require.Equal(t, 64, c.RowBytes)
	require.LessOrEqual(t, c.BufferBytes, int64(4<<20))
	t.Logf("2 workers, 64 B rows, 4 MiB: B_mem %.2f GB/s, R_copy %.2f M/s per worker in %v", c.BMem/1e9, c.RCopy/1e6, c.Elapsed)
}

func TestCalibrateInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  CalibrateOptions
		field string
	}{
		{"budget too short", CalibrateOptions{Budget: time.Microsecond}, "CalibrateOptions.Budget"},
		{"budget too long", CalibrateOptions{Budget: time.Minute}, "CalibrateOptions.Budget"},
		{"buffer too small", CalibrateOptions{BufferBytes: 4096}, "CalibrateOptions.BufferBytes"},
		{"buffer negative", CalibrateOptions{BufferBytes: -1}, "CalibrateOptions.BufferBytes"},
		{"buffer too large", CalibrateOptions{BufferBytes: math.MaxInt64}, "CalibrateOptions.BufferBytes"},
		{"row too large", CalibrateOptions{RowBytes: 1 << 20}, "CalibrateOptions.RowBytes"},
		{"negative row", CalibrateOptions{RowBytes: -3}, "CalibrateOptions.RowBytes"},
		{"too many workers", CalibrateOptions{Workers: 1000}, "CalibrateOptions.Workers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			c, err := Calibrate(context.Background(), tc.opts)
			require.ErrorIs(t, err, ErrInvalidOptions)
			var fe *FieldError
			require.True(t, errors.As(err, &fe))
			require.Equal(t, tc.field, fe.Field)
			require.Zero(t, c)
			require.Less(t, time.Since(start), 100*time.Millisecond, "rejected before probing")
		})
	}
}

func TestCalibrateCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := Calibrate(ctx, CalibrateOptions{})
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, c)
}

func TestCalibrateContextDeadlineShortensBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// A budget of 10s would be cut to the context's 200ms; the phases end
	// at their share of it, before the context expires.
	c, err := Calibrate(ctx, CalibrateOptions{Budget: 10 * time.Second, BufferBytes: 8 << 20})
	if errors.Is(err, context.DeadlineExceeded) {
		t.Skip("the machine stalled past the context deadline; nothing to check")
	}
	require.NoError(t, err)
	requireUsable(t, c)
	require.Less(t, c.Elapsed, 5*time.Second)
}

// TestCalibrateOrFallback: a calibration that cannot finish (its context
// already over, or ending mid-probe) yields the conservative figures and
// says why; invalid options are still an error; a calibration that
// finishes is returned as measured.
func TestCalibrateOrFallback(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	short, cancelShort := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancelShort()
	for name, ctx := range map[string]context.Context{"cancelled": done, "deadline": short} {
		t.Run(name, func(t *testing.T) {
			c, err := CalibrateOrFallback(ctx, CalibrateOptions{Workers: 2})
			require.NoError(t, err)
			require.Equal(t, float64(ConservativeBMem), c.BMem)
			require.Equal(t, float64(ConservativeRCopy), c.RCopy)
			require.Equal(t, 2, c.Workers)
			require.Contains(t, c.Fallback, "calibration")
			require.NoError(t, c.Apply(handParams()).Validate())
		})
	}
	_, err := CalibrateOrFallback(context.Background(), CalibrateOptions{Budget: time.Hour})
	require.ErrorIs(t, err, ErrInvalidOptions)

	c, err := CalibrateOrFallback(context.Background(), CalibrateOptions{Budget: 10 * time.Millisecond})
	require.NoError(t, err)
	require.Empty(t, c.Fallback)
	requireUsable(t, c)
}

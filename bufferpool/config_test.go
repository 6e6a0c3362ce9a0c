package bufferpool

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigRejected(t *testing.T) {
	page := os.Getpagesize()
	cases := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"zero budget", Config{}, "Budget"},
		{"negative budget", Config{Budget: -1}, "Budget"},
		{"budget above limit", Config{Budget: maxCapacity + 1}, "Budget"},
		{"min slot not a power of two", Config{Budget: 1 << 20, MinSlot: 3 * page}, "MinSlot"},
		{"min slot below page", Config{Budget: 1 << 20, MinSlot: page / 2}, "MinSlot"},
		{"min slot negative", Config{Budget: 1 << 20, MinSlot: -page}, "MinSlot"},
		{"too many slots", Config{Budget: maxCapacity, MinSlot: page}, "MinSlot"},
		{"max slot below min slot", Config{Budget: 1 << 20, MinSlot: 8 * page, MaxSlot: 4 * page}, "MaxSlot"},
		{"max slot not a power of two", Config{Budget: 1 << 20, MinSlot: page, MaxSlot: 3 * page}, "MaxSlot"},
		{"max slot above capacity", Config{Budget: 1 << 20, MinSlot: page, MaxSlot: 2 << 20}, "MaxSlot"},
		{"max slot above largest power of two", Config{Budget: 3 << 20, MinSlot: page, MaxSlot: 4 << 20}, "MaxSlot"},
		{"unknown lock mode", Config{Budget: 1 << 20, Lock: LockRequire + 1}, "Lock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg)
			require.Nil(t, p)
			require.ErrorIs(t, err, ErrInvalidConfig)
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "want *ConfigError, got %T", err)
			require.Equal(t, tc.field, ce.Field)
			require.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestConfigGeometry(t *testing.T) {
	page := os.Getpagesize()
	cases := []struct {
		name                     string
		cfg                      Config
		budget, minSlot, maxSlot int
	}{
		{"defaults", Config{Budget: 1 << 20}, 1 << 20, DefaultMinSlot, 1 << 20},
		{"budget rounded up to min slot", Config{Budget: 1<<20 + 1}, 1<<20 + DefaultMinSlot, DefaultMinSlot, 1 << 20},
		{"budget below min slot", Config{Budget: 1}, DefaultMinSlot, DefaultMinSlot, DefaultMinSlot},
		{"page slots", Config{Budget: 13 * page, MinSlot: page}, 13 * page, page, 8 * page},
		{"capped max slot", Config{Budget: 13 * page, MinSlot: page, MaxSlot: 2 * page}, 13 * page, page, 2 * page},
		{"single class", Config{Budget: 5 * page, MinSlot: page, MaxSlot: page}, 5 * page, page, page},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.NoHugePages = true
			p := newTestPool(t, tc.cfg)
			st := p.Stats()
			require.Equal(t, tc.budget, st.Budget, "Budget")
			require.Equal(t, tc.minSlot, st.MinSlot, "MinSlot")
			require.Equal(t, tc.maxSlot, st.MaxSlot, "MaxSlot")
			require.Equal(t, tc.maxSlot, st.LargestFree, "LargestFree")
			require.Len(t, p.Arena(), tc.budget)
			require.Equal(t, tc.budget, cap(p.Arena()))
		})
	}
}

func TestLockModeString(t *testing.T) {
	for m, want := range map[LockMode]string{
		LockNone: "none", LockBestEffort: "best-effort", LockRequire: "require", 7: "LockMode(7)",
	} {
		require.Equal(t, want, m.String())
	}
}

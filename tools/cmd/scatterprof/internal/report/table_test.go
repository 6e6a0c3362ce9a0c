package report

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/stage"
)

func TestHumanDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0ns"},
		{7, "7ns"},
		{999, "999ns"},
		{1000, "1.00us"},
		{1270, "1.27us"},
		{1276, "1.28us"},
		{12_340, "12.3us"},
		{123_456, "123us"},
		{999_499, "999us"},
		{999_500, "1.00ms"},
		{45_600_000, "45.6ms"},
		{999_999_999, "1.00s"},
		{12_345_678_900, "12.3s"},
		{3 * time.Hour, "10800s"},
		{-1500, "-1.50us"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, humanDuration(tc.d))
		})
	}
}

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want string
	}{
		{0, "0B"},
		{1023, "1023B"},
		{1024, "1.00KiB"},
		{1536, "1.50KiB"},
		{10 * 1024, "10.0KiB"},
		{1<<20 - 1, "1.00MiB"},
		{400 << 20, "400MiB"},
		{5 << 30, "5.00GiB"},
		{2000 << 30, "2000GiB"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, humanBytes(tc.n))
		})
	}
}

func TestSig3(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {12.34, "12.3"}, {140.2, "140"}, {9.996, "10.0"}, {0.001234, "0.00123"}, {1234.5, "1235"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, sig3(tc.v))
		})
	}
}

var (
	durationCell = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(ns|us|ms|s)$`)
	bytesCell    = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(B|KiB|MiB|GiB)$`)
	rateCell     = regexp.MustCompile(`^(-|[0-9]+(\.[0-9]+)?GB/s)$`)
	shareCell    = regexp.MustCompile(`^(-|[0-9]+\.[0-9]%)$`)
	probeLine    = regexp.MustCompile(`^probe: hit [0-9.]+(ns|us|ms|s), bias [0-9.]+(ns|us|ms|s) subtracted, (~[0-9]+\.[0-9]|<0\.1)% of target time$`)
)

func TestWriteTable(t *testing.T) {
	r := newRand(t)
	for round := range 10 {
		s, _ := randomSnapshot(t, r)
		if round == 1 {
			s.Stages[stage.Op] = Stage{} // no op: shares are "-"
		}
		m := randomMeta(r)
		sum := Summarize(s, m)
		var buf bytes.Buffer
		sum.WriteTable(&buf)
		out := buf.String()
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")

		require.Equal(t, fmt.Sprintf("targets: %d scatterd, %d scatterbench", m.Targets[0].PID, m.Targets[1].PID), lines[0])
		require.Equal(t, "elapsed: "+humanDuration(m.Elapsed), lines[1])
		require.Regexp(t, probeLine, lines[2])
		require.Contains(t, lines[2], "hit "+humanDuration(m.Hit)+",")
		require.Contains(t, lines[2], "bias "+humanDuration(m.Bias)+" subtracted")
		for _, c := range []struct {
			n      uint64
			prefix string
		}{
			{s.Counters.Unmatched, "unmatched ends: "},
			{s.Counters.BadStage, "bad stage numbers: "},
			{s.Counters.StoreErrors, "store errors: "},
		} {
			if c.n == 0 {
				require.NotContains(t, out, c.prefix)
			} else {
				require.Contains(t, out, "\n"+c.prefix+fmt.Sprint(c.n)+" (")
			}
		}
		require.NotContains(t, out, "calibration")
		require.Equal(t, "shares are of summed op time; stages overlap, so they need not add to 100%", lines[len(lines)-1])

		// The table: a header and one row per stage, all of one width.
		hi := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "stage ") })
		require.GreaterOrEqual(t, hi, 0, "header row in\n%s", out)
		table := lines[hi : len(lines)-1]
		require.Len(t, table, 1+len(sum.Rows))
		require.Equal(t, []string{"stage", "count", "p50", "p95", "p99", "mean", "bytes", "rate", "share"}, strings.Fields(table[0]))
		for _, l := range table {
			require.Len(t, l, len(table[0]), "fixed width:\n%s", out)
		}
		_, haveOp := sum.Row(int(stage.Op))
		for i, row := range sum.Rows {
			f := strings.Fields(table[1+i])
			require.Len(t, f, 9, table[1+i])
			require.Equal(t, row.Name, f[0])
			require.Equal(t, fmt.Sprint(row.Count), f[1])
			for j, d := range []time.Duration{row.P50, row.P95, row.P99, row.Mean} {
				require.Regexp(t, durationCell, f[2+j])
				require.Equal(t, humanDuration(d), f[2+j])
			}
			require.Regexp(t, bytesCell, f[6])
			require.Equal(t, humanBytes(row.Bytes), f[6])
			require.Regexp(t, rateCell, f[7])
			if row.Bytes == 0 {
				require.Equal(t, "-", f[7])
			} else {
				require.Equal(t, sig3(row.Rate/1e9)+"GB/s", f[7])
			}
			require.Regexp(t, shareCell, f[8])
			switch {
			case !haveOp:
				require.Equal(t, "-", f[8])
			case row.Stage == int(stage.Op):
				require.Equal(t, "100.0%", f[8])
			default:
				require.Equal(t, fmt.Sprintf("%.1f%%", row.Share*100), f[8])
			}
		}
	}
}

func TestApproxPercent(t *testing.T) {
	for f, want := range map[float64]string{0: "~0.0%", 3e-6: "<0.1%", 0.0004999: "<0.1%", 0.0005: "~0.1%", 0.004: "~0.4%", 0.0123: "~1.2%"} {
		require.Equal(t, want, approxPercent(f), "%g", f)
	}
}

func TestWriteTableEmpty(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta Meta
		want []string
	}{
		{"no targets", Meta{}, []string{
			"targets: none",
			"elapsed: 0ns",
			"probe: hit 0ns, bias 0ns subtracted, ~0.0% of target time",
			"no stage markers fired yet",
		}},
		{"exe unknown", Meta{Targets: []Target{{PID: 17}}, Elapsed: time.Second, Hit: 1000, Bias: 20}, []string{
			"targets: 17 ?",
			"elapsed: 1.00s",
			"probe: hit 1.00us, bias 20ns subtracted, ~0.0% of target time",
			"no stage markers fired yet",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Snapshot{}
			record(&s.Stages[CalibrationStage], 40, 0) // never reported
			sum := Summarize(s, tc.meta)
			var buf bytes.Buffer
			sum.WriteTable(&buf)
			require.Equal(t, strings.Join(tc.want, "\n")+"\n", buf.String())
		})
	}
}

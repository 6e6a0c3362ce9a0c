package report

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/scatterkit/scatterkit/verbs/stage"
)

// WriteTable writes the summary as a fixed-width text table with header
// lines (see the package doc).
func (s *Summary) WriteTable(w io.Writer) {
	var b bytes.Buffer
	b.WriteString("targets: ")
	if len(s.Targets) == 0 {
		b.WriteString("none")
	}
	for i, t := range s.Targets {
		if i > 0 {
			b.WriteString(", ")
		}
		exe := "?"
		if t.Exe != "" {
			exe = filepath.Base(t.Exe)
		}
		fmt.Fprintf(&b, "%d %s", t.PID, exe)
	}
	fmt.Fprintf(&b, "\nelapsed: %s\n", humanDuration(s.Elapsed))
	fmt.Fprintf(&b, "probe: hit %s, bias %s subtracted, %s of target time\n",
		humanDuration(s.Hit), humanDuration(s.Bias), approxPercent(s.ProbeShare))
	if s.Unprobed > 0 {
		fmt.Fprintf(&b, "marker without probe: %s per call\n", humanDuration(s.Unprobed))
	}
	for _, c := range []struct {
		n    uint64
		line string
	}{
		{s.Counters.Unmatched, "unmatched ends: %d (attached mid-stage or evicted)\n"},
		{s.Counters.BadStage, "bad stage numbers: %d (stage >= " + strconv.Itoa(MaxStages) + ")\n"},
		{s.Counters.StoreErrors, "store errors: %d (begins that replaced an open stage's start)\n"},
	} {
		if c.n != 0 {
			fmt.Fprintf(&b, c.line, c.n)
		}
	}
	if len(s.Rows) == 0 {
		b.WriteString("no stage markers fired yet\n")
		w.Write(b.Bytes()) //nolint:errcheck // WriteTable reports no errors by design
		return
	}

	head := []string{"stage", "count", "p50", "p95", "p99", "mean", "bytes", "rate", "share"}
	cells := [][]string{head}
	_, haveOp := s.Row(int(stage.Op))
	for _, r := range s.Rows {
		rate, share := "-", "-"
		if r.Bytes > 0 && r.Rate > 0 {
			rate = sig3(r.Rate/1e9) + "GB/s"
		}
		switch {
		case r.Stage == int(stage.Op):
			share = "100.0%"
		case haveOp:
			share = strconv.FormatFloat(r.Share*100, 'f', 1, 64) + "%"
		}
		cells = append(cells, []string{
			r.Name, strconv.FormatUint(r.Count, 10),
			humanDuration(r.P50), humanDuration(r.P95), humanDuration(r.P99), humanDuration(r.Mean),
			humanBytes(r.Bytes), rate, share,
		})
	}
	width := make([]int, len(head))
	for _, row := range cells {
		for j, c := range row {
			width[j] = max(width[j], len(c))
		}
	}
	for _, row := range cells {
		for j, c := range row {
			pad := strings.Repeat(" ", width[j]-len(c))
			if j == 0 { // names left-aligned, numbers right-aligned
				b.WriteString(c + pad)
				continue
			}
			b.WriteString("  " + pad + c)
		}
		b.WriteByte('\n')
	}
	b.WriteString("shares are of summed op time; stages overlap, so they need not add to 100%\n")
	w.Write(b.Bytes()) //nolint:errcheck // WriteTable reports no errors by design
}

// approxPercent writes a share as "~0.4%", or "<0.1%" for a small nonzero one.
func approxPercent(f float64) string {
	p := f * 100
	if p > 0 && p < 0.05 {
		return "<0.1%"
	}
	return "~" + strconv.FormatFloat(p, 'f', 1, 64) + "%"
}

// humanDuration writes a duration in ns, us, ms or s with three
// significant digits (whole nanoseconds below a microsecond).
func humanDuration(d time.Duration) string {
	if d < 0 {
		return "-" + humanDuration(-d)
	}
	return humanize(float64(d), 1000, []string{"ns", "us", "ms", "s"})
}

// humanBytes writes a byte count in B, KiB, MiB or GiB with three
// significant digits (whole bytes below a KiB).
func humanBytes(n uint64) string {
	return humanize(float64(n), 1024, []string{"B", "KiB", "MiB", "GiB"})
}

// humanize scales v (in units[0], a whole number) by base until it is below
// base or the units run out, and writes it with three significant digits;
// units holds at least two names.
func humanize(v, base float64, units []string) string {
	if v < base {
		return strconv.FormatFloat(v, 'f', 0, 64) + units[0]
	}
	for i := 1; ; i++ {
		v /= base
		if r := round3(v); r < base || i == len(units)-1 {
			return sig3(r) + units[i]
		}
	}
}

// round3 rounds v > 0 to three significant digits (at least whole numbers).
func round3(v float64) float64 {
	p := math.Pow10(decimals3(v))
	return math.Round(v*p) / p
}

// sig3 writes v with three significant digits, never in exponent form.
func sig3(v float64) string {
	if v == 0 {
		return "0"
	}
	r := round3(v)
	return strconv.FormatFloat(r, 'f', decimals3(r), 64)
}

// decimals3 is the number of decimals that give v three significant digits.
func decimals3(v float64) int {
	return max(0, 2-int(math.Floor(math.Log10(math.Abs(v)))))
}

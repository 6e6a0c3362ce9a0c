package cudagather

import (
	"math"
	"testing"
	"time"
)

func TestInterpolate(t *testing.T) {
	rows := [3]float64{100, 400, 1600}
	ts := [3]float64{1, 4, 10}
	for _, c := range []struct{ n, want float64 }{
		{100, 1}, {400, 4}, {1600, 10}, // the probes themselves
		{250, 2.5}, {1000, 7}, // on the segments
		{3200, 18}, // past the last: its slope
		{50, 0.5},  // below the first: the first time scaled by n (the line gives 0.5 too)
		{0, 0},
	} {
		if got := interpolate(&rows, &ts, c.n); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("interpolate(%v) = %v, want %v", c.n, got, c.want)
		}
	}
	// A fixed cost: below the first probe the line (fixed + slope) is the
	// larger and is kept.
	fixed := [3]float64{10, 13, 25}
	if got := interpolate(&rows, &fixed, 50); math.Abs(got-9.5) > 1e-12 {
		t.Errorf("fixed cost below the first probe: %v, want 9.5", got)
	}
	// A cost that grows faster than the rows: its first line would go
	// below zero near zero rows; the first time scaled by n is kept.
	steep := [3]float64{1, 10, 50}
	if got := interpolate(&rows, &steep, 50); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("steep cost below the first probe: %v, want 0.5", got)
	}
	// A noisy probe (a later size faster): the slope is taken as zero.
	noisy := [3]float64{5, 4, 8}
	if got := interpolate(&rows, &noisy, 300); got != 5 {
		t.Errorf("negative slope: %v, want 5", got)
	}
}

func TestCalibrationRows(t *testing.T) {
	for _, r := range []int64{1, 64, 264, 520, 1024, 4096, 2 << 20} {
		rows := calibrationRows(r)
		if !(rows[0] < rows[1] && rows[1] < rows[2]) || rows[0] < 4 {
			t.Fatalf("R=%d: probe sizes %v not ascending", r, rows)
		}
		if rows[2] > 262144 || rows[2]*r > 128<<20 && rows[2] > 64 {
			t.Fatalf("R=%d: largest probe %d rows, %d bytes", r, rows[2], rows[2]*r)
		}
	}
	if got := calibrationRows(264); got != [3]int64{16384, 65536, 262144} {
		t.Fatalf("R=264: %v", got)
	}
}

// hostMachine is a simulated host link for HostAuto's choice: the times
// of the three paths by rows, shaped as measured on the H200 with tables
// of 32 GiB (zero-copy a few ns a row for a few thousand rows, rising to
// about 31 ns a row past 100,000 as the device's translations miss;
// staged a fixed cost plus the CPU gather and the copy at their rates;
// a split's parts slowed by sharing the link and the memory).
type hostMachine struct {
	name                 string
	zeroFixed, zeroSmall float64 // s, s/row with few rows in flight
	zeroLarge, zeroKnee  float64 // s/row with many; rows where it is half way
	stagedFixed, stagedR float64 // s, s/row
	share                float64 // a split's time over its longer part
}

func (m hostMachine) zero(n float64) float64 {
	w := n / (n + m.zeroKnee)
	return m.zeroFixed + n*(m.zeroSmall+(m.zeroLarge-m.zeroSmall)*w)
}

func (m hostMachine) staged(n float64) float64 { return m.stagedFixed + n*m.stagedR }

func (m hostMachine) split(r *Request, tz int) float64 {
	k := float64(r.K)
	return m.share * max(m.zero(float64(tz)*k), m.staged(float64(r.T-tz)*k))
}

// calibrate is what CalibrateHost would measure on m for rows of r bytes.
func (m hostMachine) calibrate(r int64) HostCalibration {
	cal := HostCalibration{Rows: calibrationRows(r)}
	for i, n := range cal.Rows {
		cal.ZeroCopy[i] = time.Duration(m.zero(float64(n)) * 1e9)
		cal.Staged[i] = time.Duration(m.staged(float64(n)) * 1e9)
	}
	var f hostFigures
	f.add(cal)
	f.done()
	sr := &Request{T: int(cal.Rows[2]), K: 1}
	tz := f.balance(sr)
	cal.SplitFactor = m.split(sr, tz) / f.splitTime(sr, tz)
	return cal
}

// HostAuto's choice on simulated machines: for lookups of a few hundred
// to a few hundred thousand rows, the path chosen (and a split's tokens)
// takes at most 10% longer than the fastest path on the machine itself,
// K columns over two tables of one calibration class. The machines are
// the H200 host's measured shapes at two row sizes (its staged path
// faster than a split at 264 B, a split fastest at 1 KiB), a host with a
// slow CPU gather, and one whose split's parts hardly interfere.
func TestHostAutoOnSimulatedMachines(t *testing.T) {
	machines := []struct {
		m hostMachine
		r int64
	}{
		{hostMachine{"H200 R=264", 4e-6, 7e-9, 31e-9, 40e3, 230e-6, 12.5e-9, 1.45}, 264},
		{hostMachine{"H200 R=1024", 8e-6, 20e-9, 32e-9, 40e3, 280e-6, 36e-9, 1.2}, 1024},
		{hostMachine{"slow CPU", 4e-6, 7e-9, 31e-9, 40e3, 300e-6, 60e-9, 1.3}, 264},
		{hostMachine{"split adds", 4e-6, 7e-9, 31e-9, 40e3, 230e-6, 12.5e-9, 1.0}, 264},
		{hostMachine{"linear zero-copy", 5e-6, 10e-9, 10e-9, 1, 200e-6, 12e-9, 1.2}, 264},
	}
	for _, mc := range machines {
		m := mc.m
		cal := m.calibrate(mc.r)
		var f hostFigures
		f.add(cal)
		f.add(cal) // two tables of one class
		f.done()
		for _, K := range []int{1, 24} {
			for _, T := range []int{8, 64, 512, 2048, 4096, 8192} {
				r := &Request{T: T, K: K}
				n := int64(T * K)
				path, tz := f.choose(r, n)
				var got float64
				switch path {
				case HostZeroCopy:
					got = m.zero(float64(n))
				case HostStaged:
					got = m.staged(float64(n))
				case HostSplit:
					got = m.split(r, tz)
				}
				best := min(m.zero(float64(n)), m.staged(float64(n)))
				for z := 1; z < T; z++ {
					best = min(best, m.split(r, z))
				}
				if got > 1.1*best {
					t.Errorf("%s K=%d T=%d (%d rows): chose %s (tz %d) %.0f us, the fastest takes %.0f us (zero-copy %.0f, staged %.0f)",
						m.name, K, T, n, path, tz, got*1e6, best*1e6, m.zero(float64(n))*1e6, m.staged(float64(n))*1e6)
				}
			}
		}
	}
}

// A split's tokens balance its parts: the zero-copy part's predicted time
// reaches the staged part's at tz and not before.
func TestHostAutoBalance(t *testing.T) {
	m := hostMachine{"H200 R=264", 4e-6, 7e-9, 31e-9, 40e3, 230e-6, 12.5e-9, 1.45}
	var f hostFigures
	f.add(m.calibrate(264))
	f.done()
	for _, c := range []struct{ T, K int }{{2, 1}, {3, 1}, {4096, 24}, {8192, 24}, {100, 7}} {
		r := &Request{T: c.T, K: c.K}
		tz := f.balance(r)
		if tz < 1 || tz > max(c.T-1, 1) {
			t.Fatalf("T=%d: tz %d out of [1, T-1]", c.T, tz)
		}
		best := f.splitTime(r, tz)
		for z := 1; z < c.T; z++ {
			if f.splitTime(r, z) < best-1e-12 {
				t.Fatalf("T=%d K=%d: tz %d takes %v, %d takes %v", c.T, c.K, tz, best, z, f.splitTime(r, z))
			}
		}
	}
	if got := f.balance(&Request{T: 1, K: 4}); got != 1 {
		t.Fatalf("T=1: %d", got)
	}
}

// A lookup's class is its distinct tables' spans together: two tables of
// one size read by 24 columns are the class of one table twice as large.
func TestTableSet(t *testing.T) {
	a := &Table{rows: 1 << 20, rowBytes: 264}
	b := &Table{rows: 1 << 20, rowBytes: 264}
	big := &Table{rows: 2 << 20, rowBytes: 264}
	tabs := make([]*Table, 24)
	for k := range tabs {
		tabs[k] = a
		if k%2 == 1 {
			tabs[k] = b
		}
	}
	set := setOf(tabs)
	if set.n != 2 || set.t[0] != a || set.t[1] != b || set.span != 2<<20*264 {
		t.Fatalf("set %+v", set)
	}
	if set.key() != classOf(big) || set.key() == classOf(a) {
		t.Fatalf("two tables' class %+v; one twice as large %+v, one alone %+v", set.key(), classOf(big), classOf(a))
	}
	if n := testing.AllocsPerRun(100, func() { set = setOf(tabs) }); n != 0 {
		t.Fatalf("setOf allocates %v times", n)
	}
	// Past maxSetTables distinct tables the rest add their spans.
	many := make([]*Table, maxSetTables+4)
	for i := range many {
		many[i] = &Table{rows: 10, rowBytes: 8}
	}
	set = setOf(many)
	if set.n != maxSetTables || set.span != uint64(len(many))*80 {
		t.Fatalf("many: n %d span %d", set.n, set.span)
	}
	if (&tableSet{}).key() != (calKey{}) {
		t.Fatal("empty set's key")
	}
}

package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/scatterkit/scatterkit/tools/internal/units"
	"github.com/scatterkit/scatterkit/verbs"
)

// Sweep axes: a run setting that -sweep varies, the whole run repeated
// once per value (each value's passes start their own owner, so owner
// settings such as the staging apply).
const (
	AxisStagingSlots = "staging-slots" // the owner's staging slots per command (P)
	AxisStagingBytes = "staging-bytes" // the owner's staging pool (pool pressure)
	AxisCallers      = "callers"       // concurrent callers
	AxisLanes        = "lanes"         // tcp lanes per connection
)

// SweepAxes lists the axes -sweep takes.
var SweepAxes = []string{AxisStagingSlots, AxisStagingBytes, AxisCallers, AxisLanes}

// MaxSweepValues bounds a sweep's values (each repeats the whole run).
const MaxSweepValues = 16

// Sweep is one axis and its values (-sweep AXIS=V1,V2,...); the zero
// value runs once, without a sweep.
type Sweep struct {
	Axis   string
	Values []int64
}

// sweepValue is the -sweep flag.
type sweepValue struct{ s *Sweep }

func (v sweepValue) String() string {
	if v.s == nil || v.s.Axis == "" {
		return ""
	}
	parts := make([]string, len(v.s.Values))
	for i, x := range v.s.Values {
		parts[i] = strconv.FormatInt(x, 10)
	}
	return v.s.Axis + "=" + strings.Join(parts, ",")
}

func (v sweepValue) Set(s string) error {
	if v.s.Axis != "" {
		return fmt.Errorf("one -sweep per run (have %s)", v.s.Axis)
	}
	axis, list, ok := strings.Cut(s, "=")
	if !ok || list == "" {
		return fmt.Errorf("want AXIS=V1,V2,... with AXIS one of %s", strings.Join(SweepAxes, ", "))
	}
	if !slices.Contains(SweepAxes, axis) {
		return fmt.Errorf("axis %q: want one of %s", axis, strings.Join(SweepAxes, ", "))
	}
	var vals []int64
	for _, f := range strings.Split(list, ",") {
		var x int64
		var err error
		if axis == AxisStagingBytes {
			x, err = units.ParseBytes(f)
		} else {
			x, err = strconv.ParseInt(f, 10, 64)
		}
		if err != nil {
			return fmt.Errorf("value %q: %v", f, err)
		}
		if slices.Contains(vals, x) {
			return fmt.Errorf("value %d twice", x)
		}
		vals = append(vals, x)
	}
	if len(vals) > MaxSweepValues {
		return fmt.Errorf("%d values: at most %d", len(vals), MaxSweepValues)
	}
	v.s.Axis, v.s.Values = axis, vals
	return nil
}

// sweepRanges are the axes' ranges: those of the flags they stand for
// (lanes from 1: the flag's 0, "the default", is no point on an axis).
var sweepRanges = map[string][2]int64{
	AxisStagingSlots: {1, 1 << 16}, AxisStagingBytes: {1 << 20, 1 << 36},
	AxisCallers: {1, MaxCallers}, AxisLanes: {1, verbs.MaxLanes}, // a lane count, not 0 (the default) on an axis
}

// check reports the first value outside its axis's range.
func (s *Sweep) check() error {
	r := sweepRanges[s.Axis]
	for _, x := range s.Values {
		if x < r[0] || x > r[1] {
			return &FlagError{Flag: "-sweep", Value: fmt.Sprintf("%s=%d", s.Axis, x), Reason: fmt.Sprintf("%s must lie in [%d, %d]", s.Axis, r[0], r[1])}
		}
	}
	return nil
}

// apply sets the axis to x in c.
func (s *Sweep) apply(c *Config, x int64) {
	switch s.Axis {
	case AxisStagingSlots:
		c.StagingSlots = int(x)
	case AxisStagingBytes:
		c.StagingBytes = x
	case AxisCallers:
		c.Callers = int(x)
	case AxisLanes:
		c.Lanes = int(x)
	}
}

// sweepFigures draws a sweep: per transport, one figure for the axis with
// a panel per workload, goodput over the axis's values (log x), a line
// per mode and the workload's ceilings.
func sweepFigures(passes []PassResult) []Figure {
	type key struct{ transport, axis string }
	var order []key
	byKey := map[key][]PassResult{}
	for _, p := range passes {
		if p.Axis == "" {
			continue
		}
		k := key{p.Transport, p.Axis}
		if byKey[k] == nil {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], p)
	}
	var out []Figure
	for _, k := range order {
		ps := byKey[k]
		f := Figure{Name: fmt.Sprintf("sweep-%s-%s", k.transport, k.axis), Kind: KindSweep, Transport: k.transport,
			Title:    fmt.Sprintf("scatterbench sweep of %s over %s", k.axis, k.transport),
			Subtitle: fmt.Sprintf("goodput (Gbit/s) over %s, one panel per workload; grey: the workload's ceilings", k.axis),
			PanelW:   560, PanelH: 230}
		cs := newColors()
		var names []string
		for _, p := range ps {
			for i := range p.Workloads {
				if n := p.Workloads[i].Workload.Name; !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
		for _, name := range names {
			pn := Panel{Workload: name, Title: name, XLabel: k.axis, YLabel: "Gbit/s"}
			var lines lineSet
			for _, p := range ps {
				x := float64(p.AxisValue)
				for i := range p.Workloads {
					wr := &p.Workloads[i]
					if wr.Workload.Name != name {
						continue
					}
					if !slices.Contains(pn.XTicks, x) {
						pn.XTicks = append(pn.XTicks, x)
					}
					lines.add(wr, x, cs)
				}
			}
			slices.Sort(pn.XTicks)
			pn.Series = lines.series()
			if len(pn.Series) == 0 {
				pn.Note = "nothing measured"
			}
			f.Panels = append(f.Panels, pn)
		}
		f.Columns = min(2, max(1, len(f.Panels)))
		f.Keys = append(cs.keys, ceilingKeys()...)
		f.widen()
		out = append(out, f)
	}
	return out
}

package probe

import (
	"errors"
	"fmt"
	"time"

	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/report"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

// Calibration is the probes' own cost, measured on this machine by firing
// the markers in the profiler's own process.
type Calibration struct {
	// Bias is the median interval of a begin/end pair with nothing in
	// between: what the probes add to every measured interval. The kernel
	// subtracts it from each interval once calibrated.
	Bias time.Duration `json:"bias_ns"`
	// Hit is the wall time one probed marker call costs the target, above
	// an unprobed call (trap, BPF program, return).
	Hit time.Duration `json:"hit_ns"`
	// Unprobed is one marker call with no probe attached.
	Unprobed time.Duration `json:"unprobed_ns"`
	// Pairs is the number of begin/end pairs each measurement ran.
	Pairs int `json:"pairs"`
}

// calIDBase keeps calibration ids clear of the engine's.
const calIDBase = 1 << 62

// Calibrate measures the probes' cost with n begin/end pairs in this
// process and sets the bias the kernel subtracts. Call it before attaching
// any target: it attaches and detaches this process, and clears the
// counters afterwards.
func (p *Profiler) Calibrate(n int) (Calibration, error) {
	if n <= 0 {
		return Calibration{}, fmt.Errorf("scatterprof: calibration needs a positive pair count, got %d", n)
	}
	p.mu.Lock()
	attached := len(p.targets)
	p.mu.Unlock()
	if attached > 0 {
		return Calibration{}, errors.New("scatterprof: calibrate before attaching any process")
	}
	if err := p.setBias(0); err != nil {
		return Calibration{}, err
	}
	cal := Calibration{Pairs: n}
	fire := func() time.Duration {
		t := time.Now()
		for i := range n {
			id := uint64(calIDBase + i)
			stage.Begin(id, report.CalibrationStage)
			stage.End(id, report.CalibrationStage, 0)
		}
		return time.Since(t)
	}
	fire() // warm
	off := fire()
	self, err := p.AttachSelf()
	if err != nil {
		return cal, fmt.Errorf("scatterprof: calibration: %w", err)
	}
	on := fire()
	var snap report.Snapshot
	rerr := p.Read(&snap)
	derr := p.Detach(self.PID)
	cerr := p.clearCalibration()
	if err := errors.Join(rerr, derr, cerr); err != nil {
		return cal, fmt.Errorf("scatterprof: calibration: %w", err)
	}
	st := &snap.Stages[report.CalibrationStage]
	if st.Count == 0 {
		return cal, fmt.Errorf("scatterprof: calibration: no probe fired in %d marker pairs (%+v)", n, snap.Counters)
	}
	cal.Unprobed = off / time.Duration(2*n)
	cal.Hit = max(on-off, 0) / time.Duration(2*n)
	cal.Bias = time.Duration(report.Quantile(&st.Hist, 0.5))
	return cal, p.setBias(cal.Bias)
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/verbs"
)

// CalibrationFallback is a packing calibration behind a workload's figures
// that could not finish (a busy machine: costmodel.CalibrateOrFallback),
// so the cost model ran on costmodel's conservative figures, which price
// packing high and lean toward direct. The run goes on and says so: in the
// table, in the lines' calibration_fallback and in the summary record.
type CalibrationFallback struct {
	// Who calibrated: "owner (process) gather service", "requester
	// engine", "in-process gather services (2 pack workers)", ...
	Who string `json:"who"`
	// Reason is why it fell back, as far as it is known.
	Reason string `json:"reason"`
}

func (f CalibrationFallback) String() string { return f.Who + ": " + f.Reason }

// ownerFallbackReason is what scatterbench knows of an owner that does not
// say why its calibration fell back (the Engram server, whose service it
// cannot reach; an owner predating the ready line's calibration_fallback):
// only that the figures it reports are the conservative ones.
const ownerFallbackReason = "it reports costmodel's conservative figures (ConservativeBMem, ConservativeRCopy): " +
	"its startup calibration could not finish (the owner does not say why)"

// ownerFallback returns the fallback an owner's gather capability shows:
// costmodel.CalibrateOrFallback's conservative figures, exactly (a
// measured calibration never lands on both), which the wire carries
// bit for bit. It is the inference for owners that do not say
// (handleFallback for those that do).
func ownerFallback(who string, info engine.OwnerInfo) []CalibrationFallback {
	if info.BMem == costmodel.ConservativeBMem && info.RCopy == costmodel.ConservativeRCopy {
		return []CalibrationFallback{{Who: who, Reason: ownerFallbackReason}}
	}
	return nil
}

// handleFallback returns the fallback of a pass's owner: the reason the
// owner gives (a process owner's ready line, the in-process owner's Info),
// else what its gather capability info shows (ownerFallback).
func handleFallback(who string, h ownerHandle, info engine.OwnerInfo) []CalibrationFallback {
	if reason := h.calibrationFallback(); reason != "" {
		return []CalibrationFallback{{Who: who, Reason: reason}}
	}
	return ownerFallback(who, info)
}

// engineFallback returns the fallback of an engine's local calibration
// (none when it has none or it was measured).
func engineFallback(who string, e *engine.Engine) []CalibrationFallback {
	if e == nil {
		return nil
	}
	if cal, ok := e.Calibration(); ok && cal.Fallback != "" {
		return []CalibrationFallback{{Who: who, Reason: cal.Fallback}}
	}
	return nil
}

// joinFallbacks is a line's calibration_fallback.
func joinFallbacks(fs []CalibrationFallback) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.String())
	}
	return strings.Join(s, "; ")
}

// serviceCalibrationBudget is the calibration budget of the in-process
// gather services (verbs' default for a service).
const serviceCalibrationBudget = 50 * time.Millisecond

// inprocPackWorkers is the pack workers of the structobj owner's gather
// service (its default, stated here so the shared calibration matches).
func inprocPackWorkers() int { return min(runtime.GOMAXPROCS(0), 8) }

// meshPackWorkers is the pack workers of a reshard mesh's gather services
// (mesh's default, stated here so the shared calibration matches).
const meshPackWorkers = 2

// serviceCalibration returns the packing calibration the run's in-process
// gather services (reshard meshes, the structobj owner) share: measured
// once per worker count with costmodel.CalibrateOrFallback (one probe
// instead of one per rank, and one place that knows whether it fell
// back), and its fallback, if any.
func (r *Runner) serviceCalibration(ctx context.Context, workers int) (*costmodel.Calibration, []CalibrationFallback, error) {
	cal, ok := r.cals[workers]
	if !ok {
		calibrate := r.cfg.calibrate
		if calibrate == nil {
			calibrate = costmodel.CalibrateOrFallback
		}
		cctx, cancel := context.WithTimeout(ctx, 10*serviceCalibrationBudget+time.Second)
		var err error
		cal, err = calibrate(cctx, costmodel.CalibrateOptions{Budget: serviceCalibrationBudget, Workers: workers})
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("scatterbench: in-process gather service calibration: %w", err)
		}
		if !(cal.BMem > 0) || !(cal.RCopy > 0) {
			return nil, nil, errors.New("scatterbench: in-process gather service calibration: non-positive rates")
		}
		if r.cals == nil {
			r.cals = map[int]costmodel.Calibration{}
		}
		r.cals[workers] = cal
	}
	var fb []CalibrationFallback
	if cal.Fallback != "" {
		fb = append(fb, CalibrationFallback{Who: fmt.Sprintf("in-process gather services (%d pack workers)", workers), Reason: cal.Fallback})
	}
	return &cal, fb, nil
}

// probeOwnerCalibration asks the gather service at addr for its
// capability on a connection of its own (for owners whose service this
// package cannot reach, the Engram server) and returns its fallback.
func probeOwnerCalibration(ctx context.Context, who string, tr verbs.Transport, addr string) (fb []CalibrationFallback, err error) {
	conn, err := tr.Connect(ctx, addr, verbs.ConnectOptions{})
	if err != nil {
		return nil, fmt.Errorf("scatterbench: asking %s for its calibration: %w", who, err)
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	// PostOnMapped: no local calibration of this engine (it moves nothing).
	eng, err := engine.New(engine.Config{PostOnMapped: true})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, eng.Close()) }()
	info, err := eng.Prepare(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("scatterbench: asking %s for its calibration: %w", who, err)
	}
	return ownerFallback(who, info), nil
}

package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// structObjVariants are the modes of the structobj workloads' lines, in
// the order runStructObj runs them.
var structObjVariants = map[string][]string{
	StructObjPut: {"multi", "single", "concat", "buffers", "fallback"},
	StructObjGet: {"whole", "whole-buffer", "selective", "fallback", "selective-fallback"},
}

// modeNames returns the modes of w's lines under c: the configured modes,
// the structobj variants, or "cpu" for the local Engram lookup.
func (w *Workload) modeNames(c *Config) []string {
	switch {
	case w.Engram == EngramCPU:
		return []string{"cpu"}
	case w.StructObj != "":
		return structObjVariants[w.StructObj]
	}
	var out []string
	for _, m := range c.Modes {
		out = append(out, m.Name)
	}
	return out
}

// emptyLine is the line of a mode of w in which nothing was measured: what
// a workload that failed or did not run still shows.
func (w *Workload) emptyLine(c *Config, transport, mode string) Line {
	tr, own := transport, c.Owner
	switch {
	case w.Engram == EngramCPU:
		tr, own = "local", "local"
	case w.Engram != "" || w.Reshard != "" || w.StructObj != "":
		own = OwnerInproc
	}
	return Line{Workload: w.Name, Transport: tr, Owner: own, Seed: c.Seed, Mode: mode,
		Direction: strings.ToLower(w.Dir.String()), Fragments: uint64(w.Fragments()), PayloadBytes: w.Payload()}
}

// settle completes a workload's result before it is recorded: a line for
// every mode (empty where nothing was measured), the workload's status
// and reason (err; else its failed operations, modes without a timed
// repetition or a run without a verified repetition), and every line's
// status, error and calibration fallbacks.
func (r *Runner) settle(wr *WorkloadResult, transport string, err error) {
	c := r.cfg
	w := &wr.Workload
	lines, over := wr.Lines, wr.OverBound
	wr.Lines, wr.OverBound = nil, nil
	take := func(i int) {
		wr.Lines = append(wr.Lines, lines[i])
		ob := 0
		if i < len(over) {
			ob = over[i]
		}
		wr.OverBound = append(wr.OverBound, ob)
	}
	used := make([]bool, len(lines))
	for _, m := range w.modeNames(c) {
		i := slices.IndexFunc(lines, func(l Line) bool { return l.Mode == m })
		if i < 0 {
			wr.Lines = append(wr.Lines, w.emptyLine(c, transport, m))
			wr.OverBound = append(wr.OverBound, 0)
			continue
		}
		used[i] = true
		take(i)
	}
	for i := range lines {
		if !used[i] {
			take(i)
		}
	}

	if err == nil {
		var problems []string
		for _, l := range wr.Lines {
			switch {
			case l.Errors > 0:
				problems = append(problems, fmt.Sprintf("%s: %d failed operations", l.Mode, l.Errors))
			case l.Reps == 0:
				problems = append(problems, fmt.Sprintf("%s: no timed repetition", l.Mode))
			}
		}
		if wr.Verified == 0 {
			problems = append(problems, "no repetition verified")
		}
		if len(problems) > 0 {
			err = errors.New(strings.Join(problems, ", "))
			for _, l := range wr.Lines {
				if l.opErr != nil {
					err = fmt.Errorf("%w; first: %w", err, l.opErr)
					break
				}
			}
		}
	}
	wr.Status, wr.Err = StatusOK, nil
	if err != nil {
		we, ok := errors.AsType[*WorkloadError](err)
		if !ok {
			we = &WorkloadError{Transport: transport, Workload: w.Name, Err: err}
		}
		wr.Status, wr.Err = we.Status(), we
	}
	fb := joinFallbacks(wr.Calibration)
	for i := range wr.Lines {
		l := &wr.Lines[i]
		l.Status, l.CalibrationFallback = wr.Status, fb
		switch {
		case l.Errors > 0 && l.opErr != nil:
			l.Error = fmt.Sprintf("%d failed operations; first: %v", l.Errors, l.opErr)
		case l.Errors > 0:
			l.Error = fmt.Sprintf("%d failed operations", l.Errors)
		case wr.Err != nil:
			l.Error = wr.Err.(*WorkloadError).Err.Error()
		}
	}
}

// notRun records a workload that did not start, and why.
func (r *Runner) notRun(pr *PassResult, w Workload, transport string, why error) {
	r.record(pr, transport, WorkloadResult{Workload: w}, &WorkloadError{Transport: transport, Workload: w.Name, NotRun: true, Err: why})
}

// Summary counts the goals of a run by verdict.
type Summary struct {
	OK, Missed, NotMeasured int
}

// Summarize counts goals by verdict.
func Summarize(goals []Goal) Summary {
	var s Summary
	for _, g := range goals {
		switch g.Verdict {
		case "ok":
			s.OK++
		case "MISSED":
			s.Missed++
		default:
			s.NotMeasured++
		}
	}
	return s
}

// String is the run's last line: "N goals ok, M missed, K not measured".
func (s Summary) String() string {
	return fmt.Sprintf("%d goals ok, %d missed, %d not measured", s.OK, s.Missed, s.NotMeasured)
}

// WorkloadFailure is a failed workload in the summary record.
type WorkloadFailure struct {
	Transport string `json:"transport"`
	Workload  string `json:"workload"`
	Status    string `json:"status"` // StatusFailed or StatusNotRun
	Error     string `json:"error"`
}

// SummaryLine is the JSON record that ends a -json run ("workload":
// "summary"): the goals by verdict, what failed, the calibrations that
// fell back, and the exit status.
type SummaryLine struct {
	Workload         string `json:"workload"` // "summary"
	Seed             uint64 `json:"seed"`
	Status           string `json:"status"` // StatusOK or StatusFailed
	ExitStatus       int    `json:"exit_status"`
	GoalsOK          int    `json:"goals_ok"`
	GoalsMissed      int    `json:"goals_missed"`
	GoalsNotMeasured int    `json:"goals_not_measured"`
	// FailedOperations sums the lines' errors.
	FailedOperations     int               `json:"failed_operations"`
	FailedWorkloads      []WorkloadFailure `json:"failed_workloads"`
	CalibrationFallbacks []string          `json:"calibration_fallbacks"`
	Text                 string            `json:"text"` // the summary line
}

// summaryLine builds the summary record of a run.
func summaryLine(c *Config, passes []PassResult, goals []Goal, exit int) SummaryLine {
	s := Summarize(goals)
	out := SummaryLine{Workload: "summary", Seed: c.Seed, Status: StatusOK, ExitStatus: exit, GoalsOK: s.OK,
		GoalsMissed: s.Missed, GoalsNotMeasured: s.NotMeasured, FailedWorkloads: []WorkloadFailure{},
		CalibrationFallbacks: calibrationFallbacks(passes), Text: s.String()}
	if exit != 0 {
		out.Status = StatusFailed
	}
	for _, p := range passes {
		for _, wr := range p.Workloads {
			for _, l := range wr.Lines {
				out.FailedOperations += l.Errors
			}
			if we, ok := errors.AsType[*WorkloadError](wr.Err); ok {
				out.FailedWorkloads = append(out.FailedWorkloads, WorkloadFailure{Transport: p.Transport,
					Workload: wr.Workload.Name, Status: we.Status(), Error: we.Err.Error()})
			}
		}
	}
	return out
}

// calibrationFallbacks lists the run's distinct calibration fallbacks,
// each with the transport and the workloads it lay behind.
func calibrationFallbacks(passes []PassResult) []string {
	out := []string{}
	for _, p := range passes {
		var order []string
		users := map[string][]string{}
		for _, wr := range p.Workloads {
			for _, f := range wr.Calibration {
				k := f.String()
				if users[k] == nil {
					order = append(order, k)
				}
				users[k] = append(users[k], wr.Workload.Name)
			}
		}
		for _, k := range order {
			out = append(out, fmt.Sprintf("%s %s [%s]", p.Transport, k, strings.Join(users[k], ", ")))
		}
	}
	return out
}

package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// JSONLineError reports a line ReadPasses could not read.
type JSONLineError struct {
	Line int // 1-based
	Err  error
}

func (e *JSONLineError) Error() string {
	return fmt.Sprintf("scatterbench: JSON line %d: %v", e.Line, e.Err)
}

func (e *JSONLineError) Unwrap() []error { return []error{ErrJSONLines, e.Err} }

// ReadPasses rebuilds pass results from the JSON lines of a run (-json):
// what the pictures and the report need (lines, ceilings, statuses), so a
// captured run can be drawn again. A pass is a run of lines of one
// transport; lines of transport "local" (engram-cpu, the local-lookup
// ceiling) belong to the pass they appear in. The summary record is
// skipped.
func ReadPasses(r io.Reader) ([]PassResult, error) {
	var passes []PassResult
	matrix := map[string]Workload{}
	for _, w := range Matrix() {
		matrix[w.Name] = w
	}
	pass := func(transport, owner string) *PassResult {
		if n := len(passes); n > 0 && (transport == "local" || passes[n-1].Transport == transport) {
			return &passes[n-1]
		}
		passes = append(passes, PassResult{Transport: transport, Owner: owner})
		return &passes[len(passes)-1]
	}
	workload := func(p *PassResult, name string) *WorkloadResult {
		for i := range p.Workloads {
			if p.Workloads[i].Workload.Name == name {
				return &p.Workloads[i]
			}
		}
		w, ok := Lookup(name)
		if !ok {
			if w, ok = matrix[name]; !ok {
				w = Workload{Name: name}
			}
		}
		p.Workloads = append(p.Workloads, WorkloadResult{Workload: w, Status: StatusOK})
		return &p.Workloads[len(p.Workloads)-1]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		b := sc.Bytes()
		if strings.TrimSpace(string(b)) == "" {
			continue
		}
		var head struct {
			Workload string `json:"workload"`
		}
		if err := json.Unmarshal(b, &head); err != nil {
			return nil, &JSONLineError{Line: n, Err: err}
		}
		switch {
		case head.Workload == "summary":
		case strings.HasPrefix(head.Workload, "ceiling/"):
			var c CeilingLine
			if err := json.Unmarshal(b, &c); err != nil {
				return nil, &JSONLineError{Line: n, Err: err}
			}
			if c.For == "" {
				return nil, &JSONLineError{Line: n, Err: errors.New(`ceiling without "for"`)}
			}
			wr := workload(pass(c.Transport, c.Owner), c.For)
			wr.Ceilings = append(wr.Ceilings, c)
		case head.Workload == "":
			return nil, &JSONLineError{Line: n, Err: errors.New(`no "workload"`)}
		default:
			var l Line
			if err := json.Unmarshal(b, &l); err != nil {
				return nil, &JSONLineError{Line: n, Err: err}
			}
			p := pass(l.Transport, l.Owner)
			wr := workload(p, l.Workload)
			wr.Lines = append(wr.Lines, l)
			wr.OverBound = append(wr.OverBound, 0)
			if l.Status == StatusFailed || l.Status == StatusNotRun {
				wr.Status = l.Status
				if wr.Err == nil {
					wr.Err = &WorkloadError{Transport: p.Transport, Workload: l.Workload, NotRun: l.Status == StatusNotRun, Err: errors.New(l.Error)}
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return passes, nil
}

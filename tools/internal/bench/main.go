package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"syscall"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Main runs scatterbench with args (without the program name) and returns
// the exit status: 0 when every workload ran, every operation succeeded,
// every payload verified and nothing leaked (missed performance goals do
// not fail a run: they are measurements); 1 otherwise (a failed workload
// is listed with its reason and the others still run); 2 for a usage
// error. The output ends with one line, "N goals ok, M missed, K not
// measured" (with -json also a "summary" record). SIGINT and SIGTERM stop
// the run, stop the owner and remove the namespace.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := Parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "%v\n(scatterbench -h lists the flags)\n", err)
		return 2
	}
	return Run(ctx, &c, stdout, stderr)
}

// Run runs a parsed configuration (see Main).
func Run(ctx context.Context, c *Config, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if c.CPUProfile != "" {
		// The whole run, requester and (with -owner inproc) owner: the
		// profile to read before changing the pipeline (docs/benchmarks.md).
		f, err := os.Create(c.CPUProfile)
		if err != nil {
			fmt.Fprintf(stderr, "scatterbench: -cpuprofile: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "scatterbench: -cpuprofile: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if c.ExecTrace != "" {
		f, err := os.Create(c.ExecTrace)
		if err != nil {
			fmt.Fprintf(stderr, "scatterbench: -exectrace: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			fmt.Fprintf(stderr, "scatterbench: -exectrace: %v\n", err)
			return 2
		}
		defer trace.Stop()
	}
	table := stdout
	var jsonOut *bufio.Writer
	if c.JSONPath != "" {
		var w io.Writer = stdout
		if c.JSONPath == "-" {
			table = stderr
		} else {
			f, err := os.Create(c.JSONPath)
			if err != nil {
				fmt.Fprintf(stderr, "scatterbench: -json: %v\n", err)
				return 2
			}
			defer f.Close()
			w = f
		}
		jsonOut = bufio.NewWriter(w)
		defer jsonOut.Flush()
	}
	if c.PlotDir != "" {
		if err := os.MkdirAll(c.PlotDir, 0o755); err != nil {
			fmt.Fprintf(stderr, "scatterbench: -plot: %v\n", err)
			return 2
		}
	}
	r := &Runner{cfg: c, stderr: stderr}
	if jsonOut != nil {
		enc := json.NewEncoder(jsonOut)
		r.emit = func(v any) error {
			if err := enc.Encode(v); err != nil {
				return err
			}
			return jsonOut.Flush()
		}
	}
	bar := newProgress(c, stderr)
	if bar != nil {
		r.step = func(desc string) {
			bar.Describe(desc)
			_ = bar.Add(1)
		}
	}
	if !c.Quiet {
		fmt.Fprintf(stderr, "scatterbench: %d pass(es), owner %s, seed %d; starting the owner (filling a %d MiB table)...\n",
			len(c.Passes), c.Owner, c.Seed, c.TableBytes>>20)
	}
	passes, runErr := r.Run(ctx)
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(stderr)
	}
	goals := Goals(passes)
	if !c.Quiet {
		PrintTable(table, c, passes)
		PrintGoals(table, goals)
	}
	if c.PlotDir != "" {
		if err := WritePlots(c.PlotDir, passes); err != nil {
			fmt.Fprintf(stderr, "scatterbench: -plot: %v\n", err)
			runErr = errors.Join(runErr, err)
		}
	}
	if c.ReportDir != "" {
		if err := WriteReport(c.ReportDir, c, passes); err != nil {
			fmt.Fprintf(stderr, "scatterbench: -report: %v\n", err)
			runErr = errors.Join(runErr, err)
		}
	}
	failed := runErr != nil
	for _, p := range passes {
		if p.Leaked > 0 || p.Err != nil {
			failed = true
		}
		for _, w := range p.Workloads {
			failed = failed || w.Err != nil
			for _, l := range w.Lines {
				failed = failed || l.Errors > 0 || l.LeakedLeases > 0
			}
		}
	}
	code := 0
	if failed {
		code = 1
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "scatterbench: interrupted (%v); the owner was stopped and its namespace, if any, removed\n", context.Cause(ctx))
	case runErr != nil:
		fmt.Fprintf(stderr, "FAILED: %v\n", runErr)
	case failed:
		fmt.Fprintf(stderr, "FAILED: scatterbench: workloads did not run, operations failed or leases leaked (see the table)\n")
	}
	// The run ends with one summary line (and record).
	sum := summaryLine(c, passes, goals, code)
	if r.emit != nil {
		r.emitLine(sum)
	}
	if c.Quiet {
		fmt.Fprintln(stderr, sum.Text)
	} else {
		fmt.Fprintf(table, "\n%s\n", sum.Text)
	}
	return code
}

// newProgress returns a progress bar on stderr when it is a terminal and
// the run is not quiet.
func newProgress(c *Config, stderr io.Writer) *progressbar.ProgressBar {
	f, ok := stderr.(*os.File)
	if c.Quiet || !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	total := 0
	for _, p := range c.Passes {
		for i := range p.Workloads {
			total += p.Workloads[i].Reps(c) + c.Warmup
		}
	}
	total *= max(1, len(c.Sweep.Values))
	return progressbar.NewOptions(total, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("scatterbench"),
		progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100_000_000))
}

package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// ErrUsage marks a command line the profiler cannot run.
var ErrUsage = errors.New("scatterprof: usage")

// FlagError reports a bad flag value.
type FlagError struct {
	Flag, Reason string
}

func (e *FlagError) Error() string { return fmt.Sprintf("scatterprof: %s: %s", e.Flag, e.Reason) }

// Unwrap returns ErrUsage.
func (e *FlagError) Unwrap() error { return ErrUsage }

// Config is one profiling run.
type Config struct {
	PIDs     []int         // attach to these running processes
	Command  []string      // or start this command and profile it
	Children bool          // follow the targets' descendants
	Interval time.Duration // live table refresh; 0 prints only the final summary
	Duration time.Duration // stop after this long; 0 runs until the targets exit or a signal
	JSON     bool          // JSON lines instead of tables
	Delta    bool          // refreshes show the last interval, not the totals
	Metrics  string        // serve Prometheus /metrics at this address
	Pairs    int           // calibration pairs; 0 skips calibration
	Poll     time.Duration // how often to look for new children and exited targets
}

const usage = `usage:
  scatterprof [flags] -p PID[,PID...]     profile running processes
  scatterprof [flags] -- COMMAND [ARG...]  start a command and profile it
  scatterprof bench [flags]                measure the profiler's overhead and agreement

Attaches entry uprobes to the scatterkit engine's stage markers
(verbs/stage) and reports, per stage, count, p50/p95/p99, bytes and share
of operation time. Needs root; the target must keep its symbol table.

flags:
`

// Parse reads the command line of a profiling run.
func Parse(args []string, out io.Writer) (Config, error) {
	c := Config{Children: true}
	fs := flag.NewFlagSet("scatterprof", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(out, usage)
		fs.PrintDefaults()
	}
	pids := fs.String("p", "", "process ids to attach to, comma-separated")
	fs.BoolVar(&c.Children, "children", true, "also profile the targets' descendants (found by polling /proc)")
	fs.DurationVar(&c.Interval, "interval", time.Second, "refresh the live table this often (0: final summary only)")
	fs.DurationVar(&c.Duration, "duration", 0, "stop after this long (0: until the targets exit or SIGINT)")
	fs.BoolVar(&c.JSON, "json", false, "print JSON lines (one per refresh and the final summary) instead of tables")
	fs.BoolVar(&c.Delta, "delta", false, "each refresh shows only the last interval (the final summary still shows the totals)")
	fs.StringVar(&c.Metrics, "metrics", "", "serve Prometheus metrics at this address (host:port), path /metrics")
	fs.IntVar(&c.Pairs, "calibrate", 20000, "marker pairs fired to calibrate the probe's cost (0: do not calibrate)")
	fs.DurationVar(&c.Poll, "poll", 100*time.Millisecond, "how often to look for new child processes and exited targets")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	c.Command = fs.Args()
	if *pids != "" {
		for _, f := range strings.Split(*pids, ",") {
			pid, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || pid <= 0 {
				return c, &FlagError{Flag: "-p", Reason: fmt.Sprintf("%q is not a process id", f)}
			}
			c.PIDs = append(c.PIDs, pid)
		}
	}
	switch {
	case len(c.PIDs) == 0 && len(c.Command) == 0:
		return c, &FlagError{Flag: "-p", Reason: "give process ids with -p or a command after --"}
	case len(c.PIDs) > 0 && len(c.Command) > 0:
		return c, &FlagError{Flag: "-p", Reason: "give process ids or a command, not both"}
	case c.Interval < 0:
		return c, &FlagError{Flag: "-interval", Reason: "must not be negative"}
	case c.Interval > 0 && c.Interval < 50*time.Millisecond:
		return c, &FlagError{Flag: "-interval", Reason: "at least 50ms"}
	case c.Duration < 0:
		return c, &FlagError{Flag: "-duration", Reason: "must not be negative"}
	case c.Pairs < 0:
		return c, &FlagError{Flag: "-calibrate", Reason: "must not be negative"}
	case c.Poll < 10*time.Millisecond:
		return c, &FlagError{Flag: "-poll", Reason: "at least 10ms"}
	}
	return c, nil
}

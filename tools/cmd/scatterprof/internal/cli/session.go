package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/probe"
	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/report"
)

// session is one profiling run: the profiler, its targets and the
// processes it follows.
type session struct {
	cfg    Config
	prof   *probe.Profiler
	cal    probe.Calibration
	out    io.Writer // tables and JSON lines
	errOut io.Writer // notes and errors
	tty    bool      // out is a terminal: redraw the live table in place
	start  time.Time

	prev     report.Snapshot // the last refresh's reading (-delta)
	prevTime time.Time       // when it was taken (the profile's start before the first)

	mu      sync.Mutex
	known   map[int]bool    // every process of the followed trees
	live    map[int]bool    // attached and not yet seen to exit
	targets []report.Target // every process ever attached, in order
}

// exitFail is the exit status of a run that could not start.
const exitFail = 1

// cmdGrace is how long an interrupted command may take to end.
const cmdGrace = 10 * time.Second

func runProfile(ctx context.Context, c Config, stdout, stderr io.Writer) int {
	s := &session{cfg: c, out: stdout, errOut: stderr, known: map[int]bool{}, live: map[int]bool{}, start: time.Now()}
	if len(c.Command) > 0 {
		s.out = stderr // the command owns stdout
	}
	if f, ok := s.out.(*os.File); ok && !c.JSON {
		s.tty = term.IsTerminal(int(f.Fd()))
	}
	prof, err := probe.New()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFail
	}
	s.prof = prof
	defer prof.Close()
	if c.Pairs > 0 {
		if s.cal, err = prof.Calibrate(c.Pairs); err != nil {
			fmt.Fprintln(stderr, err)
			return exitFail
		}
	}
	if c.Metrics != "" {
		stop, err := s.serveMetrics(c.Metrics)
		if err != nil {
			fmt.Fprintf(stderr, "scatterprof: -metrics %s: %v\n", c.Metrics, err)
			return exitFail
		}
		defer stop()
	}

	var cmd *exec.Cmd
	cmdDone := make(chan error, 1)
	s.start = time.Now()
	if len(c.Command) > 0 {
		path, err := exec.LookPath(c.Command[0])
		if err != nil {
			fmt.Fprintf(stderr, "scatterprof: %v\n", err)
			return exitFail
		}
		cmd = exec.Command(path, c.Command[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
		aerr, err := startGated(cmd, s.attach)
		if err != nil {
			fmt.Fprintf(stderr, "scatterprof: start %s: %v\n", c.Command[0], err)
			return exitFail
		}
		s.mu.Lock()
		s.known[cmd.Process.Pid] = true
		s.mu.Unlock()
		if aerr != nil {
			if !c.Children {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				fmt.Fprintln(stderr, aerr)
				return exitFail
			}
			fmt.Fprintf(stderr, "%v\nscatterprof: following its children\n", aerr)
		}
		go func() { cmdDone <- cmd.Wait() }()
	} else {
		for _, pid := range c.PIDs {
			if err := s.attach(pid); err != nil {
				fmt.Fprintln(stderr, err)
				return exitFail
			}
			s.mu.Lock()
			s.known[pid] = true
			s.mu.Unlock()
		}
	}

	var (
		refresh <-chan time.Time
		stopAt  <-chan time.Time
	)
	if c.Interval > 0 {
		t := time.NewTicker(c.Interval)
		defer t.Stop()
		refresh = t.C
	}
	if c.Duration > 0 {
		t := time.NewTimer(c.Duration)
		defer t.Stop()
		stopAt = t.C
	}
	poll := time.NewTicker(c.Poll)
	defer poll.Stop()
	var cmdErr error
	cmdRunning, interrupted := cmd != nil, false
loop:
	for {
		select {
		case <-ctx.Done():
			if cmdRunning {
				_ = cmd.Process.Signal(os.Interrupt)
				interrupted = true
			}
			break loop
		case <-stopAt:
			break loop
		case cmdErr = <-cmdDone:
			cmdRunning = false
			s.poll()
			break loop
		case <-refresh:
			s.print(false)
		case <-poll.C:
			if !s.poll() && !cmdRunning {
				fmt.Fprintln(stderr, "scatterprof: every target exited; profile ends")
				break loop
			}
		}
	}
	s.print(true)
	if err := s.prof.Close(); err != nil {
		fmt.Fprintf(stderr, "scatterprof: detach: %v\n", err)
	}
	switch {
	case cmdRunning && interrupted:
		// The command was sent SIGINT; give it time to end.
		select {
		case cmdErr = <-cmdDone:
		case <-time.After(cmdGrace):
			fmt.Fprintf(stderr, "scatterprof: %s still running %v after SIGINT; killing it\n", c.Command[0], cmdGrace)
			_ = cmd.Process.Kill()
			cmdErr = <-cmdDone
		}
	case cmdRunning:
		// -duration ended the profile: the command runs on, unprobed.
		fmt.Fprintf(stderr, "scatterprof: profile ended after %v; waiting for %s\n", c.Duration, c.Command[0])
		cmdErr = <-cmdDone
	}
	if cmd != nil {
		var ee *exec.ExitError
		switch {
		case errors.As(cmdErr, &ee):
			return max(ee.ExitCode(), 1)
		case cmdErr != nil:
			fmt.Fprintf(stderr, "scatterprof: %s: %v\n", c.Command[0], cmdErr)
			return exitFail
		}
	}
	return 0
}

// attach probes one process and records it.
func (s *session) attach(pid int) error {
	t, err := s.prof.Attach(pid)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live[pid] = true
	s.targets = append(s.targets, report.Target{PID: pid, Exe: t.Exe})
	return nil
}

// poll detaches targets that exited and, with -children, attaches new
// descendants. It reports whether any target is still running.
func (s *session) poll() bool {
	s.mu.Lock()
	var gone []int
	for pid := range s.live {
		if !alive(pid) {
			gone = append(gone, pid)
			delete(s.live, pid)
		}
	}
	parents := make(map[int]bool, len(s.known))
	for pid := range s.known {
		parents[pid] = true
	}
	s.mu.Unlock()
	for _, pid := range gone {
		if err := s.prof.Detach(pid); err != nil {
			fmt.Fprintf(s.errOut, "scatterprof: detach %d: %v\n", pid, err)
		}
		if len(s.cfg.Command) == 0 {
			fmt.Fprintf(s.errOut, "scatterprof: target %d exited\n", pid)
		}
	}
	if s.cfg.Children {
		kids, err := children(parents)
		if err != nil {
			fmt.Fprintf(s.errOut, "scatterprof: scan /proc: %v\n", err)
		}
		for _, pid := range kids {
			s.mu.Lock()
			s.known[pid] = true
			s.mu.Unlock()
			if err := s.attach(pid); err != nil && !errors.Is(err, probe.ErrNoMarkers) && !errors.Is(err, probe.ErrTargetExited) {
				fmt.Fprintf(s.errOut, "scatterprof: child %v\n", err)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid := range s.known {
		if !alive(pid) {
			delete(s.known, pid)
		}
	}
	return len(s.live) > 0 || len(s.known) > 0
}

// meta is what the summary needs besides the maps.
func (s *session) meta() report.Meta {
	s.mu.Lock()
	defer s.mu.Unlock()
	return report.Meta{Targets: append([]report.Target(nil), s.targets...), Elapsed: time.Since(s.start),
		Bias: s.cal.Bias, Hit: s.cal.Hit, Unprobed: s.cal.Unprobed}
}

// print writes the live table (or a JSON line), or the final summary.
func (s *session) print(final bool) {
	var snap report.Snapshot
	if err := s.prof.Read(&snap); err != nil {
		fmt.Fprintf(s.errOut, "scatterprof: %v\n", err)
		return
	}
	m := s.meta()
	shown := &snap
	if s.cfg.Delta && !final {
		if s.prevTime.IsZero() {
			s.prevTime = s.start
		}
		d := snap.Sub(&s.prev)
		shown, m.Elapsed = &d, snap.Time.Sub(s.prevTime)
		s.prev, s.prevTime = snap, snap.Time
	}
	sum := report.Summarize(shown, m)
	switch {
	case s.cfg.JSON:
		if err := sum.WriteJSON(s.out); err != nil {
			fmt.Fprintf(s.errOut, "scatterprof: %v\n", err)
		}
	case final:
		fmt.Fprintln(s.out, "scatterprof: final summary")
		sum.WriteTable(s.out)
	default:
		if s.tty {
			fmt.Fprint(s.out, "\x1b[H\x1b[2J")
		} else {
			fmt.Fprintf(s.out, "--- %s\n", snap.Time.Format(time.TimeOnly))
		}
		sum.WriteTable(s.out)
	}
}

// serveMetrics serves /metrics until the returned stop is called.
func (s *session) serveMetrics(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		var snap report.Snapshot
		if err := s.prof.Read(&snap); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		report.WritePrometheus(w, &snap, s.meta())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	fmt.Fprintf(s.errOut, "scatterprof: metrics at http://%s/metrics\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

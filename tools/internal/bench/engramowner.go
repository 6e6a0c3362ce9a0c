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
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs/tcp"
	"github.com/scatterkit/scatterkit/verbs/transports"
)

// EngramOwnerMode is the first argument that makes scatterbench an Engram
// owner process (EngramOwnerMain): engram-remote-sharded's owners and its
// one-owner ceiling with -owner process.
const EngramOwnerMode = "engram-owner"

// engramOwnerEvent is an Engram owner process's ready and closed lines.
type engramOwnerEvent struct {
	Event string `json:"event"` // "ready", "closed"
	Addr  string `json:"addr,omitempty"`
	Pid   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// EngramOwnerMain serves rows [lo, lo+rows) of the pattern table of seed
// (row size row-bytes) as table served, from a local store in a temporary
// directory, until stdin ends or SIGTERM/SIGINT: one JSON ready line with
// its address on stdout, one closed line when it stopped. Exit status 0,
// 1 for a failure, 2 for a usage error.
func EngramOwnerMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(EngramOwnerMode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	transport := fs.String("transport", "tcp", "transport")
	listen := fs.String("listen", "", "listen address (default: one only this host reaches)")
	served := fs.String("served", "", "name the rows are served as")
	seed := fs.Uint64("seed", 0, "pattern seed of the whole table")
	rowBytes := fs.Int("row-bytes", 0, "row size")
	lo := fs.Int64("lo", 0, "first row of the whole table served")
	rows := fs.Int64("rows", 0, "rows served")
	staging := fs.Int64("staging", 0, "gather service staging bytes (0: engram's default)")
	noChecksums := fs.Bool("tcp-no-checksums", false, "tcp frames without checksums with requesters that ask")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *served == "" || *rowBytes < 1 || *rows < 1 || *lo < 0 || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: want -served, -row-bytes >= 1, -rows >= 1, -lo >= 0 and no arguments\n", EngramOwnerMode)
		return 2
	}
	err := serveEngramOwner(ctx, *transport, *listen, *served, *seed, *rowBytes, *lo, *rows, *staging, *noChecksums, stdin, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", EngramOwnerMode, err)
		return 1
	}
	return 0
}

func serveEngramOwner(ctx context.Context, transport, listen, served string, seed uint64, rowBytes int, lo, rows, staging int64,
	noChecksums bool, stdin io.Reader, stdout io.Writer) (err error) {
	dir, err := os.MkdirTemp(scratchBase(), "scatterbench-engram-owner-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	st, err := engram.Open(ctx, engram.Config{Tables: map[string]engram.TableSpec{served: {NumRows: rows, RowBytes: rowBytes}},
		Namespace: engramNS, Dir: dir})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	R := uint64(rowBytes)
	if err := st.PopulateFrom(served, pattern.ReaderFrom(seed, uint64(lo)*R, uint64(rows)*R)); err != nil {
		return err
	}
	tr, err := transports.New(transport, transports.Config{TCP: tcp.Config{NoChecksums: noChecksums}})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, tr.Close()) }()
	if listen == "" {
		if listen, err = transports.LocalAddr(transport, "scatterbench-engram-owner"); err != nil {
			return err
		}
	}
	srv, err := st.Serve(engram.ServeConfig{Transport: tr, Addr: listen, StagingBytes: staging})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(engramOwnerEvent{Event: "ready", Addr: srv.Addr(), Pid: os.Getpid()}); err != nil {
		return errors.Join(err, srv.Close())
	}
	sctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(eof)
	}()
	select {
	case <-sctx.Done():
	case <-eof:
	}
	cerr := srv.Close()
	ev := engramOwnerEvent{Event: "closed"}
	if cerr != nil {
		ev.Error = cerr.Error()
	}
	return errors.Join(cerr, enc.Encode(ev))
}

// scratchBase is where owner processes keep their files: /dev/shm where
// it exists (memory, as a served table is), else the temporary directory.
func scratchBase() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// engramOwnerProc is an Engram owner child process.
type engramOwnerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	tail  *tailBuffer
	addr  string
	pid   int
}

// startEngramOwner starts an Engram owner process serving rows [lo,
// lo+rows) of e's table as served, and waits for its ready line.
func (c *Config) startEngramOwner(ctx context.Context, e *engramEnv, transport, served string, lo, rows int64) (h *engramOwnerProc, err error) {
	argv, err := c.ownerArgv()
	if err != nil {
		return nil, err
	}
	if c.ownerCommand == nil {
		argv = argv[:1] // this executable, without the scatterd mode
	}
	argv = append(argv, EngramOwnerMode, "-transport", transport, "-served", served, "-seed", strconv.FormatUint(e.seed, 10),
		"-row-bytes", strconv.Itoa(e.rowBytes), "-lo", strconv.FormatInt(lo, 10), "-rows", strconv.FormatInt(rows, 10),
		"-staging", strconv.FormatInt(c.StagingBytes, 10))
	if c.TCPNoChecksums {
		argv = append(argv, "-tcp-no-checksums")
	}
	h = &engramOwnerProc{tail: &tailBuffer{}, lines: make(chan string, 4)}
	fail := func(stage string, err error) error {
		return &OwnerError{Owner: OwnerProcess, Stage: "engram owner " + served + " " + stage, Detail: h.tail.String(), Err: err}
	}
	h.cmd = exec.Command(argv[0], argv[1:]...)
	h.cmd.Env = append(os.Environ(), c.ownerEnv...)
	h.cmd.Stderr = h.tail
	setParentDeath(h.cmd)
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		return nil, fail("start", err)
	}
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		return nil, fail("start", err)
	}
	if err := h.cmd.Start(); err != nil {
		return nil, fail("start", err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	defer func() {
		if err != nil {
			_ = h.close()
		}
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case line, ok := <-h.lines:
		var ev engramOwnerEvent
		if !ok {
			return h, fail("start", errors.New("exited before it was ready"))
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Event != "ready" || ev.Addr == "" {
			return h, fail("start", fmt.Errorf("unexpected first line %q (%v)", line, err))
		}
		h.addr, h.pid = ev.Addr, ev.Pid
	case <-timer.C:
		return h, fail("start", fmt.Errorf("not ready after %v", startTimeout))
	case <-ctx.Done():
		return h, fail("start", ctx.Err())
	}
	return h, nil
}

// close ends the child (stdin closed, then SIGKILL after 30 s) and
// returns what its closed line or exit reported.
func (h *engramOwnerProc) close() error {
	if h.cmd == nil || h.cmd.Process == nil {
		return nil
	}
	_ = h.stdin.Close()
	var closed *engramOwnerEvent
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	var errs []error
drain:
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				break drain
			}
			var ev engramOwnerEvent
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Event == "closed" {
				closed = &ev
			}
		case <-timer.C:
			_ = h.cmd.Process.Kill()
			errs = append(errs, errors.New("did not stop in 30 s; killed"))
			for range h.lines {
			}
			break drain
		}
	}
	if err := h.cmd.Wait(); err != nil {
		errs = append(errs, fmt.Errorf("exit: %w", err))
	}
	switch {
	case closed == nil:
		errs = append(errs, errors.New("no closed line"))
	case closed.Error != "":
		errs = append(errs, errors.New(closed.Error))
	}
	h.cmd = nil
	if err := errors.Join(errs...); err != nil {
		return &OwnerError{Owner: OwnerProcess, Stage: "engram owner close", Detail: h.tail.String(), Err: err}
	}
	return nil
}

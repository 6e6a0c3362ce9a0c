package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scatterkit/scatterkit/tools/internal/netns"
	"github.com/scatterkit/scatterkit/tools/internal/owner"
	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// ownerSpec is what a pass needs from its owner.
type ownerSpec struct {
	transport    string
	tableBytes   int64
	seed         uint64
	scratch      int64
	scratchSeed  uint64
	stagingBytes int64
	slots        int
	noChecksums  bool // tcp frames without checksums (Config.TCPNoChecksums)
}

// ownerHandle is a running owner, wherever it runs.
type ownerHandle interface {
	// addr is where to connect, as found in the discovery directory.
	addr() string
	// desc says where the owner runs.
	desc() string
	// calibrationFallback is what the owner says of its gather service's
	// packing calibration: why it uses costmodel's conservative figures,
	// or "" when it measured them (or does not say: an owner predating
	// the ready line's calibration_fallback).
	calibrationFallback() string
	// close stops the owner and returns the staging leases it leaked.
	close() (int, error)
}

// startTimeout bounds an owner's start (filling a large table included).
const startTimeout = 3 * time.Minute

// recordName is the discovery name of this run's owner for a transport.
func recordName(transport string) string {
	return fmt.Sprintf("scatterbench/%d/%s", os.Getpid(), transport)
}

// inprocOwner runs in this process, published in a memory directory.
type inprocOwner struct {
	o    *owner.Owner
	dir  *discovery.Memory
	adr  string
	done bool
}

func startInproc(ctx context.Context, s ownerSpec) (*inprocOwner, error) {
	h := &inprocOwner{dir: discovery.NewMemory()}
	name := recordName(s.transport)
	var err error
	h.o, err = owner.Start(ctx, owner.Config{Transport: s.transport, TCPNoChecksums: s.noChecksums, Size: s.tableBytes, Seed: s.seed,
		Scratch: s.scratch, ScratchSeed: s.scratchSeed, StagingBytes: s.stagingBytes, StagingSlots: s.slots,
		Directory: h.dir, Name: name, BenchControl: true})
	if err != nil {
		_ = h.dir.Close()
		return nil, &OwnerError{Owner: OwnerInproc, Stage: "start", Err: err}
	}
	rec, err := h.dir.Lookup(ctx, name)
	if err != nil {
		_, cerr := h.close()
		return nil, &OwnerError{Owner: OwnerInproc, Stage: "lookup", Err: errors.Join(err, cerr)}
	}
	h.adr = rec.Addr
	return h, nil
}

func (h *inprocOwner) addr() string                { return h.adr }
func (h *inprocOwner) desc() string                { return "inproc" }
func (h *inprocOwner) calibrationFallback() string { return h.o.Info().CalibrationFallback }

func (h *inprocOwner) close() (int, error) {
	if h.done {
		return 0, nil
	}
	h.done = true
	rep, err := h.o.Close()
	err = errors.Join(err, h.dir.Close())
	if err != nil {
		return rep.LeakedLeases, &OwnerError{Owner: OwnerInproc, Stage: "close", Err: err}
	}
	return rep.LeakedLeases, nil
}

// procOwner is this binary re-executed in owner mode (the daemon's code,
// owner.Main), possibly inside a network namespace.
type procOwner struct {
	kind   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	tail   *tailBuffer
	ready  owner.ReadyEvent
	adr    string
	tmpDir string
	done   bool
}

// tailBuffer keeps the last bytes written to it (the owner's stderr), and
// forwards everything to w when w is set.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	w   io.Writer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8<<10 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-4<<10:]...)
	}
	if t.w != nil {
		_, _ = t.w.Write(p)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// ownerArgv returns the argv prefix that runs owner mode.
func (c *Config) ownerArgv() ([]string, error) {
	if c.ownerCommand != nil {
		return append([]string(nil), c.ownerCommand...), nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return []string{exe, "owner"}, nil
}

// startProcess starts the owner as a child process (inside link's
// namespace when link is set), waits for its ready event and finds its
// address in a discovery file of its own.
func startProcess(ctx context.Context, c *Config, s ownerSpec, link *netns.Link, stderr io.Writer) (h *procOwner, err error) {
	kind := OwnerProcess
	listen := ""
	if link != nil {
		kind = OwnerNetns
		listen = link.PeerAddr.String() + ":0"
	} else if s.transport == "tcp" {
		listen = "127.0.0.1:0"
	}
	fail := func(stage string, err error) error {
		detail := ""
		if h != nil && h.tail != nil {
			detail = h.tail.String()
		}
		return &OwnerError{Owner: kind, Stage: stage, Detail: detail, Err: err}
	}
	base := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	tmp, err := os.MkdirTemp(base, "scatterbench-")
	if err != nil {
		return nil, fail("start", err)
	}
	h = &procOwner{kind: kind, tmpDir: tmp, tail: &tailBuffer{w: stderr}, lines: make(chan string, 4)}
	defer func() {
		if err != nil {
			_, _ = h.close()
		}
	}()
	dirPath := tmp + "/discovery.json"
	name := recordName(s.transport)
	argv, err := c.ownerArgv()
	if err != nil {
		return h, fail("start", err)
	}
	argv = append(argv, "-transport", s.transport, "-size", strconv.FormatInt(s.tableBytes, 10),
		"-seed", strconv.FormatUint(s.seed, 10), "-scratch", strconv.FormatInt(s.scratch, 10),
		"-scratch-seed", strconv.FormatUint(s.scratchSeed, 10), "-staging", strconv.FormatInt(s.stagingBytes, 10),
		"-slots", strconv.Itoa(s.slots), "-discovery", dirPath, "-name", name, "-bench-control", "-stdin-eof", "-quiet")
	if listen != "" {
		argv = append(argv, "-listen", listen)
	}
	if s.noChecksums {
		argv = append(argv, "-tcp-no-checksums")
	}
	if link != nil {
		argv = link.Command(argv[0], argv[1:]...)
	}
	h.cmd = exec.Command(argv[0], argv[1:]...)
	h.cmd.Env = append(os.Environ(), c.ownerEnv...)
	h.cmd.Stderr = h.tail
	setParentDeath(h.cmd)
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		return h, fail("start", err)
	}
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		return h, fail("start", err)
	}
	if err = h.cmd.Start(); err != nil {
		h.cmd = nil
		return h, fail("start", err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case line, ok := <-h.lines:
		if !ok {
			return h, fail("start", errors.New("exited before it was ready"))
		}
		if err = json.Unmarshal([]byte(line), &h.ready); err != nil || h.ready.Event != "ready" {
			return h, fail("start", fmt.Errorf("unexpected first line %q (%v)", line, err))
		}
	case <-timer.C:
		return h, fail("start", fmt.Errorf("not ready after %v", startTimeout))
	case <-ctx.Done():
		return h, fail("start", ctx.Err())
	}
	dir, err := discovery.NewFile(dirPath)
	if err != nil {
		return h, fail("lookup", err)
	}
	rec, err := dir.Lookup(ctx, name)
	err = errors.Join(err, dir.Close())
	if err != nil {
		return h, fail("lookup", err)
	}
	if rec.Addr != h.ready.Addr || rec.Transport != s.transport {
		return h, fail("lookup", fmt.Errorf("record %s %s differs from the ready event's %s %s", rec.Transport, rec.Addr, s.transport, h.ready.Addr))
	}
	h.adr = rec.Addr
	return h, nil
}

func (h *procOwner) addr() string { return h.adr }

// calibrationFallback is the ready line's calibration_fallback.
func (h *procOwner) calibrationFallback() string { return h.ready.CalibrationFallback }

func (h *procOwner) desc() string {
	if h.cmd == nil || h.cmd.Process == nil {
		return h.kind
	}
	return fmt.Sprintf("%s (pid %d)", h.kind, h.ready.Pid)
}

// close ends the child: closing its stdin asks it to shut down (it
// withdraws its record and reports leaks in a closed event); SIGTERM and
// then SIGKILL follow if it does not.
func (h *procOwner) close() (int, error) {
	if h.done {
		return 0, nil
	}
	h.done = true
	defer os.RemoveAll(h.tmpDir)
	if h.cmd == nil {
		return 0, nil
	}
	_ = h.stdin.Close()
	var closed *owner.ClosedEvent
	var errs []error
	drain := func(d time.Duration) bool {
		timer := time.NewTimer(d)
		defer timer.Stop()
		for {
			select {
			case line, ok := <-h.lines:
				if !ok {
					return true
				}
				var ev owner.ClosedEvent
				if json.Unmarshal([]byte(line), &ev) == nil && ev.Event == "closed" {
					closed = &ev
				}
			case <-timer.C:
				return false
			}
		}
	}
	if !drain(30 * time.Second) {
		_ = h.cmd.Process.Signal(os.Interrupt)
		if !drain(5 * time.Second) {
			_ = h.cmd.Process.Kill()
			drain(5 * time.Second)
			errs = append(errs, errors.New("did not stop; killed"))
		}
	}
	if err := h.cmd.Wait(); err != nil {
		errs = append(errs, fmt.Errorf("exit: %w", err))
	}
	leaked := 0
	switch {
	case closed == nil:
		errs = append(errs, errors.New("no closed event"))
	default:
		leaked = closed.LeakedLeases
		if closed.Error != "" {
			errs = append(errs, errors.New(closed.Error))
		}
	}
	if len(errs) > 0 {
		return leaked, &OwnerError{Owner: h.kind, Stage: "close", Detail: h.tail.String(), Err: errors.Join(errs...)}
	}
	return leaked, nil
}

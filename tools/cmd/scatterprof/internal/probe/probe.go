package probe

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/report"
)

// Profiler owns the kernel programs and maps and the uprobe links of its
// targets. Its methods are safe for concurrent use.
type Profiler struct {
	mu       sync.Mutex
	coll     *ebpf.Collection
	stages   *ebpf.Map
	counters *ebpf.Map
	targets  map[int]*Target
	ncpu     int
	buf      [][recWords]uint64 // per-CPU read buffer
}

// Target is an attached process.
type Target struct {
	PID     int
	Exe     string // the executable's path as /proc shows it
	Markers Markers
	links   []link.Link
}

// uprobeType is where the kernel lists its uprobe PMU; perf-event uprobes
// need no tracefs.
const uprobeType = "/sys/bus/event_source/devices/uprobe/type"

// New checks the platform and privileges, and loads the programs and maps.
// It returns ErrNotSupported, ErrNotRoot, ErrNoUprobes or ErrNoBPF (wrapped
// with the kernel's reason) when the profiler cannot run here.
func New() (*Profiler, error) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return nil, ErrNotSupported
	}
	if !privileged() {
		return nil, ErrNotRoot
	}
	if _, err := os.Stat(uprobeType); err != nil {
		if _, terr := os.Stat("/sys/kernel/tracing/uprobe_events"); terr != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoUprobes, err)
		}
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("%w: memlock limit: %v", ErrNoBPF, err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("%w: possible CPUs: %v", ErrNoBPF, err)
	}
	coll, err := ebpf.NewCollection(collectionSpec())
	if err != nil {
		if errors.Is(err, syscall.EPERM) {
			return nil, fmt.Errorf("%w: %v", ErrNotRoot, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrNoBPF, err)
	}
	return &Profiler{coll: coll, stages: coll.Maps["stages"], counters: coll.Maps["counters"],
		targets: map[int]*Target{}, ncpu: ncpu,
		buf: make([][recWords]uint64, ncpu)}, nil
}

// Capability bits (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// privileged reports whether this process may load tracing programs and
// attach uprobes: root, or the effective capabilities CAP_BPF and
// CAP_PERFMON (or CAP_SYS_ADMIN).
func privileged() bool {
	if os.Geteuid() == 0 {
		return true
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		hex, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return false
		}
		has := func(c uint) bool { return caps&(1<<c) != 0 }
		return has(capSysAdmin) || has(capBPF) && has(capPerfmon)
	}
	return false
}

// exePath is the path through which the kernel resolves a process's
// executable (it works for deleted binaries too).
func exePath(pid int) string { return fmt.Sprintf("/proc/%d/exe", pid) }

// Attach probes the markers of process pid. It returns an *ExecError
// wrapping ErrTargetExited, ErrStripped or ErrNoMarkers when the process
// cannot be profiled. Attaching a process twice is a no-op.
func (p *Profiler) Attach(pid int) (*Target, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.coll == nil {
		return nil, ErrClosed
	}
	if t, ok := p.targets[pid]; ok {
		return t, nil
	}
	if pid <= 0 {
		return nil, &ExecError{PID: pid, Path: "?", Err: fmt.Errorf("invalid pid: %w", ErrTargetExited)}
	}
	path := exePath(pid)
	exe, err := os.Readlink(path)
	if err != nil {
		return nil, &ExecError{PID: pid, Path: path, Err: fmt.Errorf("%w: %v", ErrTargetExited, err)}
	}
	m, err := CheckExecutable(path)
	if err != nil {
		var ee *ExecError
		if errors.As(err, &ee) {
			ee.PID, ee.Path = pid, exe
		}
		return nil, err
	}
	return p.attachLocked(pid, path, exe, m)
}

// attachLocked attaches the programs to process pid at the markers' file
// offsets in the executable at path.
func (p *Profiler) attachLocked(pid int, path, exe string, m Markers) (*Target, error) {
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return nil, &ExecError{PID: pid, Path: exe, Err: err}
	}
	t := &Target{PID: pid, Exe: exe, Markers: m}
	for _, a := range []struct {
		sym  string
		off  uint64
		prog *ebpf.Program
	}{{BeginSymbol, m.Begin, p.coll.Programs["begin"]}, {EndSymbol, m.End, p.coll.Programs["end"]},
		{NextSymbol, m.Next, p.coll.Programs["next"]}} {
		if a.off == 0 {
			continue // no next marker in this executable
		}
		l, err := ex.Uprobe(a.sym, a.prog, &link.UprobeOptions{PID: pid, Address: a.off})
		if err != nil {
			closeLinks(t.links)
			if _, serr := os.Stat(path); serr != nil {
				err = fmt.Errorf("%w: %v", ErrTargetExited, err)
			} else if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
				err = fmt.Errorf("%w: %v", ErrNotRoot, err)
			} else if errors.Is(err, link.ErrNotSupported) {
				err = fmt.Errorf("%w: %v", ErrNoUprobes, err)
			}
			return nil, &ExecError{PID: pid, Path: exe, Err: fmt.Errorf("uprobe %s: %w", a.sym, err)}
		}
		t.links = append(t.links, l)
	}
	p.targets[pid] = t
	return t, nil
}

func closeLinks(ls []link.Link) error {
	var errs []error
	for _, l := range ls {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// Detach removes the probes from process pid. The process keeps running
// and its markers go back to costing one call. Detaching a process that is
// not attached is a no-op.
func (p *Profiler) Detach(pid int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.targets[pid]
	if !ok {
		return nil
	}
	delete(p.targets, pid)
	return closeLinks(t.links)
}

// Targets lists the attached processes in pid order.
func (p *Profiler) Targets() []Target {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Target, 0, len(p.targets))
	for _, t := range p.targets {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b Target) int { return a.PID - b.PID })
	return out
}

// setBias sets the nanoseconds the kernel subtracts from every interval:
// the bias word of every stage record on every CPU. It rewrites whole
// records, so it runs only while nothing is attached (calibration).
func (p *Profiler) setBias(d time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.coll == nil {
		return ErrClosed
	}
	if len(p.targets) > 0 {
		return errors.New("scatterprof: the bias is set only while no process is attached")
	}
	for s := range report.MaxStages {
		if err := p.stages.Lookup(uint32(s), &p.buf); err != nil {
			return fmt.Errorf("scatterprof: read stage %d: %w", s, err)
		}
		for c := range p.buf {
			p.buf[c][wordBias] = uint64(max(d, 0))
		}
		if err := p.stages.Put(uint32(s), p.buf); err != nil {
			return fmt.Errorf("scatterprof: set the bias of stage %d: %w", s, err)
		}
	}
	return nil
}

// Read fills snap with the maps' contents, summed over CPUs.
func (p *Profiler) Read(snap *report.Snapshot) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.coll == nil {
		return ErrClosed
	}
	*snap = report.Snapshot{Time: time.Now()}
	for s := range report.MaxStages {
		if err := p.stages.Lookup(uint32(s), &p.buf); err != nil {
			return fmt.Errorf("scatterprof: read stage %d: %w", s, err)
		}
		st := &snap.Stages[s]
		for _, rec := range p.buf {
			for j := range report.Buckets {
				st.Hist[j] += rec[j]
			}
			st.Count += rec[wordCount]
			st.SumNs += rec[wordSum]
			st.Bytes += rec[wordBytes]
			st.Probes += rec[wordProbes]
			snap.Counters.Nexts += rec[wordNexts]
		}
	}
	ctr := make([][nCounters]uint64, p.ncpu)
	if err := p.counters.Lookup(uint32(0), &ctr); err != nil {
		return fmt.Errorf("scatterprof: read counters: %w", err)
	}
	c := &snap.Counters
	for _, v := range ctr {
		c.Unmatched += v[ctrUnmatched]
		c.BadStage += v[ctrBadStage]
		c.StoreErrors += v[ctrStoreErr]
	}
	return nil
}

// clearCalibration zeroes the calibration stage's record (but its bias)
// and the counters on every CPU.
func (p *Profiler) clearCalibration() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.coll == nil {
		return ErrClosed
	}
	if err := p.stages.Put(uint32(report.CalibrationStage), make([][recWords]uint64, p.ncpu)); err != nil {
		return err
	}
	return p.counters.Put(uint32(0), make([][nCounters]uint64, p.ncpu))
}

// Close detaches every target and unloads the programs.
func (p *Profiler) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.coll == nil {
		return nil
	}
	var errs []error
	for pid, t := range p.targets {
		errs = append(errs, closeLinks(t.links))
		delete(p.targets, pid)
	}
	p.coll.Close()
	p.coll = nil
	return errors.Join(errs...)
}

package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/tools/internal/netns"
	"github.com/scatterkit/scatterkit/tools/internal/units"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/tcp"
	"github.com/scatterkit/scatterkit/verbs/transports"
)

// Owner placements.
const (
	OwnerInproc  = "inproc"
	OwnerProcess = "process"
	OwnerNetns   = "netns"
)

// Mode is a mode scatterbench runs a workload in: a forced verbs mode or
// the engine's own choice ("adaptive").
type Mode struct {
	Name  string
	Verbs engine.Mode
}

// Modes are the modes -mode accepts; "all" means the first three.
var Modes = []Mode{
	{"direct", engine.ModeDirect},
	{"gather", engine.ModeGather},
	{"adaptive", engine.ModeAuto},
	{"hybrid", engine.ModeHybrid},
}

// Pass is one transport with the workloads run over it (one owner).
type Pass struct {
	Transport string
	Workloads []Workload
}

// Config is a parsed command line.
type Config struct {
	Passes []Pass
	// DefaultPasses records that neither -transport nor -workloads nor a
	// geometry flag was given: the default run (tcp, the default
	// workloads, then many-small over shm).
	DefaultPasses bool
	Owner         string
	TBF           string
	// CPUProfile and ExecTrace: files for a CPU profile and a Go execution
	// trace of the run (empty: none).
	CPUProfile    string
	ExecTrace     string
	Modes         []Mode
	StagingSlots  int
	StagingBytes  int64
	Callers       int
	Reps, Warmup  int
	Seed          uint64
	SeedFromClock bool
	JSONPath      string
	PlotDir       string
	ReportDir     string // index.html: tables, goals, pictures (WriteReport)
	Quiet         bool
	TableBytes    int64
	Lanes         int
	// TCPNoChecksums runs tcp without frame checksums (verbs/tcp
	// Config.NoChecksums on both sides), to measure what they cost.
	TCPNoChecksums bool
	// ChunkedRead sets engine.Config.ChunkedRead on the requester's engine.
	ChunkedRead bool
	// DstGPU puts READ destinations in device memory of GPU 0 (-dst gpu, a
	// build with -tags cuda): every operation an Engine.DoDevice, with the
	// h2d-copy and host-dst ceilings measured beside it.
	DstGPU bool
	// Explain prints to stderr the cost model's decision (parameters,
	// candidates, the hybrid split) of the last measured operation of each
	// workload and mode (-explain).
	Explain bool
	// Sweep repeats the run once per value of an axis (-sweep).
	Sweep Sweep

	// ownerCommand replaces the argv prefix that starts a process owner
	// (default: this executable and "owner"); ownerEnv is added to its
	// environment. Tests run their own binary as the owner.
	ownerCommand []string
	ownerEnv     []string
	// corrupt, when set, changes the bytes of a verified destination
	// before they are checked (tests prove verification catches it).
	corrupt func(dst []byte)
	// calibrate, when set, replaces costmodel.CalibrateOrFallback for the
	// in-process gather services (tests make it fall back).
	calibrate func(context.Context, costmodel.CalibrateOptions) (costmodel.Calibration, error)
}

// Limits of the numeric flags.
const (
	MaxReps    = 100_000
	MaxCallers = 64
	MinTable   = 1 << 20
	MaxTable   = 1 << 40
)

type bytesValue struct{ v *int64 }

func (b bytesValue) String() string {
	if b.v == nil {
		return "0"
	}
	return units.FormatBytes(*b.v)
}

func (b bytesValue) Set(s string) error {
	n, err := units.ParseBytes(s)
	if err == nil {
		*b.v = n
	}
	return err
}

// Parse parses scatterbench's command line (usage goes to out). Every
// rejection wraps ErrUsage (a *FlagError, or the flag package's own
// message), or is flag.ErrHelp.
func Parse(args []string, out io.Writer) (Config, error) {
	var (
		c Config
		f cliFlags
	)
	fs := newFlagSet(&c, &f, out)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		// The flag package's own rejections (an unknown flag, a value
		// its Set refused) are usage errors too.
		return c, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return c, &FlagError{Flag: "arguments", Value: fs.Arg(0), Reason: "unexpected; every setting is a flag (the owner mode is \"scatterbench owner ...\" as the first argument)"}
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if err := c.checkSettings(&f); err != nil {
		return c, err
	}
	list, err := f.workloadList(uint64(c.TableBytes))
	if err != nil {
		return c, err
	}
	if c.DstGPU {
		if !f.set["workloads"] && !f.custom() {
			list, _ = Expand("many-small,few-large,mixed")
		}
		for i := range list {
			if !gpuWorkload(&list[i]) {
				return c, &FlagError{Flag: "-dst", Value: "gpu", Reason: fmt.Sprintf("workload %s is not a scatter READ from one owner (Engram, reshard, Structured Object, WRITE and multi-owner workloads keep their own destinations)", list[i].Name)}
			}
		}
	}
	if err := c.setPasses(&f, list); err != nil {
		return c, err
	}
	return c, nil
}

// cliFlags are the flags that Parse checks before they become settings
// (or workloads and passes), and which flags were given.
type cliFlags struct {
	transports, modes, workloads string
	fragSize, largeSize          int64
	frags, largeCount            int
	src, dst, dir                string
	seed                         string
	set                          map[string]bool
}

// custom reports whether a custom workload's geometry flag was given.
func (f *cliFlags) custom() bool {
	return f.set["frag-size"] || f.set["frags"] || f.set["large-count"] || f.set["large-size"] || f.set["src"] || f.set["dst"] || f.set["dir"]
}

// newFlagSet defines scatterbench's flags, into c or f, with their
// defaults.
func newFlagSet(c *Config, f *cliFlags, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("scatterbench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&f.transports, "transport", "", "transports, comma-separated: tcp, shm, ucx (a build with -tags ucx) (default: tcp, plus many-small over shm)")
	fs.StringVar(&c.Owner, "owner", OwnerProcess, "where the owner runs: inproc, process (this binary re-executed), netns (a network namespace over veth; root)")
	fs.StringVar(&c.TBF, "tbf", "", "with -owner netns: shape the veth with tc tbf at this rate (e.g. 1gbit)")
	fs.StringVar(&f.modes, "mode", "all", "modes, comma-separated: direct, gather, adaptive, hybrid; all = direct,gather,adaptive")
	fs.StringVar(&f.workloads, "workloads", "", "workloads, comma-separated: "+strings.Join(Names(), ", ")+"; all; matrix; default = "+strings.Join(DefaultWorkloads, ","))
	fs.Var(bytesValue{&f.fragSize}, "frag-size", "custom workload: small fragment size")
	fs.IntVar(&f.frags, "frags", 0, "custom workload: small fragment count")
	fs.IntVar(&f.largeCount, "large-count", 0, "custom workload: large fragment count")
	fs.Var(bytesValue{&f.largeSize}, "large-size", "custom workload: large fragment size")
	fs.StringVar(&f.src, "src", string(Random), "custom workload: source order, random or sequential")
	fs.StringVar(&f.dst, "dst", string(Contiguous), "custom workload: destination layout, contiguous or fragmented; gpu: the named (or custom) READ workloads into device memory of GPU 0 (a build with -tags cuda)")
	fs.StringVar(&f.dir, "dir", "read", "custom workload: direction, read or write")
	fs.IntVar(&c.StagingSlots, "staging-slots", 8, "owner staging slots one gather command may hold (P)")
	c.StagingBytes = 64 << 20
	fs.Var(bytesValue{&c.StagingBytes}, "staging-bytes", "owner staging pool size")
	fs.IntVar(&c.Callers, "callers", 1, "concurrent callers, each with its own destination")
	fs.IntVar(&c.Reps, "reps", 20, "measured repetitions per workload and mode")
	fs.IntVar(&c.Warmup, "warmup", 3, "unmeasured repetitions first")
	fs.StringVar(&f.seed, "seed", "", "seed of the owner's data and the plans (default: from the clock, printed)")
	fs.StringVar(&c.JSONPath, "json", "", "write JSON lines to this file (\"-\": stdout, the table then goes to stderr)")
	fs.StringVar(&c.PlotDir, "plot", "", "write PNG plots into this directory")
	fs.StringVar(&c.ReportDir, "report", "", "write an HTML report (index.html: tables, goals, pictures; no external assets) into this directory")
	fs.BoolVar(&c.Quiet, "quiet", false, "no table, no progress bar (errors still go to stderr)")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of this process (with -owner inproc, the owner's too) to this file")
	fs.StringVar(&c.ExecTrace, "exectrace", "", "write a Go execution trace of this process to this file (go tool trace)")
	c.TableBytes = 1 << 30
	fs.Var(bytesValue{&c.TableBytes}, "table-bytes", "size of the owner's data region")
	fs.IntVar(&c.Lanes, "lanes", 0, "tcp lanes per connection (0: verbs' default)")
	fs.BoolVar(&c.TCPNoChecksums, "tcp-no-checksums", false, "tcp frames without checksums on both sides (to measure what they cost)")
	fs.Var(sweepValue{&c.Sweep}, "sweep", "repeat the run once per value of an axis and plot goodput over it: AXIS=V1,V2,... with AXIS one of "+strings.Join(SweepAxes, ", ")+" (e.g. staging-slots=1,2,4,8)")
	fs.BoolVar(&c.ChunkedRead, "chunked-read", false, "READ gathers as a command per chunk, P in flight (engine.Config.ChunkedRead; experimental)")
	fs.BoolVar(&c.Explain, "explain", false, "print to stderr the cost model's decision (parameters, candidates, hybrid split) of each workload and mode's last measured operation")
	return fs
}

// checkSettings sets the seed (from the clock without -seed) and the
// modes, and checks the settings' ranges and combinations.
func (c *Config) checkSettings(f *cliFlags) error {
	if f.dst == "gpu" { // the destination's memory, not a custom geometry
		if newDeviceMem == nil {
			return &FlagError{Flag: "-dst", Value: f.dst, Reason: errNoGPU.Error()}
		}
		c.DstGPU, f.dst = true, string(Contiguous)
		delete(f.set, "dst")
	}
	if f.seed == "" {
		c.Seed, c.SeedFromClock = uint64(time.Now().UnixNano())&(1<<53-1), true
	} else {
		v, err := strconv.ParseUint(f.seed, 10, 64)
		if err != nil {
			return &FlagError{Flag: "-seed", Value: f.seed, Reason: "want an unsigned integer"}
		}
		c.Seed = v
	}
	switch c.Owner {
	case OwnerInproc, OwnerProcess, OwnerNetns:
	default:
		return &FlagError{Flag: "-owner", Value: c.Owner, Reason: "want inproc, process or netns"}
	}
	var err error
	if c.Modes, err = parseModes(f.modes); err != nil {
		return err
	}
	num := []struct {
		flag  string
		v, lo int
		hi    int
	}{
		{"-reps", c.Reps, 1, MaxReps}, {"-warmup", c.Warmup, 0, MaxReps}, {"-callers", c.Callers, 1, MaxCallers},
		{"-staging-slots", c.StagingSlots, 1, 1 << 16}, {"-lanes", c.Lanes, 0, verbs.MaxLanes},
		{"-frags", f.frags, 0, 1 << 24}, {"-large-count", f.largeCount, 0, 1 << 24},
	}
	for _, n := range num {
		if n.v < n.lo || n.v > n.hi {
			return &FlagError{Flag: n.flag, Value: strconv.Itoa(n.v), Reason: fmt.Sprintf("must lie in [%d, %d]", n.lo, n.hi)}
		}
	}
	if err := c.Sweep.check(); err != nil {
		return err
	}
	if c.TableBytes < MinTable || c.TableBytes > MaxTable {
		return &FlagError{Flag: "-table-bytes", Value: strconv.FormatInt(c.TableBytes, 10), Reason: "must lie in [1 MiB, 1 TiB]"}
	}
	if c.StagingBytes < 1<<20 || c.StagingBytes > 1<<36 {
		return &FlagError{Flag: "-staging-bytes", Value: strconv.FormatInt(c.StagingBytes, 10), Reason: "must lie in [1 MiB, 64 GiB]"}
	}
	if c.TBF != "" {
		if c.Owner != OwnerNetns {
			return &FlagError{Flag: "-tbf", Value: c.TBF, Reason: "shapes the veth of -owner netns only"}
		}
		if _, err := netns.RateBytes(c.TBF); err != nil {
			return &FlagError{Flag: "-tbf", Value: c.TBF, Reason: err.Error()}
		}
	}
	return nil
}

// workloadList returns the workloads to run, each checked against a
// table of tableBytes: the named ones (-workloads, else the default
// unless a custom workload is given), then "custom" from the geometry
// flags.
func (f *cliFlags) workloadList(tableBytes uint64) ([]Workload, error) {
	var list []Workload
	var err error
	switch {
	case f.workloads != "":
		if list, err = Expand(f.workloads); err != nil {
			return nil, err
		}
	case !f.custom():
		list, _ = Expand("default")
	}
	if f.custom() {
		w, err := f.customWorkload()
		if err != nil {
			return nil, err
		}
		list = append(list, w)
	}
	for i := range list {
		if err := list[i].Check(tableBytes); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// customWorkload is the workload the geometry flags describe, with
// scatterbench's default fragment sizes where only a count is given.
func (f *cliFlags) customWorkload() (Workload, error) {
	w := Workload{Name: "custom", Doc: "geometry from the flags", Small: Frags{uint64(f.fragSize), f.frags},
		Large: Frags{uint64(f.largeSize), f.largeCount}, Src: Order(f.src), Dst: Layout(f.dst)}
	switch f.dir {
	case "read":
		w.Dir = verbs.OpRead
	case "write":
		w.Dir = verbs.OpWrite
	default:
		return w, &FlagError{Flag: "-dir", Value: f.dir, Reason: "want read or write"}
	}
	if w.Src != Random && w.Src != Sequential {
		return w, &FlagError{Flag: "-src", Value: f.src, Reason: "want random or sequential"}
	}
	if w.Dst != Contiguous && w.Dst != Fragmented {
		return w, &FlagError{Flag: "-dst", Value: f.dst, Reason: "want contiguous or fragmented"}
	}
	if w.Small.Count > 0 && w.Small.Size == 0 {
		w.Small.Size = 264
	}
	if w.Large.Count > 0 && w.Large.Size == 0 {
		w.Large.Size = 512 << 10
	}
	if w.Fragments() == 0 {
		return w, &FlagError{Flag: "-frags", Value: "0", Reason: "a custom workload needs -frags or -large-count"}
	}
	return w, nil
}

// setPasses sets a pass per transport (-transport, tcp by default) over
// the workloads, plus, for the default run, many-small over shm.
func (c *Config) setPasses(f *cliFlags, list []Workload) error {
	c.DefaultPasses = f.transports == "" && f.workloads == "" && !f.custom()
	var ts []string
	if f.transports == "" {
		ts = []string{"tcp"}
	} else {
		for _, t := range strings.Split(f.transports, ",") {
			t = strings.TrimSpace(t)
			var unknown *transports.UnknownError
			if errors.As(transports.Check(t), &unknown) {
				return &FlagError{Flag: "-transport", Value: t, Reason: unknown.Want()}
			}
			if c.Owner == OwnerNetns && t == "shm" {
				return &FlagError{Flag: "-transport", Value: t, Reason: "shm connects processes of one host through a Unix socket, not over the veth: use tcp with -owner netns"}
			}
			ts = append(ts, t)
		}
	}
	for _, t := range ts {
		c.Passes = append(c.Passes, Pass{Transport: t, Workloads: list})
	}
	if c.DefaultPasses && c.Owner != OwnerNetns {
		ms, _ := Lookup("many-small")
		c.Passes = append(c.Passes, Pass{Transport: "shm", Workloads: []Workload{ms}})
	}
	return nil
}

func parseModes(s string) ([]Mode, error) {
	var out []Mode
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "all" {
			for _, m := range Modes[:3] {
				if !seen[m.Name] {
					seen[m.Name] = true
					out = append(out, m)
				}
			}
			continue
		}
		found := false
		for _, m := range Modes {
			if m.Name == name {
				found = true
				if !seen[name] {
					seen[name] = true
					out = append(out, m)
				}
			}
		}
		if !found {
			return nil, &FlagError{Flag: "-mode", Value: name, Reason: "want direct, gather, adaptive, hybrid or all"}
		}
	}
	return out, nil
}

// newTransport returns a transport of the named kind ("tcp" or "shm") as
// the configuration asks.
func (c *Config) newTransport(kind string) (verbs.Transport, error) {
	tr, err := transports.New(kind, transports.Config{TCP: tcp.Config{NoChecksums: c.TCPNoChecksums}})
	if err != nil {
		return nil, fmt.Errorf("scatterbench: %w", err)
	}
	return tr, nil
}

// newTransportPair returns two transports of the named kind, an owner's
// and a requester's for a pass run in this process.
func (c *Config) newTransportPair(kind string) (owner, req verbs.Transport, err error) {
	if owner, err = c.newTransport(kind); err != nil {
		return nil, nil, err
	}
	if req, err = c.newTransport(kind); err != nil {
		return nil, nil, errors.Join(err, owner.Close())
	}
	return owner, req, nil
}

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
	Verbs verbs.Mode
}

// Modes are the modes -mode accepts; "all" means the first three.
var Modes = []Mode{
	{"direct", verbs.ModeDirect},
	{"gather", verbs.ModeGather},
	{"adaptive", verbs.ModeAuto},
	{"hybrid", verbs.ModeHybrid},
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
// rejection is a *FlagError wrapping ErrUsage, or flag.ErrHelp.
func Parse(args []string, out io.Writer) (Config, error) {
	var (
		c                         Config
		transportList, modes, wls string
		fragSize, largeSize       int64
		frags, largeCount         int
		src, dst, dir             string
		seed                      string
	)
	fs := flag.NewFlagSet("scatterbench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&transportList, "transport", "", "transports, comma-separated: tcp, shm (default: tcp, plus many-small over shm)")
	fs.StringVar(&c.Owner, "owner", OwnerProcess, "where the owner runs: inproc, process (this binary re-executed), netns (a network namespace over veth; root)")
	fs.StringVar(&c.TBF, "tbf", "", "with -owner netns: shape the veth with tc tbf at this rate (e.g. 1gbit)")
	fs.StringVar(&modes, "mode", "all", "modes, comma-separated: direct, gather, adaptive, hybrid; all = direct,gather,adaptive")
	fs.StringVar(&wls, "workloads", "", "workloads, comma-separated: "+strings.Join(Names(), ", ")+"; all; matrix; default = "+strings.Join(DefaultWorkloads, ","))
	fs.Var(bytesValue{&fragSize}, "frag-size", "custom workload: small fragment size")
	fs.IntVar(&frags, "frags", 0, "custom workload: small fragment count")
	fs.IntVar(&largeCount, "large-count", 0, "custom workload: large fragment count")
	fs.Var(bytesValue{&largeSize}, "large-size", "custom workload: large fragment size")
	fs.StringVar(&src, "src", string(Random), "custom workload: source order, random or sequential")
	fs.StringVar(&dst, "dst", string(Contiguous), "custom workload: destination layout, contiguous or fragmented")
	fs.StringVar(&dir, "dir", "read", "custom workload: direction, read or write")
	fs.IntVar(&c.StagingSlots, "staging-slots", 8, "owner staging slots one gather command may hold (P)")
	c.StagingBytes = 64 << 20
	fs.Var(bytesValue{&c.StagingBytes}, "staging-bytes", "owner staging pool size")
	fs.IntVar(&c.Callers, "callers", 1, "concurrent callers, each with its own destination")
	fs.IntVar(&c.Reps, "reps", 20, "measured repetitions per workload and mode")
	fs.IntVar(&c.Warmup, "warmup", 3, "unmeasured repetitions first")
	fs.StringVar(&seed, "seed", "", "seed of the owner's data and the plans (default: from the clock, printed)")
	fs.StringVar(&c.JSONPath, "json", "", "write JSON lines to this file (\"-\": stdout, the table then goes to stderr)")
	fs.StringVar(&c.PlotDir, "plot", "", "write PNG plots into this directory")
	fs.StringVar(&c.ReportDir, "report", "", "write an HTML report (index.html: tables, goals, pictures; no external assets) into this directory")
	fs.BoolVar(&c.Quiet, "quiet", false, "no table, no progress bar (errors still go to stderr)")
	c.TableBytes = 1 << 30
	fs.Var(bytesValue{&c.TableBytes}, "table-bytes", "size of the owner's data region")
	fs.IntVar(&c.Lanes, "lanes", 0, "tcp lanes per connection (0: verbs' default)")
	fs.BoolVar(&c.TCPNoChecksums, "tcp-no-checksums", false, "tcp frames without checksums on both sides (to measure what they cost)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, &FlagError{Flag: "arguments", Value: fs.Arg(0), Reason: "unexpected; every setting is a flag (the owner mode is \"scatterbench owner ...\" as the first argument)"}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if seed == "" {
		c.Seed, c.SeedFromClock = uint64(time.Now().UnixNano())&(1<<53-1), true
	} else {
		v, err := strconv.ParseUint(seed, 10, 64)
		if err != nil {
			return c, &FlagError{Flag: "-seed", Value: seed, Reason: "want an unsigned integer"}
		}
		c.Seed = v
	}
	switch c.Owner {
	case OwnerInproc, OwnerProcess, OwnerNetns:
	default:
		return c, &FlagError{Flag: "-owner", Value: c.Owner, Reason: "want inproc, process or netns"}
	}
	var err error
	if c.Modes, err = parseModes(modes); err != nil {
		return c, err
	}
	num := []struct {
		flag  string
		v, lo int
		hi    int
	}{
		{"-reps", c.Reps, 1, MaxReps}, {"-warmup", c.Warmup, 0, MaxReps}, {"-callers", c.Callers, 1, MaxCallers},
		{"-staging-slots", c.StagingSlots, 1, 1 << 16}, {"-lanes", c.Lanes, 0, verbs.MaxLanes},
		{"-frags", frags, 0, 1 << 24}, {"-large-count", largeCount, 0, 1 << 24},
	}
	for _, n := range num {
		if n.v < n.lo || n.v > n.hi {
			return c, &FlagError{Flag: n.flag, Value: strconv.Itoa(n.v), Reason: fmt.Sprintf("must lie in [%d, %d]", n.lo, n.hi)}
		}
	}
	if c.TableBytes < MinTable || c.TableBytes > MaxTable {
		return c, &FlagError{Flag: "-table-bytes", Value: strconv.FormatInt(c.TableBytes, 10), Reason: "must lie in [1 MiB, 1 TiB]"}
	}
	if c.StagingBytes < 1<<20 || c.StagingBytes > 1<<36 {
		return c, &FlagError{Flag: "-staging-bytes", Value: strconv.FormatInt(c.StagingBytes, 10), Reason: "must lie in [1 MiB, 64 GiB]"}
	}
	if c.TBF != "" {
		if c.Owner != OwnerNetns {
			return c, &FlagError{Flag: "-tbf", Value: c.TBF, Reason: "shapes the veth of -owner netns only"}
		}
		if _, err := netns.RateBytes(c.TBF); err != nil {
			return c, &FlagError{Flag: "-tbf", Value: c.TBF, Reason: err.Error()}
		}
	}

	// Workloads: named ones, plus "custom" from the geometry flags.
	custom := set["frag-size"] || set["frags"] || set["large-count"] || set["large-size"] || set["src"] || set["dst"] || set["dir"]
	var list []Workload
	switch {
	case wls != "":
		if list, err = Expand(wls); err != nil {
			return c, err
		}
	case !custom:
		list, _ = Expand("default")
	}
	if custom {
		w := Workload{Name: "custom", Doc: "geometry from the flags", Small: Frags{uint64(fragSize), frags},
			Large: Frags{uint64(largeSize), largeCount}, Src: Order(src), Dst: Layout(dst)}
		switch dir {
		case "read":
			w.Dir = verbs.OpRead
		case "write":
			w.Dir = verbs.OpWrite
		default:
			return c, &FlagError{Flag: "-dir", Value: dir, Reason: "want read or write"}
		}
		if w.Src != Random && w.Src != Sequential {
			return c, &FlagError{Flag: "-src", Value: src, Reason: "want random or sequential"}
		}
		if w.Dst != Contiguous && w.Dst != Fragmented {
			return c, &FlagError{Flag: "-dst", Value: dst, Reason: "want contiguous or fragmented"}
		}
		if w.Small.Count > 0 && w.Small.Size == 0 {
			w.Small.Size = 264
		}
		if w.Large.Count > 0 && w.Large.Size == 0 {
			w.Large.Size = 512 << 10
		}
		if w.Fragments() == 0 {
			return c, &FlagError{Flag: "-frags", Value: "0", Reason: "a custom workload needs -frags or -large-count"}
		}
		list = append(list, w)
	}
	for i := range list {
		if err := list[i].Check(uint64(c.TableBytes)); err != nil {
			return c, err
		}
	}

	// Passes.
	c.DefaultPasses = transportList == "" && wls == "" && !custom
	var ts []string
	if transportList == "" {
		ts = []string{"tcp"}
	} else {
		for _, t := range strings.Split(transportList, ",") {
			t = strings.TrimSpace(t)
			var unknown *transports.UnknownError
			if errors.As(transports.Check(t), &unknown) {
				return c, &FlagError{Flag: "-transport", Value: t, Reason: unknown.Want()}
			}
			if c.Owner == OwnerNetns && t == "shm" {
				return c, &FlagError{Flag: "-transport", Value: t, Reason: "shm connects processes of one host through a Unix socket, not over the veth: use tcp with -owner netns"}
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
	return c, nil
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

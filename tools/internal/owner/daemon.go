package owner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/scatterkit/scatterkit/tools/internal/dirspec"
	"github.com/scatterkit/scatterkit/tools/internal/units"
)

// ReadyEvent is the JSON line Main prints on stdout once the owner serves.
type ReadyEvent struct {
	Event     string        `json:"event"` // "ready"
	Name      string        `json:"name,omitempty"`
	Directory string        `json:"directory,omitempty"`
	Revision  int64         `json:"revision,omitempty"`
	Transport string        `json:"transport"`
	Addr      string        `json:"addr"`
	Pid       int           `json:"pid"`
	Regions   []EventRegion `json:"regions"`
	// Seed is set for generated data.
	Seed *uint64 `json:"seed,omitempty"`
	// Staging shape.
	StagingBytes int64 `json:"staging_bytes"`
	StagingSlots int   `json:"staging_slots"`
	PackWorkers  int   `json:"pack_workers"`
	// CalibrationFallback says why the gather service uses conservative
	// packing figures (empty: it measured them).
	CalibrationFallback string `json:"calibration_fallback,omitempty"`
}

// EventRegion is an exported region in a ReadyEvent.
type EventRegion struct {
	Name   string `json:"name"`
	Bytes  uint64 `json:"bytes"`
	Access string `json:"access"`
}

// ClosedEvent is the JSON line Main prints on stdout after shutting down.
type ClosedEvent struct {
	Event        string `json:"event"` // "closed"
	Reason       string `json:"reason"`
	LeakedLeases int    `json:"leaked_leases"`
	Leak         string `json:"leak,omitempty"`
	Reads        uint64 `json:"gather_reads"`
	Writes       uint64 `json:"gather_writes"`
	Failed       uint64 `json:"gather_failed"`
	StagingPeak  int64  `json:"staging_peak_bytes"`
	Error        string `json:"error,omitempty"`
}

// DefaultDirectory is the discovery file Main publishes into unless told
// otherwise: on /dev/shm when it exists (records mean something only for
// the current boot), else in the temporary directory.
func DefaultDirectory() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm/scatterkit-discovery.json"
	}
	return filepath.Join(os.TempDir(), "scatterkit-discovery.json")
}

// uidsFlag is a flag.Value of comma-separated user ids.
type uidsFlag struct{ p *[]uint32 }

func (f uidsFlag) String() string {
	if f.p == nil {
		return ""
	}
	parts := make([]string, len(*f.p))
	for i, u := range *f.p {
		parts[i] = strconv.FormatUint(uint64(u), 10)
	}
	return strings.Join(parts, ",")
}

func (f uidsFlag) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		u, err := strconv.ParseUint(strings.TrimSpace(part), 10, 32)
		if err != nil {
			return fmt.Errorf("user id %q: %w", part, err)
		}
		*f.p = append(*f.p, uint32(u))
	}
	return nil
}

// attrsFlag is a repeatable flag.Value of KEY=VALUE record attributes.
type attrsFlag struct{ m *map[string]string }

func (f attrsFlag) String() string {
	if f.m == nil || *f.m == nil {
		return ""
	}
	parts := make([]string, 0, len(*f.m))
	for k, v := range *f.m {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func (f attrsFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("attribute %q: want KEY=VALUE", s)
	}
	if *f.m == nil {
		*f.m = map[string]string{}
	}
	if _, dup := (*f.m)[k]; dup {
		return fmt.Errorf("attribute %q given twice", k)
	}
	(*f.m)[k] = v
	return nil
}

// netsFlag is a flag.Value of comma-separated networks (10.0.0.0/8) or
// addresses (a single host).
type netsFlag struct{ p *[]netip.Prefix }

func (f netsFlag) String() string {
	if f.p == nil {
		return ""
	}
	parts := make([]string, len(*f.p))
	for i, n := range *f.p {
		parts[i] = n.String()
	}
	return strings.Join(parts, ",")
}

func (f netsFlag) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		n, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return fmt.Errorf("network %q: want a CIDR prefix or an address", part)
			}
			n = netip.PrefixFrom(a, a.BitLen())
		}
		*f.p = append(*f.p, n.Masked())
	}
	return nil
}

// byteFlag is a flag.Value of a size with units ("1GiB").
type byteFlag struct{ v *int64 }

func (b byteFlag) String() string {
	if b.v == nil {
		return "0"
	}
	return strconv.FormatInt(*b.v, 10)
}

func (b byteFlag) Set(s string) error {
	n, err := units.ParseBytes(s)
	if err != nil {
		return err
	}
	*b.v = n
	return nil
}

// options are Main's command line.
type options struct {
	cfg       Config
	directory string
	stdinEOF  bool
	quiet     bool
}

func parse(name string, args []string, out io.Writer) (options, error) {
	var o options
	c := &o.cfg
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Transport, "transport", TransportTCP, "transport: tcp, shm or ucx (a build with -tags ucx)")
	fs.StringVar(&c.Listen, "listen", "", "address to serve at (tcp: host:port, default 127.0.0.1:0; shm: socket path or @name, default @scatterd-PID-N)")
	fs.StringVar(&c.File, "file", "", "serve this file's contents (mapped shared); exclusive with -size")
	fs.BoolVar(&c.Writable, "rw", false, "let requesters WRITE the data region (a -file is changed in place; tcp only for files)")
	fs.Var(byteFlag{&c.Size}, "size", "serve this many bytes of generated data (e.g. 1GiB); exclusive with -file")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the generated data (package pattern's stream)")
	fs.StringVar(&c.Export, "export", DefaultExport, "export name of the data region")
	fs.Var(byteFlag{&c.Scratch}, "scratch", "also export a read-write region \"scratch\" of this size (0: none)")
	fs.Uint64Var(&c.ScratchSeed, "scratch-seed", 2, "seed of the scratch region's initial bytes")
	fs.Var(byteFlag{&c.StagingBytes}, "staging", "gather service staging pool size (default 64MiB)")
	fs.IntVar(&c.StagingSlots, "slots", DefaultStagingSlots, "staging slots (chunks in flight) one gather command may hold")
	fs.IntVar(&c.PackWorkers, "pack-workers", 0, "goroutines packing one chunk (0: min(GOMAXPROCS, 8))")
	fs.BoolVar(&c.TCPNoChecksums, "tcp-no-checksums", false, "tcp: agree to frames without checksums with requesters that ask (trusted links only)")
	fs.DurationVar(&c.ProgressTimeout, "progress-timeout", 0, "evict a requester whose gather command makes no progress for this long (0: 2s)")
	fs.Var(uidsFlag{&c.AllowUIDs}, "allow-uid", "shm: comma-separated user ids that may connect, read and write (default: the owner's own user only)")
	fs.Var(uidsFlag{&c.ReadUIDs}, "read-uid", "shm: comma-separated user ids that may connect and only read")
	fs.Var(netsFlag{&c.AllowNets}, "allow-net", "tcp, ucx: comma-separated networks (CIDR) whose peers may connect, read and write (default: tcp every peer, ucx this host's only)")
	fs.Var(netsFlag{&c.ReadNets}, "read-net", "tcp, ucx: comma-separated networks (CIDR) whose peers may connect and only read")
	fs.BoolVar(&c.NoHugePages, "no-huge-pages", false, "skip the transparent huge page advice for generated tcp data")
	fs.StringVar(&c.Name, "name", fmt.Sprintf("scatterd/%d", os.Getpid()), "discovery record name")
	fs.Var(attrsFlag{&c.Attrs}, "attr", "KEY=VALUE added to the discovery record (repeatable): what the owner holds, e.g. shard=3 or objects=a-m")
	fs.StringVar(&o.directory, "discovery", DefaultDirectory(), "directory to publish in: a discovery file, etcd://HOST:PORT[,...]/PREFIX[?ttl=D] or etcds://... (cluster); \"off\" publishes nothing")
	fs.BoolVar(&c.BenchControl, "bench-control", false, "serve the pack-only benchmark method (owner package doc, # Format)")
	fs.BoolVar(&o.stdinEOF, "stdin-eof", false, "shut down when standard input reaches end of file (for a parent process)")
	fs.BoolVar(&o.quiet, "quiet", false, "print only the JSON events")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, &ConfigError{Field: "arguments", Value: fs.Arg(0), Reason: "unexpected; every setting is a flag"}
	}
	if o.directory == "off" || o.directory == "" {
		o.directory, c.Name = "", ""
	}
	return o, nil
}

// Main runs the owner daemon (scatterd, and scatterbench's owner mode):
// it parses args, starts the owner, prints a ReadyEvent line on stdout and
// a summary on stderr, serves until ctx ends, SIGINT or SIGTERM arrives,
// the discovery record is lost or (with -stdin-eof) stdin ends, then shuts
// down (withdrawing the record, closing the segment, reporting staging
// leases) and prints a ClosedEvent line. While it serves it returns freed
// heap to the system (returnMemory). It returns the exit status: 0 after a
// clean shutdown, 1 when starting failed or leases leaked, 2 for a usage
// error.
func Main(ctx context.Context, name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parse(name, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if o.stdinEOF && stdin != nil {
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			cancel(errors.New("standard input closed"))
		}()
	}
	if o.directory != "" {
		dir, err := dirspec.Open(ctx, o.directory)
		if err != nil {
			fmt.Fprintf(stderr, "%s: discovery %s: %v\n", name, dirspec.Describe(o.directory), err)
			if errors.Is(err, dirspec.ErrSpec) {
				return 2
			}
			return 1
		}
		defer dir.Close()
		o.cfg.Directory = dir
	}
	o.cfg.OnError = func(err error) {
		if !o.quiet {
			fmt.Fprintf(stderr, "%s: connection: %v\n", name, err)
		}
	}
	own, err := Start(ctx, o.cfg)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		if errors.Is(err, ErrConfig) {
			return 2
		}
		return 1
	}
	in := own.Info()
	ev := ReadyEvent{Event: "ready", Name: in.Name, Directory: dirspec.Describe(o.directory), Revision: in.Revision,
		Transport: in.Transport, Addr: in.Addr, Pid: in.Pid, StagingBytes: in.StagingBytes,
		StagingSlots: in.StagingSlots, PackWorkers: in.PackWorkers, CalibrationFallback: in.CalibrationFallback}
	for _, r := range in.Regions {
		ev.Regions = append(ev.Regions, EventRegion{Name: r.Name, Bytes: r.Len, Access: r.Access.String()})
	}
	if in.Generated {
		ev.Seed = &in.Seed
	}
	w := bufio.NewWriter(stdout)
	writeEvent(w, ev)
	if !o.quiet {
		src := "file " + o.cfg.File
		if in.Generated {
			src = fmt.Sprintf("generated data (seed %d)", in.Seed)
		}
		fmt.Fprintf(stderr, "%s: serving %s on %s %s (%s, %s); staging %s, %d slots, %d pack workers\n",
			name, in.Regions[0].Name, in.Transport, in.Addr, units.FormatBytes(int64(in.Regions[0].Len)), src,
			units.FormatBytes(in.StagingBytes), in.StagingSlots, in.PackWorkers)
		if in.Name != "" {
			fmt.Fprintf(stderr, "%s: published %q (revision %d) in %s; stop with SIGINT or SIGTERM\n", name, in.Name, in.Revision, dirspec.Describe(o.directory))
		}
	}
	trimCtx, stopTrim := context.WithCancel(ctx)
	trimmed := make(chan struct{})
	go func() {
		defer close(trimmed)
		returnMemory(trimCtx, trimInterval, trimExcess)
	}()
	defer func() {
		stopTrim()
		<-trimmed
	}()
	var lost <-chan struct{}
	if reg := own.Registration(); reg != nil {
		lost = reg.Done()
	}
	reason := "signal"
	select {
	case <-ctx.Done():
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			reason = c.Error()
		}
	case <-lost:
		reason = fmt.Sprintf("discovery record lost: %v", own.Registration().Err())
	}
	rep, cerr := own.Close()
	ce := ClosedEvent{Event: "closed", Reason: reason, LeakedLeases: rep.LeakedLeases, Leak: rep.Leak,
		Reads: rep.Service.Reads, Writes: rep.Service.Writes,
		Failed: rep.Service.Refused + rep.Service.Exhausted + rep.Service.Aborted, StagingPeak: rep.StagingPeak}
	if cerr != nil {
		ce.Error = cerr.Error()
	}
	writeEvent(w, ce)
	if !o.quiet {
		fmt.Fprintf(stderr, "%s: closed (%s): %d gather reads, %d writes, %d failed; %d staging leases leaked\n",
			name, reason, ce.Reads, ce.Writes, ce.Failed, ce.LeakedLeases)
	}
	if cerr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, cerr)
		return 1
	}
	return 0
}

// How Main returns freed memory: every trimInterval it looks at the heap
// and, when it holds more than trimExcess bytes it may not need, collects
// and returns what is free to the system (returnMemory, trimmer).
const (
	trimInterval = time.Second
	trimExcess   = 32 << 20
)

// returnMemory runs until ctx ends, every interval returning the heap's
// free memory to the system (debug.FreeOSMemory: a collection, then every
// free page released) when trimmer.due says so.
//
// The owner's budgets bound what peers make it hold at once (the call
// bytes of the transport, the gather service's memory budget, the staging
// pool), but not what stays resident after them: the runtime keeps freed
// heap for reuse and releases it in the background only down to the heap
// goal of its last collection, skipping memory that was densely used at
// that collection. A burst of large calls (a flood of huge commands,
// refused or not) so leaves its pages resident, and an owner that is idle
// afterwards runs no collection until the runtime forces one (every two
// minutes): TestMemoryAttackBounded saw 230 MiB stay for 20 s without
// this. With it, what a burst left goes back within trimMaxWait intervals
// of the burst's end.
func returnMemory(ctx context.Context, interval time.Duration, excess uint64) {
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/free:bytes"}, {Name: "/gc/heap/live:bytes"}}
	var h heapSample
	read := func() bool {
		metrics.Read(samples)
		for _, s := range samples {
			if s.Value.Kind() != metrics.KindUint64 {
				return false // a runtime without these metrics: leave it to the runtime
			}
		}
		h = heapSample{cycles: samples[0].Value.Uint64(), objects: samples[1].Value.Uint64(),
			free: samples[2].Value.Uint64(), live: samples[3].Value.Uint64()}
		return true
	}
	if !read() {
		return
	}
	tr := trimmer{excess: excess, seen: h.cycles}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !read() {
			return
		}
		if tr.due(h) {
			debug.FreeOSMemory()
			if !read() {
				return
			}
			tr.trimmed(h)
		}
	}
}

// heapSample is what returnMemory reads of the runtime's heap: collections
// completed, bytes in objects (live or not yet collected), free bytes not
// yet returned to the system, and the live bytes the last collection found.
type heapSample struct {
	cycles, objects, free, live uint64
}

// trimmer decides, once an interval, whether the heap holds more than
// excess bytes it may not need.
type trimmer struct {
	excess uint64
	seen   uint64 // collections at the previous look
	quiet  int    // looks since the last collection
	wait   int    // quiet looks before a large live heap is measured again (0: 1)
}

// trimMaxWait bounds trimmer.wait: a quiet owner whose live heap is
// really over the excess pays one collection per trimMaxWait intervals.
const trimMaxWait = 8

// due reports whether to trim now, given this interval's sample: when the
// heap's objects and free memory exceed what the last collection found
// live by more than excess (garbage, or freed memory kept); or when that
// collection found more than excess live and none has run for wait looks
// since. That live figure may be a burst's (collections run while large
// calls are in flight), stale once the owner is quiet, and only a
// collection tells; a trim that finds the live heap still that large
// doubles wait, up to trimMaxWait, and one that finds it small resets it.
// An owner whose heap stays under excess never trims; a busy one runs
// collections of its own, so it trims only for its garbage.
func (tr *trimmer) due(h heapSample) bool {
	if h.cycles != tr.seen {
		tr.seen, tr.quiet = h.cycles, 0
	} else {
		tr.quiet++
	}
	return h.objects+h.free > h.live+tr.excess || h.live > tr.excess && tr.quiet >= max(tr.wait, 1)
}

// trimmed records the sample taken right after a trim.
func (tr *trimmer) trimmed(h heapSample) {
	tr.seen, tr.quiet = h.cycles, 0
	if h.live > tr.excess {
		tr.wait = min(2*max(tr.wait, 1), trimMaxWait)
	} else {
		tr.wait = 1
	}
}

func writeEvent(w *bufio.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the event types always marshal
	}
	_, _ = w.Write(append(b, '\n'))
	_ = w.Flush()
}

package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/engram/snapshot"
	"github.com/scatterkit/scatterkit/tools/internal/owner"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: engramctl COMMAND [flags]

commands:
  create    declare tables:          -dir D -ns N -table NAME:ROWS:ROWBYTES [-table ...]
  populate  fill a declared table:   -dir D -ns N -table NAME (-from FILE | -gen SEED)
  inspect   list tables and headers: -dir D -ns N [-discovery FILE|etcd://...]
  verify    check declared tables:   -dir D -ns N [-table NAME]
  lookup    print rows:              -dir D -ns N -table NAME[,NAME...] -ids I,I,...
  bench     measure lookups:         -dir D -ns N -table NAME [-t 4096] [-k 24] [-reps 20]
  serve     serve populated tables:  -dir D -ns N [-transport tcp] [-listen ADDR] [-discovery FILE|etcd://...]

run "engramctl COMMAND -h" for a command's flags.
`

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" || args[0] == "--help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("engramctl "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory holding namespaces (required)")
	ns := fs.String("ns", "default", "namespace")
	var err error
	switch cmd {
	case "create":
		var tables multiFlag
		fs.Var(&tables, "table", "NAME:ROWS:ROWBYTES (repeatable)")
		if !parse(fs, args, dir) {
			return 2
		}
		err = cmdCreate(*dir, *ns, tables, stdout)
	case "populate":
		table := fs.String("table", "", "table to populate (required)")
		from := fs.String("from", "", "raw file of exactly ROWS x ROWBYTES bytes")
		gen := fs.String("gen", "", "generate rows from this seed (uint64) instead of -from")
		if !parse(fs, args, dir) {
			return 2
		}
		err = cmdPopulate(ctx, *dir, *ns, *table, *from, *gen, stdout)
	case "inspect":
		disc := fs.String("discovery", "", "also list the namespace's records in this directory: a discovery file or etcd://HOST:PORT/PREFIX (engramctl serve, engram.ServeConfig.Directory)")
		if !parse(fs, args, dir) {
			return 2
		}
		err = cmdInspect(*dir, *ns, stdout)
		if err == nil && *disc != "" {
			err = cmdRecords(ctx, *disc, *ns, stdout)
		}
	case "serve":
		transport := fs.String("transport", "tcp", "transport: tcp or shm")
		listen := fs.String("listen", "", "address to listen at (default: tcp 127.0.0.1:0, shm an abstract name)")
		disc := fs.String("discovery", owner.DefaultDirectory(), "directory the served tables are published in: a discovery file or etcd://HOST:PORT[,...]/PREFIX[?ttl=D] (\"off\": none)")
		staging := fs.Int64("staging", 64<<20, "gather service staging bytes")
		if !parse(fs, args, dir) {
			return 2
		}
		err = cmdServe(ctx, *dir, *ns, *transport, *listen, *disc, *staging, stdout)
	case "verify":
		table := fs.String("table", "", "only this declared table (default: every declared table)")
		if !parse(fs, args, dir) {
			return 2
		}
		err = cmdVerify(*dir, *ns, *table, stdout)
	case "lookup":
		tables := fs.String("table", "", "table per column, comma-separated (one name: every column)")
		ids := fs.String("ids", "", "ids, comma-separated, token-major [T,K]")
		k := fs.Int("k", 0, "ids per token (default: the number of -table names)")
		offsets := fs.String("offsets", "", "per-column offsets, comma-separated")
		format := fs.String("format", "hex", "row output: hex or crc")
		if !parse(fs, args, dir) {
			return 2
		}
		err = cmdLookup(ctx, *dir, *ns, *tables, *ids, *k, *offsets, *format, stdout)
	case "bench":
		table := fs.String("table", "", "table named in every column (required)")
		t := fs.Int("t", 4096, "tokens T")
		k := fs.Int("k", 24, "ids per token K")
		reps := fs.Int("reps", 20, "timed repetitions of each side")
		workers := fs.Int("workers", 0, "lookup and pack workers (default GOMAXPROCS, at most 8)")
		seed := fs.Uint64("seed", 0, "id seed (default: random, printed)")
		headMajor := fs.Bool("head-major", false, "head-major output [K,T,R]")
		if !parse(fs, args, dir) {
			return 2
		}
		err = cmdBench(ctx, *dir, *ns, *table, *t, *k, *reps, *workers, *seed, *headMajor, stdout)
	default:
		fmt.Fprintf(stderr, "engramctl: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "engramctl %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func parse(fs *flag.FlagSet, args []string, dir *string) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return false
	}
	if *dir == "" {
		fmt.Fprintf(fs.Output(), "%s: -dir is required\n", fs.Name())
		return false
	}
	return true
}

func cmdCreate(dir, ns string, tables []string, stdout io.Writer) error {
	if len(tables) == 0 {
		return errors.New("name at least one -table NAME:ROWS:ROWBYTES")
	}
	if err := snapshot.ValidName(ns); err != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	if err := os.MkdirAll(dir+"/"+ns, 0o755); err != nil {
		return err
	}
	m, err := readManifest(dir, ns)
	if err != nil {
		if _, statErr := os.Stat(manifestPath(dir, ns)); statErr == nil {
			return err
		}
		m = &manifest{Namespace: ns, Tables: map[string]manifestTable{}}
	}
	for _, v := range tables {
		name, t, err := parseTableFlag(v)
		if err != nil {
			return err
		}
		if err := snapshot.ValidName(name); err != nil {
			return fmt.Errorf("-table %q: %w", v, err)
		}
		if old, ok := m.Tables[name]; ok && old != t {
			return fmt.Errorf("table %q is already declared as %d rows x %d B%s", name, old.NumRows, old.RowBytes, old.ShardOf.describe())
		}
		m.Tables[name] = t
	}
	if err := writeManifest(dir, ns, m); err != nil {
		return err
	}
	for _, name := range m.names() {
		t := m.Tables[name]
		fmt.Fprintf(stdout, "%s/%s: %d rows x %d B (%s)%s\n", ns, name, t.NumRows, t.RowBytes, byteSize(t.NumRows*int64(t.RowBytes)), t.ShardOf.describe())
	}
	return nil
}

// openStore opens the namespace's store with the manifest's tables, or
// only the named ones.
func openStore(ctx context.Context, dir, ns string, only []string, pin engram.Pin) (*engram.Store, *manifest, error) {
	m, err := readManifest(dir, ns)
	if err != nil {
		return nil, nil, err
	}
	specs := m.specs()
	if len(only) > 0 {
		sel := map[string]engram.TableSpec{}
		for _, name := range only {
			spec, ok := specs[name]
			if !ok {
				return nil, nil, fmt.Errorf("table %q is not declared in %s (declared: %s)", name, manifestPath(dir, ns), strings.Join(m.names(), ", "))
			}
			sel[name] = spec
		}
		specs = sel
	}
	s, err := engram.Open(ctx, engram.Config{Tables: specs, Namespace: ns, Dir: dir, Pin: pin})
	return s, m, err
}

func cmdPopulate(ctx context.Context, dir, ns, table, from, gen string, stdout io.Writer) error {
	if table == "" {
		return errors.New("-table is required")
	}
	if (from == "") == (gen == "") {
		return errors.New("give exactly one of -from FILE and -gen SEED")
	}
	s, m, err := openStore(ctx, dir, ns, []string{table}, engram.PinNone)
	if err != nil {
		return err
	}
	defer s.Close()
	spec, err := s.TableSpec(table)
	if err != nil {
		return err
	}
	// A shard's rows are its slice of the whole table: of the file (one
	// holding the whole table, or exactly the shard) or of the stream.
	at := m.Tables[table].ShardOf.Lo * int64(spec.RowBytes)
	var src io.Reader
	if from != "" {
		f, err := os.Open(from)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		switch {
		case fi.Size() == spec.Size():
			src = f
		case m.Tables[table].ShardOf.Table != "" && fi.Size() >= at+spec.Size():
			src = io.NewSectionReader(f, at, spec.Size())
		default:
			return fmt.Errorf("%s holds %d bytes; table %q needs exactly %d (%v)%s", from, fi.Size(), table, spec.Size(), spec,
				m.Tables[table].ShardOf.describe())
		}
	} else {
		seed, err := strconv.ParseUint(gen, 0, 64)
		if err != nil {
			return fmt.Errorf("-gen %q: want an unsigned integer seed", gen)
		}
		src = pattern.ReaderFrom(seed, uint64(at), uint64(spec.Size()))
	}
	start := time.Now()
	if err := s.PopulateFrom(table, src); err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Fprintf(stdout, "%s/%s: populated %s in %v (%.2f GB/s)\n", ns, table, byteSize(spec.Size()), el.Round(time.Millisecond), float64(spec.Size())/el.Seconds()/1e9)
	return nil
}

func cmdInspect(dir, ns string, stdout io.Writer) error {
	m, err := readManifest(dir, ns)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "namespace %s (%s)\n", ns, dir+"/"+ns)
	for _, name := range m.names() {
		t := m.Tables[name]
		path := dir + "/" + ns + "/" + snapshot.FileName(name)
		h, err := snapshot.ReadHeader(path)
		switch {
		case errors.Is(err, os.ErrNotExist) || errors.Is(err, snapshot.ErrNotExist):
			fmt.Fprintf(stdout, "  %-24s %12d rows x %5d B  not populated\n", name, t.NumRows, t.RowBytes)
		case err != nil:
			fmt.Fprintf(stdout, "  %-24s %12d rows x %5d B  BAD: %v\n", name, t.NumRows, t.RowBytes, err)
		default:
			fmt.Fprintf(stdout, "  %-24s %12d rows x %5d B  %s  v%d, %d checksum blocks of %d rows, rows at offset %d, file %d B\n",
				name, t.NumRows, t.RowBytes, byteSize(t.NumRows*int64(t.RowBytes)), h.Version, h.NumBlocks, h.BlockRows, h.RowOffset, h.FileSize)
			if h.Spec.NumRows != t.NumRows || h.Spec.RowBytes != t.RowBytes {
				fmt.Fprintf(stdout, "  %-24s MISMATCH: the file holds %d rows x %d B\n", "", h.Spec.NumRows, h.Spec.RowBytes)
			}
		}
	}
	return nil
}

// cmdVerify checks every declared table (or the one named) against its
// declaration: the snapshot file must exist, hold the declared shape and
// pass every check of snapshot.Open, every row checksum included. A
// declared table without a file fails as "declared, not populated".
func cmdVerify(dir, ns, table string, stdout io.Writer) error {
	m, err := readManifest(dir, ns)
	if err != nil {
		return err
	}
	names := m.names()
	if table != "" {
		if _, ok := m.Tables[table]; !ok {
			return fmt.Errorf("table %q is not declared in %s (declared: %s)", table, manifestPath(dir, ns), strings.Join(names, ", "))
		}
		names = []string{table}
	}
	nsDir := filepath.Join(dir, ns)
	var failed []string
	for _, name := range names {
		mt := m.Tables[name]
		want := snapshot.Spec{Name: name, NumRows: mt.NumRows, RowBytes: mt.RowBytes}
		start := time.Now()
		err := verifyTable(nsDir, want)
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "%-24s ok (%v)\n", name, time.Since(start).Round(time.Millisecond))
		case errors.Is(err, snapshot.ErrNotExist):
			failed = append(failed, name+" (declared, not populated)")
			fmt.Fprintf(stdout, "%-24s MISSING: declared in %s as %d rows x %d B, not populated: %s is absent\n",
				name, manifestName, mt.NumRows, mt.RowBytes, filepath.Join(nsDir, snapshot.FileName(name)))
		case errors.Is(err, snapshot.ErrSpecMismatch):
			failed = append(failed, name+" (file differs from the declaration)")
			fmt.Fprintf(stdout, "%-24s MISMATCH: %v\n", name, err)
		default:
			failed = append(failed, name+" (bad file)")
			fmt.Fprintf(stdout, "%-24s BAD: %v\n", name, err)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d declared tables failed verification: %s", len(failed), len(names), strings.Join(failed, ", "))
	}
	return nil
}

// verifyTable opens the table want.Name of nsDir as declared, checking
// every row block's checksum, and closes it again.
func verifyTable(nsDir string, want snapshot.Spec) error {
	t, err := snapshot.Open(nsDir, want.Name, &want, &snapshot.OpenOptions{Pin: snapshot.PinNone})
	if err != nil {
		return err
	}
	return t.Close()
}

func parseInts(v, what string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("%s %q: not an integer", what, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func cmdLookup(ctx context.Context, dir, ns, tableList, idList string, k int, offList, format string, stdout io.Writer) error {
	if format != "hex" && format != "crc" {
		return fmt.Errorf("-format %q: want hex or crc", format)
	}
	names := strings.Split(tableList, ",")
	if tableList == "" {
		return errors.New("-table is required")
	}
	if k == 0 {
		k = len(names)
	}
	if len(names) == 1 && k > 1 {
		names = slices.Repeat(names, k)
	}
	if len(names) != k {
		return fmt.Errorf("%d table names for -k %d", len(names), k)
	}
	ids, err := parseInts(idList, "-ids")
	if err != nil {
		return err
	}
	if len(ids) == 0 || len(ids)%k != 0 {
		return fmt.Errorf("-ids: %d ids are not a whole number of tokens of %d", len(ids), k)
	}
	var offsets []int64
	if offList != "" {
		if offsets, err = parseInts(offList, "-offsets"); err != nil {
			return err
		}
	}
	uniq := slices.Compact(slices.Sorted(slices.Values(names)))
	s, _, err := openStore(ctx, dir, ns, uniq, engram.PinNone)
	if err != nil {
		return err
	}
	defer s.Close()
	spec, err := s.TableSpec(names[0])
	if err != nil {
		return err
	}
	t := len(ids) / k
	out := make([]byte, len(ids)*spec.RowBytes)
	if err := s.Lookup(names, engram.IDs64(ids, t, k), engram.TokenMajor(out, t, k, spec.RowBytes), &engram.LookupOptions{Offsets: offsets}); err != nil {
		return err
	}
	for i, id := range ids {
		row := out[i*spec.RowBytes : (i+1)*spec.RowBytes]
		prefix := fmt.Sprintf("[%d,%d] %s id %d:", i/k, i%k, names[i%k], id)
		switch {
		case id == -1:
			fmt.Fprintf(stdout, "%s skipped\n", prefix)
		case format == "crc":
			fmt.Fprintf(stdout, "%s crc32c %08x\n", prefix, crc32.Checksum(row, crc32.MakeTable(crc32.Castagnoli)))
		default:
			fmt.Fprintf(stdout, "%s %s\n", prefix, hex.EncodeToString(row))
		}
	}
	return nil
}

func cmdBench(ctx context.Context, dir, ns, table string, t, k, reps, workers int, seed uint64, headMajor bool, stdout io.Writer) error {
	if table == "" {
		return errors.New("-table is required")
	}
	if t < 1 || k < 1 || reps < 1 {
		return fmt.Errorf("-t, -k and -reps must be positive (got %d, %d, %d)", t, k, reps)
	}
	if workers <= 0 {
		workers = min(runtime.GOMAXPROCS(0), 8)
	}
	m, err := readManifest(dir, ns)
	if err != nil {
		return err
	}
	mt, ok := m.Tables[table]
	if !ok {
		return fmt.Errorf("table %q is not declared", table)
	}
	s, err := engram.Open(ctx, engram.Config{Tables: map[string]engram.TableSpec{table: {NumRows: mt.NumRows, RowBytes: mt.RowBytes}}, Namespace: ns, Dir: dir, Workers: workers})
	if err != nil {
		return err
	}
	defer s.Close()
	// The pack-only ceiling reads the same snapshot (same pages) directly.
	snap, err := snapshot.Open(dir+"/"+ns, table, nil, &snapshot.OpenOptions{Pin: snapshot.PinNone, SkipRowChecksums: true})
	if err != nil {
		return err
	}
	defer snap.Close()
	if seed == 0 {
		seed = rand.Uint64()
	}
	r := rand.New(rand.NewPCG(seed, 0x656e6772616d))
	rb := mt.RowBytes
	ids := make([]int64, t*k)
	for i := range ids {
		ids[i] = r.Int64N(mt.NumRows)
	}
	names := slices.Repeat([]string{table}, k)
	out := make([]byte, t*k*rb)
	packed := make([]byte, t*k*rb)
	layout := engram.TokenMajor(out, t, k, rb)
	if headMajor {
		layout = engram.HeadMajor(out, t, k, rb)
	}
	w := pack.NewWorkers(workers)
	defer w.Close()
	lookup := func() error { return s.Lookup(names, engram.IDs64(ids, t, k), layout, nil) }
	packOnly := func() error {
		return pack.ParallelGather(w, packed, snap.Rows, ids, pack.Layout{Rows: len(ids), RowBytes: rb})
	}
	for range 2 { // warm both sides (page faults, workers)
		if err := lookup(); err != nil {
			return err
		}
		if err := packOnly(); err != nil {
			return err
		}
	}
	var lt, pt []time.Duration
	for range reps { // alternate, so both sides see the same machine
		start := time.Now()
		if err := lookup(); err != nil {
			return err
		}
		lt = append(lt, time.Since(start))
		start = time.Now()
		if err := packOnly(); err != nil {
			return err
		}
		pt = append(pt, time.Since(start))
	}
	bytes := float64(t * k * rb)
	lp50, pp50 := pct(lt, 50), pct(pt, 50)
	layoutName := "token-major"
	if headMajor {
		layoutName = "head-major"
	}
	fmt.Fprintf(stdout, "table %s/%s (%s), T=%d K=%d R=%d %s, %d workers, seed %d, %d reps\n", ns, table, byteSize(int64(mt.NumRows)*int64(rb)), t, k, rb, layoutName, workers, seed, reps)
	fmt.Fprintf(stdout, "  lookup    p50 %9v  p95 %9v  %6.2f GB/s\n", lp50, pct(lt, 95), bytes/lp50.Seconds()/1e9)
	fmt.Fprintf(stdout, "  pack-only p50 %9v  p95 %9v  %6.2f GB/s\n", pp50, pct(pt, 95), bytes/pp50.Seconds()/1e9)
	fmt.Fprintf(stdout, "  lookup / pack-only goodput: %.2f\n", pp50.Seconds()/lp50.Seconds())
	return nil
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// describe prints a shard's place, "" for a whole table.
func (o shardOf) describe() string {
	if o.Table == "" {
		return ""
	}
	return fmt.Sprintf(", rows from %d of %s", o.Lo, o.Table)
}

package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/tools/internal/units"
	"github.com/scatterkit/scatterkit/verbs"
)

// Order is how fragment sources lie in the source region.
type Order string

// Layout is how fragment destinations lie in the destination extent.
type Layout string

const (
	// Random sources: rows (or ranges aligned to their size; large
	// ranges to 4 KiB) picked uniformly from the source region.
	Random Order = "random"
	// Sequential sources: one after the other from a random start.
	Sequential Order = "sequential"

	// Contiguous destinations: back to back in plan order.
	Contiguous Layout = "contiguous"
	// Fragmented destinations: a gap as long as the fragment after each
	// (rows: a strided layout with stride 2R).
	Fragmented Layout = "fragmented"
)

// Frags is a count of fragments of one size.
type Frags struct {
	Size  uint64
	Count int
}

func (f Frags) bytes() uint64 { return f.Size * uint64(f.Count) }

// Workload is one geometry scatterbench runs. Small fragments alone lower
// to a fixed-row plan (planfmt FormRows: ids into a table of Small.Size
// rows); with large fragments the plan is general ranges (FormRanges), the
// large ones at random positions among the small.
type Workload struct {
	Name  string
	Doc   string
	Dir   verbs.Op // OpRead (owner -> requester) or OpWrite
	Small Frags
	Large Frags
	Src   Order
	Dst   Layout
	// Engram, when set ("cpu" or "remote"), makes this an Engram lookup
	// workload (engram.go): Tokens x (Small.Count/Tokens) ids into a
	// token-major [T,K,Small.Size] output, one table named in every
	// column, instead of a scatter plan.
	Engram string
	Tokens int
	// Owners, above 1, spreads the workload over that many owners: an
	// Engram remote workload's table cut by row ranges (each owner its own
	// transport and server in this process; engram.RemoteShard), a
	// scatter workload's plan cut by its source over owners of the pass's
	// kind that each serve the whole table (one engine group per
	// operation).
	Owners int
	// Reshard, when set (ReshardKV or ReshardMixed), makes this a reshard
	// workload (reshard.go): its layouts, not Small and Large, set the
	// geometry; Small and Large describe it for the table.
	Reshard string
	// StructObj, when set (StructObjPut or StructObjGet), makes this a
	// Structured Object workload (structobj.go): Small.Count bytes members
	// of Small.Size bytes, PUT or GET in several variants (the lines'
	// modes) by clients in this process.
	StructObj string
	// MinReps raises -reps for latency-sized workloads, whose repetitions
	// are cheap: a p95 over 20 samples is the second-largest sample.
	MinReps int
}

// LatencyMinReps is MinReps of the latency-sized named workloads.
const LatencyMinReps = 200

// Reps is how many measured repetitions w gets under c.
func (w *Workload) Reps(c *Config) int { return max(c.Reps, w.MinReps) }

// Named is the table of named workloads, the one place to add more (later
// issues add engram-*, reshard-*, structobj-*). "matrix" (Matrix) and
// "custom" (the geometry flags) are built, not listed.
var Named = []Workload{
	{Name: "many-small", Dir: verbs.OpRead, Small: Frags{264, 98_304}, Src: Random, Dst: Contiguous,
		Doc: "98,304 random 264 B rows of the owner's table into a contiguous destination (an Engram layer read; fixed-row plan)"},
	{Name: "many-small-3owners", Dir: verbs.OpRead, Small: Frags{264, 98_304}, Src: Random, Dst: Contiguous, Owners: 3,
		Doc: "many-small's rows read from 3 owners at once (each serves the whole table and is read for a third of its rows: the plan cut by planfmt.Splitter, one engine group per operation); goal: 2x many-small in the same pass"},
	{Name: "many-small-131k", Dir: verbs.OpRead, Small: Frags{264, 131_072}, Src: Random, Dst: Contiguous,
		Doc: "131,072 random 264 B rows into a contiguous destination (fixed-row plan)"},
	{Name: "few-large", Dir: verbs.OpRead, Large: Frags{512 << 10, 64}, Src: Random, Dst: Contiguous,
		Doc: "64 random 512 KiB ranges into a contiguous destination (the direct control's geometry)"},
	{Name: "mixed", Dir: verbs.OpRead, Small: Frags{264, 32_768}, Large: Frags{512 << 10, 64}, Src: Random, Dst: Contiguous,
		Doc: "32,768 random 264 B ranges and 64 random 512 KiB ranges, interleaved, into a contiguous destination (a Reshard mix; ranges plan)"},
	{Name: "single-read", Dir: verbs.OpRead, Small: Frags{264, 1}, Src: Random, Dst: Contiguous, MinReps: LatencyMinReps,
		Doc: "one random 264 B row: the latency of a minimal operation"},
	{Name: "engram-cpu", Dir: verbs.OpRead, Small: Frags{264, 4096 * 24}, Src: Random, Dst: Contiguous, Engram: EngramCPU, Tokens: 4096,
		Doc: "local Engram lookup, T=4096 K=24 R=264 from a snapshot of -table-bytes (ceiling: pack-only of the same ids, same workers)"},
	{Name: "engram-remote-t1", Dir: verbs.OpRead, Small: Frags{264, 1 * 24}, Src: Random, Dst: Contiguous, Engram: EngramRemote, Tokens: 1, MinReps: LatencyMinReps,
		Doc: "remote Engram lookup, T=1 K=24 R=264, from an owner in this process over the pass's transport (ceilings: rtt, local lookup of the same ids)"},
	{Name: "engram-remote-t4", Dir: verbs.OpRead, Small: Frags{264, 4 * 24}, Src: Random, Dst: Contiguous, Engram: EngramRemote, Tokens: 4, MinReps: LatencyMinReps,
		Doc: "remote Engram lookup, T=4 K=24 R=264 (as engram-remote-t1)"},
	{Name: "engram-remote-t16", Dir: verbs.OpRead, Small: Frags{264, 16 * 24}, Src: Random, Dst: Contiguous, Engram: EngramRemote, Tokens: 16, MinReps: LatencyMinReps,
		Doc: "remote Engram lookup, T=16 K=24 R=264 (as engram-remote-t1)"},
	{Name: "engram-remote-sharded", Dir: verbs.OpRead, Small: Frags{264, 16 * 24}, Src: Random, Dst: Contiguous, Engram: EngramRemote, Tokens: 16, Owners: 3, MinReps: LatencyMinReps,
		Doc: "remote Engram lookup, T=16 K=24 R=264, from the table cut by row ranges over 3 owners (each its own transport and server, in this process); ceiling one-owner: the same ids from one owner of the whole table in the same repetitions"},
	{Name: "reshard-kv", Dir: verbs.OpRead, Small: Frags{512, 4 * 2 * 16384}, Src: Random, Dst: Fragmented, Reshard: ReshardKV,
		Doc: "a 64 MiB KV cache [16384 tokens, 16 heads, 128 dim] x 2 B from TP8 paged by 16 tokens to TP2 paged by 64 (random page tables), pulled by the destination ranks (reshard/mesh, every rank in this process)"},
	{Name: "reshard-mixed", Dir: verbs.OpRead, Small: Frags{256, 65536}, Large: Frags{2 << 20, 24}, Src: Random, Dst: Contiguous, Reshard: ReshardMixed,
		Doc: "a 64 MiB [8 layers, 512, 64, 256 B] tensor from 2 pipeline stages to 2 ranks holding layers 0-5 densely and layers 6-7 block-major: large contiguous regions and 256 B fragments in the same pairs"},
	{Name: "structobj-put", Dir: verbs.OpWrite, Small: Frags{64 << 10, 64}, Src: Random, Dst: Contiguous, StructObj: StructObjPut,
		Doc: "PUT of a 4 MiB object of 64 members: 64 caller buffers (multi), one buffer (single), concatenated first (concat), pool-backed buffers (buffers), and a client without a pool (fallback)"},
	{Name: "structobj-get", Dir: verbs.OpRead, Small: Frags{64 << 10, 64}, Src: Random, Dst: Contiguous, StructObj: StructObjGet,
		Doc: "GET of the same object: whole (into caller memory, into a pool-backed buffer), selective (one member in 8), and both through a client without a pool (fallback)"},
}

// Groups are workload names that stand for several named workloads.
var Groups = map[string][]string{
	"engram-remote": {"engram-remote-t1", "engram-remote-t4", "engram-remote-t16"},
	"reshard":       {"reshard-kv", "reshard-mixed"},
	"structobj":     {"structobj-put", "structobj-get"},
}

// DefaultWorkloads run when -workloads is not given.
var DefaultWorkloads = []string{"many-small", "few-large", "mixed", "single-read", "engram-cpu",
	"engram-remote-t1", "engram-remote-t4", "engram-remote-t16", "reshard-kv", "reshard-mixed",
	"structobj-put", "structobj-get"}

// Matrix geometry: the RFC's validation matrix, within MatrixCap bytes of
// payload per workload.
var (
	MatrixSizes  = []uint64{64, 128, 264, 512, 1 << 10, 4 << 10, 32 << 10, 512 << 10}
	MatrixCounts = []int{1 << 10, 4 << 10, 32 << 10, 98_304, 131_072}
)

// MatrixCap bounds a matrix workload's payload so the matrix stays fast;
// the RFC's own cells (MatrixRFCCells) are in the matrix whatever their
// payload.
const MatrixCap = 32 << 20

// MatrixRFCCells are the adaptive-scatter RFC's named cells: 264-byte rows
// (an Engram FP8 row with its scales), 98,304 of them (one layer's read)
// and 131,072 (33 MiB, past MatrixCap).
var MatrixRFCCells = []Frags{{264, 98_304}, {264, 131_072}}

func isRFCCell(size uint64, count int) bool {
	return slices.Contains(MatrixRFCCells, Frags{size, count})
}

// Matrix returns the validation matrix: every fragment size with every
// count whose payload is at most MatrixCap or that is one of the RFC's
// cells (a size for which no count fits gets MatrixCap/size fragments),
// each with random and sequential sources,
// contiguous and fragmented destinations, READ and WRITE. Names read
// "matrix/264Bx98304/random-contiguous/read".
func Matrix() []Workload {
	var out []Workload
	for _, size := range MatrixSizes {
		var counts []int
		for _, c := range MatrixCounts {
			if size*uint64(c) <= MatrixCap || isRFCCell(size, c) {
				counts = append(counts, c)
			}
		}
		if len(counts) == 0 {
			counts = []int{int(MatrixCap / size)}
		}
		for _, c := range counts {
			for _, src := range []Order{Random, Sequential} {
				for _, dst := range []Layout{Contiguous, Fragmented} {
					for _, dir := range []verbs.Op{verbs.OpRead, verbs.OpWrite} {
						out = append(out, Workload{
							Name: fmt.Sprintf("matrix/%sx%d/%s-%s/%s", sizeName(size), c, src, dst, strings.ToLower(dir.String())),
							Doc:  "validation matrix entry", Dir: dir, Small: Frags{size, c}, Src: src, Dst: dst,
						})
					}
				}
			}
		}
	}
	return out
}

func sizeName(n uint64) string {
	switch {
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	default:
		return fmt.Sprintf("%dB", n)
	}
}

// Lookup returns the named workload.
func Lookup(name string) (Workload, bool) {
	i := slices.IndexFunc(Named, func(w Workload) bool { return w.Name == name })
	if i < 0 {
		return Workload{}, false
	}
	return Named[i], true
}

// Expand resolves a comma-separated workload list: names from Named,
// "all" (every named workload), "matrix" (Matrix) and "default"
// (DefaultWorkloads). Duplicates are dropped, order kept.
func Expand(list string) ([]Workload, error) {
	var out []Workload
	seen := map[string]bool{}
	add := func(w Workload) {
		if !seen[w.Name] {
			seen[w.Name] = true
			out = append(out, w)
		}
	}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		switch name {
		case "":
			continue
		case "all":
			for _, w := range Named {
				add(w)
			}
		case "matrix":
			for _, w := range Matrix() {
				add(w)
			}
		case "default":
			for _, n := range DefaultWorkloads {
				w, _ := Lookup(n)
				add(w)
			}
		default:
			if g, ok := Groups[name]; ok {
				for _, n := range g {
					w, _ := Lookup(n)
					add(w)
				}
				continue
			}
			w, ok := Lookup(name)
			if !ok {
				return nil, &FlagError{Flag: "-workloads", Value: name, Reason: "unknown workload; known: " + strings.Join(Names(), ", ") + ", engram-remote, all, matrix, default"}
			}
			add(w)
		}
	}
	if len(out) == 0 {
		return nil, &FlagError{Flag: "-workloads", Value: list, Reason: "names no workload"}
	}
	return out, nil
}

// Names lists the named workloads.
func Names() []string {
	var out []string
	for _, w := range Named {
		out = append(out, w.Name)
	}
	return out
}

// Fragments returns the workload's fragment count.
func (w *Workload) Fragments() int { return w.Small.Count + w.Large.Count }

// Payload returns the workload's payload bytes.
func (w *Workload) Payload() uint64 { return w.Small.bytes() + w.Large.bytes() }

// rows reports whether the workload lowers to the fixed-row form.
func (w *Workload) rows() bool { return w.Large.Count == 0 }

// DstExtent returns the destination extent of the workload's plans.
func (w *Workload) DstExtent() uint64 {
	if w.Dst == Fragmented {
		return 2 * w.Payload()
	}
	return w.Payload()
}

// Check validates the geometry against a source region of srcBytes.
func (w *Workload) Check(srcBytes uint64) error {
	bad := func(reason string) error { return &FlagError{Flag: "-workloads", Value: w.Name, Reason: reason} }
	switch {
	case w.Dir != verbs.OpRead && w.Dir != verbs.OpWrite:
		return bad("direction must be read or write")
	case w.Src != Random && w.Src != Sequential:
		return bad(fmt.Sprintf("source order %q: want random or sequential", w.Src))
	case w.Dst != Contiguous && w.Dst != Fragmented:
		return bad(fmt.Sprintf("destination layout %q: want contiguous or fragmented", w.Dst))
	case w.Small.Count < 0 || w.Large.Count < 0:
		return bad("negative fragment count")
	case w.Fragments() == 0:
		return bad("no fragments")
	case w.Small.Count > 0 && w.Small.Size == 0, w.Large.Count > 0 && w.Large.Size == 0:
		return bad("zero fragment size")
	case w.Small.Size > math.MaxUint32 || w.Large.Size > math.MaxUint32:
		return bad("a fragment must be under 4 GiB (one work request)")
	case w.Small.Count > 1<<24 || w.Large.Count > 1<<24:
		return bad("more than 16,777,216 fragments of one size")
	}
	if w.rows() && w.Small.Size > srcBytes {
		return bad(fmt.Sprintf("a %s row does not fit the %s source region", units.FormatBytes(int64(w.Small.Size)), units.FormatBytes(int64(srcBytes))))
	}
	if !w.rows() && max(w.Small.Size, w.Large.Size) > srcBytes {
		return bad(fmt.Sprintf("a fragment does not fit the %s source region", units.FormatBytes(int64(srcBytes))))
	}
	if w.Src == Sequential && w.Payload() > srcBytes {
		return bad(fmt.Sprintf("sequential sources need %s, the source region holds %s",
			units.FormatBytes(int64(w.Payload())), units.FormatBytes(int64(srcBytes))))
	}
	if w.DstExtent() > 1<<36 {
		return bad("destination extent over 64 GiB")
	}
	return nil
}

// Plan builds a plan of the workload over a source region of srcBytes,
// drawing positions from r. Destinations come in increasing order (the
// verifier relies on it).
func (w *Workload) Plan(r *rand.Rand, srcBytes uint64) (*planfmt.Plan, error) {
	if err := w.Check(srcBytes); err != nil {
		return nil, err
	}
	if w.rows() {
		return w.rowsPlan(r, srcBytes), nil
	}
	return w.rangesPlan(r, srcBytes), nil
}

func (w *Workload) rowsPlan(r *rand.Rand, srcBytes uint64) *planfmt.Plan {
	size, n := w.Small.Size, w.Small.Count
	rows := srcBytes / size
	id := func(i int, base uint64) uint64 {
		if w.Src == Sequential {
			return base + uint64(i)
		}
		return r.Uint64N(rows)
	}
	var base uint64
	if w.Src == Sequential {
		base = r.Uint64N(rows - uint64(n) + 1)
	}
	p := &planfmt.Plan{Form: planfmt.FormRows, SrcExtent: srcBytes, DstExtent: w.DstExtent(),
		Rows: planfmt.Rows{RowSize: size, TableRows: rows}}
	if rows <= math.MaxInt32 {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(id(i, base))
		}
		p.Rows.IDs32 = ids
	} else {
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = int64(id(i, base))
		}
		p.Rows.IDs64 = ids
	}
	if w.Dst == Fragmented {
		p.Rows.Layout = planfmt.Layout{Kind: planfmt.LayoutStrided, Cols: 1, RowStride: 2 * size, ColStride: size}
	}
	return p
}

func (w *Workload) rangesPlan(r *rand.Rand, srcBytes uint64) *planfmt.Plan {
	n := w.Fragments()
	large := make([]bool, n)
	for _, i := range r.Perm(n)[:w.Large.Count] {
		large[i] = true
	}
	var seq uint64
	if w.Src == Sequential {
		seq = r.Uint64N(srcBytes - w.Payload() + 1)
	}
	rs := make([]planfmt.Range, n)
	var dst uint64
	for i := range rs {
		size, align := w.Small.Size, w.Small.Size
		if large[i] {
			size, align = w.Large.Size, 4096
		}
		var src uint64
		if w.Src == Sequential {
			src, seq = seq, seq+size
		} else {
			src = r.Uint64N((srcBytes-size)/align+1) * align
		}
		rs[i] = planfmt.Range{Src: src, Dst: dst, Len: size}
		dst += size
		if w.Dst == Fragmented {
			dst += size
		}
	}
	return &planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: srcBytes, DstExtent: w.DstExtent(), Ranges: rs}
}

// forEachFragment calls fn for every carrying fragment of p in plan
// order: source offset, destination offset, length.
func forEachFragment(p *planfmt.Plan, fn func(i int, src, dst, n uint64) bool) {
	if p.Form == planfmt.FormRanges {
		for i, r := range p.Ranges {
			if r.Len > 0 && !fn(i, r.Src, r.Dst, r.Len) {
				return
			}
		}
		return
	}
	rw := &p.Rows
	for i := range rw.Len() {
		id := rw.ID(i)
		if id < 0 {
			continue
		}
		dst := rw.DstBase + uint64(i)*rw.RowSize
		if rw.Layout.Kind == planfmt.LayoutStrided {
			t, k := uint64(i)/rw.Layout.Cols, uint64(i)%rw.Layout.Cols
			dst = rw.DstBase + t*rw.Layout.RowStride + k*rw.Layout.ColStride
		}
		if !fn(i, rw.SrcBase+uint64(id)*rw.RowSize, dst, rw.RowSize) {
			return
		}
	}
}

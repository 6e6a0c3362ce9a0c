package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/scatterkit/scatterkit/reshard"
	"github.com/scatterkit/scatterkit/reshard/mesh"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
)

// Reshard workload kinds (Workload.Reshard).
const (
	// ReshardKV: a KV cache [tokens, heads, dim] of 2-byte elements moved
	// from a tensor-parallel-8 prefill layout paged by 16 tokens to a
	// tensor-parallel-2 decode layout paged by 64 tokens, with random
	// page tables on both sides.
	ReshardKV = "kv"
	// ReshardMixed: a [layers, rows, blocks, 256 B] tensor moved from two
	// pipeline stages to two ranks that hold most layers densely (large
	// contiguous regions) and the rest block-major (256-byte fragments
	// whose destination runs are contiguous): few-large and many-small in
	// the same pairs.
	ReshardMixed = "mixed"
)

// reshardPoisonSeed seeds the pattern written over destinations before a
// verified repetition.
const reshardPoisonSeed = 0x9e3779b97f4a7c15

// reshardLayouts builds a reshard workload's layouts (page tables from r).
func reshardLayouts(kind string, r *rand.Rand) (src, dst *reshard.Layout, err error) {
	switch kind {
	case ReshardKV:
		t := reshard.Tensor{Shape: []int64{16384, 16, 128}, ElemSize: 2}
		paged := func(tp int, page int64) (*reshard.Layout, error) {
			l, err := reshard.Sharded(t, reshard.ShardSpec{Parts: []int64{1, int64(tp), 1}})
			if err != nil {
				return nil, err
			}
			pages := int((t.Shape[0] + page - 1) / page)
			tables := make([][]int64, tp)
			for i := range tables {
				// A pool a quarter larger than needed, pages scattered.
				slots := r.Perm(pages + pages/4)[:pages]
				tables[i] = make([]int64, pages)
				for j, s := range slots {
					tables[i][j] = int64(s)
				}
			}
			return reshard.Paginate(l, 0, page, tables)
		}
		if src, err = paged(8, 16); err != nil {
			return nil, nil, err
		}
		dst, err = paged(2, 64)
		return src, dst, err
	case ReshardMixed:
		const layers, rows, blocks, bs = 8, 512, 64, 256
		t := reshard.Tensor{Shape: []int64{layers, rows, blocks, bs}, ElemSize: 1}
		if src, err = reshard.Sharded(t, reshard.ShardSpec{Parts: []int64{2, 1, 1, 1}}); err != nil {
			return nil, nil, err
		}
		full := func(lo, hi int64) reshard.Interval { return reshard.Interval{Lo: lo, Hi: hi, Step: 1} }
		layer := int64(rows * blocks * bs)
		// Rank 0: layers 0-5 dense, then layers 6-7 of blocks 0-31
		// block-major ([layer, block, row, byte]); rank 1: layers 6-7 of
		// blocks 32-63, block-major.
		blockMajor := func(off int64, b0 int64) reshard.Piece {
			return reshard.Piece{Box: []reshard.Interval{full(6, 8), full(0, rows), full(b0, b0+blocks/2), full(0, bs)}, Offset: off,
				Strides: []int64{blocks / 2 * rows * bs, bs, rows * bs, 1}}
		}
		dense := reshard.Piece{Box: []reshard.Interval{full(0, 6), full(0, rows), full(0, blocks), full(0, bs)},
			Strides: []int64{layer, blocks * bs, bs, 1}}
		dst = &reshard.Layout{Tensor: t, Ranks: []reshard.Rank{
			{Pieces: []reshard.Piece{dense, blockMajor(6*layer, 0)}, RegionBytes: 7 * layer},
			{Pieces: []reshard.Piece{blockMajor(0, blocks/2)}, RegionBytes: layer},
		}}
		return src, dst, dst.Validate(reshard.Limits{})
	}
	return nil, nil, &FlagError{Flag: "-workloads", Value: kind, Reason: "unknown reshard workload kind"}
}

// denseLayout is the tensor held whole, row-major, by one rank: the
// oracle's view (logical byte L of the tensor is pattern byte L).
func denseLayout(t reshard.Tensor) (*reshard.Layout, error) {
	return reshard.Sharded(t, reshard.ShardSpec{Parts: slices.Repeat([]int64{1}, len(t.Shape))})
}

// reshardOracle moves pattern bytes between a rank's memory and the
// logical tensor through plans from the dense layout.
type reshardOracle struct {
	seed uint64
	plan *reshard.Plan // dense -> layout
}

func newReshardOracle(seed uint64, l *reshard.Layout) (*reshardOracle, error) {
	d, err := denseLayout(l.Tensor)
	if err != nil {
		return nil, err
	}
	p, err := reshard.NewPlan(d, l, reshard.Limits{})
	if err != nil {
		return nil, err
	}
	return &reshardOracle{seed: seed, plan: p}, nil
}

// each calls f with every fragment the layout holds (b, in its rank's
// memory) and the logical offset of its first byte, until f returns false.
func (o *reshardOracle) each(mem func(rank int) []byte, f func(b []byte, logical uint64) bool) {
	for i := range o.plan.Pairs {
		pr := &o.plan.Pairs[i]
		m := mem(pr.Dst)
		for j := range pr.Regions {
			rg := &pr.Regions[j]
			more := true
			rg.Each(func(src, dst int64) bool {
				more = f(m[dst:dst+rg.Inner], uint64(src))
				return more
			})
			if !more {
				return
			}
		}
	}
}

// fill writes the tensor's bytes into every rank of the layout.
func (o *reshardOracle) fill(mem func(rank int) []byte) {
	o.each(mem, func(b []byte, logical uint64) bool {
		pattern.Fill(b, o.seed, logical)
		return true
	})
}

// check compares every rank's held bytes with the tensor's (Offset: in
// the logical tensor).
func (o *reshardOracle) check(mem func(rank int) []byte) *VerifyError {
	var bad *VerifyError
	o.each(mem, func(b []byte, logical uint64) bool {
		if k := pattern.Check(b, o.seed, logical); k >= 0 {
			at := logical + uint64(k)
			bad = &VerifyError{Fragment: -1, Offset: at, Want: pattern.At(o.seed, at), Got: b[k]}
			return false
		}
		return true
	})
	return bad
}

// runReshard runs a reshard workload over the pass's transport, every
// rank in this process (reshard/mesh), destinations pulling (READ): every
// repetition runs every mode once, in an order that rotates by one.
func (r *Runner) runReshard(ctx context.Context, transport string, w *Workload) (res WorkloadResult, err error) {
	c := r.cfg
	res = WorkloadResult{Workload: *w}
	src, dst, err := reshardLayouts(w.Reshard, planRand(c.Seed, w.Name))
	if err != nil {
		return res, err
	}
	staging := int(c.StagingBytes)
	if staging == 0 {
		staging = 16 << 20
	}
	cal, fb, err := r.serviceCalibration(ctx, meshPackWorkers)
	if err != nil {
		return res, err
	}
	res.Calibration = fb
	m, err := mesh.New(mesh.Config{Transport: transport, StagingBytes: staging, Lanes: c.Lanes,
		PackWorkers: meshPackWorkers, Calibration: cal}, regionSizes(src), regionSizes(dst))
	if err != nil {
		return res, &OwnerError{Owner: OwnerInproc, Stage: "mesh", Err: err}
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	defer func() {
		res.Calibration = append(res.Calibration, engineFallback("reshard mesh engine", m.Engine())...)
	}()
	x, err := newReshardRun(ctx, c, w, m, src, dst, &res)
	if err != nil {
		return res, err
	}
	failure := r.repeat(ctx, w, len(x.sides), func(i int, measured, verify bool) error {
		err := x.once(x.sides[i], measured, verify)
		var ve *VerifyError
		if err != nil && (errors.As(err, &ve) || fatal(ctx, err)) {
			return err
		}
		return nil
	})
	r.reshardLines(&res, transport, w, x, int64(staging)*int64(len(src.Ranks)))
	return res, failure
}

// regionSizes returns the region bytes of l's ranks.
func regionSizes(l *reshard.Layout) []int64 {
	var s []int64
	for _, rk := range l.Ranks {
		s = append(s, rk.RegionBytes)
	}
	return s
}

// reshardSide is what one mode of a reshard workload measured.
type reshardSide struct {
	mode        Mode
	t           timings
	plan, lower []time.Duration
	chosen      map[string]int
	peak        int64
	overBound   int
	fallbacks   int
	last        []reshard.PairResult // the last measured run's pairs (-explain)
}

// reshardRun is a reshard workload under way on its mesh: the layouts,
// the oracle of the destinations' bytes, a side per mode, and the last
// plan made (nil until one is).
type reshardRun struct {
	ctx       context.Context
	c         *Config
	w         *Workload
	m         *mesh.Mesh
	src, dst  *reshard.Layout
	dstOracle *reshardOracle
	local     []int // every destination rank pulls in this process
	links     reshard.LinkFunc
	sides     []*reshardSide
	plan      *reshard.Plan
	res       *WorkloadResult // Verified counts the checked repetitions
}

// newReshardRun fills the sources with the seed's pattern and makes a
// side per configured mode.
func newReshardRun(ctx context.Context, c *Config, w *Workload, m *mesh.Mesh, src, dst *reshard.Layout, res *WorkloadResult) (*reshardRun, error) {
	srcOracle, err := newReshardOracle(c.Seed, src)
	if err != nil {
		return nil, err
	}
	dstOracle, err := newReshardOracle(c.Seed, dst)
	if err != nil {
		return nil, err
	}
	srcOracle.fill(func(i int) []byte { return m.Src(i).Bytes() })
	x := &reshardRun{ctx: ctx, c: c, w: w, m: m, src: src, dst: dst, dstOracle: dstOracle, res: res}
	x.sides = make([]*reshardSide, len(c.Modes))
	for i, md := range c.Modes {
		x.sides[i] = &reshardSide{mode: md, chosen: map[string]int{}}
	}
	x.local = make([]int, len(dst.Ranks))
	for i := range x.local {
		x.local[i] = i
	}
	x.links = m.Links(ctx, reshard.Pull)
	return x, nil
}

// once plans the workload and runs it once in s's mode (measured or a
// warm-up); when verify is set, the destinations are poisoned first and
// checked after. A failed operation is counted in s and returned; so are
// wrong bytes, as a *VerifyError.
func (x *reshardRun) once(s *reshardSide, measured, verify bool) error {
	if verify {
		for j := range x.dst.Ranks {
			pattern.ParallelFill(x.m.Dst(j).Bytes(), reshardPoisonSeed, uint64(j)<<40, 2)
		}
	}
	t0 := time.Now()
	p, err := reshard.NewPlan(x.src, x.dst, reshard.Limits{})
	if err != nil {
		return s.t.fail(fmt.Errorf("planning: %w", err))
	}
	planned := time.Since(t0)
	x.plan = p
	var out *reshard.Result
	err = s.t.run(measured, func() error {
		run, err := reshard.Start(x.ctx, x.m.Engine(), p, reshard.Pull, x.local, x.links, reshard.Options{Mode: s.mode.Verbs})
		if err != nil {
			return err
		}
		out, err = run.Wait()
		return err
	})
	if err != nil {
		return err
	}
	if measured {
		s.record(planned, out)
	}
	if verify {
		if x.c.corrupt != nil {
			x.c.corrupt(x.m.Dst(0).Bytes())
		}
		if bad := x.dstOracle.check(func(j int) []byte { return x.m.Dst(j).Bytes() }); bad != nil {
			return fmt.Errorf("scatterbench: %s/%s: %w", x.w.Name, s.mode.Name, bad)
		}
		x.res.Verified++
	}
	return nil
}

// record adds a measured run's planning time and what its pairs report.
func (s *reshardSide) record(planned time.Duration, out *reshard.Result) {
	s.plan = append(s.plan, planned)
	s.lower = append(s.lower, out.Lower)
	var peak int64
	for _, pr := range out.Pairs {
		tr := &pr.Result.Trace
		peak += tr.StagingPeak
		if tr.Slots > 0 && tr.StagingPeak > tr.ChunkBytes*int64(tr.Slots) {
			s.overBound++
		}
		if pr.Result.Fallback != 0 {
			s.fallbacks++
		}
		s.chosen[pr.Result.Chosen.String()]++
	}
	s.peak = max(s.peak, peak)
	s.last = append(s.last[:0], out.Pairs...)
}

// reshardLines appends a line per mode to res (bound: the staging bound
// of the whole mesh), its chosen mode the one most pairs chose (ties to
// the first name).
func (r *Runner) reshardLines(res *WorkloadResult, transport string, w *Workload, x *reshardRun, bound int64) {
	c := r.cfg
	// Without a plan (every NewPlan failed, counted in the lines' errors)
	// the lines show the workload's description.
	frags, payload := int64(w.Fragments()), w.Payload()
	if x.plan != nil {
		frags = 0
		for _, pr := range x.plan.Pairs {
			frags += pr.Fragments
		}
		payload = uint64(x.plan.Bytes)
	}
	for _, s := range x.sides {
		p50 := s.t.p(0.5)
		chosen := chosenMix(s.chosen)
		res.Lines = append(res.Lines, Line{Workload: w.Name, Transport: transport, Owner: OwnerInproc, Seed: c.Seed,
			Mode: s.mode.Name, Chosen: chosen, Direction: "read", Fragments: uint64(frags), PayloadBytes: payload,
			Reps: len(s.t.d), P50Ms: ms(p50), P95Ms: ms(s.t.p(0.95)), GoodputGbps: gbps(payload, p50), WindowGbps: gbps(payload, p50),
			PlanMs: ms(quantile(s.plan, 0.5) + quantile(s.lower, 0.5)), StagingPeakBytes: s.peak, StagingBoundBytes: bound,
			Fallbacks: s.fallbacks, Errors: s.t.errors, opErr: s.t.first})
		res.OverBound = append(res.OverBound, s.overBound)
		if s.t.first != nil && r.stderr != nil {
			fmt.Fprintf(r.stderr, "scatterbench: %s/%s over %s: %d failed operations, first: %v\n",
				w.Name, s.mode.Name, transport, s.t.errors, s.t.first)
		}
		if c.Explain && r.stderr != nil {
			for i := range s.last {
				pr := &s.last[i]
				explain(r.stderr, fmt.Sprintf("%s[%d->%d]", w.Name, pr.Src, pr.Dst), s.mode.Name, transport, &pr.Result)
			}
		}
	}
}

// chosenMix names the modes a side's pair operations chose: the one mode,
// or every mode that was chosen, the most often chosen first (ties by
// name), joined by "+" ("direct+gather+hybrid"): a reshard's pairs decide
// each for itself, and naming only the most common hid the others.
func chosenMix(counts map[string]int) string {
	modes := make([]string, 0, len(counts))
	for k, n := range counts {
		if n > 0 {
			modes = append(modes, k)
		}
	}
	slices.SortFunc(modes, func(x, y string) int {
		if c := counts[y] - counts[x]; c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	return strings.Join(modes, "+")
}

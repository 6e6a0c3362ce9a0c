package reshard

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"
	"github.com/scatterkit/scatterkit/verbs/gather"
	"github.com/scatterkit/scatterkit/verbs/staging"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/shm"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

var exSeed = flag.Uint64("exec.seed", 0, "seed for the executor tests' random inputs (0: from the clock)")

// exRand returns a generator from a logged seed.
func exRand(tb testing.TB) *rand.Rand {
	tb.Helper()
	seed := *exSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	tb.Logf("seed %d (rerun with -exec.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// exFill writes random non-zero bytes.
func exFill(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(1 + r.IntN(255))
	}
}

func exContext(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// --- Reference: fragments expanded by brute force, independent of Each. ---

// exFrag is one fragment: inner bytes from src to dst (layout offsets).
type exFrag struct{ src, dst, n int64 }

// exFragments lists the fragments of reg with an odometer over its loops.
func exFragments(reg *Region) []exFrag {
	if reg.Inner == 0 {
		return nil
	}
	for _, c := range reg.Counts {
		if c == 0 {
			return nil
		}
	}
	n := len(reg.Counts)
	idx := make([]int64, n)
	var out []exFrag
	for {
		s, d := reg.SrcOff, reg.DstOff
		for i := range n {
			s += idx[i] * reg.SrcStrides[i]
			d += idx[i] * reg.DstStrides[i]
		}
		out = append(out, exFrag{s, d, reg.Inner})
		i := n - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < reg.Counts[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return out
		}
	}
}

// exPairFragments lists the fragments of every region of pr.
func exPairFragments(pr *Pair) []exFrag {
	var out []exFrag
	for i := range pr.Regions {
		out = append(out, exFragments(&pr.Regions[i])...)
	}
	return out
}

// --- Lowering, without transports. ---

// exNest returns strides for counts nested in a random order (innermost
// stride at least inner, each outer stride past the extent of the loops
// inside it, random padding), some walked backwards, the offset of the
// first fragment from the footprint's start, and the footprint.
func exNest(r *rand.Rand, counts []int64, inner int64) (strides []int64, first, size int64) {
	strides = make([]int64, len(counts))
	stride := inner
	if r.IntN(3) == 0 {
		stride += int64(r.IntN(8))
	}
	size = inner
	for _, l := range r.Perm(len(counts)) {
		strides[l] = stride
		size = (counts[l]-1)*stride + size
		stride = counts[l] * stride
		if r.IntN(3) == 0 {
			stride += int64(r.IntN(16))
		}
	}
	for l := range strides {
		if r.IntN(4) == 0 {
			first += (counts[l] - 1) * strides[l]
			strides[l] = -strides[l]
		}
	}
	return strides, first, size
}

// exRandomPair is a pair of 1 to 6 random regions placed one after the
// other on both sides (sometimes back to back, so fragments of two regions
// may coalesce), with an occasional empty region.
func exRandomPair(r *rand.Rand) *Pair {
	pr := &Pair{Src: r.IntN(4), Dst: r.IntN(4)}
	var srcAt, dstAt int64
	for range 1 + r.IntN(6) {
		loops := r.IntN(4)
		counts := make([]int64, loops)
		for i := range counts {
			counts[i] = 1 + int64(r.IntN(5))
		}
		inner := 1 + int64(r.IntN(16))
		ss, sf, sn := exNest(r, counts, inner)
		ds, df, dn := exNest(r, counts, inner)
		reg := Region{SrcOff: srcAt + sf, DstOff: dstAt + df, Inner: inner, Counts: counts, SrcStrides: ss, DstStrides: ds}
		switch r.IntN(12) {
		case 0:
			if loops > 0 {
				reg.Counts[r.IntN(loops)] = 0
			}
		case 1:
			reg.Inner = 0
		}
		pr.Regions = append(pr.Regions, reg)
		srcAt, dstAt = srcAt+sn, dstAt+dn
		if r.IntN(4) == 0 {
			// Two shares of one block, interleaving in the destination
			// (cyclic): the regions' order cannot settle the fragments'.
			k, in := 1+int64(r.IntN(6)), 1+int64(r.IntN(8))
			for h := range int64(2) {
				pr.Regions = append(pr.Regions, Region{SrcOff: srcAt + h*k*in, DstOff: dstAt + h*in, Inner: in,
					Counts: []int64{k}, SrcStrides: []int64{in}, DstStrides: []int64{2 * in}})
			}
			srcAt, dstAt = srcAt+2*k*in, dstAt+2*k*in
		}
		if r.IntN(2) == 0 {
			srcAt += int64(1 + r.IntN(8))
			dstAt += int64(1 + r.IntN(8))
		}
	}
	return pr
}

// exLower measures and lowers pr as Start does.
func exLower(pr *Pair, maxFrags int64) (*execPair, []planfmt.Range, error) {
	x := &execPair{src: pr.Src, dst: pr.Dst}
	if err := measurePair(pr, x, maxFrags); err != nil {
		return nil, nil, err
	}
	if x.frags == 0 {
		return x, nil, nil
	}
	var sc lowerScratch
	rs, err := lowerPair(pr, x, make([]planfmt.Range, 0, x.frags), &sc)
	return x, rs, err
}

// exCheckLowered checks ranges lowered from pr against the reference: the
// same bytes land in the same places, inside the windows, destinations
// ascending and disjoint, nothing left to coalesce.
func exCheckLowered(t *testing.T, r *rand.Rand, pr *Pair, x *execPair, rs []planfmt.Range) {
	t.Helper()
	frags := exPairFragments(pr)
	if len(frags) == 0 {
		if len(rs) != 0 {
			t.Fatalf("no fragments, %d ranges", len(rs))
		}
		return
	}
	var srcHi, dstHi int64
	for _, f := range frags {
		srcHi, dstHi = max(srcHi, f.src+f.n), max(dstHi, f.dst+f.n)
	}
	src := make([]byte, srcHi)
	exFill(r, src)
	want := make([]byte, dstHi)
	wantSet := make([]bool, dstHi)
	for _, f := range frags {
		copy(want[f.dst:f.dst+f.n], src[f.src:f.src+f.n])
		for i := f.dst; i < f.dst+f.n; i++ {
			wantSet[i] = true
		}
	}
	got := make([]byte, dstHi)
	gotSet := make([]bool, dstHi)
	srcExt, dstExt := uint64(x.srcHi-x.srcLo), uint64(x.dstHi-x.dstLo)
	for i, rg := range rs {
		if rg.Len == 0 || rg.Src+rg.Len > srcExt || rg.Dst+rg.Len > dstExt {
			t.Fatalf("range %d %+v outside extents %d/%d", i, rg, srcExt, dstExt)
		}
		if i > 0 {
			p := rs[i-1]
			if rg.Dst < p.Dst+p.Len {
				t.Fatalf("ranges %d %+v and %d %+v: destinations not ascending and disjoint", i-1, p, i, rg)
			}
			if rg.Dst == p.Dst+p.Len && rg.Src == p.Src+p.Len {
				t.Fatalf("ranges %d %+v and %d %+v: not coalesced", i-1, p, i, rg)
			}
		}
		s, d := int64(rg.Src)+x.srcLo, int64(rg.Dst)+x.dstLo
		copy(got[d:d+int64(rg.Len)], src[s:s+int64(rg.Len)])
		for j := d; j < d+int64(rg.Len); j++ {
			gotSet[j] = true
		}
	}
	if !slices.Equal(gotSet, wantSet) {
		t.Fatalf("lowered ranges write other destination bytes than the fragments")
	}
	if !slices.Equal(got, want) {
		t.Fatalf("lowered ranges move other bytes than the fragments")
	}
	var bytes int64
	for _, f := range frags {
		bytes += f.n
	}
	if x.bytes != bytes || x.frags != int64(len(frags)) {
		t.Fatalf("measured %d bytes in %d fragments, reference %d in %d", x.bytes, x.frags, bytes, len(frags))
	}
}

func TestLowerRandom(t *testing.T) {
	r := exRand(t)
	for i := range 2000 {
		pr := exRandomPair(r)
		x, rs, err := exLower(pr, DefaultMaxFragments)
		if err != nil {
			t.Fatalf("pair %d %+v: %v", i, pr, err)
		}
		exCheckLowered(t, r, pr, x, rs)
	}
}

func TestLowerOrder(t *testing.T) {
	r := exRand(t)
	for _, tc := range []struct {
		name   string
		pair   Pair
		ranges int
	}{
		{"one fragment", Pair{Regions: []Region{{SrcOff: 10, DstOff: 20, Inner: 7}}}, 1},
		// Unfolded contiguous loops coalesce into one range.
		{"contiguous loops", Pair{Regions: []Region{{SrcOff: 3, DstOff: 5, Inner: 16,
			Counts: []int64{4, 8}, SrcStrides: []int64{128, 16}, DstStrides: []int64{128, 16}}}}, 1},
		// Two regions back to back on both sides (a piece boundary).
		{"adjacent regions", Pair{Regions: []Region{
			{SrcOff: 0, DstOff: 100, Inner: 50},
			{SrcOff: 50, DstOff: 150, Inner: 30, Counts: []int64{2}, SrcStrides: []int64{30}, DstStrides: []int64{30}}}}, 1},
		// Two cyclic halves of one block, each strided, interleave into
		// one contiguous block on both sides once sorted.
		{"interleaved halves", Pair{Regions: []Region{
			{SrcOff: 0, DstOff: 0, Inner: 8, Counts: []int64{16}, SrcStrides: []int64{16}, DstStrides: []int64{16}},
			{SrcOff: 8, DstOff: 8, Inner: 8, Counts: []int64{16}, SrcStrides: []int64{16}, DstStrides: []int64{16}}}}, 1},
		// A transposed destination: visited column by column, sorted
		// into one destination run of 12 ranges.
		{"transposed", Pair{Regions: []Region{{Inner: 4, Counts: []int64{3, 4},
			SrcStrides: []int64{20, 5}, DstStrides: []int64{4, 12}}}}, 12},
		// A destination walked backwards; sources contiguous, so
		// sorting by destination leaves every range separate.
		{"reversed", Pair{Regions: []Region{{DstOff: 90, Inner: 10, Counts: []int64{10},
			SrcStrides: []int64{10}, DstStrides: []int64{-10}}}}, 10},
		{"empty regions", Pair{Regions: []Region{
			{Inner: 0, Counts: []int64{3}, SrcStrides: []int64{1}, DstStrides: []int64{1}},
			{Inner: 9, Counts: []int64{0}, SrcStrides: []int64{1}, DstStrides: []int64{1}}}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, rs, err := exLower(&tc.pair, DefaultMaxFragments)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != tc.ranges {
				t.Fatalf("%d ranges, want %d: %+v", len(rs), tc.ranges, rs)
			}
			exCheckLowered(t, r, &tc.pair, x, rs)
		})
	}
}

// exPrepare measures and lowers every pair of p as Start does for a Pull
// run of all destination ranks, without links: the first failure to check
// (in pair order), else the first failure to lower. work decides on
// goroutines as Start's estimate does. The run's range storage is
// released (held once each, whatever failed).
func exPrepare(t *testing.T, p *Plan, work, maxFrags int64) (*Run, error) {
	t.Helper()
	run := &Run{dir: Pull}
	own := make([]int, len(p.Pairs))
	for i := range own {
		own[i] = i
	}
	lowerErrs, err := run.keep(run.prepare(p, own, 1<<20, maxFrags, work))
	seen := map[*[]planfmt.Range]bool{}
	for _, b := range run.ranges {
		if b != nil && seen[b] {
			t.Fatalf("range storage %p held twice", b)
		}
		seen[b] = true
	}
	defer run.release()
	if err != nil {
		return nil, err
	}
	for k, err := range lowerErrs {
		if err != nil {
			x := &run.pairs[k]
			return nil, &PairError{Src: x.src, Dst: x.dst, Dir: Pull, Phase: PhaseCheck, Err: err}
		}
	}
	// The plans outlive the release: copy them.
	out := &Run{dir: Pull, pairs: run.pairs, plans: make([]planfmt.Plan, len(run.plans))}
	for k, pl := range run.plans {
		out.plans[k] = pl
		out.plans[k].Ranges = slices.Clone(pl.Ranges)
	}
	return out, nil
}

// TestLowerAll lowers a run on several goroutines and compares each plan
// with the pair lowered alone. Failures come in the order of Start's
// steps, each the first pair in order: checks (then the fragments of the
// run), then lowering.
func TestLowerAll(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	r := exRand(t)
	p := &Plan{}
	for k := range 8 {
		a, c := 16+int64(r.IntN(32)), 64+int64(r.IntN(256))
		inner := 1 + int64(r.IntN(32))
		p.Pairs = append(p.Pairs, Pair{Src: k, Dst: 0, Regions: []Region{
			{Inner: inner, Counts: []int64{a, c}, SrcStrides: []int64{c * (inner + 1), inner + 1}, DstStrides: []int64{inner, a * inner}},
			{SrcOff: a * c * (inner + 1), DstOff: a * c * inner, Inner: inner, Counts: []int64{a * c}, SrcStrides: []int64{inner}, DstStrides: []int64{inner + 3}},
		}})
		if k == 2 { // nothing to move: the pairs after it move down
			p.Pairs[k].Regions[0].Inner, p.Pairs[k].Regions[1].Inner = 0, 0
		}
	}
	for _, work := range []int64{0, parallelLowerMin} {
		run, err := exPrepare(t, p, work, DefaultMaxFragments)
		if err != nil {
			t.Fatal(err)
		}
		if len(run.pairs) != 7 {
			t.Fatalf("%d pairs lowered, want 7", len(run.pairs))
		}
		for j := range run.pairs {
			k := run.pairs[j].index
			x, rs, err := exLower(&p.Pairs[k], DefaultMaxFragments)
			if err != nil {
				t.Fatal(err)
			}
			pl := &run.plans[j]
			if !slices.Equal(pl.Ranges, rs) || pl.Form != planfmt.FormRanges ||
				pl.SrcExtent != uint64(x.srcHi-x.srcLo) || pl.DstExtent != uint64(x.dstHi-x.dstLo) {
				t.Fatalf("work %d: pair %d: lowered differently from the pair alone", work, k)
			}
			exCheckLowered(t, r, &p.Pairs[k], &run.pairs[j], pl.Ranges)
		}
	}
	bad := func(mod func(p *Plan)) *Plan {
		q := &Plan{Pairs: slices.Clone(p.Pairs)}
		for k := range q.Pairs {
			q.Pairs[k].Regions = slices.Clone(q.Pairs[k].Regions)
		}
		mod(q)
		return q
	}
	overlap := func(q *Plan, k int) { q.Pairs[k].Regions = append(q.Pairs[k].Regions, q.Pairs[k].Regions[0]) }
	huge := Region{Inner: 1, Counts: []int64{1 << 20, 1 << 21}, SrcStrides: []int64{1 << 21, 1}, DstStrides: []int64{1 << 21, 1}}
	for _, tc := range []struct {
		name     string
		plan     *Plan
		maxFrags int64
		src      int
		kind     error
	}{
		{"two overlaps", bad(func(q *Plan) { overlap(q, 6); overlap(q, 3) }), 0, 3, ErrOverlap},
		{"check after an overlap", bad(func(q *Plan) {
			overlap(q, 1)
			q.Pairs[5].Regions[1].Counts = []int64{-1}
		}), 0, 5, ErrLayout},
		{"run of 2^41 fragments", bad(func(q *Plan) {
			overlap(q, 0)
			q.Pairs[4].Regions = append(q.Pairs[4].Regions, huge)
			q.Pairs[7].Regions[1].Counts = []int64{-1}
		}), math.MaxInt64, -1, ErrLimit},
	} {
		for _, work := range []int64{0, parallelLowerMin} {
			maxFrags := cmp.Or(tc.maxFrags, DefaultMaxFragments)
			_, err := exPrepare(t, tc.plan, work, maxFrags)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("%s, work %d: %v, want %v", tc.name, work, err, tc.kind)
			}
			if tc.src >= 0 {
				exWantPair(t, err, PhaseCheck, tc.src, 0)
			}
		}
	}
}

func TestLowerErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pair     Pair
		maxFrags int64
		kind     error
	}{
		{"overlap", Pair{Src: 1, Dst: 2, Regions: []Region{
			{SrcOff: 0, DstOff: 64, Inner: 32},
			{SrcOff: 100, DstOff: 0, Inner: 8, Counts: []int64{10}, SrcStrides: []int64{8}, DstStrides: []int64{8}}}}, 0, ErrOverlap},
		{"strides", Pair{Regions: []Region{{Inner: 4, Counts: []int64{2, 2}, SrcStrides: []int64{8}, DstStrides: []int64{8, 4}}}}, 0, ErrLayout},
		{"negative count", Pair{Regions: []Region{{Inner: 4, Counts: []int64{-1}, SrcStrides: []int64{8}, DstStrides: []int64{8}}}}, 0, ErrLayout},
		{"negative inner", Pair{Regions: []Region{{Inner: -4}}}, 0, ErrLayout},
		{"negative offset", Pair{Regions: []Region{{DstOff: 8, Inner: 4, Counts: []int64{3}, SrcStrides: []int64{4}, DstStrides: []int64{-8}}}}, 0, ErrLayout},
		{"overflow", Pair{Regions: []Region{{Inner: 4, Counts: []int64{1 << 40, 1 << 40}, SrcStrides: []int64{1 << 30, 4}, DstStrides: []int64{1 << 30, 4}}}}, 0, ErrLayout},
		{"fragments", Pair{Regions: []Region{{Inner: 4, Counts: []int64{100}, SrcStrides: []int64{8}, DstStrides: []int64{8}}}}, 99, ErrLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := tc.maxFrags
			if lim == 0 {
				lim = DefaultMaxFragments
			}
			_, _, err := exLower(&tc.pair, lim)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("error %v, want %v", err, tc.kind)
			}
			var le *LayoutError
			var me *LimitError
			if !errors.As(err, &le) && !errors.As(err, &me) {
				t.Fatalf("error %T is neither a *LayoutError nor a *LimitError", err)
			}
			t.Log(err)
		})
	}
}

func TestRunning(t *testing.T) {
	p := &Plan{Pairs: []Pair{{Src: 0, Dst: 0}, {Src: 0, Dst: 1}, {Src: 1, Dst: 0}, {Src: 2, Dst: 1}}}
	for _, tc := range []struct {
		rank int
		dir  Dir
		want []int
	}{
		{0, Pull, []int{0, 2}},
		{1, Pull, []int{1, 3}},
		{0, Push, []int{0, 1}},
		{2, Push, []int{3}},
		{5, Pull, nil},
		{0, Dir(0), nil},
		{-1, Dir(9), nil},
	} {
		if got := p.Running(tc.rank, tc.dir); !slices.Equal(got, tc.want) {
			t.Errorf("Running(%d, %v) = %v, want %v", tc.rank, tc.dir, got, tc.want)
		}
	}
	if Pull.String() != "pull" || Push.String() != "push" || Dir(7).String() != "Dir(7)" {
		t.Errorf("Dir names: %v %v %v", Pull, Push, Dir(7))
	}
	if PhaseLink.String() != "link" || Phase(0).String() != "Phase(0)" || Phase(99).String() != "Phase(99)" {
		t.Errorf("Phase names: %v %v %v", PhaseLink, Phase(0), Phase(99))
	}
}

// --- Transports: every rank a separate verbs Transport. ---

type exBackend struct {
	name string
	new  func() verbs.Transport
	addr func() string
	// exposeRegistered: registered memory (the engine's staging) can be
	// exposed, so a Push can be gathered.
	exposeRegistered bool
}

var exShmAddrs atomic.Uint64

var exBackends = []exBackend{
	{name: "shm", new: func() verbs.Transport { return shm.New(shm.Config{}) },
		addr: func() string {
			return fmt.Sprintf("@scatterkit-reshard-exec-%d-%d", time.Now().UnixNano(), exShmAddrs.Add(1))
		}},
	{name: "tcp", new: func() verbs.Transport { return tcp.New(tcp.Config{}) },
		addr: func() string { return "127.0.0.1:0" }, exposeRegistered: true},
}

// exManySmall makes small requests expensive (1 us each, 3 GB/s bulk, 30
// us round trip): the engine gathers many small fragments and sends large
// ones direct. Giving all three figures also skips the link measurement.
var exManySmall = verbs.LinkParams{Bandwidth: 3e9, PostRate: 1e6, RTT: 30 * time.Microsecond}

// exCalibration is a fixed packing calibration, so decisions do not
// depend on the machine.
var exCalibration = costmodel.Calibration{BMem: 5e9, RCopy: 8e6}

// exBase is where layout offset 0 sits in every rank's region; exTail
// bytes follow the layout's RegionBytes.
const (
	exBase = 4096
	exTail = 4096
	poison = 0xA5
)

// exProc is one rank: a transport, its region (exported as "region"), the
// gather service that owns it, and the engine it runs pairs with.
type exProc struct {
	tr     verbs.Transport
	region *verbs.Region
	seg    verbs.Segment
	ownStg *staging.Staging
	svc    *gather.Service
	reqStg *staging.Staging // requester staging for WRITE gather (tcp)
	eng    *engine.Engine
}

// exWorld is a set of source and destination ranks with connections from
// every destination rank to every source rank (pull[d][s]) and back
// (push[s][d]).
type exWorld struct {
	be         exBackend
	src, dst   []*exProc
	pull, push [][]verbs.Conn
}

func exNewProc(t testing.TB, be exBackend, layoutBytes int64, cleanup *[]func() error) *exProc {
	t.Helper()
	pc := &exProc{tr: be.new()}
	*cleanup = append(*cleanup, pc.tr.Close)
	var err error
	pc.region, err = pc.tr.Alloc(int(exBase+layoutBytes+exTail), verbs.AccessLocal|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	if errors.Is(err, verbs.ErrNotSupported) {
		t.Skipf("%s: %v", be.name, err) // shm off Linux
	}
	if err != nil {
		t.Fatal(err)
	}
	exports := []verbs.Export{{Name: "region", Region: pc.region}}
	pc.seg, err = pc.tr.Listen(be.addr(), exports, verbs.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	*cleanup = append(*cleanup, pc.seg.Close)
	// Commands of up to 512 KiB of staging: three concurrent Pushes into
	// one owner never wait for a slot.
	pc.ownStg, err = staging.New(pc.tr, bufferpool.Config{Budget: 4 << 20, MinSlot: 64 << 10, NoHugePages: true}, verbs.AccessLocal)
	if err != nil {
		t.Fatal(err)
	}
	*cleanup = append(*cleanup, pc.ownStg.Close)
	pc.svc, err = gather.NewService(gather.Config{Segment: pc.seg, Exports: exports, Staging: pc.ownStg,
		Calibration: &exCalibration, PackWorkers: 2, ParallelMin: 128 << 10,
		CommandBudget: 512 << 10, AcquireTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	*cleanup = append(*cleanup, pc.svc.Close)
	ecfg := engine.Config{Calibration: &exCalibration, StagingTimeout: 200 * time.Millisecond}
	if be.exposeRegistered {
		pc.reqStg, err = staging.New(pc.tr, bufferpool.Config{Budget: 4 << 20, MinSlot: 64 << 10, NoHugePages: true},
			verbs.AccessLocal|verbs.AccessRemoteRead)
		if err != nil {
			t.Fatal(err)
		}
		*cleanup = append(*cleanup, pc.reqStg.Close)
		ecfg.Staging = pc.reqStg
	}
	pc.eng, err = engine.New(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	*cleanup = append(*cleanup, pc.eng.Close)
	return pc
}

// exConnect connects from to to's segment, exposing from's region (so the
// owner can WRITE a READ gather's data into it) and, where the backend
// allows, from's requester staging (so the owner can READ a WRITE
// gather's waves).
func exConnect(t testing.TB, ctx context.Context, be exBackend, from, to *exProc) verbs.Conn {
	t.Helper()
	opts := verbs.ConnectOptions{Link: exManySmall, Expose: []verbs.Export{{Name: "region", Region: from.region}}}
	if from.reqStg != nil {
		opts.Expose = append(opts.Expose, from.reqStg.Export("staging"))
	}
	c, err := from.tr.Connect(ctx, to.seg.Addr(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// exNewWorld starts a world whose ranks hold the layouts' RegionBytes
// (plus exBase before and exTail after). Everything is closed at cleanup,
// engines first, transports last.
func exNewWorld(t testing.TB, be exBackend, src, dst *Layout) *exWorld {
	t.Helper()
	ctx := exContext(t)
	w := &exWorld{be: be}
	var cleanup []func() error
	t.Cleanup(func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			if err := cleanup[i](); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	for _, rk := range src.Ranks {
		w.src = append(w.src, exNewProc(t, be, rk.RegionBytes, &cleanup))
	}
	for _, rk := range dst.Ranks {
		w.dst = append(w.dst, exNewProc(t, be, rk.RegionBytes, &cleanup))
	}
	// Connections close before the stagings they expose and after the
	// engines that run on them (cleanup runs backwards).
	var conns []verbs.Conn
	w.pull = make([][]verbs.Conn, len(w.dst))
	for d, dp := range w.dst {
		for _, sp := range w.src {
			c := exConnect(t, ctx, be, dp, sp)
			w.pull[d] = append(w.pull[d], c)
			conns = append(conns, c)
		}
	}
	w.push = make([][]verbs.Conn, len(w.src))
	for s, sp := range w.src {
		for _, dp := range w.dst {
			c := exConnect(t, ctx, be, sp, dp)
			w.push[s] = append(w.push[s], c)
			conns = append(conns, c)
		}
	}
	engines := make([]func() error, 0, len(w.src)+len(w.dst))
	for _, pc := range append(slices.Clone(w.src), w.dst...) {
		engines = append(engines, pc.eng.Close)
	}
	for _, c := range conns {
		cleanup = append(cleanup, c.Close)
	}
	cleanup = append(cleanup, engines...)
	return w
}

// links returns the LinkFunc of dir: the running rank's connection to its
// peer, the peer's region at exBase, its own region at exBase.
func (w *exWorld) links(dir Dir) LinkFunc {
	return func(self, peer int) (Link, error) {
		var c verbs.Conn
		var local *verbs.Region
		if dir == Push {
			c, local = w.push[self][peer], w.src[self].region
		} else {
			c, local = w.pull[self][peer], w.dst[self].region
		}
		info, ok := verbs.FindRegion(c.Remote(), "region")
		if !ok {
			return Link{}, errors.New("no region exported")
		}
		return Link{Conn: c, Remote: info, RemoteBase: exBase, Local: local, LocalBase: exBase}, nil
	}
}

// engine is the engine of the rank that runs pairs in dir.
func (w *exWorld) engine(dir Dir, rank int) *engine.Engine {
	if dir == Push {
		return w.src[rank].eng
	}
	return w.dst[rank].eng
}

// poisonAll fills every destination region with the poison byte.
func (w *exWorld) poisonAll() {
	for _, dp := range w.dst {
		b := dp.region.Bytes()
		for i := range b {
			b[i] = poison
		}
	}
}

// want is what the destination regions must hold after p ran on poisoned
// regions: poison everywhere but the fragments, which hold their source
// bytes.
func (w *exWorld) want(t *testing.T, p *Plan) [][]byte {
	t.Helper()
	out := make([][]byte, len(w.dst))
	written := make([][]bool, len(w.dst))
	for d, dp := range w.dst {
		out[d] = make([]byte, dp.region.Len())
		for i := range out[d] {
			out[d][i] = poison
		}
		written[d] = make([]bool, dp.region.Len())
	}
	for i := range p.Pairs {
		pr := &p.Pairs[i]
		src := w.src[pr.Src].region.Bytes()
		for _, f := range exPairFragments(pr) {
			for j := exBase + f.dst; j < exBase+f.dst+f.n; j++ {
				if written[pr.Dst][j] {
					t.Fatalf("test plan writes destination %d byte %d twice", pr.Dst, j-exBase)
				}
				written[pr.Dst][j] = true
			}
			copy(out[pr.Dst][exBase+f.dst:exBase+f.dst+f.n], src[exBase+f.src:exBase+f.src+f.n])
		}
	}
	return out
}

// check compares every byte of every destination region with want.
func (w *exWorld) check(t *testing.T, want [][]byte) {
	t.Helper()
	for d, dp := range w.dst {
		got := dp.region.Bytes()
		bad, first := 0, -1
		for i := range got {
			if got[i] != want[d][i] {
				if first < 0 {
					first = i
				}
				bad++
			}
		}
		if bad > 0 {
			t.Fatalf("destination %d: %d bytes differ, the first at layout offset %d (got %#x, want %#x)",
				d, bad, first-exBase, got[first], want[d][first])
		}
	}
}

// exBuilder builds a plan by hand: bump allocators per rank, with gaps
// so that poison sits between fragments.
type exBuilder struct {
	r              *rand.Rand
	srcEnd, dstEnd []int64
	cyclic         []int64 // per destination rank: the block the sources interleave into
	cyclicK        int64
	cyclicInner    int64
}

func (b *exBuilder) gap() int64 { return 1 + int64(b.r.IntN(64)) }

func (b *exBuilder) allocSrc(s int, n int64) int64 {
	off := b.srcEnd[s]
	b.srcEnd[s] += n + b.gap()
	return off
}

func (b *exBuilder) allocDst(d int, n int64) int64 {
	off := b.dstEnd[d]
	b.dstEnd[d] += n + b.gap()
	return off
}

// mixedRegions is what source s sends destination d: a large contiguous
// region; many small fragments, strided at the source and contiguous at
// the destination; a 2-D grid, column-major at the source and padded at
// the destination; a destination walked backwards; a transposed
// destination; a share of a block that every source interleaves into
// (cyclic); two regions back to back on both sides; and two empty ones.
func (b *exBuilder) mixedRegions(s, d, sources int) []Region {
	r := b.r
	var regs []Region
	{
		n := 64<<10 + int64(r.IntN(128<<10))
		regs = append(regs, Region{SrcOff: b.allocSrc(s, n), DstOff: b.allocDst(d, n), Inner: n})
	}
	{
		inner, c, pad := 64+int64(r.IntN(200)), 400+int64(r.IntN(600)), 8+int64(r.IntN(100))
		regs = append(regs, Region{SrcOff: b.allocSrc(s, c*(inner+pad)), DstOff: b.allocDst(d, c*inner), Inner: inner,
			Counts: []int64{c}, SrcStrides: []int64{inner + pad}, DstStrides: []int64{inner}})
	}
	{
		inner, a, c := 32+int64(r.IntN(96)), 10+int64(r.IntN(20)), 10+int64(r.IntN(30))
		ds1 := inner + int64(r.IntN(3))*8
		ds0 := c*ds1 + 16 + int64(r.IntN(64))
		ss0 := inner + 8 + int64(r.IntN(32))
		regs = append(regs, Region{SrcOff: b.allocSrc(s, a*c*ss0), DstOff: b.allocDst(d, a*ds0), Inner: inner,
			Counts: []int64{a, c}, SrcStrides: []int64{ss0, a * ss0}, DstStrides: []int64{ds0, ds1}})
	}
	{
		inner, c := 48+int64(r.IntN(100)), 100+int64(r.IntN(200))
		ds := inner + 8 + int64(r.IntN(24))
		regs = append(regs, Region{SrcOff: b.allocSrc(s, c*inner), DstOff: b.allocDst(d, c*ds) + (c-1)*ds, Inner: inner,
			Counts: []int64{c}, SrcStrides: []int64{inner}, DstStrides: []int64{-ds}})
	}
	{
		inner, a, c := int64(64), 10+int64(r.IntN(20)), 10+int64(r.IntN(20))
		ss1 := inner + 8 + int64(r.IntN(16))
		regs = append(regs, Region{SrcOff: b.allocSrc(s, a*c*ss1), DstOff: b.allocDst(d, a*c*inner), Inner: inner,
			Counts: []int64{a, c}, SrcStrides: []int64{c * ss1, ss1}, DstStrides: []int64{inner, a * inner}})
	}
	{
		k, inner := b.cyclicK, b.cyclicInner
		regs = append(regs, Region{SrcOff: b.allocSrc(s, k*inner), DstOff: b.cyclic[d] + int64(s)*inner, Inner: inner,
			Counts: []int64{k}, SrcStrides: []int64{inner}, DstStrides: []int64{int64(sources) * inner}})
	}
	{
		n1, n2 := 100+int64(r.IntN(100)), 20+int64(r.IntN(20))
		so, do := b.allocSrc(s, n1+2*n2), b.allocDst(d, n1+2*n2)
		regs = append(regs, Region{SrcOff: so, DstOff: do, Inner: n1},
			Region{SrcOff: so + n1, DstOff: do + n1, Inner: n2, Counts: []int64{2}, SrcStrides: []int64{n2}, DstStrides: []int64{n2}})
	}
	regs = append(regs, Region{Inner: 0, Counts: []int64{5}, SrcStrides: []int64{1}, DstStrides: []int64{1}},
		Region{Inner: 8, Counts: []int64{3, 0}, SrcStrides: []int64{8, 1}, DstStrides: []int64{8, 1}})
	return regs
}

// exMixedPlan is a plan from sources source ranks to dests destination
// ranks in which every pair carries mixedRegions, except the last pair,
// which carries only an empty region (its share of the cyclic blocks
// stays poison).
func exMixedPlan(r *rand.Rand, sources, dests int) *Plan {
	b := &exBuilder{r: r, srcEnd: make([]int64, sources), dstEnd: make([]int64, dests),
		cyclicK: 100 + int64(r.IntN(200)), cyclicInner: 32 + int64(r.IntN(64))}
	for d := range dests {
		b.cyclic = append(b.cyclic, b.allocDst(d, b.cyclicK*b.cyclicInner*int64(sources)))
	}
	p := &Plan{Tensor: Tensor{Shape: []int64{1}, ElemSize: 1}}
	for s := range sources {
		for d := range dests {
			pr := Pair{Src: s, Dst: d}
			if s == sources-1 && d == dests-1 {
				pr.Regions = []Region{{Inner: 8, Counts: []int64{0}, SrcStrides: []int64{8}, DstStrides: []int64{8}}}
			} else {
				pr.Regions = b.mixedRegions(s, d, sources)
			}
			for i := range pr.Regions {
				pr.Bytes += pr.Regions[i].Bytes()
				pr.Fragments += pr.Regions[i].Fragments()
			}
			p.Bytes += pr.Bytes
			p.Pairs = append(p.Pairs, pr)
		}
	}
	p.Src = &Layout{Tensor: p.Tensor}
	for _, n := range b.srcEnd {
		p.Src.Ranks = append(p.Src.Ranks, Rank{RegionBytes: n})
	}
	p.Dst = &Layout{Tensor: p.Tensor}
	for _, n := range b.dstEnd {
		p.Dst.Ranks = append(p.Dst.Ranks, Rank{RegionBytes: n})
	}
	return p
}

// exStartAll starts one Run per running rank of dir, each on that rank's
// engine (as separate processes would), and waits for all of them.
func (w *exWorld) exStartAll(t *testing.T, ctx context.Context, p *Plan, dir Dir, mode engine.Mode) []*Result {
	t.Helper()
	n := len(w.dst)
	if dir == Push {
		n = len(w.src)
	}
	runs := make([]*Run, n)
	for rank := range n {
		run, err := Start(ctx, w.engine(dir, rank), p, dir, []int{rank}, w.links(dir), Options{Mode: mode})
		if err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
		runs[rank] = run
	}
	out := make([]*Result, n)
	for rank, run := range runs {
		res, err := run.Wait()
		if err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
		out[rank] = res
	}
	return out
}

// TestReshard moves a mixed plan (large contiguous regions and many small
// strided fragments, interleaving sources, reversed and transposed
// destinations) by Pull and Push, in every mode, over shm and tcp, and
// checks every destination byte.
func TestReshard(t *testing.T) {
	const sources, dests = 3, 2
	for _, be := range exBackends {
		t.Run(be.name, func(t *testing.T) {
			r := exRand(t)
			p := exMixedPlan(r, sources, dests)
			w := exNewWorld(t, be, p.Src, p.Dst)
			for _, sp := range w.src {
				exFill(r, sp.region.Bytes())
			}
			want := w.want(t, p)
			ctx := exContext(t)
			for _, dir := range []Dir{Pull, Push} {
				// Auto first: each direction has its own connections, and
				// on them no moving measurement yet, so the decision
				// rests on the fixed link and calibration.
				for _, mode := range []engine.Mode{engine.ModeAuto, engine.ModeDirect, engine.ModeGather, engine.ModeHybrid} {
					t.Run(fmt.Sprintf("%v/%v", dir, mode), func(t *testing.T) {
						w.poisonAll()
						results := w.exStartAll(t, ctx, p, dir, mode)
						w.check(t, want)
						exCheckResults(t, be, p, dir, mode, results)
					})
				}
			}
		})
	}
}

// exCheckResults checks the runs' results: every non-empty pair reported
// once with its bytes, and the modes each mode should give.
func exCheckResults(t *testing.T, be exBackend, p *Plan, dir Dir, mode engine.Mode, results []*Result) {
	t.Helper()
	seen := map[[2]int]bool{}
	var gathered bool
	for rank, res := range results {
		var bytes int64
		var peak int64
		staged := false
		for _, pr := range res.Pairs {
			key := [2]int{pr.Src, pr.Dst}
			if seen[key] {
				t.Fatalf("pair %v reported twice", key)
			}
			seen[key] = true
			if runner := dir.runner(&Pair{Src: pr.Src, Dst: pr.Dst}); runner != rank {
				t.Fatalf("rank %d ran pair %v", rank, key)
			}
			vr := &pr.Result
			bytes += int64(vr.Bytes)
			got, fb := vr.Mode, vr.Fallback
			// A Push is gathered only where the engine's staging can
			// be exposed; on shm it falls back to direct.
			noWriteGather := dir == Push && !be.exposeRegistered
			switch mode {
			case engine.ModeDirect:
				if got != engine.ModeDirect || fb != engine.FallbackNone {
					t.Errorf("pair %v: forced direct ran %v (fallback %v)", key, got, fb)
				}
			case engine.ModeGather, engine.ModeHybrid:
				if noWriteGather {
					if got != engine.ModeDirect || fb != engine.FallbackNotExposed {
						t.Errorf("pair %v: %v on shm ran %v (fallback %v), want direct after not-exposed", key, mode, got, fb)
					}
					break
				}
				if got != mode || fb != engine.FallbackNone {
					t.Errorf("pair %v: forced %v ran %v (fallback %v: %v)", key, mode, got, fb, vr.FallbackErr)
				}
			case engine.ModeAuto:
				if fb != engine.FallbackNone && !noWriteGather {
					t.Errorf("pair %v: auto fell back (%v: %v)", key, fb, vr.FallbackErr)
				}
				if be.name == "tcp" && dir == Pull && got != engine.ModeHybrid && got != engine.ModeGather {
					// Every pair mixes large regions with thousands
					// of small fragments: the small part is gathered.
					t.Errorf("pair %v: auto over a many-small link ran %v, want hybrid or gather\n%v\n%v",
						key, got, vr.Decision, vr.Split)
				}
			}
			if got == engine.ModeGather || got == engine.ModeHybrid {
				gathered = true
				// An inline reply (a small READ gather) holds no staging.
				staged = staged || !vr.Trace.Inline
			}
			peak = max(peak, vr.Trace.StagingPeak)
			t.Logf("rank %d pair %d->%d: %v (chosen %v, fallback %v) %d B, %d fragments, %d spans, %d direct requests, %d chunks, inline %v, staging peak %d",
				rank, pr.Src, pr.Dst, got, vr.Chosen, fb, vr.Bytes, vr.Fragments, vr.Spans, vr.Trace.DirectRequests, vr.Trace.Chunks,
				vr.Trace.Inline, vr.Trace.StagingPeak)
		}
		if bytes != res.Bytes {
			t.Errorf("rank %d: result bytes %d, pairs total %d", rank, res.Bytes, bytes)
		}
		if len(res.Pairs) > 0 && (res.Elapsed <= 0 || res.Lower <= 0) {
			t.Errorf("rank %d: elapsed %v, lower %v", rank, res.Elapsed, res.Lower)
		}
		if res.StagingPeak != uint64(peak) || staged && peak == 0 {
			t.Errorf("rank %d: staging peak %d, pairs' largest %d (staged: %v)", rank, res.StagingPeak, peak, staged)
		}
		t.Logf("rank %d: %d B in %v (lower %v, submit %v), staging peak %d", rank, res.Bytes, res.Elapsed, res.Lower, res.Submit, res.StagingPeak)
	}
	for i := range p.Pairs {
		pr := &p.Pairs[i]
		nonEmpty := len(exPairFragments(pr)) > 0
		if seen[[2]int{pr.Src, pr.Dst}] != nonEmpty {
			t.Errorf("pair %d->%d (non-empty %v) reported %v", pr.Src, pr.Dst, nonEmpty, !nonEmpty)
		}
	}
	if mode != engine.ModeDirect && mode != engine.ModeAuto && !(dir == Push && !be.exposeRegistered) && !gathered {
		t.Errorf("%v: nothing gathered", mode)
	}
}

// TestReshardOneEngine runs every destination rank's pairs from one Start
// on one engine (local ranks given twice count once).
func TestReshardOneEngine(t *testing.T) {
	r := exRand(t)
	p := exMixedPlan(r, 2, 3)
	w := exNewWorld(t, exBackends[1], p.Src, p.Dst)
	for _, sp := range w.src {
		exFill(r, sp.region.Bytes())
	}
	want := w.want(t, p)
	w.poisonAll()
	run, err := Start(exContext(t), w.dst[0].eng, p, Pull, []int{2, 0, 1, 0}, w.links(Pull), Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Wait()
	if err != nil {
		t.Fatal(err)
	}
	again, err2 := run.Wait()
	if again != res || err2 != nil {
		t.Fatalf("second Wait: %p %v, first %p", again, err2, res)
	}
	w.check(t, want)
	if len(res.Pairs) != len(p.Pairs)-1 {
		t.Fatalf("%d pairs ran, want %d", len(res.Pairs), len(p.Pairs)-1)
	}
	for i := 1; i < len(res.Pairs); i++ {
		a, b := res.Pairs[i-1], res.Pairs[i]
		if a.Src > b.Src || a.Src == b.Src && a.Dst >= b.Dst {
			t.Fatalf("pairs out of plan order: %d->%d before %d->%d", a.Src, a.Dst, b.Src, b.Dst)
		}
	}
}

// exErrLink is what a failing LinkFunc returns.
var exErrLink = errors.New("no route to rank")

// TestStartErrors checks that bad input fails Start with a typed error
// and submits nothing: the engine has run no operation, not even once
// closed, and no destination byte changed.
func TestStartErrors(t *testing.T) {
	r := exRand(t)
	p := exMixedPlan(r, 3, 2)
	be := exBackends[1]
	w := exNewWorld(t, be, p.Src, p.Dst)
	for _, sp := range w.src {
		exFill(r, sp.region.Bytes())
	}
	pull := w.links(Pull)
	broken := func(ts, tp int, f func(*Link) error) LinkFunc {
		return func(self, peer int) (Link, error) {
			l, err := pull(self, peer)
			if self == ts && peer == tp {
				err = f(&l)
			}
			return l, err
		}
	}
	overlapping := func() *Plan {
		q := *p
		q.Pairs = slices.Clone(p.Pairs)
		pr := &q.Pairs[len(q.Pairs)-2] // the last pair of destination 0
		pr.Regions = append(slices.Clone(pr.Regions), pr.Regions[0])
		return &q
	}()
	for _, tc := range []struct {
		name  string
		plan  *Plan
		dir   Dir
		local []int
		links LinkFunc
		opt   Options
		ctx   func() context.Context
		check func(t *testing.T, err error)
	}{
		{name: "unknown rank", local: []int{0, 2}, check: func(t *testing.T, err error) {
			var le *LayoutError
			if !errors.As(err, &le) || le.Kind != ErrLayout || le.Rank != 2 {
				t.Fatalf("%v: want a *LayoutError for rank 2", err)
			}
		}},
		{name: "negative rank", dir: Push, local: []int{-1}, check: func(t *testing.T, err error) {
			var le *LayoutError
			if !errors.As(err, &le) || le.Rank != -1 || !errors.Is(err, ErrLayout) {
				t.Fatalf("%v: want a *LayoutError for rank -1", err)
			}
		}},
		// Pair 2->0 is the last one destination 0 runs: every other link
		// was had, and still nothing is submitted.
		{name: "link error", links: broken(0, 2, func(*Link) error { return exErrLink }), check: func(t *testing.T, err error) {
			exWantPair(t, err, PhaseLink, 2, 0)
			if !errors.Is(err, exErrLink) {
				t.Fatalf("%v: does not wrap the link's error", err)
			}
		}},
		{name: "nil conn", links: broken(0, 1, func(l *Link) error { l.Conn = nil; return nil }), check: func(t *testing.T, err error) {
			exWantPair(t, err, PhaseLink, 1, 0)
			var ie *engine.InvalidOpError
			if !errors.As(err, &ie) || ie.Field != "Link.Conn" || !errors.Is(err, verbs.ErrInvalid) {
				t.Fatalf("%v: want a *engine.InvalidOpError for Link.Conn", err)
			}
		}},
		{name: "read-only remote", dir: Push, links: func(self, peer int) (Link, error) {
			l, err := w.links(Push)(self, peer)
			l.Remote.Access &^= verbs.AccessRemoteWrite
			return l, err
		}, check: func(t *testing.T, err error) {
			exWantPair(t, err, PhaseLink, 0, 0)
			if !errors.Is(err, verbs.ErrInvalid) {
				t.Fatalf("%v: want verbs.ErrInvalid", err)
			}
		}},
		{name: "window past remote", links: broken(0, 2, func(l *Link) error { l.Remote.Len = exBase + 100; return nil }),
			check: func(t *testing.T, err error) {
				exWantPair(t, err, PhaseCheck, 2, 0)
				var le *LayoutError
				if !errors.As(err, &le) || le.Kind != ErrLayout || le.Rank != 2 {
					t.Fatalf("%v: want a *LayoutError for source rank 2", err)
				}
			}},
		{name: "window past local", links: broken(0, 1, func(l *Link) error { l.LocalBase = 1 << 62; return nil }),
			check: func(t *testing.T, err error) {
				exWantPair(t, err, PhaseCheck, 1, 0)
				if !errors.Is(err, ErrLayout) {
					t.Fatalf("%v: want ErrLayout", err)
				}
			}},
		{name: "overlap", plan: overlapping, check: func(t *testing.T, err error) {
			exWantPair(t, err, PhaseCheck, 2, 0)
			if !errors.Is(err, ErrOverlap) {
				t.Fatalf("%v: want ErrOverlap", err)
			}
		}},
		{name: "fragments", opt: Options{MaxFragments: 100}, check: func(t *testing.T, err error) {
			exWantPair(t, err, PhaseCheck, 0, 0)
			var me *LimitError
			if !errors.As(err, &me) || me.Max != 100 {
				t.Fatalf("%v: want a *LimitError", err)
			}
		}},
		{name: "bad dir", dir: Dir(3), check: func(t *testing.T, err error) {
			if !errors.Is(err, verbs.ErrInvalid) {
				t.Fatalf("%v: want verbs.ErrInvalid", err)
			}
		}},
		{name: "bad mode", opt: Options{Mode: engine.ModeHybrid + 1}, check: func(t *testing.T, err error) {
			if !errors.Is(err, verbs.ErrInvalid) {
				t.Fatalf("%v: want verbs.ErrInvalid", err)
			}
		}},
		{name: "no layouts", plan: &Plan{Pairs: p.Pairs}, check: func(t *testing.T, err error) {
			if !errors.Is(err, ErrLayout) {
				t.Fatalf("%v: want ErrLayout", err)
			}
		}},
		{name: "cancelled", ctx: func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, check: func(t *testing.T, err error) {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%v: want context.Canceled", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w.poisonAll()
			before := w.want(t, &Plan{})
			eng, err := engine.New(engine.Config{Calibration: &exCalibration})
			if err != nil {
				t.Fatal(err)
			}
			plan, dir, local, links := tc.plan, tc.dir, tc.local, tc.links
			if plan == nil {
				plan = p
			}
			if dir == 0 {
				dir = Pull
			}
			if local == nil {
				local = []int{0, 1}
				if dir == Push {
					local = []int{0, 1, 2}
				}
			}
			if links == nil {
				links = w.links(dir)
			}
			ctx := exContext(t)
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			run, err := Start(ctx, eng, plan, dir, local, links, tc.opt)
			if err == nil {
				run.Wait()
				t.Fatal("Start succeeded")
			}
			t.Log(err)
			tc.check(t, err)
			if err := eng.Close(); err != nil {
				t.Fatal(err)
			}
			if st := eng.Stats(); st.Ops != 0 {
				t.Fatalf("the engine ran %d operations", st.Ops)
			}
			w.check(t, before)
		})
	}
}

// exWantPair checks that err is a *PairError of phase ph for pair src->dst.
func exWantPair(t *testing.T, err error, ph Phase, src, dst int) {
	t.Helper()
	var pe *PairError
	if !errors.As(err, &pe) || pe.Phase != ph || pe.Src != src || pe.Dst != dst {
		t.Fatalf("%v: want a *PairError at %v for pair %d->%d", err, ph, src, dst)
	}
}

// TestSubmitFails makes the engine reject the third operation: Start
// returns the rejection after the two submitted ones have completed.
func TestSubmitFails(t *testing.T) {
	r := exRand(t)
	p := exMixedPlan(r, 3, 2)
	w := exNewWorld(t, exBackends[1], p.Src, p.Dst)
	eng, err := engine.New(engine.Config{Calibration: &exCalibration})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	injected := errors.New("injected submit failure")
	calls := 0
	submitOp = func(e *engine.Engine, ctx context.Context, op *engine.ScatterOp) (*engine.Operation, error) {
		calls++
		if calls == 3 {
			return nil, injected
		}
		return e.Submit(ctx, op)
	}
	defer func() { submitOp = (*engine.Engine).Submit }()
	run, err := Start(exContext(t), eng, p, Push, []int{0, 1, 2}, w.links(Push), Options{Mode: engine.ModeDirect})
	if err == nil {
		run.Wait()
		t.Fatal("Start succeeded")
	}
	exWantPair(t, err, PhaseSubmit, 1, 0)
	if !errors.Is(err, injected) {
		t.Fatalf("%v: does not wrap the submit error", err)
	}
	// Completed before Start returned: none left running.
	if st := eng.Stats(); st.Ops != 2 {
		t.Fatalf("%d operations completed, want the 2 submitted", st.Ops)
	}
}

// TestTransferFails runs one pair over a closed connection: Wait reports
// that pair, wrapping verbs.ErrClosed, and the others complete.
func TestTransferFails(t *testing.T) {
	for _, be := range exBackends {
		t.Run(be.name, func(t *testing.T) {
			r := exRand(t)
			p := exMixedPlan(r, 3, 2)
			w := exNewWorld(t, be, p.Src, p.Dst)
			for _, sp := range w.src {
				exFill(r, sp.region.Bytes())
			}
			dead := exConnect(t, exContext(t), be, w.dst[1], w.src[0])
			if err := dead.Close(); err != nil {
				t.Fatal(err)
			}
			pull := w.links(Pull)
			links := func(self, peer int) (Link, error) {
				l, err := pull(self, peer)
				if self == 1 && peer == 0 {
					l.Conn = dead
				}
				return l, err
			}
			w.poisonAll()
			run, err := Start(exContext(t), w.dst[1].eng, p, Pull, []int{1}, links, Options{Mode: engine.ModeDirect})
			if err != nil {
				t.Fatal(err)
			}
			res, err := run.Wait()
			t.Log(err)
			exWantPair(t, err, PhaseTransfer, 0, 1)
			var oe *engine.OpError
			if !errors.Is(err, verbs.ErrClosed) || !errors.As(err, &oe) {
				t.Fatalf("%v: want a *engine.OpError wrapping verbs.ErrClosed", err)
			}
			if len(res.Pairs) != 2 {
				t.Fatalf("%d pair results, want 2", len(res.Pairs))
			}
			// The other pair of destination 1 (from source 1) landed.
			want := w.want(t, &Plan{Pairs: []Pair{p.Pairs[3]}})
			got := w.dst[1].region.Bytes()
			for _, f := range exPairFragments(&p.Pairs[3]) {
				if !slices.Equal(got[exBase+f.dst:exBase+f.dst+f.n], want[1][exBase+f.dst:exBase+f.dst+f.n]) {
					t.Fatalf("pair 1->1 fragment at %d did not land", f.dst)
				}
			}
		})
	}
}

// TestCancel cancels the context right after Start: Wait returns, and any
// failure is the cancellation.
func TestCancel(t *testing.T) {
	r := exRand(t)
	p := exMixedPlan(r, 3, 2)
	w := exNewWorld(t, exBackends[1], p.Src, p.Dst)
	ctx, cancel := context.WithCancel(exContext(t))
	run, err := Start(ctx, w.dst[0].eng, p, Pull, []int{0, 1}, w.links(Pull), Options{Mode: engine.ModeDirect})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	res, err := run.Wait()
	t.Logf("%d pairs: %v", len(res.Pairs), err)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("%v: want nil or context.Canceled", err)
	}
}

// BenchmarkLower measures lowering alone (ns per fragment) of a pair of
// 1M fragments of 64 B: a region in destination order, the same region
// transposed (put in order by reordering its loops), and two regions
// interleaving in the destination (radix-sorted).
func BenchmarkLower(b *testing.B) {
	const a, c, inner = 1024, 1024, 64
	for _, tc := range []struct {
		name string
		reg  Region
	}{
		{"sorted", Region{Inner: inner, Counts: []int64{a, c}, SrcStrides: []int64{c * 2 * inner, 2 * inner}, DstStrides: []int64{c * inner, inner}}},
		{"transposed", Region{Inner: inner, Counts: []int64{a, c}, SrcStrides: []int64{c * 2 * inner, 2 * inner}, DstStrides: []int64{inner, a * inner}}},
		// Two halves interleaving in the destination: radix-sorted.
		{"interleaved", Region{Inner: inner, Counts: []int64{a * c / 2}, SrcStrides: []int64{2 * inner}, DstStrides: []int64{2 * inner}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			pr := &Pair{Regions: []Region{tc.reg}}
			if tc.name == "interleaved" {
				other := tc.reg
				other.SrcOff, other.DstOff = inner, inner
				pr.Regions = append(pr.Regions, other)
			}
			x := &execPair{}
			if err := measurePair(pr, x, DefaultMaxFragments); err != nil {
				b.Fatal(err)
			}
			rs := make([]planfmt.Range, 0, x.frags)
			var sc lowerScratch
			b.ReportAllocs()
			b.SetBytes(x.bytes)
			for b.Loop() {
				if _, err := lowerPair(pr, x, rs[:0], &sc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(x.frags), "ns/fragment")
		})
	}
}

// BenchmarkReshard pulls a mixed plan (3 sources, 2 destinations, about
// 2,000 fragments and 400 KiB per pair, in ModeAuto) and reports the
// lowering's share of the elapsed time.
func BenchmarkReshard(b *testing.B) {
	for _, be := range exBackends {
		b.Run(be.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			p := exMixedPlan(r, 3, 2)
			w := exNewWorld(b, be, p.Src, p.Dst)
			ctx := exContext(b)
			var lower, elapsed time.Duration
			var frags int64
			b.SetBytes(p.Bytes)
			for b.Loop() {
				runs := make([]*Run, len(w.dst))
				for rank := range w.dst {
					run, err := Start(ctx, w.engine(Pull, rank), p, Pull, []int{rank}, w.links(Pull), Options{})
					if err != nil {
						b.Fatal(err)
					}
					runs[rank] = run
				}
				for _, run := range runs {
					res, err := run.Wait()
					if err != nil {
						b.Fatal(err)
					}
					lower += res.Lower
					elapsed += res.Elapsed
					for _, pr := range res.Pairs {
						frags += int64(pr.Result.Fragments)
					}
				}
			}
			b.ReportMetric(100*float64(lower)/float64(elapsed), "lower-%")
			b.ReportMetric(float64(lower.Nanoseconds())/float64(frags), "lower-ns/fragment")
		})
	}
}

// exKVLayouts are scatterbench's reshard-kv layouts: a KV cache [16384
// tokens, 16 heads, 128 dims] x 2 bytes, tensor-parallel 8 paged by 16
// tokens (8192 source pages) to tensor-parallel 2 paged by 64 tokens (512
// destination pages), pages scattered in pools a quarter larger than
// needed: 8192 regions of 16 fragments of 512 bytes in 8 pairs.
func exKVLayouts(tb testing.TB, r *rand.Rand) (src, dst *Layout) {
	tb.Helper()
	t := Tensor{Shape: []int64{16384, 16, 128}, ElemSize: 2}
	paged := func(tp int, page int64) *Layout {
		l, err := Sharded(t, ShardSpec{Parts: []int64{1, int64(tp), 1}})
		if err != nil {
			tb.Fatal(err)
		}
		pages := int((t.Shape[0] + page - 1) / page)
		tables := make([][]int64, tp)
		for i := range tables {
			tables[i] = make([]int64, pages)
			for j, s := range r.Perm(pages + pages/4)[:pages] {
				tables[i][j] = int64(s)
			}
		}
		l, err = Paginate(l, 0, page, tables)
		if err != nil {
			tb.Fatal(err)
		}
		return l
	}
	return paged(8, 16), paged(2, 64)
}

// BenchmarkLowerKV plans scatterbench's reshard-kv (exKVLayouts) once and
// times what Start spends besides links and submission when one process
// pulls every pair: measuring the pairs and lowering all of them into
// their ranges (131072 fragments of 512 bytes, 8192 regions, 8 pairs),
// the range storage reused from run to run as Start's is.
func BenchmarkLowerKV(b *testing.B) {
	src, dst := exKVLayouts(b, rand.New(rand.NewPCG(1, 1)))
	p, err := NewPlan(src, dst, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	var frags, regions int64
	for _, pr := range p.Pairs {
		frags += pr.Fragments
		regions += int64(len(pr.Regions))
	}
	if frags != 131072 || regions != 8192 || len(p.Pairs) != 8 {
		b.Fatalf("%d fragments, %d regions, %d pairs; want 131072, 8192, 8", frags, regions, len(p.Pairs))
	}
	own := make([]int, len(p.Pairs))
	for i := range own {
		own[i] = i
	}
	b.ReportAllocs()
	b.SetBytes(p.Bytes)
	for b.Loop() {
		r := &Run{dir: Pull}
		lowerErrs, err := r.keep(r.prepare(p, own, len(p.Src.Ranks), DefaultMaxFragments, frags))
		if err == nil {
			err = errors.Join(lowerErrs...)
		}
		if err != nil {
			b.Fatal(err)
		}
		r.release() // as Wait does once the operations complete
	}
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(ns/float64(frags), "ns/fragment")
	b.ReportMetric(ns/float64(regions), "ns/region")
}

// exLowerReference is lowerPair as it was before it read canonical
// regions in place and settled order per run of the innermost loop: each
// region copied into canonical form, the copies stably sorted by their
// first destination byte when all are nests, every fragment expanded by
// Region.Each and compared with the previous range, the ranges stably
// sorted by destination and coalesced again when some fragment did not
// continue upwards. lowerPair must give the same ranges and errors.
func exLowerReference(pr *Pair, x *execPair) ([]planfmt.Range, error) {
	type canon struct {
		reg Region
		dlo int64
	}
	var regs []canon
	nested := true
	for i := range pr.Regions {
		reg := pr.Regions[i]
		if reg.Inner == 0 || reg.Fragments() == 0 {
			continue
		}
		c := Region{SrcOff: reg.SrcOff, DstOff: reg.DstOff, Inner: reg.Inner,
			Counts: slices.Clone(reg.Counts), SrcStrides: slices.Clone(reg.SrcStrides), DstStrides: slices.Clone(reg.DstStrides)}
		n := len(c.Counts)
		for l := range n {
			if c.DstStrides[l] < 0 {
				k := c.Counts[l] - 1
				c.SrcOff += k * c.SrcStrides[l]
				c.DstOff += k * c.DstStrides[l]
				c.SrcStrides[l], c.DstStrides[l] = -c.SrcStrides[l], -c.DstStrides[l]
			}
		}
		for i := 1; i < n; i++ {
			for j := i; j > 0 && c.DstStrides[j-1] < c.DstStrides[j]; j-- {
				c.Counts[j-1], c.Counts[j] = c.Counts[j], c.Counts[j-1]
				c.SrcStrides[j-1], c.SrcStrides[j] = c.SrcStrides[j], c.SrcStrides[j-1]
				c.DstStrides[j-1], c.DstStrides[j] = c.DstStrides[j], c.DstStrides[j-1]
			}
		}
		ext := c.Inner
		for l := n - 1; l >= 0; l-- {
			if k := c.Counts[l] - 1; k > 0 {
				nested = nested && c.DstStrides[l] >= ext
				ext += k * c.DstStrides[l]
			}
		}
		regs = append(regs, canon{c, c.DstOff})
	}
	if nested {
		slices.SortStableFunc(regs, func(a, b canon) int { return cmp.Compare(a.dlo, b.dlo) })
	}
	var rs []planfmt.Range
	sorted := true
	for i := range regs {
		n := uint64(regs[i].reg.Inner)
		regs[i].reg.Each(func(s, d int64) bool {
			src, dst := uint64(s-x.srcLo), uint64(d-x.dstLo)
			if k := len(rs); k > 0 {
				last := &rs[k-1]
				end := last.Dst + last.Len
				if dst == end && src == last.Src+last.Len {
					last.Len += n
					return true
				}
				if dst < end {
					sorted = false
				}
			}
			rs = append(rs, planfmt.Range{Src: src, Dst: dst, Len: n})
			return true
		})
	}
	if sorted {
		return rs, nil
	}
	slices.SortStableFunc(rs, func(a, b planfmt.Range) int { return cmp.Compare(a.Dst, b.Dst) })
	w := 0
	for _, r := range rs {
		if w > 0 {
			last := &rs[w-1]
			end := last.Dst + last.Len
			if r.Dst < end {
				return nil, &LayoutError{Kind: ErrOverlap, Rank: x.dst, Piece: -1,
					Reason: fmt.Sprintf("pair %d->%d writes destination bytes [%d, %d) and [%d, %d)",
						x.src, x.dst, int64(last.Dst)+x.dstLo, int64(end)+x.dstLo, int64(r.Dst)+x.dstLo, int64(r.Dst+r.Len)+x.dstLo)}
			}
			if r.Dst == end && r.Src == last.Src+last.Len {
				last.Len += r.Len
				continue
			}
		}
		rs[w] = r
		w++
	}
	return rs[:w], nil
}

// exSameLowering checks that lowerPair lowers pr as exLowerReference
// does: the same ranges, or the same error.
func exSameLowering(t *testing.T, what string, pr *Pair) {
	t.Helper()
	x, rs, err := exLower(pr, DefaultMaxFragments)
	if x == nil || x.frags == 0 {
		return
	}
	want, werr := exLowerReference(pr, x)
	if fmt.Sprint(err) != fmt.Sprint(werr) {
		t.Fatalf("%s: error %v, reference %v", what, err, werr)
	}
	if !slices.Equal(rs, want) {
		t.Fatalf("%s: %d ranges, reference %d: %+v\nreference %+v", what, len(rs), len(want), rs, want)
	}
}

// TestLowerReference: lowerPair gives exactly the ranges (or errors) of
// the reference lowering, on random pairs (some overlapping: a region
// repeated, or shifted onto another) and on the pairs of random plans.
func TestLowerReference(t *testing.T) {
	r := exRand(t)
	for i := range 3000 {
		pr := exRandomPair(r)
		if n := len(pr.Regions); r.IntN(4) == 0 {
			reg := pr.Regions[r.IntN(n)]
			if r.IntN(2) == 0 {
				reg.DstOff += int64(r.IntN(8)) - 4
				reg.DstOff = max(reg.DstOff, 0)
			}
			pr.Regions = slices.Insert(pr.Regions, r.IntN(n+1), reg)
		}
		exSameLowering(t, fmt.Sprintf("pair %d", i), pr)
	}
	for i := range 300 {
		tn := planTestRandTensor(r)
		o := planTestGenOpts{maxParts: 4, maxBase: 4, maxRep: 2, negative: i%2 == 0}
		src, _ := planTestRandLayout(r, tn, o)
		dst, _ := planTestRandLayout(r, tn, o)
		p, err := planLayouts(src, dst, planTestBoxes(t, src), Limits{}.withDefaults())
		if err != nil {
			t.Fatalf("plan %d: %v", i, err)
		}
		for k := range p.Pairs {
			exSameLowering(t, fmt.Sprintf("plan %d pair %d", i, k), &p.Pairs[k])
		}
	}
}

package reshard_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/reshard"
	"github.com/scatterkit/scatterkit/reshard/mesh"
	"github.com/scatterkit/scatterkit/verbs"
)

var seedFlag = flag.Uint64("reshard.seed", 0, "seed of the property tests (0: from the clock)")

func newRand(tb testing.TB) *rand.Rand {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	tb.Logf("seed %d (rerun with -reshard.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
}

// randomLayout draws a layout of t: a sharding with random parts, cyclic
// axes, replicas, memory order and base, sometimes paged along a
// block-split axis with a random page length and page tables.
func randomLayout(r *rand.Rand, t reshard.Tensor, maxRanks int64, replicas bool) (*reshard.Layout, error) {
	n := len(t.Shape)
	spec := reshard.ShardSpec{Parts: make([]int64, n), Cyclic: make([]bool, n), Replicas: 1, Order: r.Perm(n), Base: r.Int64N(3) * 64}
	ranks := int64(1)
	for a := range n {
		spec.Parts[a] = 1
		if p := 1 + r.Int64N(min(t.Shape[a], 4)); ranks*p <= maxRanks {
			spec.Parts[a] = p
			ranks *= p
		}
		spec.Cyclic[a] = spec.Parts[a] > 1 && r.IntN(3) == 0
	}
	if replicas && ranks < maxRanks && r.IntN(3) == 0 {
		spec.Replicas = 2
	}
	l, err := reshard.Sharded(t, spec)
	if err != nil || r.IntN(2) == 0 {
		return l, err
	}
	var axes []int
	for a := range n {
		if !spec.Cyclic[a] {
			axes = append(axes, a)
		}
	}
	if len(axes) == 0 {
		return l, nil
	}
	axis := axes[r.IntN(len(axes))]
	page := 1 + r.Int64N(t.Shape[axis])
	tables := make([][]int64, len(l.Ranks))
	for i, rk := range l.Ranks {
		pages := int((rk.Pieces[0].Box[axis].Len() + page - 1) / page)
		for _, s := range r.Perm(pages + r.IntN(3))[:pages] {
			tables[i] = append(tables[i], int64(s))
		}
	}
	return reshard.Paginate(l, axis, page, tables)
}

// randomReshard draws a tensor of axes axes (1 to 12 elements each, of
// 1, 2, 4 or 8 bytes) and two random layouts of it (up to 6 ranks each,
// replicas allowed).
func randomReshard(tb testing.TB, r *rand.Rand, axes int) (reshard.Tensor, *reshard.Layout, *reshard.Layout) {
	tb.Helper()
	tensor := reshard.Tensor{ElemSize: []int64{1, 2, 4, 8}[r.IntN(4)]}
	for range axes {
		tensor.Shape = append(tensor.Shape, 1+r.Int64N(12))
	}
	src, err := randomLayout(r, tensor, 6, true)
	if err != nil {
		tb.Fatal(err)
	}
	dst, err := randomLayout(r, tensor, 6, true)
	if err != nil {
		tb.Fatal(err)
	}
	return tensor, src, dst
}

func regionSizes(l *reshard.Layout) []int64 {
	var s []int64
	for _, rk := range l.Ranks {
		s = append(s, rk.RegionBytes)
	}
	return s
}

// fixedLink skips the link measurement at connect and makes small
// requests expensive, so ModeAuto gathers small fragments.
var fixedLink = verbs.LinkParams{Bandwidth: 3e9, PostRate: 1e6, RTT: 30 * time.Microsecond}

// fixedCalibration spares every gather service and engine its packing
// probe.
var fixedCalibration = costmodel.Calibration{BMem: 5e9, RCopy: 8e6}

// TestReshardProperty: random tensors and layouts on both sides (splits,
// cyclic head-like placements, replicas, memory orders, pages), moved
// over shm and tcp, pulled and pushed, in the engine's own mode or forced
// gather: afterwards every destination rank's memory equals its poisoned
// image with exactly the layout's elements replaced by the tensor's
// bytes, so every held byte is right and nothing else was written.
func TestReshardProperty(t *testing.T) {
	r := newRand(t)
	cases := 20
	if testing.Short() {
		cases = 4
	}
	for _, transport := range []string{"shm", "tcp"} {
		for i := range cases {
			dir := []reshard.Dir{reshard.Pull, reshard.Push}[i%2]
			mode := []engine.Mode{engine.ModeAuto, engine.ModeGather, engine.ModeDirect}[i%3]
			t.Run(fmt.Sprintf("%s/%d/%v/%v", transport, i, dir, mode), func(t *testing.T) {
				reshardCase(t, r, transport, dir, mode)
			})
		}
	}
}

func reshardCase(t *testing.T, r *rand.Rand, transport string, dir reshard.Dir, mode engine.Mode) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	axes := 2 + r.IntN(3)
	tensor, src, dst := randomReshard(t, r, axes)
	t.Logf("tensor %v x %d B; %d source ranks, %d destination ranks", tensor.Shape, tensor.ElemSize, len(src.Ranks), len(dst.Ranks))
	m, err := mesh.New(mesh.Config{Transport: transport, StagingBytes: 1 << 20, Link: fixedLink, Calibration: &fixedCalibration,
		Engine: engine.Config{Calibration: &fixedCalibration}}, regionSizes(src), regionSizes(dst))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}()
	whole, err := reshard.Sharded(tensor, reshard.ShardSpec{Parts: slices.Repeat([]int64{1}, axes)})
	if err != nil {
		t.Fatal(err)
	}
	logical := make([]byte, whole.Ranks[0].RegionBytes)
	for i := range logical {
		logical[i] = byte(r.Uint32())
	}
	in, err := reshard.NewPlan(whole, src, reshard.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Apply(func(int) []byte { return logical }, func(i int) []byte { return m.Src(i).Bytes() }); err != nil {
		t.Fatal(err)
	}
	// Poison every destination byte; the expected image is the poison
	// with the layout's elements taken from the tensor.
	want := make([][]byte, len(dst.Ranks))
	for j := range dst.Ranks {
		b := m.Dst(j).Bytes()
		for k := range b {
			b[k] = byte(r.Uint32())
		}
		want[j] = bytes.Clone(b)
	}
	out, err := reshard.NewPlan(whole, dst, reshard.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Apply(func(int) []byte { return logical }, func(j int) []byte { return want[j] }); err != nil {
		t.Fatal(err)
	}
	srcBefore := make([][]byte, len(src.Ranks))
	for i := range src.Ranks {
		srcBefore[i] = bytes.Clone(m.Src(i).Bytes())
	}

	plan, err := reshard.NewPlan(src, dst, reshard.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	running := dst.Ranks
	if dir == reshard.Push {
		running = src.Ranks
	}
	local := make([]int, len(running))
	for i := range local {
		local[i] = i
	}
	run, err := reshard.Start(ctx, m.Engine(), plan, dir, local, m.Links(ctx, dir), reshard.Options{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != plan.Bytes {
		t.Errorf("moved %d bytes, plan %d", res.Bytes, plan.Bytes)
	}
	for j := range dst.Ranks {
		got := m.Dst(j).Bytes()
		if i := firstDiff(got, want[j]); i >= 0 {
			t.Fatalf("destination rank %d: byte %d is %#x, want %#x (%d pairs)", j, i, got[i], want[j][i], len(plan.Pairs))
		}
	}
	for i := range src.Ranks {
		if !bytes.Equal(m.Src(i).Bytes(), srcBefore[i]) {
			t.Fatalf("source rank %d changed", i)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

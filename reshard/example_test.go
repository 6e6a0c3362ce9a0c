package reshard_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"slices"

	"github.com/scatterkit/scatterkit/reshard"
	"github.com/scatterkit/scatterkit/reshard/mesh"
)

// reshardOnMesh fills the source ranks of a mesh with a known tensor,
// reshards it with the destination ranks pulling, and reports whether
// every destination rank holds exactly the tensor's bytes where its
// layout says.
func reshardOnMesh(src, dst *reshard.Layout, transport string) (*reshard.Plan, bool) {
	ctx := context.Background()
	regions := func(l *reshard.Layout) []int64 {
		var s []int64
		for _, r := range l.Ranks {
			s = append(s, r.RegionBytes)
		}
		return s
	}
	m, err := mesh.New(mesh.Config{Transport: transport, StagingBytes: 1 << 20}, regions(src), regions(dst))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	// The logical tensor, whole, exists only here, as the reference:
	// random bytes, scattered into the source ranks by an in-memory plan
	// from one rank holding it row-major.
	whole, err := reshard.Sharded(src.Tensor, reshard.ShardSpec{Parts: slices.Repeat([]int64{1}, len(src.Tensor.Shape))})
	if err != nil {
		log.Fatal(err)
	}
	tensor := make([]byte, whole.Ranks[0].RegionBytes)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range tensor {
		tensor[i] = byte(rng.Uint32())
	}
	in, err := reshard.NewPlan(whole, src, reshard.Limits{})
	if err != nil {
		log.Fatal(err)
	}
	if err := in.Apply(func(int) []byte { return tensor }, func(i int) []byte { return m.Src(i).Bytes() }); err != nil {
		log.Fatal(err)
	}

	// The reshard itself: plan once, then every destination rank pulls
	// its pairs, one scatter operation per pair, one completion for all.
	plan, err := reshard.NewPlan(src, dst, reshard.Limits{})
	if err != nil {
		log.Fatal(err)
	}
	all := make([]int, len(dst.Ranks))
	for i := range all {
		all[i] = i
	}
	run, err := reshard.Start(ctx, m.Engine(), plan, reshard.Pull, all, m.Links(ctx, reshard.Pull), reshard.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := run.Wait(); err != nil {
		log.Fatal(err)
	}

	// Check: gather every destination rank back into a whole tensor.
	out, err := reshard.NewPlan(dst, whole, reshard.Limits{})
	if err != nil {
		log.Fatal(err)
	}
	back := make([]byte, len(tensor))
	if err := out.Apply(func(j int) []byte { return m.Dst(j).Bytes() }, func(int) []byte { return back }); err != nil {
		log.Fatal(err)
	}
	return plan, bytes.Equal(back, tensor)
}

// A KV cache moves from a tensor-parallel-8 prefill layout, paged by 16
// tokens, to a tensor-parallel-2 decode layout paged by 64 tokens. Each
// side's pages sit in its ranks' page pools through page tables.
func Example_kvCache() {
	kv := reshard.Tensor{Shape: []int64{512, 8, 64}, ElemSize: 2} // tokens, heads, head dim; bf16
	pagesOf := func(tp int, page int64, seed uint64) [][]int64 {
		r := rand.New(rand.NewPCG(seed, 7))
		pages := int((kv.Shape[0] + page - 1) / page)
		tables := make([][]int64, tp)
		for i := range tables {
			for _, s := range r.Perm(2 * pages)[:pages] { // a pool twice the size, pages scattered
				tables[i] = append(tables[i], int64(s))
			}
		}
		return tables
	}
	prefill, err := reshard.Sharded(kv, reshard.ShardSpec{Parts: []int64{1, 8, 1}}) // one head per rank
	if err != nil {
		log.Fatal(err)
	}
	if prefill, err = reshard.Paginate(prefill, 0, 16, pagesOf(8, 16, 1)); err != nil {
		log.Fatal(err)
	}
	decode, err := reshard.Sharded(kv, reshard.ShardSpec{Parts: []int64{1, 2, 1}}) // four heads per rank
	if err != nil {
		log.Fatal(err)
	}
	if decode, err = reshard.Paginate(decode, 0, 64, pagesOf(2, 64, 2)); err != nil {
		log.Fatal(err)
	}
	plan, ok := reshardOnMesh(prefill, decode, "shm")
	fmt.Printf("%d pairs, %d KiB, correct: %v\n", len(plan.Pairs), plan.Bytes>>10, ok)
	// Output: 8 pairs, 512 KiB, correct: true
}

// Pipeline stages rebalance: layers [0, 4) and [4, 8) on two stages
// become [0, 3) and [3, 8): layer 3 moves from stage 0 to stage 1. Each
// pair is one contiguous copy. The layouts are written out piece by
// piece.
func Example_pipelineStages() {
	w := reshard.Tensor{Shape: []int64{8, 128, 256}, ElemSize: 4} // layers, rows, cols; fp32
	layer := w.Shape[1] * w.Shape[2] * w.ElemSize
	stages := func(bounds ...int64) *reshard.Layout {
		l := &reshard.Layout{Tensor: w}
		for i := 0; i+1 < len(bounds); i++ {
			lo, hi := bounds[i], bounds[i+1]
			l.Ranks = append(l.Ranks, reshard.Rank{RegionBytes: (hi - lo) * layer, Pieces: []reshard.Piece{{
				Box:     []reshard.Interval{{Lo: lo, Hi: hi, Step: 1}, {Lo: 0, Hi: w.Shape[1], Step: 1}, {Lo: 0, Hi: w.Shape[2], Step: 1}},
				Strides: []int64{layer, w.Shape[2] * w.ElemSize, w.ElemSize},
			}}})
		}
		return l
	}
	plan, ok := reshardOnMesh(stages(0, 4, 8), stages(0, 3, 8), "tcp")
	for _, p := range plan.Pairs {
		fmt.Printf("stage %d -> stage %d: %d KiB in %d fragment(s)\n", p.Src, p.Dst, p.Bytes>>10, p.Fragments)
	}
	fmt.Println("correct:", ok)
	// Output:
	// stage 0 -> stage 0: 384 KiB in 1 fragment(s)
	// stage 0 -> stage 1: 128 KiB in 1 fragment(s)
	// stage 1 -> stage 1: 512 KiB in 1 fragment(s)
	// correct: true
}

// Expert shards rebalance: 16 experts, 4 per rank in blocks, are moved
// to a placement that spreads the hot experts 0-3 over all ranks. Each
// rank keeps its experts in slots of one buffer, in the order it lists
// them.
func Example_expertRebalance() {
	ex := reshard.Tensor{Shape: []int64{16, 64, 128}, ElemSize: 2} // experts, rows, cols
	expert := ex.Shape[1] * ex.Shape[2] * ex.ElemSize
	place := func(ranks [][]int64) *reshard.Layout {
		l := &reshard.Layout{Tensor: ex}
		for _, experts := range ranks {
			rk := reshard.Rank{RegionBytes: int64(len(experts)) * expert}
			for slot, e := range experts {
				rk.Pieces = append(rk.Pieces, reshard.Piece{
					Box:     []reshard.Interval{{Lo: e, Hi: e + 1, Step: 1}, {Lo: 0, Hi: ex.Shape[1], Step: 1}, {Lo: 0, Hi: ex.Shape[2], Step: 1}},
					Offset:  int64(slot) * expert,
					Strides: []int64{expert, ex.Shape[2] * ex.ElemSize, ex.ElemSize},
				})
			}
			l.Ranks = append(l.Ranks, rk)
		}
		return l
	}
	before := place([][]int64{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}})
	after := place([][]int64{{0, 4, 5, 6}, {1, 7, 8, 9}, {2, 10, 11, 12}, {3, 13, 14, 15}})
	plan, ok := reshardOnMesh(before, after, "shm")
	moved := int64(0)
	for _, p := range plan.Pairs {
		if p.Src != p.Dst {
			moved += p.Bytes
		}
	}
	fmt.Printf("%d pairs; %d of 16 experts change rank; correct: %v\n", len(plan.Pairs), moved/expert, ok)
	// Output: 10 pairs; 9 of 16 experts change rank; correct: true
}

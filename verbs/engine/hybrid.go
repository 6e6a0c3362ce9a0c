package engine

import (
	"math/bits"

	"github.com/scatterkit/scatterkit/costmodel"
	"github.com/scatterkit/scatterkit/planfmt"
)

// A mixed ranges plan is split by span size. Spans are classed by the
// power of two of their length (planfmt's Geometry.SpanLog2 histogram);
// each occupied class becomes one costmodel.Run (its bytes and span
// count), and costmodel.Split picks which classes share one gather
// pipeline while the others stay direct. The gathered spans become a
// FormRanges sub-plan built into the operation's reused storage; the
// direct ones become work requests. Both parts run at once, under the
// operation's one completion.

// spanClass is the log2 size class of a span of n >= 1 bytes.
func spanClass(n uint64) int { return bits.Len64(n) - 1 }

// occupiedBuckets counts the span size classes the plan uses.
func (op *Operation) occupiedBuckets() int {
	k := 0
	for _, c := range op.geom.SpanLog2 {
		if c != 0 {
			k++
		}
	}
	return k
}

// splitPlan runs the cost model's split over the plan's size classes and
// settles op.mode (direct, gather or hybrid) and op.h.bucketModes. A forced
// hybrid whose split is not a hybrid (it gathers nothing, or everything)
// gathers the classes whose spans are all at most HybridThreshold bytes.
func (op *Operation) splitPlan(p costmodel.Params, forced bool) {
	var bytes, count [64]uint64
	op.norm.ForEachSpan(func(_, _, n uint64) bool {
		c := spanClass(n)
		bytes[c] += n
		count[c]++
		return true
	})
	var runs [64]costmodel.Run
	var modes [64]Mode
	var class [64]int
	k := 0
	for c := range bytes {
		if count[c] == 0 {
			continue
		}
		runs[k] = costmodel.Run{Geometry: costmodel.Geometry{S: int64(bytes[c]), N: int64(count[c]), M: int64(count[c])}, Gatherable: true}
		class[k] = c
		k++
	}
	op.h.split = costmodel.Split(p, runs[:k], modes[:k])
	op.h.bucketModes = [64]Mode{}
	mode := op.h.split.Mode
	if op.h.split.Err != nil {
		mode = ModeDirect
	}
	if mode != ModeHybrid && forced {
		var g costmodel.Geometry
		for i := range k {
			modes[i] = ModeDirect
			if uint64(2)<<class[i]-1 <= op.e.cfg.HybridThreshold {
				modes[i] = ModeGather
				g.S, g.N, g.M = g.S+runs[i].S, g.N+runs[i].N, g.M+runs[i].M
			}
		}
		switch {
		case g.N == 0:
			mode = ModeDirect
		case g.N == int64(op.geom.Spans):
			mode = ModeGather
		default:
			mode = ModeHybrid
		}
		op.h.split.Gather = g
		op.h.split.Pipeline = costmodel.Decide(p, g).Gather
	}
	for i := range k {
		op.h.bucketModes[class[i]] = modes[i]
	}
	switch mode {
	case ModeGather:
		op.mode = ModeGather
	case ModeHybrid:
		op.mode = ModeHybrid
	default:
		op.mode = ModeDirect
	}
}

// buildHybrid makes the direct part's work requests (spans of direct
// classes) and the gathered sub-plan (spans of gather classes) in one pass
// over the spans.
func (op *Operation) buildHybrid() {
	if op.mapper != nil {
		// The direct part copies through the mapping: spans, no requests.
		op.primary.resetSpans()
		sub := op.h.sub[:0]
		op.norm.ForEachSpan(func(src, dst, n uint64) bool {
			if op.h.bucketModes[spanClass(n)] == ModeGather {
				sub = append(sub, planfmt.Range{Src: src, Dst: dst, Len: n})
			} else {
				op.primary.addSpan(src, dst, n)
			}
			return true
		})
		op.h.sub = sub
		op.h.subPlan = planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: op.sop.Plan.SrcExtent,
			DstExtent: op.sop.Plan.DstExtent, Ranges: sub}
		return
	}
	op.primary.op = op
	id := op.cs.reserve(&op.primary)
	wrs, sub := op.primary.wrs[:0], op.h.sub[:0]
	op.norm.ForEachSpan(func(src, dst, n uint64) bool {
		if op.h.bucketModes[spanClass(n)] == ModeGather {
			sub = append(sub, planfmt.Range{Src: src, Dst: dst, Len: n})
		} else {
			wrs = op.spanRequest(wrs, id, src, dst, n)
		}
		return true
	})
	op.primary.wrs, op.h.sub = wrs, sub
	op.h.subPlan = planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: op.sop.Plan.SrcExtent,
		DstExtent: op.sop.Plan.DstExtent, Ranges: sub}
}

package reshard

import (
	"fmt"
	"math"
)

// Apply carries out the plan in this process: every region's fragments
// are copied from src(pair.Src) to dst(pair.Dst), the memory of the
// source and destination ranks (the byte slices their layouts' offsets
// index). It is the reshard of a single host that holds both layouts in
// plain memory, and the reference the transfer paths are tested against.
//
// Every pair's regions are checked (shapes, overflow, and the byte
// windows their fragments span against the lengths of the slices) before
// any byte is copied; on an error nothing is written.
func (p *Plan) Apply(src, dst func(rank int) []byte) error {
	for i := range p.Pairs {
		pr := &p.Pairs[i]
		var x execPair
		if err := measurePair(pr, &x, math.MaxInt64); err != nil {
			return err
		}
		if x.frags == 0 {
			continue
		}
		s, d := len(src(pr.Src)), len(dst(pr.Dst))
		if x.srcLo < 0 || x.srcHi > int64(s) || x.dstLo < 0 || x.dstHi > int64(d) {
			return &LayoutError{Kind: ErrLayout, Rank: -1, Piece: -1, Reason: fmt.Sprintf(
				"pair %d->%d spans source bytes [%d, %d) of %d and destination bytes [%d, %d) of %d",
				pr.Src, pr.Dst, x.srcLo, x.srcHi, s, x.dstLo, x.dstHi, d)}
		}
	}
	for i := range p.Pairs {
		pr := &p.Pairs[i]
		s, d := src(pr.Src), dst(pr.Dst)
		for j := range pr.Regions {
			rg := &pr.Regions[j]
			n := rg.Inner
			rg.Each(func(so, do int64) bool {
				copy(d[do:do+n], s[so:so+n])
				return true
			})
		}
	}
	return nil
}
